"""SLURM through dask-jobqueue: the options a cluster user gives (``--slurm-*`` on the command
line, a ``[dask.slurm]`` table in a sweep file), checked before anything runs, and the
``SLURMCluster`` they make. Its workers join the same Dask executor as a LocalCluster's.

Each SLURM job runs ``cores`` single-threaded Dask workers (one per core: a braid run is one
thread); ``jobs`` jobs are submitted, never more than the points need. What the user does not
give falls back to their dask-jobqueue configuration (``jobqueue.slurm.*`` in
``~/.config/dask/jobqueue.yaml``, as their site may have set it), then to braid's defaults
(:data:`DEFAULTS`).
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..scenario import BraidError

#: braid's defaults, used when neither the user nor their dask-jobqueue config gives a value.
#: (dask-jobqueue's shipped configuration sets walltime = 00:30:00, so that one applies unless
#: the site removed it.)
DEFAULTS = {"cores": 1, "memory_per_core": "2GiB", "walltime": "00:30:00", "jobs": 10}

# SLURM's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_WALLTIME = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$")
_WORD = re.compile(r"^[^\s'\"\\;&|`$<>]+$")

#: Environment for the workers: Dask's sampling profiler off (see executors.DaskExecutor).
WORKER_ENV = "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False"


@dataclass
class SlurmOptions:
    """What to ask SLURM for. ``None`` = not given (config, then default)."""

    partition: Optional[str] = None
    account: Optional[str] = None
    cores: Optional[int] = None
    memory: Optional[str] = None
    walltime: Optional[str] = None
    jobs: Optional[int] = None
    extra: List[str] = field(default_factory=list)
    prologue: List[str] = field(default_factory=list)
    interface: Optional[str] = None

    def given(self) -> bool:
        return any(getattr(self, f.name) not in (None, []) for f in fields(self))

    def merged(self, over: "SlurmOptions") -> "SlurmOptions":
        """These options with those given in ``over`` replacing them (lists are added)."""
        out = SlurmOptions(**{f.name: getattr(self, f.name) for f in fields(self)})
        for f in fields(self):
            v = getattr(over, f.name)
            if isinstance(v, list):
                setattr(out, f.name, getattr(out, f.name) + v)
            elif v is not None:
                setattr(out, f.name, v)
        return out

    def check(self, name=lambda key: f"--slurm-{key}") -> "SlurmOptions":
        """Raises one BraidError naming the option (``name(key)``) and the expected form."""
        for key in ("partition", "account", "interface"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, str) or not _WORD.match(v)):
                raise BraidError(name(key), f"expected a {key} name (one word), got {v!r}")
        for key in ("cores", "jobs"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise BraidError(name(key), f"expected a positive integer, got {v!r}")
        if self.memory is not None:
            if _bytes(self.memory) is None:
                raise BraidError(name("memory"), f"expected a memory size per job such as 4GB or 500MB, got {self.memory!r}")
        if self.walltime is not None:
            if not isinstance(self.walltime, str) or not _WALLTIME.match(self.walltime.strip()):
                raise BraidError(name("walltime"), f"expected a SLURM time limit such as 01:30:00, 90 or 1-12:00:00 (D-HH:MM:SS), got {self.walltime!r}")
        for v in self.extra:
            if not isinstance(v, str) or not v.strip().startswith("-") or "\n" in v:
                raise BraidError(name("extra"), f"expected an sbatch option such as --qos=long or '-C haswell' (written after #SBATCH), got {v!r}")
        for v in self.prologue:
            if not isinstance(v, str) or "\n" in v or not v.strip():
                raise BraidError(name("prologue"), f"expected one shell line such as 'module load python', got {v!r}")
        return self


def _bytes(text: Any) -> Optional[int]:
    from dask.utils import parse_bytes

    if not isinstance(text, str) or not text.strip():
        return None
    try:
        n = parse_bytes(text)
    except (ValueError, TypeError):
        return None
    return n if n > 0 else None


#: The keys of a sweep file's [dask.slurm] table (``queue`` is another name for ``partition``).
TABLE_KEYS = ("partition", "queue", "account", "cores", "memory", "walltime", "jobs", "extra", "prologue", "interface")


def from_table(table: Any, where: str) -> SlurmOptions:
    """A sweep file's ``[dask.slurm]`` table, checked; errors name ``where.key``."""
    if not isinstance(table, dict):
        raise BraidError(where, "expected a table of SLURM options (partition, cores, memory, walltime, jobs, ...)")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise BraidError(f"{where}.{unknown[0]}", f"unknown key (expected one of {', '.join(TABLE_KEYS)})")
    if "queue" in table and "partition" in table:
        raise BraidError(f"{where}.queue", "give partition or queue (the same thing), not both")
    kw: Dict[str, Any] = {k: v for k, v in table.items() if k != "queue"}
    if "queue" in table:
        kw["partition"] = table["queue"]
    for key in ("extra", "prologue"):
        v = kw.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            raise BraidError(f"{where}.{key}", "expected a string or a list of strings")
        kw[key] = v
    return SlurmOptions(**kw).check(lambda key: f"{where}.{key}")


def check_available() -> None:
    """dask-jobqueue importable and sbatch on PATH, or one line saying what is missing."""
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        from .executors import sweep_extra_install

        raise BraidError("--dask slurm", f"needs dask-jobqueue (braid's sweep extra): {sweep_extra_install()}") from None
    if shutil.which("sbatch") is None:
        raise BraidError("--dask slurm", "sbatch is not on PATH (run braid on a SLURM login node)")


@dataclass
class Resolved:
    """The values used: given, else the user's dask-jobqueue config, else braid's defaults."""

    cores: int
    memory: str
    walltime: str
    jobs: int
    kwargs: Dict[str, Any]

    def describe(self) -> str:
        return f"SLURM through dask-jobqueue: {self.jobs} job(s) x {self.cores} worker(s), {self.memory} and {self.walltime} each"


def resolve(opts: SlurmOptions, n_tasks: int, log_dir: Optional[Path]) -> Resolved:
    import dask

    def conf(key: str) -> Any:
        return dask.config.get(f"jobqueue.slurm.{key}", None)

    cores = opts.cores or conf("cores") or DEFAULTS["cores"]
    memory = opts.memory or conf("memory")
    if memory is None:
        from dask.utils import format_bytes, parse_bytes

        memory = format_bytes(cores * parse_bytes(DEFAULTS["memory_per_core"])).replace(" ", "")
    walltime = str(opts.walltime or conf("walltime") or DEFAULTS["walltime"]).strip()
    jobs = opts.jobs or DEFAULTS["jobs"]
    # Never more jobs than the points can keep busy.
    jobs = max(1, min(jobs, math.ceil(max(1, n_tasks) / cores)))
    prologue = list(conf("job-script-prologue") or []) + [WORKER_ENV] + list(opts.prologue)
    kw: Dict[str, Any] = dict(
        cores=cores,
        processes=cores,
        memory=memory,
        walltime=walltime,
        job_script_prologue=prologue,
        job_extra_directives=list(conf("job-extra-directives") or []) + [x.strip() for x in opts.extra],
        job_name="braid",
        dashboard_address=None,
    )
    if opts.partition:
        kw["queue"] = opts.partition
    if opts.account:
        kw["account"] = opts.account
    if opts.interface:
        kw["interface"] = opts.interface
    if log_dir is not None:
        # Absolute: the job's working folder on the node need not be this one.
        kw["log_directory"] = str(Path(log_dir).resolve())
    return Resolved(cores, memory, walltime, jobs, kw)


def start_cluster(opts: SlurmOptions, n_tasks: int, log_dir: Optional[Path] = None, submit_timeout: float = 120.0):
    """A SLURMCluster with its jobs submitted (sbatch answered for each); its job script is also
    kept as ``log_dir/braid-job.sh`` for inspection. Returns (cluster, resolved)."""
    import logging
    import time

    check_available()
    from dask_jobqueue.slurm import SLURMCluster, SLURMJob

    failures: List[BaseException] = []

    class Job(SLURMJob):
        # Records why sbatch refused a job: dask-jobqueue only logs it, and the sweep would wait
        # for workers that never come.
        async def start(self):
            try:
                await super().start()
            except Exception as e:
                failures.append(e)
                raise

    r = resolve(opts, n_tasks, log_dir)
    try:
        cluster = SLURMCluster(job_cls=Job, **r.kwargs)
    except (ValueError, TypeError) as e:
        raise BraidError("--dask slurm", f"dask-jobqueue refused the options: {e}") from None
    if log_dir is not None:
        from .store import _write_atomic

        script = cluster.job_script()
        _write_atomic(Path(log_dir) / "braid-job.sh", lambda t: t.write_text(script))
    # The event loop logs a refused submission with a traceback; it is reported below in one line.
    noisy = {n: logging.getLogger(n).level for n in ("asyncio", "tornado.application", "distributed.deploy.spec")}
    for n in noisy:
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        cluster.scale(jobs=r.jobs)
        end = time.monotonic() + submit_timeout
        while not failures and time.monotonic() < end:
            if sum(1 for w in list(cluster.workers.values()) if getattr(w, "job_id", None)) >= r.jobs:
                break
            time.sleep(0.05)
    finally:
        if not failures:
            for n, level in noisy.items():
                logging.getLogger(n).setLevel(level)
    if failures:
        with contextlib.suppress(Exception):
            cluster.close()
        raise BraidError("--dask slurm", f"sbatch refused the job: {_sbatch_said(failures[0])}")
    return cluster, r


def _sbatch_said(e: BaseException) -> str:
    """The useful line of dask-jobqueue's error for a failed sbatch (its stderr)."""
    text = str(e)
    if "stderr:" in text:
        lines = [x.strip() for x in text.split("stderr:", 1)[1].splitlines() if x.strip()]
        if lines:
            return lines[0]
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[0] if lines else type(e).__name__

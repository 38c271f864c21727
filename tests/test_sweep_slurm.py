"""Sweeps and reproductions on SLURM through dask-jobqueue, without a SLURM cluster: stand-ins for
sbatch / squeue / scancel on PATH (sbatch keeps a copy of the job script and runs it in the
background, in its own session, as a node would; scancel ends that session), so dask-jobqueue's
SLURMCluster really submits jobs whose Dask workers connect and run the points. The dataset must
equal the local executor's, the job script must carry the requested directives, every job must be
cancelled at the end, and bad SLURM options are one line and exit 2."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

from braid.cli import main

pytest.importorskip("dask_jobqueue")
pytestmark = pytest.mark.skipif(not Path("/proc/self").exists() or sys.platform != "linux", reason="the stand-in SLURM needs Linux (setsid)")

SBATCH = """#!/bin/sh
# sbatch stand-in: keep the job script, run it in its own session, answer as sbatch does.
set -e
job=$$
cp "$1" "$FAKE_SLURM_DIR/job-$job.sh"
setsid bash "$FAKE_SLURM_DIR/job-$job.sh" > "$FAKE_SLURM_DIR/job-$job.log" 2>&1 < /dev/null &
echo $! > "$FAKE_SLURM_DIR/job-$job.pid"
echo "Submitted batch job $job"
"""
SCANCEL = """#!/bin/sh
# scancel stand-in: end each job's session (its worker processes).
for job in "$@"; do
  pid=$(cat "$FAKE_SLURM_DIR/job-$job.pid" 2>/dev/null) || continue
  kill -TERM -- "-$pid" 2>/dev/null || true
  echo "$job" >> "$FAKE_SLURM_DIR/cancelled"
done
"""
SQUEUE = """#!/bin/sh
# squeue stand-in: the jobs whose session is alive.
echo "JOBID"
for f in "$FAKE_SLURM_DIR"/job-*.pid; do
  [ -e "$f" ] || continue
  kill -0 "$(cat "$f")" 2>/dev/null && basename "$f" .pid | sed 's/^job-//'
done
exit 0
"""
REFUSING_SBATCH = """#!/bin/sh
echo "sbatch: error: invalid partition specified: nope" >&2
exit 1
"""

GRID = ["--grid", "transport.kind=dcqcn,none", "--grid", "topology.paths=1,2"]
NONDET = ["wall_s", "sim_wall_s"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def fake_slurm(tmp_path: Path, monkeypatch, sbatch: str = SBATCH) -> Path:
    bin_dir, state = tmp_path / "slurm-bin", tmp_path / "slurm-state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("sbatch", sbatch), ("scancel", SCANCEL), ("squeue", SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    return state


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _session_members(sid: int) -> list:
    out = []
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().split(")")[-1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(st.parent.name))
    return out


def jobs_of(state: Path) -> list:
    return sorted(int(p.stem.split("-")[1]) for p in state.glob("job-*.pid"))


def assert_all_cancelled(state: Path) -> None:
    jobs = jobs_of(state)
    cancelled = sorted(int(x) for x in (state / "cancelled").read_text().split())
    assert cancelled == jobs, "every submitted job is cancelled when the sweep ends"
    deadline = time.time() + 10
    while time.time() < deadline and any(_session_members(j) for j in jobs):
        time.sleep(0.1)
    assert not [j for j in jobs if _session_members(j)], "a job's workers are still running"


def test_slurm_sweep_gives_the_local_dataset_and_the_requested_job_script(tmp_path, monkeypatch):
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL_TOML)
    r = invoke("sweep", scen, *GRID, "-j", "2", "-o", tmp_path / "local")
    assert r.exit_code == 0, r.output
    state = fake_slurm(tmp_path, monkeypatch)
    # The SLURM options from a sweep file's [dask.slurm] table, two of them replaced (and one
    # added) on the command line.
    sw = tmp_path / "sweep.toml"
    sw.write_text(
        f'scenario = "{scen}"\n[grid]\n"transport.kind" = ["dcqcn", "none"]\n"topology.paths" = [1, 2]\n'
        '[dask.slurm]\nqueue = "debug"\naccount = "proj"\ncores = 1\njobs = 5\nmemory = "3GB"\nwalltime = "1:00:00"\n'
        'extra = ["--qos=test"]\nprologue = ["echo braid-prologue-ran"]\n'
    )
    out = tmp_path / "slurm"
    r = invoke("sweep", sw, "--slurm-walltime", "00:10:00", "--slurm-jobs", "2", "--slurm-extra=--constraint=fast", "-o", out)
    assert r.exit_code == 0, r.output
    assert "4 points: 4 run, 0 already done, 0 failed" in r.stdout
    assert "SLURM through dask-jobqueue: 2 job(s) x 1 worker(s)" in r.stderr
    local = pl.read_parquet(tmp_path / "local" / "sweep.parquet").drop(NONDET)
    assert pl.read_parquet(out / "sweep.parquet").drop(NONDET).equals(local)
    # Two jobs were really submitted (sbatch ran each script) and their workers ran the points.
    jobs = jobs_of(state)
    assert len(jobs) == 2
    script = (state / f"job-{jobs[0]}.sh").read_text()
    lines = script.splitlines()
    assert lines[0].startswith("#!")
    for directive in ("-J braid", "-p debug", "-A proj", "-n 1", "--cpus-per-task=1", "--mem=3G", "-t 00:10:00", "--qos=test", "--constraint=fast"):
        assert f"#SBATCH {directive}" in lines, (directive, script)
    logs = (out / "slurm-logs").resolve()
    assert f"#SBATCH -o {logs}/braid-%J.out" in lines
    assert "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False" in lines
    assert "echo braid-prologue-ran" in lines
    worker = [x for x in lines if "distributed.cli.dask_worker" in x]
    assert len(worker) == 1 and worker[0].startswith(f"{sys.executable} -m distributed.cli.dask_worker tcp://") and "--nthreads 1" in worker[0]
    assert "braid-prologue-ran" in (state / f"job-{jobs[0]}.log").read_text()
    # The script braid keeps for the user is the one submitted (but for the worker's name).
    kept = (out / "slurm-logs" / "braid-job.sh").read_text().splitlines()
    assert [x for x in kept if x.startswith("#SBATCH")] == [x for x in lines if x.startswith("#SBATCH")]
    assert_all_cancelled(state)
    # Resumed on SLURM: nothing to run, so no job is submitted.
    r = invoke("sweep", sw, "--slurm-walltime", "00:10:00", "-o", out)
    assert r.exit_code == 0 and "4 points: 0 run, 4 already done" in r.stdout, r.output
    assert len(jobs_of(state)) == 2


def test_reproduce_on_slurm_gives_the_local_results_and_a_resumed_run_the_same(tmp_path, monkeypatch):
    local, slurm = tmp_path / "local.json", tmp_path / "slurm.json"
    r = invoke("reproduce", "mp-rdma/ecn-balance", "-j", "2", "-o", tmp_path / "l", "--json", local)
    assert r.exit_code == 0, r.output
    state = fake_slurm(tmp_path, monkeypatch)
    r = invoke("reproduce", "mp-rdma/ecn-balance", "--dask", "slurm", "--slurm-jobs", "1", "--slurm-cores", "2", "--slurm-memory", "2GB", "-o", tmp_path / "s", "--json", slurm)
    assert r.exit_code == 0, r.output
    assert "SLURM through dask-jobqueue: 1 job(s) x 2 worker(s)" in r.stderr
    assert len(jobs_of(state)) == 1 and "--cpus-per-task=2" in (state / f"job-{jobs_of(state)[0]}.sh").read_text()
    assert_all_cancelled(state)

    def measures(p: Path) -> list:
        doc = json.loads(p.read_text())
        return [(e["id"], e["rows"], {k: [{x: v for x, v in m.items() if x != "_wall_s"} for m in ms] for k, ms in e["measures"].items()}) for e in doc["experiments"]]

    assert measures(slurm) == measures(local)
    # The same command again: every run read back from the store, the same JSON to the byte.
    again = tmp_path / "again.json"
    r = invoke("reproduce", "mp-rdma/ecn-balance", "-j", "2", "-o", tmp_path / "l", "--json", again)
    assert r.exit_code == 0 and "2 runs, 2 already done, 0 to run" in r.stderr, r.output
    assert again.read_text() == local.read_text()


@pytest.mark.parametrize(
    "args, key, fragment",
    [
        (["--slurm-cores", "0"], "--slurm-cores", "positive integer"),
        (["--slurm-jobs", "-1"], "--slurm-jobs", "positive integer"),
        (["--slurm-memory", "lots"], "--slurm-memory", "memory size"),
        (["--slurm-walltime", "1h"], "--slurm-walltime", "SLURM time limit"),
        (["--slurm-partition", "a b"], "--slurm-partition", "one word"),
        (["--slurm-extra", "qos=long"], "--slurm-extra", "sbatch option"),
        (["-j", "2"], "--jobs", "--slurm-jobs"),
    ],
)
def test_bad_slurm_options_are_one_line_and_exit_2(tmp_path, monkeypatch, args, key, fragment):
    fake_slurm(tmp_path, monkeypatch)
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL_TOML)
    out = tmp_path / "bad"
    r = invoke("sweep", scen, *GRID, "--dask", "slurm", *args, "-o", out)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}") and fragment in lines[0], r.stderr
    assert not out.exists(), "nothing may be written before the options are checked"


def test_slurm_misuse_and_refusals_are_one_line(tmp_path, monkeypatch):
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL_TOML)

    def one_line(r, start: str, fragment: str) -> None:
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert lines[-1].startswith(start) and fragment in lines[-1], r.stderr
        assert "Traceback" not in r.output

    # SLURM options without --dask slurm, for sweep and reproduce.
    one_line(invoke("sweep", scen, *GRID, "--slurm-cores", "2", "-o", tmp_path / "a"), "error: --slurm-cores", "only with --dask slurm")
    one_line(invoke("reproduce", "mp-rdma/ecn", "--dask", "local", "--slurm-memory", "4GB"), "error: --slurm-memory", "only with --dask slurm")
    # No sbatch on PATH.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    one_line(invoke("sweep", scen, *GRID, "--dask", "slurm", "-o", tmp_path / "b"), "error: --dask slurm", "sbatch is not on PATH")
    assert not (tmp_path / "b").exists()
    # A sweep file's [dask.slurm] table is checked like the options, naming the file and key.
    sw = tmp_path / "sweep.toml"
    sw.write_text(f'scenario = "{scen}"\n[grid]\n"topology.paths" = [1, 2]\n[dask.slurm]\ncores = 2\ngpus = 1\n')
    one_line(invoke("sweep", sw, "-o", tmp_path / "c"), f"error: {sw}: dask.slurm.gpus", "unknown key")
    sw.write_text(f'scenario = "{scen}"\n[grid]\n"topology.paths" = [1, 2]\n[dask]\nscheduler = "local"\n[dask.slurm]\ncores = 2\n')
    one_line(invoke("sweep", sw, "-o", tmp_path / "c"), f"error: {sw}: dask.slurm", 'scheduler = "slurm"')
    # sbatch refuses the job (a wrong partition): its own words, one line, no hang.
    monkeypatch.undo()
    fake_slurm(tmp_path, monkeypatch, REFUSING_SBATCH)
    t = time.time()
    one_line(invoke("sweep", scen, *GRID, "--dask", "slurm", "--slurm-partition", "nope", "-o", tmp_path / "d"), "error: --dask slurm", "sbatch refused the job: sbatch: error: invalid partition specified: nope")
    assert time.time() - t < 30


def test_defaults_come_from_the_users_jobqueue_config_then_braids():
    import dask

    from braid.sweep.slurm import SlurmOptions, resolve

    r = resolve(SlurmOptions(cores=4), n_tasks=6, log_dir=None)
    # 2 GiB per core; jobs: 10 by default but never more than ceil(6 points / 4 workers) = 2.
    assert (r.cores, r.jobs, r.kwargs["processes"]) == (4, 2, 4)
    assert dask.utils.parse_bytes(r.memory) == 8 * 2**30
    assert resolve(SlurmOptions(), n_tasks=100, log_dir=None).jobs == 10
    assert resolve(SlurmOptions(jobs=3), n_tasks=100, log_dir=None).jobs == 3
    with dask.config.set({"jobqueue.slurm.cores": 3, "jobqueue.slurm.memory": "5GB", "jobqueue.slurm.walltime": "04:00:00"}):
        r = resolve(SlurmOptions(), n_tasks=100, log_dir=None)
        assert (r.cores, r.memory, r.walltime) == (3, "5GB", "04:00:00")
        # What the user gives wins over the config.
        r = resolve(SlurmOptions(cores=2, walltime="10"), n_tasks=100, log_dir=None)
        assert (r.cores, r.walltime) == (2, "10")

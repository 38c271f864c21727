"""What a sweep runs: the grid, the seeds and the points (their cartesian product).

A point is a list of ``key=value`` overrides (the fixed ``--set`` ones, then one per grid key)
and a seed. Its identity is a hash of the canonical form of those overrides and the seed, so the
same point has the same name whatever order the grid keys were given in and however a value was
spelt (``1MB`` and ``"1MB"`` are one point): that name is the file its results are kept in, which
is what makes a sweep resumable.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..scenario import BraidError, _fmt_path, _parse_key_path, _parse_value, parse_override, read_toml

GRID_FORM = "expected --grid key.path=v1,v2,... (values are TOML; bare words such as dcqcn or 1MB are strings)"
SEEDS_FORM = "expected a positive number of seeds N (seeds 1..N) or a list of seeds a,b,c"


def split_values(text: str) -> List[str]:
    """``a,"b,c",[1,2]`` -> ``['a', '"b,c"', '[1,2]']``: commas inside quotes, brackets or braces
    belong to the value."""
    out, cur, depth, quote = [], [], 0, None
    for c in text:
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(c)
    out.append("".join(cur).strip())
    return out


def canonical_key(spec: str, keypath: str) -> str:
    return _fmt_path(_parse_key_path(spec, keypath))


def parse_grid(spec: str) -> Tuple[str, List[Any]]:
    """``"transport.kind=dcqcn,none"`` -> ("transport.kind", ["dcqcn", "none"]); one line naming
    --grid and the expected form otherwise."""
    opt = f"--grid {spec}"
    if "=" not in spec:
        raise BraidError(opt, GRID_FORM)
    keypath, values = spec.split("=", 1)
    try:
        key = canonical_key(spec, keypath.strip())
    except BraidError:
        raise BraidError(opt, GRID_FORM) from None
    texts = split_values(values)
    if not values.strip() or any(t == "" for t in texts):
        raise BraidError(opt, f"an empty value; {GRID_FORM}")
    vals = []
    for t in texts:
        try:
            vals.append(_parse_value(t, spec))
        except BraidError as e:
            raise BraidError(opt, e.message) from None
    return key, vals


def parse_seeds(text: str) -> List[int]:
    parts = split_values(text)
    try:
        nums = [int(p, 0) for p in parts]
    except ValueError:
        raise BraidError("--seeds", f"{SEEDS_FORM}, got {text!r}") from None
    if len(nums) == 1:
        if nums[0] < 1:
            raise BraidError("--seeds", f"{SEEDS_FORM}, got {text!r}")
        return list(range(1, nums[0] + 1))
    return check_seed_list(nums, "--seeds")


def check_seed_list(nums: Sequence[Any], opt: str) -> List[int]:
    if not nums or any(isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2**64 for n in nums):
        raise BraidError(opt, f"{SEEDS_FORM} (each between 0 and 2^64-1), got {list(nums)!r}")
    if len(set(nums)) != len(nums):
        raise BraidError(opt, f"a seed is listed twice: {list(nums)!r}")
    return list(nums)


def toml_text(v: Any) -> str:
    """A Python value (as read from TOML) back as TOML text, for an override."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise BraidError("grid", f"{v} is not allowed (expected a finite number)")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_fmt_path([str(k)])} = {toml_text(x)}" for k, x in v.items()) + "}"
    # Dates and times from TOML.
    return v.isoformat()


@dataclass(frozen=True)
class Point:
    """One run of the sweep."""

    fixed: Tuple[str, ...]
    grid: Tuple[Tuple[str, Any], ...]
    seed: int
    id: str = field(compare=False)

    @property
    def overrides(self) -> List[str]:
        return list(self.fixed) + [f"{k}={toml_text(v)}" for k, v in self.grid]

    def describe(self) -> str:
        return ", ".join(f"{k}={toml_text(v)}" for k, v in self.grid) + (", " if self.grid else "") + f"seed {self.seed}"


def point_id(fixed: Sequence[str], grid: Iterable[Tuple[str, Any]], seed: int) -> str:
    doc = {
        "set": [[_fmt_path(parts), v] for parts, v in map(parse_override, fixed)],
        "grid": sorted([k, v] for k, v in grid),
        "seed": seed,
    }
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class Plan:
    """A sweep: the scenario, fixed overrides, the grid (key -> values) and the seeds."""

    scenario: Path
    grid: Dict[str, List[Any]]
    seeds: Optional[List[int]]
    fixed: List[str] = field(default_factory=list)
    #: Where to run, from a sweep file's [dask] table (the command line's --dask/--slurm-* win).
    dask: Optional[str] = None
    slurm: Optional[Any] = None

    def points(self, default_seed: int) -> List[Point]:
        seeds = self.seeds or [default_seed]
        keys = list(self.grid)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            g = tuple(zip(keys, combo))
            for s in seeds:
                out.append(Point(tuple(self.fixed), g, s, point_id(self.fixed, g, s)))
        return out


def merge_grid(base: Dict[str, List[Any]], specs: Sequence[str]) -> Dict[str, List[Any]]:
    grid = dict(base)
    seen = set()
    for spec in specs:
        k, vals = parse_grid(spec)
        if k in seen:
            raise BraidError(f"--grid {spec}", f"{k} is given twice; list all its values in one --grid {k}=v1,v2")
        seen.add(k)
        grid[k] = vals
    for k, vals in grid.items():
        if k == "seed":
            raise BraidError(f"--grid {k}", "sweep seeds with --seeds N (or seeds = [...] in a sweep file)")
        dup = [v for i, v in enumerate(vals) if v in vals[:i]]
        if dup:
            raise BraidError(f"--grid {k}", f"the value {toml_text(dup[0])} is listed twice")
    return grid


def is_sweep_file(data: dict) -> bool:
    # A scenario has no top-level `scenario` key (the core rejects it), so this cannot mistake one.
    return isinstance(data.get("scenario"), str)


SWEEP_FILE_KEYS = {"scenario", "grid", "seeds", "set", "dask"}


def read_dask_table(path: Path, t: Any) -> Tuple[Optional[str], Any]:
    """``[dask]``: ``scheduler = "local" | "slurm" | "tcp://..."`` and an optional ``[dask.slurm]``
    table of SLURM options (its presence alone means slurm)."""
    from .executors import DASK_FORM
    from .slurm import from_table

    if not isinstance(t, dict):
        raise BraidError(f"{path}: dask", 'expected a table: [dask] scheduler = "slurm", and [dask.slurm] options')
    unknown = sorted(set(t) - {"scheduler", "slurm"})
    if unknown:
        raise BraidError(f"{path}: dask.{unknown[0]}", "unknown key (expected scheduler, slurm)")
    sched = t.get("scheduler")
    if sched is not None:
        if not isinstance(sched, str) or not (sched.lower() in ("local", "localcluster", "slurm") or "://" in sched):
            raise BraidError(f"{path}: dask.scheduler", f"{DASK_FORM}, got {sched!r}")
    slurm = None
    if "slurm" in t:
        slurm = from_table(t["slurm"], f"{path}: dask.slurm")
        if sched is None:
            sched = "slurm"
        elif sched.lower() != "slurm":
            raise BraidError(f"{path}: dask.slurm", f"SLURM options with scheduler = {sched!r}; expected scheduler = \"slurm\" (or none)")
    return sched, slurm


def read_sweep_file(path: Path, data: dict) -> Plan:
    """``scenario = "x.toml"`` (relative to the sweep file), ``seeds = N`` or ``[..]``, a ``[grid]``
    table of key -> list of values, an optional ``[set]`` table of fixed key -> value, an
    optional ``[dask]`` table (where to run: see :func:`read_dask_table`)."""
    unknown = sorted(set(data) - SWEEP_FILE_KEYS)
    if unknown:
        raise BraidError(f"{path}: {unknown[0]}", f"unknown key in a sweep file (expected {', '.join(sorted(SWEEP_FILE_KEYS))})")
    scen = (path.resolve().parent / data["scenario"]).resolve()
    if not scen.is_file():
        raise BraidError(f"{path}: scenario", f"the scenario file {scen} does not exist")
    grid_t = data.get("grid", {})
    if not isinstance(grid_t, dict):
        raise BraidError(f"{path}: grid", 'expected a table of key = [values], e.g. "transport.kind" = ["dcqcn", "none"]')
    grid: Dict[str, List[Any]] = {}
    for k, vals in grid_t.items():
        if not isinstance(vals, list) or not vals:
            raise BraidError(f"{path}: grid.{k}", "expected a non-empty list of values")
        grid[canonical_key(k, k)] = vals
    seeds = data.get("seeds")
    if seeds is not None:
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            if seeds < 1:
                raise BraidError(f"{path}: seeds", SEEDS_FORM)
            seeds = list(range(1, seeds + 1))
        elif isinstance(seeds, list):
            seeds = check_seed_list(seeds, f"{path}: seeds")
        else:
            raise BraidError(f"{path}: seeds", SEEDS_FORM)
    fixed_t = data.get("set", {})
    if not isinstance(fixed_t, dict):
        raise BraidError(f"{path}: set", "expected a table of key = value")
    fixed = [f"{k}={toml_text(v)}" for k, v in fixed_t.items()]
    dask, slurm = read_dask_table(path, data["dask"]) if "dask" in data else (None, None)
    return Plan(scen, grid, seeds, fixed, dask, slurm)


def make_plan(source: str, grid_specs: Sequence[str], seeds: Optional[str], fixed: Sequence[str]) -> Plan:
    """The plan from the command line: SOURCE is a scenario or a sweep file; --grid / --seeds /
    --set given on the command line add to (and replace keys of) a sweep file's."""
    path = Path(source)
    data = read_toml(path)
    if is_sweep_file(data):
        plan = read_sweep_file(path, data)
    else:
        plan = Plan(path, {}, None, [])
    plan.grid = merge_grid(plan.grid, grid_specs)
    if seeds is not None:
        plan.seeds = parse_seeds(seeds)
    for s in fixed:
        parse_override(s)  # the --set form, checked now
    plan.fixed = plan.fixed + list(fixed)
    return plan

"""The Python API's surface: `braid.read_results` gives back what `braid.run` gave, and the
lazily loaded names (`run`, `sweep`, `read_results`, ...) are visible to `dir(braid)` (tab
completion) before their first use."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from polars.testing import assert_frame_equal

import braid
from braid.results import TABLES


def test_read_results_returns_the_run_result_run_returned(tmp_path):
    from conftest import SMALL_TOML

    out = tmp_path / "r"
    res = braid.run(tomllib.loads(SMALL_TOML), seed=5, out_dir=out)
    back = braid.read_results(out)
    assert type(back) is type(res) is braid.RunResult
    for name in TABLES:
        assert_frame_equal(getattr(back, name), getattr(res, name), check_dtypes=False)
    assert back.flows.height > 0
    for attr in ("seed", "finished", "unfinished", "not_started", "in_flight", "counters", "headline"):
        assert getattr(back, attr) == getattr(res, attr), attr
    assert back.scenario.data == res.scenario.data and back.scenario.name == res.scenario.name
    assert back.wall_s == res.wall_s and back.summary == braid.results.read_results(out)["summary"]
    assert back.out_dir == out and back.pcap is None
    assert "RunResult(" in repr(back)


def test_dir_lists_the_lazy_names_before_first_use():
    # A fresh interpreter: in this one the names may already have been loaded.
    code = "import braid; d = dir(braid); print(' '.join(n for n in ('run', 'sweep', 'read_results', 'RunResult', 'validate') if n in d))"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert got == ["run", "sweep", "read_results", "RunResult", "validate"]
    assert {"run", "sweep", "read_results"} <= set(braid.__all__)


def test_braid_sweep_is_the_sweep_subpackage():
    # Lazily resolved, `braid.sweep` is the subpackage docs/sweep.md uses (`braid.sweep.sweep(...)`).
    import importlib

    assert braid.sweep is importlib.import_module("braid.sweep")
    assert callable(braid.sweep.sweep)

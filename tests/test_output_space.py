"""The free-space check (issue 28 §1): before a run, the output file system must hold what the
core's estimate says the results folder takes (``outputs``); otherwise one line, exit 2, and
nothing written (no folder, no temporary folder beside it). And the estimate of the folder
against what a run actually writes.

Both fail on the code before the change (no ``outputs`` in the estimate, no check)."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

from click.testing import CliRunner

import braid
import braid.results
from braid.cli import main

Usage = namedtuple("Usage", "total used free")

POISSON = """\
name = "poisson k4"
seed = 3
duration = "1ms"
[topology]
kind = "fat-tree"
k = 4
host_link = { rate = "40Gbps", delay = "1us" }
fabric_link = { rate = "40Gbps", delay = "1us" }
[[traffic]]
pattern = "poisson"
load = 0.5
cdf = "google-rpc"
duration = "200us"
[measure]
interval = "10us"
"""


def _folder_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def test_a_run_too_large_for_the_disk_is_refused_before_it_runs(tmp_path, small_file, monkeypatch):
    est = braid.estimate(small_file)
    assert est["outputs"] > 0
    free = int(est["outputs"] / 2)
    real = shutil.disk_usage
    # The file system of the output folder has half of what the results need.
    monkeypatch.setattr(braid.results.shutil, "disk_usage", lambda p: Usage(real(p).total, 0, free) if str(p).startswith(str(tmp_path)) else real(p))
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["run", str(small_file), "-o", str(out), "--no-progress"], catch_exceptions=False)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {out}") and "no space left on the device" in lines[0] and "they need" in lines[0], lines[0]
    # Nothing half-written: no folder, no temporary folder, no lock left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.toml"]


def test_the_same_run_goes_ahead_with_room(tmp_path, small_file, monkeypatch):
    est = braid.estimate(small_file)
    real = shutil.disk_usage
    monkeypatch.setattr(braid.results.shutil, "disk_usage", lambda p: Usage(real(p).total, 0, int(est["outputs"] * 2)))
    res = braid.run(small_file, out_dir=tmp_path / "out")
    assert (res.out_dir / "summary.json").is_file()


def test_outputs_estimate_is_close_to_the_folder_written(tmp_path):
    """Upper-bound-ish: at least what is written, at most three times it (the folder of a
    generated-traffic run with time series and messages)."""
    s = tmp_path / "p.toml"
    s.write_text(POISSON)
    est = braid.estimate(s)
    res = braid.run(s, out_dir=tmp_path / "out")
    written = _folder_bytes(res.out_dir)
    assert len(res.tables["flows"]) > 1000
    assert written <= est["outputs"] <= 3 * written, (written, est["outputs"])

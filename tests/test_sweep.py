"""braid sweep (issue 12, "Sweeps and comparisons"): the grid product and its columns, resuming
(finished points skipped, counted), a sweep killed by SIGTERM and resumed (every point exactly
once, counted), Dask's LocalCluster giving the local dataset, failed points recorded, bad input
in one line with exit 2, the sweep file form and --collect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

import braid
from braid.cli import main

GRID = ["--grid", "transport.kind=dcqcn,none", "--grid", "topology.paths=1,2", "--seeds", "2"]
NONDET = ["wall_s", "sim_wall_s"]  # wall times: the only columns that may differ between runs


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def ran(r) -> tuple:
    """(run, already done, failed) from the summary line."""
    line = [x for x in r.stdout.splitlines() if " points: " in x][-1]
    nums = [int(w) for w in line.replace(",", " ").replace(";", " ").split() if w.isdigit()]
    return nums[1], nums[2], nums[3]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One 8-point sweep (2 transports x 2 path counts x 2 seeds) shared by several tests."""
    d = tmp_path_factory.mktemp("sweep")
    scen = d / "small.toml"
    scen.write_text(SMALL_TOML)
    out = d / "out"
    r = invoke("sweep", scen, *GRID, "-j", "2", "-o", out)
    assert r.exit_code == 0, r.output
    return scen, out, r


def test_grid_product_and_columns(base):
    scen, out, r = base
    assert ran(r) == (8, 0, 0)
    df = pl.read_parquet(out / "sweep.parquet")
    assert df.height == 8
    for c in ("point", "transport.kind", "topology.paths", "seed", "aggregate_goodput_gbps", "fct_p50_us", "fct_p99_us",
              "drops", "flows", "flows_completed", "finished", "wall_s", "error"):
        assert c in df.columns, c
    got = sorted(zip(df["transport.kind"], df["topology.paths"], df["seed"]))
    assert got == sorted((k, p, s) for k in ("dcqcn", "none") for p in (1, 2) for s in (1, 2))
    assert df["point"].n_unique() == 8 and df["error"].null_count() == 8
    assert df["wall_s"].min() > 0 and df["finished"].all()
    # A row is that point's run: the same numbers as braid.run with the same overrides and seed.
    row = df.filter((pl.col("transport.kind") == "none") & (pl.col("topology.paths") == 2) & (pl.col("seed") == 2)).row(0, named=True)
    res = braid.run(scen, seed=2, overrides=["transport.kind=none", "topology.paths=2"])
    assert row["aggregate_goodput_gbps"] == res.headline["aggregate_goodput_gbps"]
    assert row["fct_p99_us"] == res.headline["fct_p99_us"]
    assert row["flows_completed"] == res.headline["flows_completed"] == row["flows"]
    assert row["drops"] == res.counters["drops"]
    # One small file per point (its row and its overrides) and nothing half-written.
    pts = out / "points"
    assert len(list(pts.glob("*.parquet"))) == 8 and len(list(pts.glob("*.json"))) == 8
    assert not list(out.rglob(".*tmp*"))
    doc = json.loads((pts / f"{row['point']}.json").read_text())
    assert doc["seed"] == 2 and doc["overrides"] == ['transport.kind="none"', "topology.paths=2"]


def test_resume_skips_finished_points(base, tmp_path):
    scen, out, _ = base
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.parquet")}
    # The same sweep, keys given in the other order and one value spelt as a TOML string:
    # the same points, nothing runs.
    r = invoke("sweep", scen, "--grid", "topology.paths=1,2", "--grid", 'transport.kind="dcqcn",none', "--seeds", "2", "-j", "2", "-o", out)
    assert r.exit_code == 0, r.output
    assert ran(r) == (0, 8, 0)
    # One more seed: only its 4 points run.
    r = invoke("sweep", scen, *GRID[:-1], "3", "-j", "2", "-o", out)
    assert ran(r) == (4, 8, 0), r.output
    assert pl.read_parquet(out / "sweep.parquet").height == 12
    assert {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.parquet") if p.name in stamps} == stamps
    # The sweep file form is the same sweep (same point names): nothing runs.
    sw = tmp_path / "sweep.toml"
    sw.write_text(f'scenario = "{scen}"\nseeds = 3\n[grid]\n"transport.kind" = ["dcqcn", "none"]\n"topology.paths" = [1, 2]\n')
    r = invoke("sweep", sw, "-o", out)
    assert r.exit_code == 0, r.output
    assert ran(r) == (0, 12, 0)
    # Another sweep is not mixed into this folder.
    r = invoke("sweep", scen, "--grid", "topology.hosts_per_tor=2,3", "-o", out)
    assert r.exit_code == 2 and "holds a sweep with other grid keys" in r.stderr


def test_collect_rebuilds_the_dataset(base):
    _, out, _ = base
    before = pl.read_parquet(out / "sweep.parquet")
    (out / "sweep.parquet").unlink()
    r = invoke("sweep", "--collect", out)
    assert r.exit_code == 0, r.output
    assert pl.read_parquet(out / "sweep.parquet").equals(before)


def test_dask_local_cluster_gives_the_same_dataset(base, tmp_path):
    pytest.importorskip("distributed")
    scen, out, _ = base
    r = invoke("sweep", scen, *GRID, "-j", "2", "--dask", "local", "-o", tmp_path / "d")
    assert r.exit_code == 0, r.output
    assert ran(r) == (8, 0, 0)
    assert "unsendable" not in r.stderr
    local = pl.read_parquet(out / "sweep.parquet").filter(pl.col("seed") <= 2).drop(NONDET)
    dask = pl.read_parquet(tmp_path / "d" / "sweep.parquet").drop(NONDET)
    assert dask.equals(local)


def test_failing_point_is_recorded_and_the_sweep_goes_on(small_file, tmp_path):
    out = tmp_path / "f"
    r = invoke("sweep", small_file, "--grid", "topology.hosts_per_tor=3,0,2", "-j", "2", "-o", out)
    assert r.exit_code == 1, r.output
    assert ran(r) == (2, 0, 1)
    assert "failed: topology.hosts_per_tor=0, seed 1: topology.hosts_per_tor: must be at least 1" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: 1 of 3 points failed")
    df = pl.read_parquet(out / "sweep.parquet")
    assert df.height == 3
    bad = df.filter(pl.col("error").is_not_null())
    assert bad["topology.hosts_per_tor"].to_list() == [0] and "\n" not in bad["error"][0]
    assert df.filter(pl.col("error").is_null())["topology.hosts_per_tor"].sort().to_list() == [2, 3]
    # A re-run retries the failed point only.
    r = invoke("sweep", small_file, "--grid", "topology.hosts_per_tor=3,0,2", "-j", "2", "-o", out)
    assert r.exit_code == 1 and ran(r) == (0, 2, 1)


@pytest.mark.parametrize(
    "args, key, fragment",
    [
        (["--grid", "transport.kindd=a,b"], "--grid transport.kindd", "unknown field"),
        (["--grid", "transport.kind=bogus,dcqcn"], "--grid transport.kind", "expected one of"),
        (["--grid", "traffic[5].size=1MB,2MB"], "--grid traffic[5].size", "index out of range"),
        (["--set", "topology.pathz=2", "--grid", "topology.paths=1,2"], "--set topology.pathz=2", "unknown field"),
        (["--grid", "topology.paths"], "--grid topology.paths", "expected --grid key.path=v1,v2"),
        (["--grid", "topology.paths=1,"], "--grid topology.paths=1,", "empty value"),
        (["--grid", "topology.paths=[1"], "--grid topology.paths=[1", "not valid TOML"),
        (["--grid", "seed=1,2"], "--grid seed", "--seeds"),
        (["--seeds", "0"], "--seeds", "positive number of seeds"),
        (["--dask", "nowhere"], "--dask", "scheduler address"),
        (["-j", "0"], "--jobs", "positive integer"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(small_file, tmp_path, args, key, fragment):
    out = tmp_path / "bad"
    r = invoke("sweep", small_file, *args, "-o", out)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}") and fragment in lines[0], r.stderr
    assert not out.exists(), "nothing may be written before the input is checked"


# --- killed mid-way, then resumed --------------------------------------------------------------

SLOW = SMALL_TOML.replace('size = "200KB"', 'size = "60MB"').replace('duration = "5ms"', 'duration = "200ms"')


def _children(pid: int) -> list:
    kids = []
    for t in Path(f"/proc/{pid}/task").glob("*/children"):
        kids += [int(x) for x in t.read_text().split()]
    return kids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_killed_sweep_resumes_with_every_point_exactly_once(tmp_path):
    scen = tmp_path / "slow.toml"
    scen.write_text(SLOW)  # each point ~0.4 s
    out = tmp_path / "out"
    args = ["sweep", scen, "--grid", "topology.paths=1,2", "--grid", "transport.kind=dcqcn,none", "--seeds", "4", "-j", "2", "-o", out, "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "braid.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pts = out / "points"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(pts.glob("*.parquet"))) < 3:
        time.sleep(0.02)
    kids = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "run the same command to resume" in err
    t = time.time() + 3
    while time.time() < t and any(_alive(k) for k in kids):
        time.sleep(0.05)
    assert not [k for k in kids if _alive(k)], "workers still running after the sweep was stopped"
    first = len(list(pts.glob("*.parquet")))
    assert 3 <= first < 16, f"the sweep was not stopped mid-way ({first} of 16 points)"
    assert not list(out.rglob(".*tmp*")), "a half-written file was left"
    r = invoke("sweep", *args[1:])
    assert r.exit_code == 0, r.output
    again, skipped, failed = ran(r)
    assert (skipped, failed) == (first, 0)
    assert first + again == 16, "a point was run twice or lost"
    df = pl.read_parquet(out / "sweep.parquet")
    assert df.height == 16 and df["point"].n_unique() == 16
    assert sorted(zip(df["topology.paths"], df["transport.kind"], df["seed"])) == sorted(
        (p, k, s) for p in (1, 2) for k in ("dcqcn", "none") for s in (1, 2, 3, 4)
    )
    assert df["finished"].all()


def test_python_api_and_sweep_file_with_fixed_overrides(small_file, tmp_path):
    from braid.sweep import sweep

    df = sweep(small_file, grid={"topology.paths": [1, 2]}, seeds=[3, 4], overrides=["transport.kind=none"], out_dir=tmp_path / "a", jobs=2)
    assert sorted(zip(df["topology.paths"], df["seed"])) == [(1, 3), (1, 4), (2, 3), (2, 4)]
    one = braid.run(small_file, seed=4, overrides=["transport.kind=none", "topology.paths=2"])
    assert df.filter((pl.col("topology.paths") == 2) & (pl.col("seed") == 4))["fct_p99_us"][0] == one.headline["fct_p99_us"]
    # The same sweep as a file ([set] for the fixed override): the same points, nothing runs.
    sw = tmp_path / "sw.toml"
    sw.write_text(f'scenario = "{small_file}"\nseeds = [3, 4]\n[grid]\n"topology.paths" = [1, 2]\n[set]\n"transport.kind" = "none"\n')
    r = invoke("sweep", sw, "-o", tmp_path / "a")
    assert r.exit_code == 0, r.output
    assert ran(r) == (0, 4, 0)
    sw.write_text(f'scenario = "{small_file}"\nseed = 3\n')
    r = invoke("sweep", sw, "-o", tmp_path / "b")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {sw}: seed") and "unknown key in a sweep file" in r.stderr


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_killed_worker_loses_no_point(tmp_path):
    # SIGKILL to one worker mid-sweep (as the OOM killer would): the points it held run again in a
    # new pool; the sweep ends with every point once and no failure.
    scen = tmp_path / "slow.toml"
    scen.write_text(SLOW)
    out = tmp_path / "out"
    args = ["sweep", scen, "--grid", "topology.paths=1,2", "--seeds", "5", "-j", "2", "-o", out, "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "braid.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pts = out / "points"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(pts.glob("*.parquet"))) < 2:
        time.sleep(0.02)
    workers = [k for k in _children(proc.pid) if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
    assert workers, "no workers"
    os.kill(workers[0], signal.SIGKILL)
    o, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "workers died" in err, "the killed worker held no point: the test did not test anything"
    assert "10 points: 10 run, 0 already done, 0 failed" in o, o
    df = pl.read_parquet(out / "sweep.parquet")
    assert df.height == 10 and df["point"].n_unique() == 10 and df["error"].null_count() == 10

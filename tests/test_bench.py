"""`braid bench`'s scale series: the smallest point runs through the bench code path (child
process, wait4) and reports sane fields; the memory fits are exact on exact lines. No timing
assertions."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

import braid
from braid.bench import QP_HOSTS, SCALE_SERIES, benchmarks, fit_line, qp_benchmarks, run_bench, scale_benchmarks, scale_fits
from braid.cli import main


def test_scale_scenarios_are_valid_and_named_in_series():
    todo = scale_benchmarks()
    names = [b[0] for b in todo]
    assert names == ["ft-k8", "ft-k16", "ft-k24", "ft-k16-2x", "ft-k16-4x"]
    for series in SCALE_SERIES.values():
        assert set(series) <= set(names)
    for _, _, sc, _ in todo:
        s = braid.validate(sc)  # schema, ranges and topology, without running
        assert s.data["topology"]["kind"] == "fat-tree"
        assert s.data["measure"] == {"interval": "0us", "messages": False}
    # The flows series keeps the topology and the load and stretches the arrival window.
    by = {b[0]: b[2] for b in todo}
    assert by["ft-k16-4x"]["topology"] == by["ft-k16"]["topology"]
    assert by["ft-k16-4x"]["traffic"][0]["duration"] == "800us"
    # --scale runs exactly the scale series; --quick leaves it out.
    assert [b[0] for b in benchmarks(None, quick=False, scale_only=True)] == names
    assert not {b[0] for b in benchmarks(None, quick=True)} & set(names)


def test_smallest_scale_point_runs_through_bench(tmp_path):
    out = run_bench(only=["ft-k8"], scale=True, window_us=10.0, json_out=str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads(json.dumps(out))
    (r,) = out["scenarios"]
    assert "error" not in r, r.get("error")
    assert r["name"] == "ft-k8" and r["series"] == ["hosts"]
    st, h = r["stats"], r["headline"]
    assert st["hosts"] == 128 and st["switches"] == 80
    assert h["flows"] > 0 and 0 <= h["flows_completed"] <= h["flows"]
    assert st["events"] > 0 and st["sim_time_ps"] <= 110e6
    assert r["cpu_s"] > 0 and r["wall_s"] > 0
    assert 0 < r["base_rss_mb"] <= r["build_rss_mb"] <= r["max_rss_mb"] < 4096
    # One point is no series: no fit.
    assert out["fits"] == []
    # The numbers say which build of the extension made them (scripts/build-ext.sh).
    from braid import _core

    assert out["build"] == _core.__build__
    assert _core.__build__ in ("release", "release, profile-guided", "instrumented", "debug")


def test_qps_per_host_series_is_all_to_all_on_one_switch_at_equal_flow_counts():
    todo = qp_benchmarks()
    assert [b[0] for b in todo] == [f"a2a-{n}" for n in QP_HOSTS] == ["a2a-100", "a2a-300", "a2a-1000"]
    for (_, _, sc, _), n in zip(todo, QP_HOSTS):
        topo = sc["topology"]
        assert topo["kind"] == "edges" and topo["switches"] == [0] and len(topo["links"]) == n
        assert all(t["pattern"] == "all-to-all" and t["size"] == "1KB" for t in sc["traffic"])
        flows = len(sc["traffic"]) * n * (n - 1)
        assert 0.95e6 <= flows <= 1.05e6, (n, flows)
    # In the default run, not in --quick.
    assert {"a2a-100", "a2a-300", "a2a-1000"} <= {b[0] for b in benchmarks(None, quick=False)}
    assert not {b[0] for b in benchmarks(None, quick=True)} & {"a2a-100", "a2a-300", "a2a-1000"}
    # Valid scenarios (a small copy of each: the same generator with fewer flows).
    for _, _, sc, _ in qp_benchmarks(flows=20_000):
        braid.validate(sc)


def test_qps_per_host_point_runs_through_bench(tmp_path, monkeypatch):
    import braid.bench as bench

    monkeypatch.setattr(bench, "QP_FLOWS", 2_000)
    monkeypatch.setattr(bench, "QP_HOSTS", (20, 40))
    out = run_bench(only=["a2a-20", "a2a-40"], json_out=str(tmp_path / "b.json"))
    rows = {r["name"]: r for r in out["scenarios"]}
    for name, n in (("a2a-20", 20), ("a2a-40", 40)):
        r = rows[name]
        assert "error" not in r, r.get("error")
        assert r["stats"]["hosts"] == n
        assert r["headline"]["flows_completed"] == r["headline"]["flows"] > 0


def test_scale_option_rejects_unknown_name():
    res = CliRunner().invoke(main, ["bench", "--scale", "--only", "two-tor"])
    assert res.exit_code == 2
    assert "--only" in res.stderr and "ft-k8" in res.stderr


def test_fit_line_exact_and_degenerate():
    slope, icpt, r2 = fit_line([1, 2, 3], [5, 7, 9])
    assert slope == pytest.approx(2) and icpt == pytest.approx(3) and r2 == pytest.approx(1)
    slope, icpt, r2 = fit_line([1, 2, 3, 4], [1, 3, 2, 4])
    assert slope == pytest.approx(0.8) and 0 < r2 < 1
    assert math.isnan(fit_line([1, 2], [3, 3])[2])
    assert math.isnan(fit_line([2, 2], [1, 3])[0])


def _row(name, hosts, flows, peak, built):
    return {
        "name": name,
        "stats": {"hosts": float(hosts)},
        "headline": {"flows": float(flows)},
        "max_rss_mb": peak,
        "build_rss_mb": built,
    }


def test_scale_fits_per_host_and_per_flow():
    # Peak = 20 MB + 0.05 MB per host; flows series: 100 MB + 0.01 MB per flow.
    rows = [
        _row("ft-k8", 128, 50, 20 + 0.05 * 128, 20),
        _row("ft-k16", 1024, 400, 20 + 0.05 * 1024, 30),
        _row("ft-k24", 3456, 1500, 20 + 0.05 * 3456, 60),
    ]
    fits = {f["series"]: f for f in scale_fits(rows)}
    assert set(fits) == {"hosts"}  # the flows series is incomplete
    assert fits["hosts"]["peak_mb_per_unit"] == pytest.approx(0.05)
    assert fits["hosts"]["peak_intercept_mb"] == pytest.approx(20)
    assert fits["hosts"]["peak_r2"] == pytest.approx(1)
    assert fits["hosts"]["x"] == [128, 1024, 3456]
    rows[1] = _row("ft-k16", 1024, 400, 104, 30)
    rows += [_row("ft-k16-2x", 1024, 800, 108, 30), _row("ft-k16-4x", 1024, 1600, 116, 31)]
    fits = {f["series"]: f for f in scale_fits(rows)}
    assert fits["flows"]["peak_mb_per_unit"] == pytest.approx(0.01)
    assert fits["flows"]["peak_intercept_mb"] == pytest.approx(100)
    assert fits["flows"]["peak_r2"] == pytest.approx(1)
    assert 0 < fits["flows"]["build_r2"] <= 1
    # A failed point drops its series.
    rows[-1] = {"name": "ft-k16-4x", "error": "exit 1: boom"}
    assert {f["series"] for f in scale_fits(rows)} == {"hosts"}


def test_the_large_points_are_k34_and_k48_fat_trees_for_1ms_outside_the_fits():
    from braid.bench import LARGE_WINDOW_US, large_benchmarks

    points = large_benchmarks()
    assert [(name, sc["topology"]["k"]) for name, _, sc, _ in points] == [("ft-k34", 34), ("ft-k48", 48)]
    assert LARGE_WINDOW_US == 1000.0
    for name, _, sc, _ in points:
        assert sc["traffic"][0]["load"] == 0.3 and sc["traffic"][0]["cdf"] == "web-search"
        # 1 ms of arrivals, and the run stops there (issue 16's points).
        assert sc["traffic"][0]["duration"] == "1000us" and sc["duration"] == "1000us"
        assert name in {b[0] for b in benchmarks(None, quick=False)}
        assert name not in {b[0] for b in benchmarks(None, quick=True)}
        assert all(name not in names for names in SCALE_SERIES.values())
        braid.validate(sc)
    # The window is a parameter; a drain may follow it.
    ((_, _, sc, _), _) = large_benchmarks(window_us=100, drain_us=50)
    assert sc["traffic"][0]["duration"] == "100us" and sc["duration"] == "150us"


# --- --hpcc-ns3: HPCC ns-3 run side by side, on the same anchor inputs --------------------------

STAND_IN = """#!{python}
# A stand-in for HPCC ns-3: records how it was called, burns CPU in a child of its own (CPU of
# processes it waits for counts too, as waf's would), and writes one FCT line per flow.
import json, os, subprocess, sys, time
cfg_path = sys.argv[1]
cfg = dict(line.split(maxsplit=1) for line in open(cfg_path).read().splitlines() if line.strip())
subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\nwhile time.process_time() - t < {burn}: pass"], check=True)
flows = open(cfg["FLOW_FILE"]).read().split()
n = int(flows[0])
with open(cfg["FCT_OUTPUT_FILE"], "w") as f:
    for i in range(n):
        f.write("0b000201 0b000101 10000 100 1000 2000000000 5000 4000\\n")
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv, "cwd": os.getcwd(), "config": cfg}}) + "\\n")
"""


def _fake_anchors(tmp_path):
    """An anchor folder of the small HPCC test inputs under the anchors' names (hpcc-incast)."""
    import shutil
    from pathlib import Path

    data = Path(__file__).parent / "data" / "hpcc"
    anchors = tmp_path / "anchors"
    anchors.mkdir()
    shutil.copy(data / "config-small.txt", anchors / "config-dcqcn-incast.txt")
    shutil.copy(data / "mix" / "topo-star4.txt", anchors / "topology-star-65.txt")
    shutil.copy(data / "mix" / "flows-star4.txt", anchors / "flows-incast-2to1.txt")
    shutil.copy(data / "mix" / "topo-star4.txt", anchors / "topology-fattree-320.txt")  # marks the folder
    return anchors


def test_hpcc_ns3_runs_side_by_side_on_the_same_inputs(tmp_path, monkeypatch):
    import os
    import sys

    anchors = _fake_anchors(tmp_path)
    exe = tmp_path / "hpcc-ns3.py"
    exe.write_text(STAND_IN.format(python=sys.executable, burn=0.4))
    exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STAND_IN_LOG", str(log))
    res = CliRunner().invoke(
        main, ["bench", "--quick", "--only", "hpcc-incast", "--anchors", str(anchors), "--hpcc-ns3", str(exe), "--json", str(tmp_path / "b.json")], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    (r,) = json.loads((tmp_path / "b.json").read_text())["scenarios"]
    h = r["hpcc_ns3"]
    assert "error" not in h and "error" not in r, (h, r.get("error"))
    # The child's CPU time is measured, its own children's included (0.4 s burnt by a grandchild).
    assert 0.4 <= h["cpu_s"] < 30, h
    assert h["flows_completed"] == 3
    # The inputs passed: the anchor's config with its own keys, the anchor's topology and flows.
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    cfg = call["config"]
    assert call["argv"][1] == os.path.join(call["cwd"], "config.txt")
    assert cfg["TOPOLOGY_FILE"] == str((anchors / "topology-star-65.txt").resolve())
    assert cfg["FLOW_FILE"] == str((anchors / "flows-incast-2to1.txt").resolve())
    assert cfg["FCT_OUTPUT_FILE"].startswith(call["cwd"])
    original = dict(line.split(maxsplit=1) for line in (anchors / "config-dcqcn-incast.txt").read_text().splitlines() if line.strip())
    for key, value in original.items():
        if not key.endswith("_FILE"):
            assert cfg[key] == value, key
    # Both CPU times and their ratio are printed; no constant measured elsewhere, no issue named.
    out = " ".join(res.output.split())
    assert "side by side" in out and f"{h['cpu_s'] / r['cpu_s']:.1f}x" in out, res.output
    assert "issue" not in res.output and "220.5" not in res.output


@pytest.mark.parametrize("kind", ["missing", "folder", "not executable"])
def test_hpcc_ns3_bad_path_is_one_line(tmp_path, kind):
    anchors = _fake_anchors(tmp_path)
    path = tmp_path / "ns3"
    if kind == "folder":
        path.mkdir()
    elif kind == "not executable":
        path.write_text("#!/bin/sh\n")
    res = CliRunner().invoke(main, ["bench", "--quick", "--only", "hpcc-incast", "--anchors", str(anchors), "--hpcc-ns3", str(path)], catch_exceptions=False)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --hpcc-ns3: "), res.stderr
    assert str(path) in lines[0]
    # Refused before anything runs.
    assert "hpcc-incast:" not in res.stdout


def test_hpcc_ns3_without_an_hpcc_benchmark_is_refused(tmp_path):
    exe = tmp_path / "ns3"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    res = CliRunner().invoke(main, ["bench", "--quick", "--only", "two-tor", "--anchors", str(_fake_anchors(tmp_path)), "--hpcc-ns3", str(exe)], catch_exceptions=False)
    assert res.exit_code == 2 and "error: --hpcc-ns3: " in res.stderr, res.output

"""`braid reproduce -o DIR` on the sweep engine: killed by SIGTERM mid-way, its workers stop and its
finished runs are kept; the same command resumes and runs only the rest, so every run is run
exactly once (counted); the report is the same as from runs never interrupted (same rows)."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from braid import BraidError
from braid.cli import main
from braid.reproduce.store import plain_loads

pytestmark = pytest.mark.core

EXPERIMENT = "mp-rdma/lossy-paths"  # 24 runs of ~0.3 s each


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


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


def counts(r) -> tuple:
    """(runs, already done, to run) from `N runs, K already done, M to run`."""
    line = [x for x in r.stderr.splitlines() if " already done, " in x][-1]
    nums = [int(w) for w in line.replace(",", " ").split() if w.isdigit()]
    return nums[0], nums[1], nums[2]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_reproduce_killed_and_resumed_runs_every_run_exactly_once(tmp_path):
    out = tmp_path / "out"
    runs = out / "runs"
    cmd = [sys.executable, "-m", "braid.cli", "reproduce", EXPERIMENT, "-j", "2", "-o", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(runs.glob("*.pkl"))) < 3:
        time.sleep(0.02)
    kids = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "run the same command to resume" in err, err
    t = time.time() + 3
    while time.time() < t and any(_alive(k) for k in kids):
        time.sleep(0.05)
    assert not [k for k in kids if _alive(k)], "workers still running after reproduce was stopped"
    assert not list(out.rglob(".*tmp*")), "a half-written file was left"
    kept = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.pkl")}
    first = len(kept)
    total = int(err.split(" runs, ")[0].split()[-1])
    assert 3 <= first < total, f"reproduce was not stopped mid-way ({first} of {total} runs)"
    assert f"{first} finished runs are kept" in err

    js = tmp_path / "r.json"
    r = invoke("reproduce", EXPERIMENT, "-j", "2", "-o", out, "--json", js)
    assert r.exit_code == 0, r.output
    n, skipped, again = counts(r)
    assert (n, skipped) == (total, first)
    assert first + again == total, "a run was run twice or lost"
    # The kept runs were read back, not run again; every run has exactly one result file.
    assert {p.name: p.stat().st_mtime_ns for p in runs.glob("*.pkl") if p.name in kept} == kept
    assert len(list(runs.glob("*.pkl"))) == total
    described = [json.loads(p.read_text()) for p in runs.glob("*.json") if p.name != "store.json"]
    assert len(described) == total and len({(d["label"], d["seed"], tuple(d["overrides"])) for d in described}) == total
    # The report over resumed runs is the table a single uninterrupted run prints.
    doc = json.loads(js.read_text())
    (e,) = doc["experiments"]
    assert e["id"] == EXPERIMENT and sum(len(ms) for ms in e["measures"].values()) == total
    assert "direction " in r.stdout and " of " in r.stdout and "magnitude " in r.stdout and EXPERIMENT in r.stdout


def test_the_store_refuses_foreign_folders_and_unsafe_files(tmp_path):
    # A runs/ folder braid did not make is not written into.
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mine.txt").write_text("x")
    r = invoke("reproduce", "mp-rdma/ecn", "-o", tmp_path)
    assert r.exit_code == 2 and "did not make" in r.stderr and r.stderr.count("\n") == 1, r.output
    # Only plain data is read back from a run file: a pickle that would call a function is refused.
    import numpy as np

    back = plain_loads(pickle.dumps({1: [1.5, float("nan")], "a": (2, "x"), "n": np.float64(0.1), "v": np.arange(3)}))
    assert back[1][0] == 1.5 and back[1][1] != back[1][1] and back["a"] == (2, "x")
    assert type(back["n"]) is np.float64 and back["n"] == 0.1 and back["v"].tolist() == [0, 1, 2]
    with pytest.raises(pickle.UnpicklingError, match="not plain data"):
        plain_loads(pickle.dumps(BraidError("x", "y")))


def test_progress_is_reported_per_run_and_the_bar_shows_an_eta(tmp_path):
    import io

    from rich.console import Console

    from braid.reproduce import execute, select
    from braid.sweep.progress import TaskBar

    calls = []
    execute(select(["mp-rdma/ecn-balance"], False), jobs=2, out=tmp_path, on_start=lambda t, s: calls.append(("start", t, s)), on_progress=lambda n, t: calls.append(("done", n, t)))
    assert calls == [("start", 2, 0), ("done", 1, 2), ("done", 2, 2)]
    calls.clear()
    execute(select(["mp-rdma/ecn-balance"], False), jobs=2, out=tmp_path, on_start=lambda t, s: calls.append(("start", t, s)), on_progress=lambda n, t: calls.append(("done", n, t)))
    assert calls == [("start", 0, 2)], "a resumed, finished reproduce runs nothing"
    # The bar (the same for sweep and reproduce) shows done/total, failures and an ETA.
    buf = io.StringIO()
    bar = TaskBar("reproduce", Console(file=buf, force_terminal=True, width=100), True)
    bar.start(4)
    bar.update(2, failed=1)
    bar.stop()
    text = buf.getvalue()
    assert "reproduce" in text and "2/4" in text and "1 failed" in text and "ETA" in text
    quiet = io.StringIO()
    bar = TaskBar("reproduce", Console(file=quiet, force_terminal=True), False)
    bar.start(4)
    bar.update(2)
    bar.stop()
    assert quiet.getvalue() == ""

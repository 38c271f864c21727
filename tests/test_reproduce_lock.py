"""`braid reproduce -o DIR` takes DIR's run store for the whole command (issue 28 §1): a second
reproduce into the same folder meanwhile is refused with one line and exit 2, instead of both
running every run neither has finished. Fails before the change (the second one ran, exit 0).
The store is released when the first one ends, and by the kernel if it is killed."""

from __future__ import annotations

from click.testing import CliRunner

from braid.cli import main
from braid.reproduce import Row, Run, experiment
from braid.reproduce.store import RunStore


def _value(seed: int) -> dict:
    return {"x": 1.0}


def _runs(full: bool):
    return [Run("one", None, 1, _value)]


@experiment("test/store-lock", "made up", "one trivial run", _runs, cost="slow")
def _summary(m):
    return [Row("ran", "-", f"{m['one'][0]['x']:g}")]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_a_second_reproduce_into_a_busy_store_is_refused(tmp_path):
    out = tmp_path / "r"
    first = RunStore(out)  # another reproduce, mid-way through its runs
    first.prepare()
    try:
        r = invoke("reproduce", "test/store-lock", "-j", 1, "-o", out, "--no-progress")
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "is being written by another braid reproduce" in lines[0], r.stderr
        assert not list((out / "runs").glob("*.pkl"))
    finally:
        first.unlock()
    # Free again: it runs, and releases the store when done (a third one resumes without running).
    r = invoke("reproduce", "test/store-lock", "-j", 1, "-o", out, "--no-progress")
    assert r.exit_code == 0, r.output
    assert len(list((out / "runs").glob("*.pkl"))) == 1
    r = invoke("reproduce", "test/store-lock", "-j", 1, "-o", out, "--no-progress")
    assert r.exit_code == 0 and "1 already done, 0 to run" in r.output, r.output

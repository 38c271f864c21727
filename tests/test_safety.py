"""Nothing lost, nothing taken down (issue 28, section 1): exclusive output folders, symlinks,
full disks, orphaned sweep workers, special files as inputs, byte-order marks, scripts without
a main guard, and the review's smaller defects (../shared/reviews/new-user-and-reliability.md,
D1, D3-D5, D7-D11, D24).

Each test fails on the code before the change (the review's repro, made a test)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

import braid
from braid.cli import main

BRAID = [sys.executable, "-m", "braid.cli"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line_error(r, key: str, *fragments: str) -> str:
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {key}"), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def small_file(tmp_path: Path, name: str = "s.toml", text: str = SMALL_TOML) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def leftovers(folder: Path) -> list:
    """Hidden temporary files or folders braid writes beside its output."""
    return sorted(p.name for p in folder.rglob(".*") if ".tmp" in p.name or ".old" in p.name)


# --- D1: two runs into one folder --------------------------------------------------------------


def test_a_second_run_into_a_folder_being_written_is_refused(tmp_path, monkeypatch):
    """D1: while one run holds `same` (reserved, still running), a second `braid run -o same` is
    refused with one line; the first then writes its results there."""
    monkeypatch.chdir(tmp_path)
    p = small_file(tmp_path)
    from braid.results import ResultsDir

    first = ResultsDir("same")
    try:
        r = invoke("run", p, "-o", "same", "--no-progress")
        one_line_error(r, "same", "is being written by another braid run", f"pid {os.getpid()}")
        assert not (tmp_path / "same" / "summary.json").exists()
        (first.tmp / "summary.json").write_text('{"headline": {}}')
        assert first.commit() == Path("same")
    except BaseException:
        first.abort()
        raise
    assert (tmp_path / "same" / "summary.json").read_text() == '{"headline": {}}'
    # The lock is gone with the run: the next run into the folder is told about the results.
    one_line_error(invoke("run", p, "-o", "same", "--no-progress"), "same", "already holds results")


def test_results_put_into_the_folder_meanwhile_are_not_replaced(tmp_path, monkeypatch):
    """D1, checked again at the final rename: results that something else (an older braid that
    takes no lock) put into the reserved folder are not replaced without overwrite; the
    finished results are kept beside them, and the error says where."""
    monkeypatch.chdir(tmp_path)
    from braid.results import ResultsDir

    d = ResultsDir("same")
    (d.tmp / "summary.json").write_text('{"mine": 1}')
    (tmp_path / "same" / "summary.json").write_text('{"theirs": 1}')
    with pytest.raises(braid.BraidError) as e:
        d.commit()
    d.abort()
    assert "was changed by another process" in str(e.value) and "same-2" in str(e.value)
    assert (tmp_path / "same" / "summary.json").read_text() == '{"theirs": 1}'
    assert (tmp_path / "same-2" / "summary.json").read_text() == '{"mine": 1}'
    assert leftovers(tmp_path) == []


def test_two_sweeps_into_one_folder(tmp_path, monkeypatch):
    """D24: a sweep holds its folder; a second sweep into it is refused with one line (before,
    both ran every point)."""
    monkeypatch.chdir(tmp_path)
    p = small_file(tmp_path)
    from braid.sweep.store import SweepDir

    held = SweepDir(Path("sw"))
    held.lock()
    try:
        r = invoke("sweep", p, "--grid", "topology.paths=1,2", "-o", "sw", "-j", "1")
        one_line_error(r, "-o", "sw is being written by another braid sweep or run")
        assert not (tmp_path / "sw" / "points").exists()
    finally:
        held.unlock()


# --- D8, D4: odd -o values --------------------------------------------------------------------------


def test_empty_output_folder_is_refused(tmp_path, monkeypatch):
    """D8: `-o ""` was taken as "no -o" and the results went to results/<file>-<time>."""
    monkeypatch.chdir(tmp_path)
    p = small_file(tmp_path)
    one_line_error(invoke("run", p, "-o", "", "--no-progress"), "-o", "expected a folder name")
    assert not (tmp_path / "results").exists()


def test_output_through_a_symlink(tmp_path, monkeypatch):
    """D4: `-o link` (a link to an empty folder) ran the whole simulation, then failed with
    NotADirectoryError at the final rename, and the results were lost."""
    monkeypatch.chdir(tmp_path)
    p = small_file(tmp_path)
    (tmp_path / "realdir").mkdir()
    (tmp_path / "linkdir").symlink_to("realdir")
    r = invoke("run", p, "-o", "linkdir", "--no-progress")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "linkdir").is_symlink()
    assert (tmp_path / "realdir" / "summary.json").is_file()
    assert leftovers(tmp_path) == []


# --- D5: a full disk --------------------------------------------------------------------------------


def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_run_on_a_full_disk(tmp_path, monkeypatch):
    """D5: a write that fails at the end (a full disk) is one line and exit 2, with no
    temporary folder and no reserved folder left (before: a polars traceback, exit 1)."""
    monkeypatch.chdir(tmp_path)
    p = small_file(tmp_path)

    def half_then_full(self, file, *a, **k):
        Path(file).write_bytes(b"PAR1")
        raise pl.exceptions.ComputeError("failed to write: No space left on device (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", half_then_full)
    r = invoke("run", p, "-o", "out", "--no-progress")
    one_line_error(r, "out", "no space left on the device")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.toml"]


def test_a_finished_result_survives_a_failed_write_in_python(tmp_path, monkeypatch):
    """D5 from Python: the write fails after the simulation; the BraidError carries the finished
    result, which can be written elsewhere (nothing is left at the failed place)."""
    monkeypatch.chdir(tmp_path)
    real = pl.DataFrame.write_parquet
    monkeypatch.setattr(pl.DataFrame, "write_parquet", lambda self, *a, **k: _enospc())
    with pytest.raises(braid.BraidError) as e:
        braid.run(tomllib.loads(SMALL_TOML), out_dir="full")
    assert "no space left on the device" in str(e.value)
    assert not (tmp_path / "full").exists() and leftovers(tmp_path) == []
    monkeypatch.setattr(pl.DataFrame, "write_parquet", real)
    from braid.results import write_results

    write_results(e.value.result, "elsewhere")
    assert (tmp_path / "elsewhere" / "flows.parquet").is_file()


def test_report_and_export_on_a_full_disk(tmp_path, monkeypatch):
    """D5: `braid report` left `.throughput.png.tmp-PID` (and a traceback); `braid export
    --format csv` left a 0-byte CSV. Now: one line, exit 2, nothing half-written."""
    monkeypatch.chdir(tmp_path)
    braid.run(tomllib.loads(SMALL_TOML), out_dir="r")
    before = sorted(x.name for x in (tmp_path / "r").iterdir())
    real = Path.write_bytes

    def half_then_full(self, data):
        if self.suffix.startswith(".tmp") or ".tmp-" in self.name:
            real(self, data[: len(data) // 2])
            _enospc()
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", half_then_full)
    r = invoke("report", "r")
    line = one_line_error(r, "r/", "no space left on the device")
    assert ".png" in line
    assert sorted(x.name for x in (tmp_path / "r").iterdir()) == before
    monkeypatch.setattr(Path, "write_bytes", real)

    def empty_then_full(self, file=None, *a, **k):
        Path(file).write_bytes(b"")
        _enospc()

    monkeypatch.setattr(pl.DataFrame, "write_csv", empty_then_full)
    r = invoke("export", "r", "--format", "csv", "-o", "csv")
    one_line_error(r, "csv/", "no space left on the device")
    assert list((tmp_path / "csv").iterdir()) == []


def test_run_on_a_real_full_file_system(tmp_path):
    """D5 against the kernel's own ENOSPC: a 1 MiB tmpfs (needs mount rights; skipped
    without them)."""
    small = tmp_path / "small"
    small.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True)
    if m.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        p = small_file(tmp_path)
        (small / "filler").write_bytes(b"\0" * (1024 * 1024 - 8 * 1024))
        r = subprocess.run([*BRAID, "run", str(p), "-o", str(small / "y"), "--no-progress"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert "Traceback" not in r.stderr
        assert r.stderr.strip().splitlines() == [r.stderr.strip()]
        assert "no space left on the device" in r.stderr
        assert sorted(x.name for x in small.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


# --- D3: workers outlive a killed driver -----------------------------------------------------------


def test_sweep_workers_end_when_the_driver_is_killed(tmp_path):
    """D3: after SIGKILL of the process driving local workers, the workers (children of a dead
    process) used to wait forever. They now end within a few seconds."""
    script = tmp_path / "driver.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing, sys, time
            from braid.sweep.executors import LocalExecutor

            if __name__ == "__main__":
                ex = LocalExecutor(2)
                futs = [ex.submit(time.sleep, 120) for _ in range(2)]
                while len(multiprocessing.active_children()) < 2:
                    time.sleep(0.1)
                time.sleep(1.0)
                print(" ".join(str(p.pid) for p in multiprocessing.active_children() if p.name.startswith("SpawnProcess")), flush=True)
                time.sleep(120)
            """
        )
    )
    drv = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in drv.stdout.readline().split()]
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)
        drv.send_signal(signal.SIGKILL)
        drv.wait(10)
        deadline = time.time() + 10
        alive = pids
        while alive and time.time() < deadline:
            alive = [pid for pid in pids if _running(pid)]
            time.sleep(0.2)
        for pid in alive:  # do not leave them behind when the test fails
            os.kill(pid, signal.SIGKILL)
        assert alive == [], "workers outlived the driver"
    finally:
        if drv.poll() is None:
            drv.kill()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# --- D7: braid.sweep.sweep() from a script without a main guard -------------------------------------


def test_sweep_from_a_script_without_a_main_guard(tmp_path):
    """D7: every spawned worker ran the script again, every point failed, and sweep() returned
    a frame of failures without raising. Now one clear error before any work."""
    sc = small_file(tmp_path)
    script = tmp_path / "api_test.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import braid.sweep
            df = braid.sweep.sweep({str(sc)!r}, grid={{"topology.paths": [1, 2]}}, seeds=1, out_dir={str(tmp_path / "sw")!r}, jobs=1)
            print("rows", df.height, "errors", df["error"].drop_nulls().len())
            """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode != 0, r.stdout
    assert "braid.sweep.sweep(): is called from the top level of the script" in r.stderr
    assert 'if __name__ == "__main__"' in r.stderr
    assert "rows" not in r.stdout


def test_the_main_guard_check_sees_the_guard(tmp_path):
    """A call under `if __name__ == "__main__":` (directly or through a function) is fine."""
    script = tmp_path / "guarded.py"
    script.write_text(
        textwrap.dedent(
            """
            from braid.sweep.executors import unguarded_main_call

            def check():
                return unguarded_main_call()

            top = check()
            if __name__ == "__main__":
                print("top", top is not None, "guarded", check() is None)
            """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["top", "True", "guarded", "True"], r.stderr


# --- D9, D10, D11: the files a scenario names -------------------------------------------------------


def _scenario_with(tmp_path: Path, traffic: str) -> Path:
    text = SMALL_TOML.split("[[traffic]]")[0] + traffic + "\n[measure]\ninterval = \"10us\"\n"
    return small_file(tmp_path, "x.toml", text)


def _cli(args, timeout=60, cwd=None):
    return subprocess.run([*BRAID, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _one_line(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "panicked" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def test_a_fifo_as_a_flow_file_is_refused(tmp_path):
    """D9: a FIFO as `[[traffic]] file` blocked `braid validate` and `braid run` forever."""
    fifo = tmp_path / "flows.txt"
    os.mkfifo(fifo)
    p = _scenario_with(tmp_path, f'[[traffic]]\npattern = "hpcc"\nfile = "{fifo}"\n')
    for cmd in ("validate", "run"):
        r = _cli([cmd, p] + (["--no-write"] if cmd == "run" else []), timeout=60)
        _one_line(r, "is a FIFO, not a regular file")


def test_a_device_as_a_cdf_is_refused(tmp_path):
    """D9: `cdf = "/dev/zero"` was read until memory ran out."""
    p = _scenario_with(tmp_path, '[[traffic]]\npattern = "poisson"\ncdf = "/dev/zero"\nload = 0.3\nduration = "100us"\n')
    _one_line(_cli(["validate", p], timeout=60), "/dev/zero", "is a device, not a regular file")


def test_a_fifo_as_the_scenario_is_refused(tmp_path):
    """D9 in the front end's own reader: a FIFO named as the scenario blocked forever."""
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    _one_line(_cli(["validate", fifo], timeout=30), "s.toml", "is a FIFO, not a regular file")


def test_an_error_does_not_quote_a_file_it_was_not_meant_to_read(tmp_path):
    """D11: a readable file named as a CDF had its first line quoted in the error."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    p = _scenario_with(tmp_path, f'[[traffic]]\npattern = "poisson"\ncdf = "{secret}"\nload = 0.3\nduration = "100us"\n')
    line = _one_line(_cli(["validate", p], timeout=60), "secret.txt:1")
    assert "root" not in line.split("secret.txt:1", 1)[1], line


def test_a_byte_order_mark_is_accepted(tmp_path):
    """D10: a scenario saved by Notepad (UTF-8 with a BOM) was `1:1: invalid TOML`."""
    p = tmp_path / "bom.toml"
    p.write_bytes(b"\xef\xbb\xbf" + SMALL_TOML.encode())
    r = _cli(["validate", p], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: small two-tor")

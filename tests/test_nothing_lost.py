"""Nothing lost (issue 12): output places checked before any work, no silent replacement or
collision, SIGTERM like Ctrl-C, stale temporary folders, reproduce workers stopped, cost
estimates, deep nesting, silent accepts made errors, one exception hierarchy, numpy seeds,
messages in the user's terms, strict --set values, damaged results folders.

Each test fails on the code before the change."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

import braid
from braid.cli import main

LINK = '{ rate = "10Gbps", delay = "1us" }'


def invoke(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def one_line_error(r, key: str, *fragments: str) -> str:
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {key}"), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def small(**edit) -> dict:
    d = tomllib.loads(SMALL_TOML)
    d.update(edit)
    return d


# --- the output folder is checked before the run ----------------------------------------------


@pytest.mark.parametrize("where", ["/proc/braid-results", "FILE/sub", "."])
def test_bad_output_folder_fails_before_the_run(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("x")
    ticks = []
    with pytest.raises(braid.BraidError) as e:
        braid.run(small(), out_dir=where, progress=lambda now, end: ticks.append(now))
    assert ticks == [], "the simulation ran before the output folder was checked"
    assert e.value.path == where
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_bad_output_folder_on_the_command_line(tmp_path):
    p = write(tmp_path, SMALL_TOML)
    one_line_error(invoke("run", p, "-o", "/proc/braid-results"), "/proc/braid-results", "cannot create the output folder")


def test_reproduce_json_checked_first(tmp_path):
    # The bad --json is reported before anything else (here: before even the unknown id).
    one_line_error(invoke("reproduce", "--json", "/proc/nope/x.json", "no-such-experiment"), "--json", "cannot write")


def test_drum_out_checked_before_solving(tmp_path):
    r = invoke("drum", "solve", "--n", "20", "--m", "2", "--out", "/proc/nope/t.parquet", "--no-reference")
    one_line_error(r, "--out", "cannot write")
    assert "iterations" not in r.stdout


# --- no collision, no silent replacement --------------------------------------------------------


def test_default_folders_never_collide(tmp_path, monkeypatch):
    p = write(tmp_path, SMALL_TOML)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-000000")
    for _ in range(2):
        assert invoke("run", p).exit_code == 0
    assert sorted(x.name for x in (tmp_path / "results").iterdir()) == ["s-20260101-000000", "s-20260101-000000-2"]


def test_existing_results_refused_without_overwrite(tmp_path):
    p = write(tmp_path, SMALL_TOML)
    out = tmp_path / "out"
    assert invoke("run", p, "-o", out, "--seed", "1").exit_code == 0
    first = (out / "summary.json").read_text()
    one_line_error(invoke("run", p, "-o", out, "--seed", "2"), str(out), "already holds results", "--overwrite")
    assert (out / "summary.json").read_text() == first
    assert invoke("run", p, "-o", out, "--seed", "2", "--overwrite").exit_code == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    with pytest.raises(braid.BraidError):
        braid.run(small(), out_dir=out)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temporary_folders_are_cleaned(tmp_path):
    p = write(tmp_path, SMALL_TOML)
    stale = tmp_path / f".out.tmp-{_dead_pid()}-abcd"
    stale.mkdir()
    (stale / "flows.parquet").write_text("half")
    assert invoke("run", p, "-o", tmp_path / "out").exit_code == 0
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out", "s.toml"]


LONG_APP = f"""
name = "long"
duration = "10s"
[topology]
kind = "leaf-spine"
spines = 1
leaves = 1
hosts_per_leaf = 2
host_link = {LINK}
fabric_link = {LINK}
[[apps]]
kind = "write_bw"
src = 0
dst = 1
size = "64KB"
duration = "10s"
"""


def _braid(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "braid.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    p = write(tmp_path, LONG_APP)
    out = tmp_path / "out"
    proc = _braid("run", p, "-o", out, "--no-progress")
    # The folder is reserved at the start: wait for it, then stop the run mid-way.
    for _ in range(200):
        if out.exists():
            break
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated" and "Traceback" not in err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.toml"]


def _children(pid: int) -> list:
    kids = []
    for t in Path(f"/proc/{pid}/task").glob("*/children"):
        kids += [int(x) for x in t.read_text().split()]
    return kids


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_reproduce_workers_stop_with_it(tmp_path):
    # A sweep of minutes (240 runs), so it is surely still running when it is stopped.
    proc = _braid("reproduce", "-j", "2", "--full", "multipath/compare", "--out", str(tmp_path / "figs"), cwd=tmp_path)
    kids: list = []
    for _ in range(300):
        kids = _children(proc.pid)
        if len(kids) >= 2:
            break
        time.sleep(0.05)
    assert kids, "no workers started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    try:
        # Orphaned workers would keep the pipes open: a timeout here is the failure below.
        proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.time() + 3
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.05)
    alive = [k for k in kids if _alive(k)]
    for k in alive:  # do not leave them behind when the test fails
        os.kill(k, signal.SIGKILL)
    assert not alive, "workers still running after braid reproduce was stopped"
    assert proc.wait(timeout=5) == 143


# --- what a scenario will cost ----------------------------------------------------------------


@pytest.mark.parametrize(
    "override, key, what",
    [
        ('measure.interval="1ps"', "measure.interval", "time-series samples"),
        ("traffic=[]", None, None),
    ],
)
def test_validate_rejects_what_cannot_fit(small_file, override, key, what):
    r = invoke("validate", small_file, "--set", override)
    if key is None:
        assert r.exit_code == 0, r.output
        assert "estimate:" in r.stdout and "nodes" in r.stdout and "memory" in r.stdout
    else:
        one_line_error(r, key, what, "GB")


def test_huge_qps_and_fat_tree_rejected_quickly(tmp_path):
    p = write(tmp_path, SMALL_TOML)
    t0 = time.perf_counter()
    one_line_error(invoke("validate", p, "--set", 'apps=[{kind="write_bw", src=0, dst=1, size="1KB", qps=100000000}]'), "apps[0].qps", "QPs")
    ft = 'topology={kind="fat-tree", k=200, host_link={rate="100Gbps", delay="1us"}, fabric_link={rate="100Gbps", delay="1us"}}'
    # At the default 10 us sampling, the 2,000,000 hosts' time series cost the most...
    one_line_error(invoke("validate", p, "--set", ft), "measure.interval", "time-series samples")
    # ...and with sampling off, the topology itself (~18 GB of nodes and ~4 GB of route groups, one
    # per switch and edge switch: more than a 16 GB limit).
    off = invoke("validate", p, "--set", ft, "--set", 'measure.interval="0ns"', env={"BRAID_MEMORY_LIMIT": "16GB"})
    one_line_error(off, "topology.k", "2,000,000 hosts")
    assert time.perf_counter() - t0 < 10


def test_memory_limit_from_the_environment(small_file):
    r = invoke("validate", small_file, env={"BRAID_MEMORY_LIMIT": "1MB"})
    one_line_error(r, "", "more than the 1 MB BRAID_MEMORY_LIMIT")


def test_deeply_nested_toml_is_a_clean_error(tmp_path):
    p = write(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    one_line_error(invoke("validate", p), str(p), "nested too deeply")
    p = write(tmp_path, "a = " + "[" * 100 + "]" * 100 + "\n", "b.toml")
    one_line_error(invoke("validate", p), "a[0]", "nested too deeply")


# --- silent accepts are errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, key, fragment",
    [
        (['routes=[{node="tor0", next_hops=["h0"]}]'], "routes[0].next_hops[0]", "is a host"),
        (['middleware.per_host."99"=[{kind="raw"}]'], "middleware.per_host.99", "host 99 does not exist"),
        (["switch.scheduler=dwrr", "switch.dwrr_quantum=[1500, 1500]"], "switch.dwrr_quantum", "one quantum per priority"),
        (['apps=[{kind="write_bw", src=0, dst=1, size="1KB", iterations=10, duration="1ms"}]'], "apps[0].duration", "not both"),
        (['measure.queues=["tor0:0", "tor0:0"]'], "measure.queues[1]", "already sampled"),
        (['measure.queues=["all-fabric", "tor0:4"]'], "measure.queues[1]", "already sampled"),
    ],
)
def test_silent_accepts_are_errors(small_file, overrides, key, fragment):
    args = []
    for o in overrides:
        args += ["--set", o]
    one_line_error(invoke("validate", small_file, *args), key, fragment)


def test_a_host_is_a_next_hop_only_for_its_own_traffic(small_file):
    assert invoke("validate", small_file, "--set", 'routes=[{node="tor0", dst=[0], next_hops=["h0"]}]').exit_code == 0


def test_packets_a_switch_cannot_forward_are_drops():
    # Two switches with no link between them: the flow's packets die at the first one.
    d = small(duration="200us", measure={})
    d["topology"] = {
        "kind": "edges",
        "nodes": ["a", "b", "s1", "s2"],
        "switches": ["s1", "s2"],
        "links": [{"a": "a", "b": "s1", "rate": "10Gbps", "delay": "1us"}, {"a": "b", "b": "s2", "rate": "10Gbps", "delay": "1us"}],
    }
    d["traffic"] = [{"pattern": "flows", "flows": [{"src": 0, "dst": 1, "size": "10KB"}]}]
    r = braid.run(d, seed=1)
    c = r.counters
    assert c["drops_no_route"] > 0
    assert c["drops"] == c["drops_buffer"] + c["drops_loss"] + c["drops_link_down"] + c["drops_no_route"]
    assert c["drops_buffer"] == 0


# --- import-hpcc checks the files it references -----------------------------------------------

HPCC = Path(__file__).parent / "data" / "hpcc"


@pytest.mark.parametrize(
    "flows, topo, fragment",
    [
        ("1\n0 1 3 100 1000 2.0\n", None, "node 0 is a switch, not a host"),
        ("1\n9 1 3 100 1000 2.0\n", None, "node 9 does not exist (the topology has 5 nodes)"),
        ("3\n2 1 3 100 1000 2.0\n", None, "declares 3 flows, the file has 1"),
        ("1\n2 1 3 100 1000 soon\n", None, "start time"),
        (None, "5 1 4\n0\n0 1 100Gbps 1000ns 0\n0 2 100Gbps 1000ns 0\n0 3 100Gbps 1000ns 0\n0 7 40Gbps 1us 0\n", "node 7 does not exist"),
        (None, "5 1 1\n9\n0 1 100Gbps 1000ns 0\n", "switch 9 does not exist (line 1 declares 5 nodes"),
    ],
)
def test_import_hpcc_checks_its_files(tmp_path, flows, topo, fragment):
    import shutil

    shutil.copytree(HPCC / "mix", tmp_path / "mix")
    shutil.copy(HPCC / "config-small.txt", tmp_path / "config.txt")
    if flows is not None:
        (tmp_path / "mix" / "flows-star4.txt").write_text(flows)
    if topo is not None:
        (tmp_path / "mix" / "topo-star4.txt").write_text(topo)
    r = invoke("import-hpcc", tmp_path / "config.txt", "-o", tmp_path / "out.toml")
    assert r.exit_code == 2, r.output
    assert fragment in r.stderr and "Traceback" not in r.output
    assert not (tmp_path / "out.toml").exists()


# --- Python: one hierarchy, numpy seeds, user terms, --set ------------------------------------


def test_one_exception_hierarchy():
    assert issubclass(braid.ScenarioError, braid.BraidError)
    assert issubclass(braid.BraidError, ValueError)
    from braid import _core

    assert _core.ScenarioError is braid.ScenarioError
    with pytest.raises(braid.BraidError) as e:
        braid.validate(small(duration="0ms"))
    assert isinstance(e.value, braid.ScenarioError) and e.value.path == "duration"


def test_numpy_integer_seeds():
    d = small(duration="300us")
    a = braid.run(d, seed=np.int64(4))
    b = braid.run(d, seed=4)
    assert a.seed == 4 and a.headline == b.headline
    for bad in (np.float64(4.0), True, -1):
        with pytest.raises(braid.BraidError):
            braid.run(d, seed=bad)
    # numpy numbers inside a scenario built in Python are numbers too.
    d2 = small(duration="300us", seed=np.int64(4))
    d2["topology"]["paths"] = np.int32(2)
    assert braid.run(d2).headline == b.headline


@pytest.mark.parametrize(
    "override, key, expect",
    [
        ("traffic[0].size=[1]", "traffic[0].size", None),
        ("topology.paths=-1", "topology.paths", "expected a whole number from 0 to 4294967295, got -1"),
        ('traffic[0]={pattern="incast", receiver=0, senders="x", size="1KB"}', "traffic[0].senders", "expected a number of senders (e.g. 8) or a list of host indices"),
        ("topology.host_link=3", "topology.host_link", "expected a table"),
        ("measure.queues=3", "measure.queues", "expected a list"),
    ],
)
def test_messages_in_the_users_terms(small_file, override, key, expect):
    line = one_line_error(invoke("validate", small_file, "--set", override), key)
    for rust in ("u8", "u16", "u32", "u64", "usize", "untagged", "enum ", "struct ", "a sequence"):
        assert rust not in line.split(":", 2)[-1].replace("u32 ", ""), line
    if expect:
        assert expect in line


@pytest.mark.parametrize("value", ["[1, 2", "{ rate = ", '"unterminated', "40 Gbps"])
def test_set_value_that_is_not_toml_is_an_error(small_file, value):
    one_line_error(invoke("validate", small_file, "--set", f"traffic[0].size={value}"), "--set traffic[0].size=", "not valid TOML")


def test_set_bare_words_are_strings(small_file):
    assert invoke("validate", small_file, "--set", "traffic[0].size=1MB", "--set", "transport.kind=none").exit_code == 0


# --- damaged results folders ----------------------------------------------------------------


@pytest.fixture
def results_folder(tmp_path):
    out = tmp_path / "res"
    braid.run(small(duration="300us"), seed=1, out_dir=out)
    return out


def test_report_on_a_truncated_parquet(results_folder):
    p = results_folder / "flows.parquet"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    one_line_error(invoke("report", results_folder), str(p), "cannot be read as Parquet")


def test_report_on_bad_json(results_folder):
    p = results_folder / "summary.json"
    p.write_text(p.read_text()[:40])
    one_line_error(invoke("report", results_folder), str(p), "not valid JSON")

"""The command line: bad input gives one line naming the key and exit code 2, never a traceback;
good input runs and writes a results folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from braid.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def assert_user_error(res, key: str, *fragments: str):
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert "Traceback" not in res.output
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {key}: "), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]


def write(tmp_path: Path, text: str, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- bad input --------------------------------------------------------------------------------


def test_toml_syntax_error(tmp_path, small_toml):
    p = write(tmp_path, small_toml.replace('duration = "5ms"', "duration = 5ms"))
    assert_user_error(invoke("run", p, "--no-write"), f"{p}:3:13", "invalid TOML")


def test_unknown_key(tmp_path, small_toml):
    p = write(tmp_path, small_toml.replace("[transport]", "[transport]\nknd = 1"))
    assert_user_error(invoke("run", p, "--no-write"), "transport.knd", "unknown field")


def test_unknown_key_in_tagged_table(tmp_path, small_toml):
    p = write(tmp_path, small_toml.replace("paths = 2", "paths = 2\nspines = 4"))
    assert_user_error(invoke("validate", p), "topology.spines", "unknown field")


def test_wrong_unit(tmp_path, small_toml):
    p = write(tmp_path, small_toml.replace('host_link = { rate = "10Gbps"', 'host_link = { rate = "10GBs"'))
    assert_user_error(invoke("run", p, "--no-write"), "topology.host_link.rate", "10GBs")


def test_time_without_unit(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    assert_user_error(invoke("run", p, "--no-write", "--set", "duration=5"), "duration", "ambiguous")


def test_negative_rate(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    assert_user_error(invoke("run", p, "--no-write", "--set", "topology.fabric_link.rate=-10Gbps"), "topology.fabric_link.rate", "negative")


def test_out_of_range_value(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    assert_user_error(invoke("run", p, "--no-write", "--set", "switch.ecn.pmax=1.5"), "switch.ecn.pmax", "between 0 and 1")


def test_ack_coalescing_refused_under_mp_rdma(tmp_path, small_toml):
    # MP-RDMA ACKs every packet (NSDI'18 §3.2): nic.ack_every > 1 is refused, not ignored.
    p = write(tmp_path, small_toml)
    res = invoke("run", p, "--no-write", "--set", "transport.kind=mp-rdma", "--set", "nic.ack_every=4")
    assert_user_error(res, "nic.ack_every", "mp-rdma")


def test_missing_scenario_file(tmp_path):
    assert_user_error(invoke("run", tmp_path / "nope.toml"), str(tmp_path / "nope.toml"), "no such file")


def test_missing_referenced_file(tmp_path):
    p = write(tmp_path, 'duration = "1ms"\ntopology = { kind = "hpcc", file = "missing-topology.txt" }\n')
    assert_user_error(invoke("run", p, "--no-write"), "topology.file", "missing-topology.txt")


@pytest.mark.parametrize(
    "spec, key",
    [
        ("nonsense", "--set nonsense"),
        ("traffic[7].size=1", "--set traffic[7].size=1"),
        ("duration.x=1", "--set duration.x=1"),
    ],
)
def test_bad_set(tmp_path, small_toml, spec, key):
    p = write(tmp_path, small_toml)
    assert_user_error(invoke("run", p, "--no-write", "--set", spec), key)


@pytest.mark.parametrize("seed", ["-1", "abc", str(2**64)])
def test_bad_seed(tmp_path, small_toml, seed):
    p = write(tmp_path, small_toml)
    assert_user_error(invoke("run", p, "--no-write", "--seed", seed), "--seed")


def test_usage_errors_are_one_line():
    res = invoke("run")
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[0].startswith("error: Missing argument")
    res = invoke("no-such-command")
    assert res.exit_code == 2 and res.stderr.startswith("error: ")


def test_refuses_to_overwrite_a_foreign_folder(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    other = tmp_path / "precious"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert_user_error(invoke("run", p, "-o", other), str(other), "not a braid results folder")
    assert (other / "notes.txt").read_text() == "keep me"


def test_real_process_exit_code_and_no_traceback(tmp_path, small_toml):
    p = write(tmp_path, small_toml.replace('"10Gbps"', '"fast"', 1))
    r = subprocess.run([sys.executable, "-m", "braid.cli", "run", str(p), "--no-write"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() == 'error: topology.host_link.rate: expected a rate like "40Gbps", got "fast"'


# --- good input -------------------------------------------------------------------------------


def test_run_writes_results(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    out = tmp_path / "res"
    res = invoke("run", p, "-o", out, "--seed", "3", "--set", "transport.kind=none")
    assert res.exit_code == 0, res.output
    for f in ("summary.json", "flows.parquet", "messages.parquet", "throughput.parquet", "queues.parquet"):
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    assert s["seed"] == 3
    assert s["scenario"]["data"]["transport"]["kind"] == "none"
    assert s["scenario"]["overrides"] == ["transport.kind=none"]
    assert s["counters"]["cnps"] == 0
    assert s["headline"]["flows_completed"] == s["headline"]["flows"] == 3
    for k in ("braid_version", "wall_s", "cpu_s", "events_per_s", "headline", "counters", "stats"):
        assert k in s
    # No temporary folders left beside the result.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["res", "s.toml"]


def test_run_default_folder(tmp_path, small_toml, monkeypatch):
    p = write(tmp_path, small_toml)
    monkeypatch.chdir(tmp_path)
    res = invoke("run", p.resolve())
    assert res.exit_code == 0, res.output
    assert "results: results/s-" in res.stdout


def test_set_changes_the_run(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    with_pfc = invoke("run", p, "-o", tmp_path / "a", "--set", 'traffic[0].size="50KB"')
    assert with_pfc.exit_code == 0, with_pfc.output
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["headline"]["delivered_bytes"] == 3 * 50_000


def test_validate_and_schema(small_file):
    res = invoke("validate", small_file)
    assert res.exit_code == 0
    assert res.stdout.startswith("ok: small two-tor (6 hosts, 4 switches)")
    res = invoke("schema")
    schema = json.loads(res.stdout)
    assert "topology" in schema["properties"]


def test_report(tmp_path, small_toml):
    p = write(tmp_path, small_toml)
    out = tmp_path / "res"
    assert invoke("run", p, "-o", out).exit_code == 0
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    for f in ("throughput.png", "fct_cdf.png", "queues.png", "report.md"):
        assert (out / f).stat().st_size > 0, f
    assert "throughput.png" in (out / "report.md").read_text()


def test_report_on_a_non_results_folder(tmp_path):
    assert_user_error(invoke("report", tmp_path), str(tmp_path), "summary.json")


@pytest.mark.slow
def test_demo(tmp_path):
    out = tmp_path / "demo"
    res = invoke("demo", "-o", out)
    assert res.exit_code == 0, res.output
    assert "Per-flow goodput" in res.stdout and "incast" in res.stdout
    meta = json.loads((out / "demo.json").read_text())
    assert len(meta["two_tor"]["flows"]) == 5
    assert all(f["via"].startswith("spine") for f in meta["two_tor"]["flows"])
    rows = dict((label, vals) for label, vals in meta["incast"]["rows"])
    assert rows["packets dropped"][0] == 0, "PFC on must not drop"
    assert rows["packets dropped"][1] > 0, "PFC off with a shallow buffer must drop"
    assert rows["PFC pause frames"][0] > 0
    assert rows["flows completed"] == ["8/8", "8/8"]
    # MP-RDMA spreads the same five connections over all paths: ~30 Gbps each, each on many
    # virtual paths, above DCQCN's ECMP-pinned total.
    mp = meta["mp_rdma"]
    assert len(mp["flows"]) == 5 and all(f["vps"] >= 8 for f in mp["flows"])
    assert mp["total_gbps"] > meta["two_tor"]["total_gbps"] and mp["total_gbps"] > 140
    for sub in ("two-tor-dcqcn", "two-tor-mp-rdma", "incast-pfc", "incast-no-pfc"):
        assert (out / sub / "summary.json").exists()
        assert (out / sub / "throughput.png").exists()
    assert (out / "report.md").exists()
    assert "incast-no-pfc" in (out / "report.html").read_text()
    # `braid report` regenerates a demo folder's report.
    assert invoke("report", out).exit_code == 0


def test_bench_quick(tmp_path):
    res = invoke("bench", "--quick", "--only", "incast-8to1", "--json", tmp_path / "b.json")
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "b.json").read_text())["scenarios"]
    assert rows[0]["name"] == "incast-8to1"
    assert rows[0]["cpu_s"] > 0 and rows[0]["max_rss_mb"] > 0 and rows[0]["stats"]["events"] > 0


def test_bench_unknown_name():
    assert_user_error(invoke("bench", "--only", "nope"), "--only", "unknown benchmark")


@pytest.mark.parametrize("command", ["import-hpcc", "drum"])
def test_extension_commands_registered(command):
    assert command in main.commands
    assert invoke(command, "--help").exit_code == 0


# Every command `braid` had before the CLI became a package (braid/cli/), by name.
COMMANDS = [
    "bench", "compare", "compare-hpcc", "conformance", "demo", "drum", "export", "import-hpcc", "perftest",
    "plot", "report", "reproduce", "run", "schema", "sweep", "validate",
]


def test_every_command_is_registered():
    assert sorted(main.commands) == COMMANDS
    for name in COMMANDS:
        if main.commands[name].add_help_option:  # perftest and conformance hand --help to their binary
            assert invoke(name, "--help").exit_code == 0, name


def test_every_cli_module_is_registered():
    # The one way of adding a command: a module in braid/cli/ defining COMMANDS, and its name in
    # COMMAND_MODULES. A module left out of the list would define commands nobody can run.
    import importlib
    import pkgutil

    import braid.cli as cli

    modules = {m.name for m in pkgutil.iter_modules(cli.__path__) if not m.name.startswith("_")}
    assert modules == set(cli.COMMAND_MODULES)
    for name in cli.COMMAND_MODULES:
        for cmd in importlib.import_module(f"braid.cli.{name}").COMMANDS:
            assert main.commands[cmd.name] is cmd, (name, cmd.name)

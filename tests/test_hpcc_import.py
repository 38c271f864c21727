"""`braid import-hpcc`: HPCC ns-3 config.txt → braid scenario.

The importer reads HPCC's topology and flow files with the core's reader (braid-topo, through
`braid._core`), the one a run uses; the imported scenarios are also built by the core (schema,
files, topology, flows). The anchor configs in ../shared/anchors/hpcc are used when present
(skipped on users' machines)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from braid import _core
from braid import hpcc as hi
from braid.cli.hpcc import import_hpcc

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "hpcc"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _anchors() -> Path | None:
    for c in (ROOT.parent / "shared" / "anchors" / "hpcc", Path("/work/shared/anchors/hpcc")):
        if (c / "config-dcqcn-fattree-websearch.txt").is_file():
            return c
    return None


ANCHORS = _anchors()
needs_anchors = pytest.mark.skipif(ANCHORS is None, reason="HPCC anchor files (../shared/anchors/hpcc) not present")


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def run_cli(*args: str):
    return _runner().invoke(import_hpcc, list(args), catch_exceptions=False)


def _core_build(scenario: dict, base_dir: Path) -> None:
    """Builds the scenario with the compiled core (schema + world + flows)."""
    _core.Simulation(json.dumps(scenario), str(base_dir), 1)


# ------------------------------------------------------------------------------------------------
# Anchor configs


@needs_anchors
def test_fattree_websearch_anchor(tmp_path: Path) -> None:
    out = tmp_path / "fat.toml"
    r = run_cli(
        str(ANCHORS / "config-dcqcn-fattree-websearch.txt"),
        "-o", str(out),
        "--topology", str(ANCHORS / "topology-fattree-320.txt"),
        "--flows", str(ANCHORS / "flows-websearch-320h-30pct-5ms.txt"),
    )
    assert r.exit_code == 0, r.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["duration"] == "2.1s"
    assert doc["topology"]["kind"] == "hpcc"
    assert (out.parent / doc["topology"]["file"]).resolve() == (ANCHORS / "topology-fattree-320.txt").resolve()
    assert doc["traffic"] == [
        {
            "pattern": "hpcc",
            "file": doc["traffic"][0]["file"],
            "topology": doc["topology"]["file"],
        }
    ]
    assert (out.parent / doc["traffic"][0]["file"]).resolve() == (ANCHORS / "flows-websearch-320h-30pct-5ms.txt").resolve()
    assert doc["transport"]["kind"] == "dcqcn"
    dc = doc["transport"]["dcqcn"]
    assert dc == {
        "alpha_timer": "1us",
        "rate_decrease_interval": "4us",
        "rate_timer": "300us",
        "g": 0.00390625,
        "fast_recovery_steps": 1,
        "rate_ai": "20Mbps",
        "rate_hai": "200Mbps",
        "min_rate": "1Gbps",
        "clamp_target_rate": False,
        "byte_counter": 0,
        "reaction": "hpcc",
        "notify": "ack",
    }
    # ACK_HIGH_PRIO 1 gives ACKs priority at HPCC's NICs only: its switches queue them with the data.
    assert doc["nic"] == {"mtu": 1000, "ack_every": 1, "ack_priority": "data", "priority": 3}
    sw = doc["switch"]
    assert sw["buffer"] == "32MiB"  # 32 * 1024 * 1024
    assert sw["ecn"]["enabled"] is True
    assert sw["ecn"]["by_rate"] == [
        {"rate": "100Gbps", "kmin": "400KB", "kmax": "1600KB", "pmax": 0.2},
        {"rate": "400Gbps", "kmin": "1600KB", "kmax": "6400KB", "pmax": 0.2},
    ]
    assert sw["pfc"]["dynamic"] is True
    assert "link_events" not in doc
    assert "default_loss" not in doc["topology"]
    # Ignored keys are listed with reasons, on stderr.
    for key in ("TRACE_FILE", "FCT_OUTPUT_FILE", "QLEN_MON_FILE", "U_TARGET", "DCTCP_RATE_AI", "L2_BACK_TO_ZERO",
                "L2_CHUNK_SIZE", "HAS_WIN", "VAR_WIN", "GLOBAL_T", "PINT_PROB", "ENABLE_TRACE"):
        assert key in r.stderr, key
    assert "1024*1024" in r.stderr
    assert "AckHighPrio is never set" in r.stderr
    _core_build(doc, out.parent)


@needs_anchors
def test_incast_anchor_maps_hosts_through_the_topology(tmp_path: Path) -> None:
    imp = hi.convert(
        ANCHORS / "config-dcqcn-incast.txt",
        topology=str(ANCHORS / "topology-star-65.txt"),
        flows=str(ANCHORS / "flows-incast-2to1.txt"),
        out_dir=tmp_path,
    )
    doc = imp.scenario
    assert doc["duration"] == "4s"
    assert doc["traffic"][0]["topology"] == doc["topology"]["file"]
    assert any("not the lowest node ids" in n for n in imp.notes)
    assert tomllib.loads(imp.toml)["switch"] == doc["switch"]
    (tmp_path / "incast.toml").write_text(imp.toml)
    _core_build(tomllib.loads(imp.toml), tmp_path)


@needs_anchors
def test_anchor_without_files_says_how_to_fix() -> None:
    r = run_cli(str(ANCHORS / "config-dcqcn-fattree-websearch.txt"))
    assert r.exit_code == 2
    assert "TOPOLOGY_FILE mix/fat.txt: file not found" in r.stderr
    assert "--topology" in r.stderr


# ------------------------------------------------------------------------------------------------
# A small config with every mapped key


def test_small_config(tmp_path: Path) -> None:
    out = tmp_path / "small.toml"
    r = run_cli(str(DATA / "config-small.txt"), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["duration"] == "2.005s"
    assert doc["topology"]["default_loss"] == 0.001
    assert (out.parent / doc["topology"]["file"]).resolve() == (DATA / "mix" / "topo-star4.txt").resolve()
    assert doc["nic"] == {"mtu": 1024, "ack_every": 4, "ack_priority": "data", "priority": 3}
    assert doc["switch"]["buffer"] == "12MiB"
    assert doc["switch"]["pfc"] == {"enabled": True, "dynamic": False}
    assert doc["switch"]["ecn"]["by_rate"] == [
        {"rate": "40Gbps", "kmin": "5KB", "kmax": "200KB", "pmax": 0.01},
        {"rate": "100Gbps", "kmin": "400KB", "kmax": "1600KB", "pmax": 0.2},
    ]
    dc = doc["transport"]["dcqcn"]
    assert dc["alpha_timer"] == "55us" and dc["rate_timer"] == "55us" and dc["rate_decrease_interval"] == "50us"
    assert dc["clamp_target_rate"] is True and dc["fast_recovery_steps"] == 5
    assert (dc["rate_ai"], dc["rate_hai"], dc["min_rate"]) == ("40Mbps", "400Mbps", "100Mbps")
    assert dc["byte_counter"] == 0
    assert (dc["reaction"], dc["notify"]) == ("hpcc", "ack")
    # LINK_DOWN 1500 0 4: at 2 s + 1500 µs.
    assert doc["link_events"] == [{"a": "0", "b": "4", "down": "2.0015s"}]
    assert "VAR_WIN" in r.stderr and "windowing is off" in r.stderr
    assert "FCT_OUTPUT_FILE" in r.stderr
    _core_build(doc, out.parent)


def test_stdout_and_absolute_paths() -> None:
    r = run_cli(str(DATA / "config-small.txt"))
    assert r.exit_code == 0, r.stderr
    doc = tomllib.loads(r.stdout)
    assert Path(doc["topology"]["file"]).is_absolute()
    assert Path(doc["traffic"][0]["file"]).is_file()


def test_files_found_by_basename(tmp_path: Path) -> None:
    # HPCC paths are relative to the ns-3 run directory; a copy of the files next to the config
    # is found by basename.
    for f in ("topo-star4.txt", "flows-star4.txt"):
        shutil.copy(DATA / "mix" / f, tmp_path / f)
    text = (DATA / "config-small.txt").read_text().replace("mix/topo-star4.txt", "/somewhere/else/topo-star4.txt")
    text = text.replace("mix/flows-star4.txt", "elsewhere/flows-star4.txt")
    (tmp_path / "config.txt").write_text(text)
    imp = hi.convert(tmp_path / "config.txt", out_dir=tmp_path)
    assert imp.scenario["topology"]["file"] == "topo-star4.txt"
    assert imp.scenario["traffic"][0]["file"] == "flows-star4.txt"


# ------------------------------------------------------------------------------------------------
# Errors: exit code 2, clear messages


def _config(tmp_path: Path, edit) -> Path:
    text = edit((DATA / "config-small.txt").read_text())
    shutil.copytree(DATA / "mix", tmp_path / "mix", dirs_exist_ok=True)
    p = tmp_path / "config.txt"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "edit, expect",
    [
        (lambda t: t + "FROBNICATE 1\n", "unknown key 'FROBNICATE'"),
        (lambda t: t.replace("RATE_AI 40Mb/s", "RATE_AI 40Mbit"), "RATE_AI: unknown rate unit 'Mbit'"),
        (lambda t: t.replace("RATE_AI 40Mb/s", "RATE_AI fast"), "RATE_AI: expected a rate"),
        (lambda t: t.replace("PACKET_PAYLOAD_SIZE 1024", "PACKET_PAYLOAD_SIZE 1k"), "PACKET_PAYLOAD_SIZE: expected a non-negative integer"),
        (lambda t: t.replace("PACKET_PAYLOAD_SIZE 1024", "PACKET_PAYLOAD_SIZE 10"), "between 64 and 65536"),
        (lambda t: t.replace("ENABLE_QCN 1", "ENABLE_QCN 2"), "ENABLE_QCN: expected 0 or 1"),
        (lambda t: t.replace("LINK_DOWN 1500 0 4", "LINK_DOWN 1500 0"), "LINK_DOWN takes 3 values"),
        (lambda t: t.replace("LINK_DOWN 1500 0 4", "LINK_DOWN 1500 0 9"), "node 9 does not exist"),
        (lambda t: t + "BUFFER_SIZE 4\n", "BUFFER_SIZE is given twice"),
        (lambda t: t.replace("EWMA_GAIN 0.00390625", "EWMA_GAIN 1.5"), "EWMA_GAIN: expected a gain in (0, 1]"),
        (lambda t: t.replace("PMAX_MAP 2 40000000000 0.01 100000000000 0.2", "PMAX_MAP 1 40000000000 0.01"), "must list the same link rates"),
        (lambda t: t.replace("KMIN_MAP 2 40000000000 5 100000000000 400", "KMIN_MAP 3 40000000000 5 100000000000 400"), "says 3 entries"),
        (lambda t: t.replace("KMIN_MAP 2 40000000000 5", "KMIN_MAP 2 40000000000 500"), "exceeds KMAX"),
        (lambda t: t.replace("SIMULATOR_STOP_TIME 2.005", "SIMULATOR_STOP_TIME soon"), "SIMULATOR_STOP_TIME: expected a time in seconds"),
        (lambda t: t.replace("SIMULATOR_STOP_TIME 2.005\n", ""), "SIMULATOR_STOP_TIME is not set"),
        (lambda t: t.replace("ERROR_RATE_PER_LINK 0.001", "ERROR_RATE_PER_LINK 2"), "error rate between 0 and 1"),
        (lambda t: t.replace("mix/topo-star4.txt", "mix/nope.txt"), "TOPOLOGY_FILE mix/nope.txt: file not found"),
        (lambda t: t.replace("CC_MODE 1", "CC_MODE 10"), "CC_MODE 10 (HPCC-PINT) is not supported; braid models DCQCN (1), HPCC (3)"),
        (lambda t: t.replace("CC_MODE 1", "CC_MODE 3"), "HAS_WIN 0: braid's HPCC always limits its window"),
        (lambda t: t.replace("CC_MODE 1", "CC_MODE 3").replace("HAS_WIN 0", "HAS_WIN 1") + "U_TARGET 1.5\n", "U_TARGET: expected a utilisation in (0, 1]"),
        (lambda t: t.replace("CC_MODE 1", "CC_MODE 3").replace("HAS_WIN 0", "HAS_WIN 1") + "SAMPLE_FEEDBACK 1\n", "SAMPLE_FEEDBACK 1"),
        (lambda t: t.replace("HAS_WIN 0", "HAS_WIN 1"), "HAS_WIN 1"),
        (lambda t: t.replace("L2_BACK_TO_ZERO 0", "L2_BACK_TO_ZERO 1"), "L2_BACK_TO_ZERO 1"),
    ],
)
def test_bad_config_exits_2(tmp_path: Path, edit, expect: str) -> None:
    cfg = _config(tmp_path, edit)
    r = run_cli(str(cfg), "-o", str(tmp_path / "out.toml"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert expect in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out.toml").exists()


def test_error_names_file_and_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, lambda t: t.replace("RATE_HAI 400Mb/s", "RATE_HAI -4Mb/s"))
    with pytest.raises(hi.HpccImportError) as e:
        hi.convert(cfg)
    line = next(i for i, l in enumerate(cfg.read_text().splitlines(), 1) if l.startswith("RATE_HAI"))
    assert f"{cfg}:{line}: RATE_HAI" in e.value.format_message()


def test_bad_topology_file_names_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, lambda t: t)
    (tmp_path / "mix" / "topo-star4.txt").write_text("5 1 4\n0\n0 1 100Gbps 1000ns 0\n0 2 fast 1000ns 0\n")
    r = run_cli(str(cfg))
    assert r.exit_code == 2
    assert "topo-star4.txt:4" in r.stderr


def test_fallbacks(tmp_path: Path) -> None:
    cfg = _config(tmp_path, lambda t: t.replace("CC_MODE 1", "CC_MODE 10").replace("HAS_WIN 0", "HAS_WIN 1"))
    imp = hi.convert(cfg, cc_fallback="dcqcn", lenient=True)
    assert imp.scenario["transport"]["kind"] == "dcqcn"
    assert any("CC_MODE 10 (HPCC-PINT) is not supported" in n for n in imp.notes)
    assert any(n.startswith("approximated: HAS_WIN 1") for n in imp.notes)
    imp = hi.convert(cfg, cc_fallback="none", lenient=True)
    assert imp.scenario["transport"]["kind"] == "none"
    # ENABLE_QCN 0: no marking, so no congestion control.
    cfg = _config(tmp_path, lambda t: t.replace("ENABLE_QCN 1", "ENABLE_QCN 0"))
    imp = hi.convert(cfg)
    assert imp.scenario["transport"]["kind"] == "none"
    assert imp.scenario["switch"]["ecn"]["enabled"] is False


def test_timely_and_dctcp_modes_map_to_transport_cc(tmp_path: Path) -> None:
    # CC_MODE 7 (TIMELY): RATE_AI is its additive step, MIN_RATE its floor; DCQCN's timers are ignored.
    cfg = _config(tmp_path, lambda t: t.replace("CC_MODE 1", "CC_MODE 7"))
    imp = hi.convert(cfg)
    tr = imp.scenario["transport"]
    assert tr["kind"] == "dcqcn" and "dcqcn" not in tr, tr
    assert tr["cc"] == {"kind": "timely", "min_rate": "100Mbps", "delta": "40Mbps"}, tr
    keys = dict(imp.ignored)
    assert "DCQCN-only" in keys["RATE_HAI"] and "not used by TIMELY" in keys["EWMA_GAIN"]
    _core_build(imp.scenario, tmp_path)
    # CC_MODE 8 (DCTCP): EWMA_GAIN is its g, DCTCP_RATE_AI its step; RATE_AI is not for DCTCP.
    cfg = _config(tmp_path, lambda t: t.replace("CC_MODE 1", "CC_MODE 8") + "DCTCP_RATE_AI 1000Mb/s\n")
    imp = hi.convert(cfg)
    cc = imp.scenario["transport"]["cc"]
    assert cc == {"kind": "dctcp", "min_rate": "100Mbps", "rate_ai": "1Gbps", "g": 0.00390625}, cc
    assert "not for DCTCP" in dict(imp.ignored)["RATE_AI"]
    assert 'kind = "dctcp"' in imp.toml
    _core_build(imp.scenario, tmp_path)


def test_hpcc_mode_maps_to_transport_cc_with_its_int_settings(tmp_path: Path) -> None:
    # CC_MODE 3 (HPCC): U_TARGET is eta, MI_THRESH maxStage, RATE_AI its W_AI rate, MIN_RATE its
    # floor, FAST_REACT per-ACK reaction (config_doc.txt); the INT header's settings braid does
    # not need are listed, DCQCN's timers and gain are ignored.
    extra = "U_TARGET 0.9\nMI_THRESH 3\nFAST_REACT 0\nINT_MULTI 1\nMULTI_RATE 0\nSAMPLE_FEEDBACK 0\nGLOBAL_T 1\n"
    cfg = _config(tmp_path, lambda t: t.replace("CC_MODE 1", "CC_MODE 3").replace("HAS_WIN 0", "HAS_WIN 1") + extra)
    imp = hi.convert(cfg)
    tr = imp.scenario["transport"]
    assert tr["kind"] == "dcqcn" and "dcqcn" not in tr, tr
    assert tr["cc"] == {
        "kind": "hpcc",
        "eta": 0.9,
        "max_stage": 3,
        "rate_ai": "40Mbps",
        "min_rate": "100Mbps",
        "fast_react": False,
        # GLOBAL_T 1: the star's largest base RTT, host 1/2/3 to host 4 (40G, 1 us): 2 x 2000 ns
        # + 1024 B at 100G (81 ns, whole ns) + at 40G (204 ns).
        "base_rtt": "4285ns",
    }, tr
    keys = dict(imp.ignored)
    assert "multiplicative" in keys["RATE_HAI"]
    assert "DCQCN-only" in keys["EWMA_GAIN"]
    assert "exact" in keys["INT_MULTI"]
    assert keys["MULTI_RATE"].startswith("0:") and keys["SAMPLE_FEEDBACK"].startswith("0:")
    assert "HAS_WIN" in keys
    assert any("GLOBAL_T 1" in n and "4285ns" in n for n in imp.notes)
    assert 'kind = "hpcc"' in imp.toml
    _core_build(imp.scenario, tmp_path)
    # MULTI_RATE 1 is approximated: refused without --lenient, noted with it.
    cfg = _config(tmp_path, lambda t: t.replace("CC_MODE 1", "CC_MODE 3").replace("HAS_WIN 0", "HAS_WIN 1") + "MULTI_RATE 1\n")
    with pytest.raises(hi.HpccImportError, match="MULTI_RATE 1"):
        hi.convert(cfg)
    assert any("MULTI_RATE 1" in n for n in hi.convert(cfg, lenient=True).notes)


def test_units_formatting() -> None:
    assert hi.fmt_rate(2_500_000_000) == "2.5Gbps"
    assert hi.fmt_rate(999) == "999bps"
    assert hi.fmt_duration(2_100_000_000_000) == "2.1s"
    assert hi.fmt_duration(1_500) == "1.5ns"
    assert hi.fmt_bytes(33_554_432) == "32MiB"
    assert hi.fmt_bytes(1_600_000) == "1600KB"
    assert hi.fmt_bytes(1500) == "1500B"


def test_config_doc_parses() -> None:
    # Every key of HPCC's config_doc.txt is known (its `{...}` comments are skipped).
    if ANCHORS is None:
        pytest.skip("HPCC anchor files not present")
    cfg = hi.parse_config(ANCHORS / "config_doc.txt")
    assert set(cfg) == set(hi.ARITY)


def test_one_reader_for_hpcc_files(tmp_path: Path) -> None:
    # The importer reads HPCC's topology and flow files with the core's reader, the one a run
    # uses: a file the run refuses, the importer refuses too, in the same words.
    cfg = _config(tmp_path, lambda t: t)
    scenario = hi.convert(cfg, out_dir=tmp_path).scenario
    _core_build(scenario, tmp_path)  # the good files build
    flows = tmp_path / "mix" / "flows-star4.txt"
    for text, words in (
        ("1\n0 1 3 100 1000 2.0\n", "node 0 is a switch, not a host"),  # node 0: the star's switch
        ("1\n2 9 3 100 1000 2.0\n", "node 9 does not exist"),
        ("1\n2 1 3 100 0 2.0\n", "flow size is 0 bytes"),
        ("2\n2 1 3 100 1000 2.0\n", "file ends early"),
    ):
        flows.write_text(text)
        r = run_cli(str(cfg))
        assert r.exit_code == 2, (text, r.stderr)
        assert words in r.stderr, r.stderr
        with pytest.raises(_core.ScenarioError) as e:
            _core_build(scenario, tmp_path)
        importer = r.stderr.strip().splitlines()[-1].removeprefix("error: ")
        assert importer == e.value.message, (importer, e.value.message)
    # The topology likewise.
    (tmp_path / "mix" / "topo-star4.txt").write_text("5 1 4\n0\n0 1 100Gbps 1000ns 0\n0 1 100Gbps 1000ns 0\n0 2 fast 1000ns 0\n")
    with pytest.raises(ValueError) as e:
        _core.hpcc_topology(str(tmp_path / "mix" / "topo-star4.txt"))
    r = run_cli(str(cfg))
    assert r.exit_code == 2 and r.stderr.strip().endswith(str(e.value)), (r.stderr, str(e.value))


def test_global_t_is_hpcc_ns3s_largest_base_rtt() -> None:
    # HPCC ns-3 prints maxRtt=12240 for the fat-tree anchor (320 hosts; 1 us links, 100G to the
    # hosts and 400G above: 12 x 1000 ns + 1000 B at 100G twice (80 ns) and at 400G four times
    # (20 ns)). The star below: hosts are never a middle point, so 1 -> 3 is not through 2.
    from braid.hpcc.rtt import base_rtts_ns, max_base_rtt_ns

    star = [(1, 0, 100 * 10**9, 1_000_000, 0.0), (2, 0, 100 * 10**9, 1_000_000, 0.0), (3, 0, 40 * 10**9, 2_000_000, 0.0),
            (1, 2, 100 * 10**9, 1_000_000, 0.0)]
    rtts = base_rtts_ns([1, 2, 3], [0], star, 1000)
    assert rtts[(1, 2)] == 2 * 1000 + 80  # the direct link, one hop
    assert rtts[(1, 3)] == rtts[(3, 1)] == 2 * 3000 + 80 + 200
    assert max_base_rtt_ns([1, 2, 3], [0], star, 1000) == 6280
    assert max_base_rtt_ns([1], [0], star[:1], 1000) == 0
    anchors = ROOT / ".." / "shared" / "anchors" / "hpcc"
    if (anchors / "topology-fattree-320.txt").exists():
        from braid import _core

        t = _core.hpcc_topology(str(anchors / "topology-fattree-320.txt"))
        assert max_base_rtt_ns(t["hosts"], t["switches"], t["links"], 1000) == 12240

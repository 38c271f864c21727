"""The DRUM online solver's per-round table (`drum_rounds`, a middleware layer's table handed to
the results): written as drum_rounds.parquet, read back by `braid.results` like the other
tables, its last gap the agents' final one, listed by the report (docs/drum-agent.md)."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import braid
from braid.report import make_report
from braid.results import read_results

pytestmark = pytest.mark.core


def _scenario(decider: str = "online", ctrl: str = "rc") -> dict:
    """Three hosts on a switch: h0 SENDs to h1 and h2 (two-sided: the online solver talks over
    the fabric), h1 WRITEs to h2; Q = C = 2 Mops per host."""
    mw = [
        {
            "kind": "drum",
            "wqe_rate": 2e6,
            "cqe_rate": 2e6,
            "decider": decider,
            "online": {"demand": False, "report_gap": True, "window": "20us", "ctrl": ctrl},
        }
    ]
    nodes = ["h0", "h1", "h2", "sw"]
    links = [{"a": h, "b": "sw", "rate": "40Gbps", "delay": "500ns"} for h in nodes[:3]]
    app = lambda kind, src, dst: {  # noqa: E731
        "kind": kind,
        "src": src,
        "dst": dst,
        "size": "1KB",
        "qps": 2,
        "tx_depth": 16,
        "duration": "1ms",
    }
    return {
        "name": "drum online rounds",
        "duration": "1ms",
        "nic": {"mtu": 1024},
        "topology": {"kind": "edges", "nodes": nodes, "switches": ["sw"], "links": links},
        "middleware": {"default": mw},
        "apps": [app("send_bw", 0, 1), app("send_bw", 0, 2), app("write_bw", 1, 2)],
    }


@pytest.fixture(scope="module")
def online_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("drum") / "run"
    res = braid.run(_scenario(), out_dir=out)
    return res, out


def test_the_rounds_table_is_written_and_read_back_like_the_others(online_run):
    res, out = online_run
    t = res.layer_tables["drum_rounds"]
    assert t.height > 0
    assert t.columns[:2] == ["host", "tenant"]
    for c in ("time_ps", "epoch", "round", "iterations", "messages_sent", "bytes_sent", "messages_received", "bytes_received", "stale_values", "late_values", "ctrl_lost", "objective", "gap", "cpu_ns"):
        assert c in t.columns, c
    assert (out / "drum_rounds.parquet").is_file()
    back = read_results(out)
    assert_frame_equal(back["drum_rounds"], t)
    # Rows of the three agents (tenant 0: the agent slot), each host's rounds in order.
    assert sorted(t["host"].unique().to_list()) == [0, 1, 2]
    assert set(t["tenant"].to_list()) == {0}
    for (h,), g in t.group_by(["host"]):
        key = list(zip(g["epoch"].to_list(), g["round"].to_list()))
        assert key == sorted(key) and len(set(key)) == len(key), h


def test_the_last_rounds_gap_is_the_agents_final_gap(online_run):
    res, _ = online_run
    t = res.layer_tables["drum_rounds"]
    agents = res.tenants.filter(pl.col("label") == "agent").sort("host")
    final = agents["drum_online_gap"].to_list()
    assert len(final) == 3 and abs(final[0]) <= 1e-3, final
    # A row's gap is the run's after that host's round: the final gap is the last round's
    # anywhere (one of the rows at the last time).
    end = t.filter(pl.col("time_ps") == t["time_ps"].max())
    assert final[0] in end["gap"].to_list()
    assert all(g == final[0] for g in final), "one instance, one gap"
    last = t.group_by("host", maintain_order=True).last().sort("host")
    # Its cumulative counters never pass the agents' counters at the end.
    assert (last["messages_sent"].to_numpy() <= agents["drum_online_messages"].to_numpy()).all()
    assert (last["cpu_ns"].to_numpy() <= agents["drum_cpu_ns_solver"].to_numpy()).all()
    assert (agents["drum_cpu_ns_solver"] > 0).all()


def test_the_report_lists_the_rounds_table(online_run):
    _, out = online_run
    make_report(out)
    html = (out / "report.html").read_text()
    assert "Layer table drum_rounds" in html
    assert "drum_rounds.parquet" in html


def test_a_run_without_the_online_decider_has_no_rounds_table(tmp_path):
    res = braid.run(_scenario(decider="local"), out_dir=tmp_path / "run")
    assert res.layer_tables == {}
    assert not (tmp_path / "run" / "drum_rounds.parquet").exists()
    assert "drum_rounds" not in read_results(tmp_path / "run")
    agents = res.tenants.filter(pl.col("label") == "agent")
    assert (agents["drum_cpu_ns_solver"] == 0).all()


def test_csv_export_writes_the_rounds_table(online_run, tmp_path):
    from braid.export import export

    _, out = online_run
    written = export(out, "csv", tmp_path / "csv")
    p = tmp_path / "csv" / "drum_rounds.csv"
    assert p in written
    assert pl.read_csv(p).height == read_results(out)["drum_rounds"].height

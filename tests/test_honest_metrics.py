"""Headline numbers that do not mislead (issue 12, "Honest metrics").

Each test fails on the code before the change: unfinished flows reported as -1 and left out of
Jain's index, aggregate goodput over the whole run, zero-goodput intervals missing from the
series, one path for a multipath flow, "finished": true when time simply ran out."""

from __future__ import annotations

import json
import tomllib

import polars as pl
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.show import headline_table

LINK = '{ rate = "10Gbps", delay = "1us" }'

#: Two 200 KB flows on one switch; the link to host 3 is down from the start, so flow 1 (2 -> 3)
#: never delivers a byte while flow 0 (0 -> 1) completes.
STUCK = f"""
name = "one stuck flow"
duration = "1ms"
[topology]
kind = "leaf-spine"
spines = 1
leaves = 1
hosts_per_leaf = 4
host_link = {LINK}
fabric_link = {LINK}
[transport]
kind = "none"
[[traffic]]
pattern = "flows"
flows = [{{ src = 0, dst = 1, size = "200KB" }}, {{ src = 2, dst = 3, size = "200KB" }}]
[[link_events]]
a = "h3"
b = "leaf0"
down = "0us"
[measure]
interval = "20us"
"""


@pytest.fixture(scope="module")
def stuck():
    return braid.run(tomllib.loads(STUCK), seed=1)


def test_unfinished_flows_are_null_not_minus_one(stuck):
    f = stuck.flows.sort("flow")
    assert f["fct_ps"].to_list()[1] is None and f["finish_ps"].to_list()[1] is None
    assert f["fct_ps"].to_list()[0] > 0
    assert (f["fct_ps"].drop_nulls() >= 0).all()


def test_unfinished_run_says_so(stuck):
    assert not stuck.finished
    assert stuck.unfinished == 1
    assert stuck.summary["finished"] is False
    assert stuck.summary["unfinished"] == 1


def test_headline_shows_completed_of_total_and_what_fcts_cover(stuck):
    from rich.console import Console

    con = Console(width=200, record=True)
    con.print(headline_table(stuck))
    text = con.export_text()
    assert "flows completed" in text and "1 / 2" in text
    assert "fct_p99_us (completed flows)" in text
    assert "flow_goodput_jain (all flows)" in text
    assert stuck.summary["fct_covers"] == "completed flows"


def test_jain_counts_a_stuck_flow(stuck):
    # Goodputs (x, 0): Jain = x^2 / (2 x^2) = 0.5, not 1 over the completed flow alone.
    gp = stuck.flows.sort("flow")["goodput_gbps"].to_list()
    assert gp[0] > 1 and gp[1] == 0
    assert stuck.headline["flow_goodput_jain"] == pytest.approx(0.5)


def test_throughput_keeps_zero_intervals(stuck):
    tp = stuck.throughput
    # One row per (time, flow).
    assert tp.select(["time_ps", "flow"]).is_duplicated().sum() == 0
    dead = tp.filter(pl.col("flow") == 1)
    iv = 20_000_000
    # The stuck flow has a zero row for every interval of the run, not none at all.
    assert dead.height == stuck.stats["sim_time_ps"] // iv
    assert (dead["gbps"] == 0).all() and (dead["bytes"] == 0).all()
    live = tp.filter(pl.col("flow") == 0).sort("time_ps")["time_ps"].to_list()
    assert all(b - a == iv for a, b in zip(live, live[1:])), "the live flow's series has gaps"


def test_cli_warns_when_traffic_is_unfinished(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(STUCK)
    r = CliRunner().invoke(main, ["run", str(p), "-o", str(tmp_path / "out")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "warning:" in r.stderr and "1 of 2" in r.stderr and '"finished": false' in r.stderr
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["finished"] is False
    fl = pl.read_parquet(tmp_path / "out" / "flows.parquet")
    assert fl["fct_ps"].null_count() == 1
    r = CliRunner().invoke(main, ["report", str(tmp_path / "out")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    md = (tmp_path / "out" / "report.md").read_text()
    assert "1 of 2 flows completed" in md and "cover completed flows only" in md
    assert "traffic unfinished" in md


def test_aggregate_goodput_is_over_the_time_traffic_ran():
    # Flows that start at 2 ms of a 20 ms run (as imported HPCC traces start at 2 s).
    d = tomllib.loads(STUCK)
    d.pop("link_events")
    d["duration"] = "20ms"
    for f in d["traffic"][0]["flows"]:
        f["start"] = "2ms"
    r = braid.run(d, seed=1)
    f = r.flows
    window_s = (f["finish_ps"].max() - f["start_ps"].min()) / 1e12
    expect = r.headline["delivered_bytes"] * 8 / window_s / 1e9
    assert r.headline["aggregate_goodput_gbps"] == pytest.approx(expect, rel=1e-9)
    # Both flows run at the same time on separate links: close to 2 x 10 Gbps of payload.
    assert r.headline["aggregate_goodput_gbps"] > 10
    assert r.headline["traffic_start_ms"] == pytest.approx(2.0)


def test_multipath_flows_report_every_path():
    from conftest import SMALL_TOML

    d = tomllib.loads(SMALL_TOML)
    d["duration"] = "300us"
    d["transport"] = {"kind": "mp-rdma"}
    d["traffic"][0]["size"] = "2MB"
    mp = braid.run(d, seed=3)
    for n, s, one in zip(mp.flows["paths"], mp.flows["path_set"], mp.flows["path"]):
        paths = s.split(" | ")
        assert n == len(paths) == len(set(paths))
        # Both spines of the two-ToR fabric carry each connection's virtual paths.
        assert n == 2 and {p.split(">")[2] for p in paths} == {"spine0", "spine1"}
        assert one in paths
    d["transport"] = {"kind": "dcqcn"}
    dc = braid.run(d, seed=3)
    assert (dc.flows["paths"] == 1).all()
    assert dc.flows["path_set"].to_list() == dc.flows["path"].to_list()

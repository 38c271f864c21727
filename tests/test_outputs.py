"""The outputs researchers expect: ports.parquet, pfc.parquet, `braid export` (HPCC ns-3's
fct.txt / pfc.txt / qlen.txt, and CSV)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.export import hpcc_ip
from braid.results import TABLES, read_results

INCAST = {
    "name": "incast",
    "duration": "10ms",
    "topology": {
        "kind": "dumbbell", "left": 4, "right": 1,
        "host_link": {"rate": "40Gbps", "delay": "1us"},
        "bottleneck": {"rate": "400Gbps", "delay": "1us"},
    },
    "switch": {"buffer": "200KB"},
    "measure": {"interval": "5us", "queues": [{"node": "swL", "peer": "swR"}], "messages": False},
    "traffic": [{"pattern": "flows", "flows": [{"src": i, "dst": 4, "size": "300KB", "dport": 100 + i} for i in range(4)]}],
}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def incast(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "incast"
    res = braid.run(INCAST, seed=1, out_dir=out)
    return res, out


def test_hpcc_addresses_follow_node_ids():
    assert hpcc_ip(0) == "0b000001"
    assert hpcc_ip(1) == "0b000101"
    assert hpcc_ip(257) == "0b010101"


def test_port_map_and_pfc_tables_are_written(incast):
    res, out = incast
    back = read_results(out)
    for t in ("ports", "pfc"):
        assert (out / f"{t}.parquet").exists()
        assert back[t].equals(getattr(res, t))
    ports = res.ports
    # Every link appears from both ends.
    ends = set(zip(ports["node"], ports["port"]))
    assert all((p, pp) in ends for p, pp in zip(ports["peer"], ports["peer_port"]))
    assert set(ports["role"]) == {"host", "switch"}
    # The queue named by its neighbour is the port of swL that faces swR.
    facing = ports.filter((pl.col("node_name") == "swL") & (pl.col("peer_name") == "swR"))
    assert set(res.queues["port"]) == {f"swL:{facing['port'][0]}"}
    pfc = res.pfc
    assert pfc.height > 0
    sent = pfc.filter((pl.col("direction") == "sent") & (pl.col("type") == "pause")).height
    assert sent == res.counters["pfc_pauses"]


def test_export_hpcc_writes_what_hpcc_scripts_parse(incast, tmp_path):
    res, out = incast
    dest = tmp_path / "hpcc"
    r = invoke("export", out, "--format", "hpcc", "-o", dest)
    assert r.exit_code == 0, r.output
    # fct.txt: sip dip sport dport size start_time fct standalone_fct, one line per flow.
    lines = (dest / "fct.txt").read_text().splitlines()
    assert len(lines) == res.flows.height == 4
    node_of_host = dict(zip(*res.ports.filter(pl.col("host") >= 0).select("host", "node").unique().get_columns()))
    by_src = {f["src"]: f for f in res.flows.iter_rows(named=True)}
    finish = []
    for line in lines:
        sip, dip, sport, dport, size, start, fct, standalone = line.split()
        node = int(sip, 16) >> 8 & 0xFFFF  # HPCC's ip_to_node_id
        host = next(h for h, n in node_of_host.items() if n == node)
        f = by_src[host]
        assert (int(dip, 16) >> 8 & 0xFFFF) == node_of_host[f["dst"]]
        # Each flow's own dport (as HPCC's flow file gives it), not the RoCEv2 port every packet carries.
        assert int(sport) == f["sport"] and int(dport) == f["dport"] == 100 + host
        assert int(size) == f["size"] == 300_000
        assert int(start) == f["start_ps"] // 1000
        assert int(fct) == f["fct_ps"] // 1000
        assert int(standalone) == f["path_ideal_fct_ps"] // 1000  # the flow alone on its own path
        finish.append(int(start) + int(fct))
    assert finish == sorted(finish), "in completion order, as HPCC writes them"
    # pfc.txt: time node_id node_type if_index type, one line per frame a port received.
    rows = [list(map(int, x.split())) for x in (dest / "pfc.txt").read_text().splitlines()]
    recv = res.pfc.filter(pl.col("direction") == "received")
    assert len(rows) == recv.height > 0
    role = dict(zip(res.ports["node"], res.ports["role"]))
    for (t, node, kind, ifx, ty), r in zip(rows, recv.iter_rows(named=True)):
        assert (t, node, ifx) == (r["time_ps"] // 1000, r["node"], r["port"] + 1)
        assert kind == (0 if role[node] == "host" else 1)
        assert ty == (1 if r["type"] == "pause" else 0)
    assert {r[4] for r in rows} == {0, 1}
    # qlen.txt: "time: T" then "node if_index counts...", counts adding up to the samples.
    q = (dest / "qlen.txt").read_text().splitlines()
    assert q[0].startswith("time: ")
    node, ifx, *counts = map(int, q[1].split())
    assert sum(counts) == res.queues.height
    assert len(counts) == max(res.queues["bytes"]) // 1000 + 1


def test_export_csv_writes_every_table(incast, tmp_path):
    res, out = incast
    dest = tmp_path / "csv"
    r = invoke("export", out, "--format", "csv", "-o", dest)
    assert r.exit_code == 0, r.output
    for t in TABLES:
        df = pl.read_csv(dest / f"{t}.csv") if getattr(res, t).height else None
        if df is not None:
            assert df.height == getattr(res, t).height, t
            assert df.columns == getattr(res, t).columns, t


def test_export_of_a_non_results_folder_is_one_clear_error(tmp_path):
    r = invoke("export", tmp_path, "--format", "hpcc")
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    assert "not a braid results folder" in r.stderr


def test_bad_queue_table_is_one_error_naming_the_key():
    bad = dict(INCAST, measure={"queues": [{"node": "swL", "peer": "nowhere"}]})
    with pytest.raises(braid.BraidError) as e:
        braid.run(bad, seed=1)
    assert "measure.queues[0].peer" in str(e.value) and "nowhere" in str(e.value)


ANCHORS = Path(__file__).resolve().parents[1] / ".." / "shared" / "anchors" / "hpcc"


@pytest.mark.skipif(not (ANCHORS / "fct-dcqcn-incast.txt").exists(), reason="../shared/anchors not present")
def test_hpcc_anchor_exports_the_lines_hpcc_wrote(tmp_path):
    """The HPCC incast anchor, run in braid and exported, gives HPCC's own fct.txt lines: the same
    addresses, size and start time, and FCTs within 2% of HPCC's on braid's terms."""
    from braid.bench import _hpcc_dcqcn

    sc = _hpcc_dcqcn(ANCHORS, "config-dcqcn-incast.txt", "topology-star-65.txt", "flows-incast-2to1.txt")
    braid.run(sc, seed=1, out_dir=tmp_path / "run")
    r = invoke("export", tmp_path / "run", "--format", "hpcc", "-o", tmp_path / "hpcc")
    assert r.exit_code == 0, r.output
    ours = [x.split() for x in (tmp_path / "hpcc" / "fct.txt").read_text().splitlines()]
    theirs = [x.split() for x in (ANCHORS / "fct-dcqcn-incast.txt").read_text().splitlines()]
    assert len(ours) == len(theirs) == 2
    # HPCC's FCTs on braid's terms: 62-byte RoCEv2 headers against HPCC's 48, and HPCC ns-3's
    # serialization truncated to whole ns (83 ns for 1048 B at 100 Gb/s); docs/topologies.md.
    terms = (1062 / 1048) * (83.84 / 83)
    # The same flows (addresses, dport as HPCC's flow file gives it, size, start); which of the two
    # ends first depends on the seed (DCQCN favours one at random), so completion times are
    # compared in completion order.
    assert sorted((a[0], a[1], a[3], a[4], a[5]) for a in ours) == sorted((b[0], b[1], b[3], b[4], b[5]) for b in theirs)
    for a, b in zip(ours, theirs):
        assert abs(int(a[6]) - int(b[6]) * terms) / (int(b[6]) * terms) < 0.02, (a, b)

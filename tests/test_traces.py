"""Traces: ``cc.parquet`` (congestion-control state per QP) and ``trace.pcap`` (RoCEv2 packet
captures), read back the way users would: with polars, and with tshark, Wireshark's reader (a
Debian package; CI installs it with scripts/ci-install-tshark.sh, the decoding tests skip here
without it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.results import read_results

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (CI installs it: scripts/ci-install-tshark.sh)")

MTU = 1024

#: braid's QP n is QP n + 16 on the wire (docs/scenario.md, "Packet traces"): QP 0 and 1 are a real
#: NIC's management QPs; Linux's software RoCE numbers data QPs from 16.
WIRE_QPN_BASE = 16


def wire(qpn: int) -> int:
    return qpn + WIRE_QPN_BASE


def dumbbell(left, right):
    return {
        "kind": "dumbbell", "left": left, "right": right,
        "host_link": {"rate": "40Gbps", "delay": "1us"},
        "bottleneck": {"rate": "200Gbps", "delay": "1us"},
    }


#: Flow 0: a 10 KB WRITE alone (host 0 -> 3); flows 1, 2: an incast on host 4 (ECN marks, CNPs);
#: flow 3: a READ application (host 0 reads 2 x 4 KB from host 3). Every packet in the network
#: belongs to a captured flow.
TRACED = {
    "name": "traced",
    "duration": "5ms",
    "topology": dumbbell(3, 2),
    # PSNs from 0 (the checks below read them as such); seed-drawn initial PSNs decode the same
    # (crates/braid-sim/tests/trace.rs).
    "nic": {"mtu": MTU, "initial_psn": 0},
    "switch": {"ecn": {"kmin": "5KB", "kmax": "50KB", "pmax": 0.2}},
    "traffic": [{"pattern": "flows", "flows": [
        {"src": 0, "dst": 3, "size": "10KB"},
        {"src": 1, "dst": 4, "size": "400KB"},
        {"src": 2, "dst": 4, "size": "400KB"},
    ]}],
    "apps": [{"kind": "read_bw", "src": 0, "dst": 3, "size": "4KiB", "iterations": 2}],
    "measure": {
        "interval": "20us",
        "pcap": {"flows": [0, 1, 2, 3], "snaplen": 65535, "max_packets": 100000},
        "cc": {"qps": [0, 1, 2], "interval": "2us"},
    },
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "traced"
    res = braid.run(TRACED, seed=1, out_dir=out)
    return res, out


FIELDS = [
    "frame.len", "ip.src", "ip.dst", "ip.len", "ip.dsfield.ecn", "udp.srcport", "udp.dstport",
    "infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.destqp", "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
]


def tshark_rows(path: Path) -> pl.DataFrame:
    cmd = [TSHARK, "-r", str(path), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    rows = [line.split("|") for line in out.splitlines()]
    assert rows and all(len(r) == len(FIELDS) for r in rows)

    def num(v):
        return int(v, 0) if v else None

    cols = {f: [r[i] for r in rows] for i, f in enumerate(FIELDS)}
    return pl.DataFrame({
        "len": [num(v) for v in cols["frame.len"]],
        "src": cols["ip.src"],
        "dst": cols["ip.dst"],
        "ip_len": [num(v) for v in cols["ip.len"]],
        "ecn": [num(v) for v in cols["ip.dsfield.ecn"]],
        "sport": [num(v) for v in cols["udp.srcport"]],
        "dport": [num(v) for v in cols["udp.dstport"]],
        "opcode": [num(v) for v in cols["infiniband.bth.opcode"]],
        "psn": [num(v) for v in cols["infiniband.bth.psn"]],
        "destqp": [num(v) for v in cols["infiniband.bth.destqp"]],
        "dmalen": [num(v) for v in cols["infiniband.reth.dmalen"]],
        "syndrome": [num(v) for v in cols["infiniband.aeth.syndrome"]],
    })


def ip_of(node: int) -> str:
    return f"10.{node >> 16 & 255}.{node >> 8 & 255}.{node & 255}"


def payload(row: dict) -> int:
    """Payload bytes of a data frame from its IP length: IPv4 20, UDP 8, BTH 12, RETH 16 on WRITE
    First/Only, AETH 4 on READ response First/Last/Only, ICRC 4."""
    ext = 16 if row["opcode"] in (0x06, 0x0A) else 4 if row["opcode"] in (0x0D, 0x0F, 0x10) else 0
    return row["ip_len"] - 20 - 8 - 12 - ext - 4


def test_results_folder_holds_the_trace_and_the_cc_table(traced):
    res, out = traced
    assert (out / "trace.pcap").read_bytes() == res.pcap
    assert res.pcap[:4] == bytes.fromhex("4d3cb2a1"), "nanosecond pcap magic, little-endian"
    back = read_results(out)
    assert back["cc"].equals(res.cc)
    assert res.stats["pcap_missed"] == 0


@needs_tshark
def test_tshark_decodes_what_braid_sent(traced):
    res, out = traced
    t = tshark_rows(out / "trace.pcap")
    assert len(t) == res.stats["pcap_packets"]
    # Every frame is RoCEv2 (UDP 4791) with a BTH tshark could read.
    assert t["dport"].to_list() == [4791] * len(t)
    assert t["opcode"].null_count() == 0 and t["psn"].null_count() == 0
    # Whole frames (snaplen 65535): IP length = frame length - 14.
    assert (t["ip_len"] == t["len"] - 14).all()

    tr = res.transport
    ports = res.ports
    node_of_host = dict(zip(ports.filter(pl.col("role") == "host")["host"], ports.filter(pl.col("role") == "host")["node"]))

    def sender_qp(host: int, flow_size: int) -> dict:
        # The sending QP of a flow: on its host, the one that sent exactly its bytes.
        rows = tr.filter((pl.col("host") == host) & (pl.col("tx_bytes") == flow_size)).to_dicts()
        assert len(rows) == 1, rows
        return rows[0]

    # Flow 0: a 10,000-byte WRITE in 1,024-byte packets: PSNs 0..9, WRITE First, Middle, Last;
    # RETH with the message length on the first; to the receiver's QP, from the QP's UDP port.
    q = sender_qp(0, 10_000)
    data = t.filter(
        (pl.col("opcode").is_in([0x06, 0x07, 0x08, 0x0A]))
        & (pl.col("destqp") == wire(q["remote_qpn"]))
        & (pl.col("src") == ip_of(node_of_host[0]))
    ).to_dicts()
    assert sorted(r["psn"] for r in data) == list(range(10))
    by_psn = {r["psn"]: r for r in data}
    assert [by_psn[p]["opcode"] for p in range(10)] == [0x06] + [0x07] * 8 + [0x08]
    assert by_psn[0]["dmalen"] == 10_000
    assert sum(payload(r) for r in data) == 10_000
    assert {r["sport"] for r in data} == {q["sport"]}
    assert {r["dst"] for r in data} == {ip_of(node_of_host[3])}
    # ACKs of it go back to the sender's QP, syndrome "ACK".
    acks = t.filter((pl.col("opcode") == 0x11) & (pl.col("destqp") == wire(q["qpn"])) & (pl.col("dst") == ip_of(node_of_host[0])))
    assert len(acks) >= 1 and set(acks["syndrome"].to_list()) == {0x1F}
    assert acks["psn"].max() == 9, "the last ACK acknowledges PSN 9"

    # The READ application: requests (opcode 0x0C) with the length asked for, responses
    # (First/Middle/Last) to the requester's QP carrying the bytes braid's messages say it read.
    msgs = res.messages.filter(pl.col("op") == "read")
    assert len(msgs) == 2 and msgs["bytes"].sum() == 8192
    rq = tr.filter((pl.col("host") == 0) & (pl.col("remote_host") == 3) & (pl.col("qpn") != q["qpn"])).to_dicts()
    assert len(rq) == 1
    reqs = t.filter(pl.col("opcode") == 0x0C)
    assert len(reqs) == 2 and set(reqs["dmalen"].to_list()) == {4096}
    assert set(reqs["destqp"].to_list()) == {wire(rq[0]["remote_qpn"])}
    resp = t.filter(pl.col("opcode").is_in([0x0D, 0x0E, 0x0F, 0x10])).to_dicts()
    assert {r["destqp"] for r in resp} == {wire(rq[0]["qpn"])}
    assert sum(payload(r) for r in resp) == 8192
    assert sorted(r["opcode"] for r in resp) == sorted([0x0D, 0x0E, 0x0E, 0x0F] * 2)

    # The incast: every CNP braid sent (opcode 0x81) and every ECN mark the switch set (CE in the
    # IP header) are in the capture, which holds all packets of all flows.
    c = res.counters
    assert c["cnps"] > 0 and c["ecn_marks"] > 0
    assert len(t.filter(pl.col("opcode") == 0x81)) == c["cnps"]
    assert len(t.filter(pl.col("ecn") == 3)) == c["ecn_marks"]
    assert set(t.filter(pl.col("ecn") != 3)["ecn"].to_list()) == {2}, "ECT(0) otherwise"
    # Data frames of every flow: as many as braid sent.
    all_data = t.filter(pl.col("opcode").is_in(list(range(0x00, 0x0C)) + [0x0D, 0x0E, 0x0F, 0x10]))
    # (braid's data_packets counts READ requests and retransmissions too; every copy is captured.)
    assert len(all_data) == c["data_packets"] - len(reqs)


@needs_tshark
def test_tshark_summary_shows_rdma_operations_on_data_qps(traced):
    """Wireshark's packet list (tshark's summary line) reads every frame as the RDMA operation it
    is, addressed to a data QP: DestQP 0 or 1 would make it a management datagram ("RESERVED
    (Unknown Attribute)"), which is what braid's own QP numbers 0 and 1 gave."""
    res, out = traced
    lines = subprocess.run(
        [TSHARK, "-r", str(out / "trace.pcap")], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    assert len(lines) == res.stats["pcap_packets"]
    assert not [ln for ln in lines if "Unknown Attribute" in ln or "RESERVED" in ln], lines[:5]
    # Every RoCE frame but the CNPs (no name in Wireshark 4.0) shows its operation and wire QP.
    roce = [ln for ln in lines if " RRoCE " in ln]
    assert len(roce) == len(lines)
    named = [ln for ln in roce if "Unknown OpCode" not in ln]
    assert len(named) == len(roce) - res.counters["cnps"]
    assert all(" QP=0x" in ln for ln in named)
    # Flow 0's WRITE from host 0: a "RC RDMA Write First" to its receiver's QP as numbered on the wire.
    tr = res.transport
    q = tr.filter((pl.col("host") == 0) & (pl.col("tx_bytes") == 10_000)).to_dicts()[0]
    first = [ln for ln in named if f"RC RDMA Write First QP=0x{wire(q['remote_qpn']):06x}" in ln]
    assert len(first) >= 1, [ln for ln in named if "Write First" in ln]


def test_cc_table_has_nulls_where_a_field_does_not_apply(traced):
    res, _ = traced
    cc = res.cc
    assert set(cc["flow"].unique().to_list()) == {0, 1, 2}
    assert set(cc["kind"].to_list()) == {"dcqcn"}
    # DCQCN has no window: null, not NaN; its rate, target and alpha are all there.
    assert cc["cwnd"].null_count() == len(cc) and cc["srtt_us"].null_count() == len(cc)
    for col in ("rate_bps", "target_bps", "alpha", "inflight", "signals", "cuts"):
        assert cc[col].null_count() == 0, col
    # The incast senders were cut; the lone WRITE was not.
    cuts = cc.group_by("flow").agg(pl.col("cuts").max()).sort("flow")["cuts"].to_list()
    assert cuts[0] == 0 and cuts[1] > 0 and cuts[2] > 0
    assert cc["time_ps"].min() == 2_000_000


def test_mp_rdma_cc_rows_have_a_window_and_null_rates(tmp_path):
    sc = {
        "duration": "1ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 1, "paths": 2,
                     "host_link": {"rate": "40Gbps", "delay": "1us"}, "fabric_link": {"rate": "40Gbps", "delay": "1us"}},
        "transport": {"kind": "mp-rdma"},
        "traffic": [{"pattern": "flows", "flows": [{"src": 0, "dst": 1, "size": "500KB"}]}],
        "measure": {"interval": "10us", "cc": {"qps": "all"}},
    }
    res = braid.run(sc)
    cc = res.cc
    assert len(cc) > 5 and set(cc["kind"].to_list()) == {"mp-rdma"}
    assert cc["cwnd"].null_count() == 0 and cc["rate_bps"].null_count() == len(cc)


def test_bad_trace_keys_are_one_line_and_exit_2(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(
        'duration = "1ms"\n'
        '[topology]\nkind = "dumbbell"\nleft = 1\nright = 1\n'
        'host_link = { rate = "40Gbps", delay = "1us" }\nbottleneck = { rate = "40Gbps", delay = "1us" }\n'
        '[[traffic]]\npattern = "flows"\nflows = [{ src = 0, dst = 1, size = "10KB" }]\n'
    )
    cases = {
        "measure.cc.qps=[5]": "measure.cc.qps[0]",
        'measure.cc.qps="some"': "measure.cc.qps",
        "measure.cc.qps=[true]": "measure.cc.qps",
        "measure.pcap.flows=[1]": "measure.pcap.flows[0]",
        'measure.pcap.ports=["swL:7"]': "measure.pcap.ports[0]",
        "measure.pcap.snaplen=9": "measure.pcap.snaplen",
    }
    for override, key in cases.items():
        r = CliRunner().invoke(main, ["validate", str(p), "--set", override])
        assert r.exit_code == 2, (override, r.output)
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert len(lines) == 1 and key in lines[0], (override, r.output)
        assert "untagged" not in r.output and "Traceback" not in r.output


def test_validate_counts_what_a_trace_will_cost(tmp_path, monkeypatch):
    base = {k: v for k, v in TRACED.items() if k != "measure"}
    small = braid.estimate({**base, "measure": {"pcap": {"flows": [0], "max_packets": 1000}}})
    big = braid.estimate({**base, "measure": {"pcap": {"flows": [0], "max_packets": 100_000_000, "snaplen": 1000}}})
    assert big["by_key"]["measure.pcap.max_packets"] > 1e11 > small["by_key"]["measure.pcap.max_packets"]
    monkeypatch.setenv("BRAID_MEMORY_LIMIT", "8GB")
    with pytest.raises(braid.BraidError, match="measure.pcap.max_packets"):
        braid.estimate({**base, "measure": {"pcap": {"flows": [0], "max_packets": 100_000_000, "snaplen": 1000}}}, check=True)
    cc = braid.estimate({**base, "measure": {"cc": {"qps": "all", "max_qps": 1000, "interval": "1ns"}}})
    assert cc["by_key"]["measure.cc.interval"] > 1e12

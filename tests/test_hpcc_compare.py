"""`braid compare-hpcc` and HPCC parity by flow size (docs/topologies.md, "HPCC fidelity").

The bucketing and fct.txt reading are checked against hand-computed values; the parity test runs
the HPCC fat-tree anchor as `braid import-hpcc` imports it and compares braid's slowdown per size
bucket with HPCC ns-3's (skipped where ../shared/anchors is absent)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.hpcc.compare import BUCKETS, bucket_table, format_table, quantile, read_braid, read_hpcc_fct


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_quantile_is_numpys_linear_interpolation():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100, 489):
        x = sorted(rng.lognormal(size=n).tolist())
        for q in (0.0, 0.25, 0.5, 0.99, 1.0):
            assert math.isclose(quantile(x, q), float(np.percentile(x, q * 100)), rel_tol=1e-12)
    assert math.isnan(quantile([], 0.5))


def test_buckets_are_decades_of_1000_bytes():
    sizes = [1, 9_999, 10_000, 99_999, 100_000, 999_999, 1_000_000, 9_999_999, 10_000_000, 30_000_000]
    slow = [1.0, 3.0, 2.0, 4.0, 1.5, 2.5, 1.0, 1.0, 7.0, 9.0]
    rows = bucket_table(sizes, slow)
    assert [r["bucket"] for r in rows] == [b[0] for b in BUCKETS] + ["all"]
    assert [r["flows"] for r in rows] == [2, 2, 2, 2, 2, 10]
    # Two values per bucket: the median is their midpoint, p99 is 99% of the way up.
    assert [r["p50"] for r in rows[:5]] == [2.0, 3.0, 2.0, 1.0, 8.0]
    assert math.isclose(rows[0]["p99"], 1.0 + 0.99 * 2.0)
    assert math.isclose(rows[5]["mean"], sum(slow) / 10)
    with pytest.raises(ValueError):
        bucket_table([1, 2], [1.0])


def test_reads_hpcc_fct_txt(tmp_path):
    p = tmp_path / "fct.txt"
    # sip dip sport dport size start_ns fct_ns standalone_ns (HPCC's third.cc qp_finish).
    p.write_text("0b000201 0b000101 10000 100 200000000 2000000000 33674253 16772160\n"
                 "0b000301 0b000101 10000 100 5000 2000000000 24000 12000\n")
    sizes, sd = read_hpcc_fct(p)
    assert sizes == [200000000, 5000]
    assert math.isclose(sd[0], 33674253 / 16772160) and sd[1] == 2.0
    p.write_text("0b000201 0b000101 10000 100 200000000 2000000000 33674253\n")
    with pytest.raises(braid.BraidError, match=r"fct.txt:1: expected `sip dip"):
        read_hpcc_fct(p)


def test_cli_prints_both_columns_and_rejects_bad_input(tmp_path):
    sc = {
        "duration": "2ms",
        "topology": {"kind": "edges", "nodes": 4, "switches": [0],
                     "links": [{"a": i, "b": 0, "rate": "100Gbps", "delay": "1us"} for i in (1, 2, 3)]},
        "measure": {"interval": "0us", "messages": False},
        "traffic": [{"pattern": "flows", "flows": [{"src": 0, "dst": 2, "size": "5KB"},
                                                   {"src": 1, "dst": 2, "size": "2MB", "start": "1us"}]}],
    }
    braid.run(sc, seed=1, out_dir=tmp_path / "run")
    fct = tmp_path / "fct.txt"
    fct.write_text("0b000101 0b000301 10000 100 5000 0 24000 12000\n")
    r = invoke("compare-hpcc", tmp_path / "run", "--hpcc", fct)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("| size | flows | HPCC p50 |")
    small = next(x for x in lines if x.startswith("| < 10 KB"))
    assert "| 2.00 |" in small  # HPCC's one small flow: 24000 / 12000
    r = invoke("compare-hpcc", tmp_path / "nowhere")
    assert r.exit_code == 2
    assert "expected a braid results folder" in r.output
    r = invoke("compare-hpcc", tmp_path / "run", "--hpcc", tmp_path / "none.txt")
    assert r.exit_code == 2 and "cannot read" in r.output


# ------------------------------------------------------------------------------------------------
# Parity with HPCC ns-3 on its fat-tree anchor

ANCHORS = Path(__file__).resolve().parents[1] / ".." / "shared" / "anchors" / "hpcc"

#: HPCC ns-3's fct.txt for the fat-tree anchor (320 hosts, 3,100 web-search flows, DCQCN),
#: bucketed as `bucket_table` does (issue 16). Used when the anchors hold no fct.txt for this run.
HPCC_FATTREE = [
    ("< 10 KB", 489, 1.01, 6.06, 1.29),
    ("10–100 KB", 1184, 1.06, 6.08, 1.39),
    ("0.1–1 MB", 495, 1.21, 5.63, 1.59),
    ("1–10 MB", 841, 1.57, 5.59, 1.99),
    ("> 10 MB", 91, 2.02, 4.11, 2.09),
]


@pytest.mark.skipif(not (ANCHORS / "topology-fattree-320.txt").exists(), reason="../shared/anchors not present")
def test_fattree_anchor_slowdown_by_size_matches_hpcc():
    """Issue 16's bar: in every bucket p50 within 10% of HPCC's, p99 within 25%, mean within 10%
    (docs/topologies.md, "HPCC fidelity": seeds 1–3 give p99 ratios 0.92–1.13, means 1.01–1.05).
    Below 100 KB this needs the exact ideal FCT and HPCC's ACK queueing at switches
    (import-hpcc's `ack_priority = "data"`); with ACKs in queue 0 the small-flow p99 falls to
    ~0.73 of HPCC's and the test fails."""
    from braid.bench import _hpcc_dcqcn

    sc = _hpcc_dcqcn(ANCHORS, "config-dcqcn-fattree-websearch.txt", "topology-fattree-320.txt",
                     "flows-websearch-320h-30pct-5ms.txt")
    assert sc["transport"]["dcqcn"]["reaction"] == "hpcc" and sc["transport"]["dcqcn"]["notify"] == "ack"
    assert sc["nic"]["ack_priority"] == "data"
    res = braid.run(sc, seed=1)
    ours = bucket_table(*read_braid(res))
    fct = ANCHORS / "fct-dcqcn-fattree-websearch.txt"
    if fct.exists():
        theirs = bucket_table(*read_hpcc_fct(fct))
    else:
        theirs = [{"bucket": b, "flows": n, "p50": p50, "p99": p99, "mean": m} for b, n, p50, p99, m in HPCC_FATTREE]
    table = format_table(ours, theirs)
    for o, t in zip(ours, theirs):
        assert o["flows"] == t["flows"], table
        assert abs(o["p50"] / t["p50"] - 1) <= 0.10, table
        assert abs(o["p99"] / t["p99"] - 1) <= 0.25, table
        assert abs(o["mean"] / t["mean"] - 1) <= 0.10, table
    assert ours[-1]["flows"] == 3100

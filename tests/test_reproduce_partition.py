"""`braid reproduce partition/...`: the data-partition experiments run, their rows have the
expected structure, and the measured shapes hold (so these tests can fail): more QPs cut the
transfer's completion time on the two-tier fabric, and dynamic assignment moves chunks off a slow
path while static assignment splits them evenly."""

from __future__ import annotations

import math

import pytest

from braid.reproduce import experiments_dir, registry, reproduce, select
from braid.reproduce import partition

pytestmark = pytest.mark.core

IDS = ("partition/twotier", "partition/assignment")


def test_partition_experiments_are_registered_with_their_scenarios():
    reg = registry()
    for id in IDS:
        assert id in reg, id
        e = reg[id]
        assert e.doc.startswith("docs/partition.md")
        assert e.cost == "quick"
        for s in e.scenarios:
            assert (experiments_dir() / s).is_file(), s
    assert [e.id for e in select(["partition"], False)] == list(IDS)
    # Quick: 3 QP counts x 3 chunk sizes x 2 seeds; --full: the paper's 1-16 x 1K-128K.
    quick = reg["partition/twotier"].runs(False)
    full = reg["partition/twotier"].runs(True)
    assert len(quick) == 18 and len(full) == 7 * 8 * 4 + 3 * 8 * 2
    assert {r.overrides for r in full} >= {(partition._mw(16, "1KB"),), (partition._mw(1, "128KB"),)}


@pytest.fixture(scope="module")
def outcomes():
    return {o.experiment.id: o for o in reproduce(list(IDS), jobs=2)}


def test_rows_have_their_structure(outcomes):
    for id in IDS:
        o = outcomes[id]
        assert o.rows, id
        for r in o.rows:
            assert isinstance(r.quantity, str) and r.quantity
            assert isinstance(r.braid, str) and r.braid and "nan" not in r.braid.lower(), r
            assert r.ok in (True, False, None)
        assert any(r.ok is not None for r in o.rows)


def test_two_qps_beat_one_on_the_two_tier_fabric(outcomes):
    ms = outcomes["partition/twotier"].measures
    one = [r["fct_ms"] for k, v in ms.items() if k.startswith("q1 ") for r in v]
    two = [r["fct_ms"] for k, v in ms.items() if k.startswith("q2 ") for r in v]
    four = [r["fct_ms"] for k, v in ms.items() if k.startswith("q4 ") for r in v]
    assert all(not math.isnan(x) for x in one + two + four)
    assert sum(two) / len(two) < 0.9 * sum(one) / len(one)
    assert sum(four) / len(four) < sum(two) / len(two)
    # Every QP of a 4-QP connection carried chunks.
    for k, v in ms.items():
        if k.startswith("q4 "):
            assert all(len(r["chunks"]) == 4 and min(r["chunks"]) > 0 for r in v), k


def test_dynamic_moves_chunks_off_the_slow_path_and_static_does_not(outcomes):
    ms = outcomes["partition/assignment"].measures
    s, d = ms["static"][0], ms["dynamic"][0]
    assert abs(s["chunks"][1] / sum(s["chunks"]) - 0.5) < 0.02
    assert d["chunks"][1] / sum(d["chunks"]) <= 0.2
    assert s["fct_ms"] > 2 * d["fct_ms"]
    rows = {r.quantity: r for r in outcomes["partition/assignment"].rows}
    assert all(r.ok for r in rows.values()), rows

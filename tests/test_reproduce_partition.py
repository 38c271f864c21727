"""`braid reproduce partition/...`: the data-partition experiments run, their rows have the
expected structure, and the measured shapes hold (so these tests can fail): more QPs cut the
transfer's completion time on the two-tier fabric, and dynamic assignment moves chunks off a slow
path while static assignment splits them evenly. The paper's other two topologies (five routers
linked to each other; 128 hosts on 8 leaves x 4 spines) are checked as scenarios (the wiring the
files claim), with a few runs each showing 2 QPs beat 1, and their summaries on made-up
measurements (the rows flip when the shape does)."""

from __future__ import annotations

import math
from collections import deque

import pytest

from braid import api
from braid.api import estimate
from braid.reproduce import experiments_dir, registry, reproduce, select
from braid.reproduce import partition
from braid.reproduce.registry import Experiment, Run
from braid.reproduce.runner import execute

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

pytestmark = pytest.mark.core

# The experiments the module fixture runs in full (quick); the two other topologies' sweeps are
# ~40 runs each, so their tests run a few cells only.
IDS = ("partition/twotier", "partition/assignment")
ALL_IDS = ("partition/twotier", "partition/routers", "partition/large", "partition/assignment")


def test_partition_experiments_are_registered_with_their_scenarios():
    reg = registry()
    for id in ALL_IDS:
        assert id in reg, id
        e = reg[id]
        assert e.doc.startswith("docs/partition.md")
        assert e.cost == "quick"
        for s in e.scenarios:
            assert (experiments_dir() / s).is_file(), s
    assert [e.id for e in select(["partition"], False)] == list(ALL_IDS)
    # Quick: 3 QP counts x 3 chunk sizes x 2 seeds; --full: the paper's 1-16 x 1K-128K.
    quick = reg["partition/twotier"].runs(False)
    full = reg["partition/twotier"].runs(True)
    assert len(quick) == 18 and len(full) == 7 * 8 * 4 + 3 * 8 * 2
    assert {r.overrides for r in full} >= {(partition._mw(16, "1KB"),), (partition._mw(1, "128KB"),)}
    # Topologies 2 and 3: quick 1 QP at 32K + 2 and 4 QPs x 3 chunk sizes, x 4 seeds, + topology 1
    # at 1 and 2 QPs on the same seeds; --full the paper's grid x 8 seeds + the same reference.
    for id, scen in (("partition/routers", partition.ROUTERS), ("partition/large", partition.LARGE)):
        quick, full = reg[id].runs(False), reg[id].runs(True)
        assert len(quick) == (1 + 2 * 3) * 4 + 2 * 4 and len(full) == 7 * 8 * 8 + 2 * 8
        assert {r.scenario for r in full if not r.label.startswith("t1 ")} == {scen}
        assert {r.scenario for r in full if r.label.startswith("t1 ")} == {partition.TWOTIER}
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
    # (Not "4 beat 2": since the members' ports are drawn from the seed (issue 27), two seeds
    # re-sample their paths and 4 QPs land within the seed spread of 2: 5.80 vs 5.43 ms.)
    assert sum(four) / len(four) < 0.9 * sum(one) / len(one)
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


# ---------------------------------------------------------------- topologies 2 and 3


def _shortest_paths(links, src, dst):
    """(length, count) of the shortest paths from src to dst in an undirected graph."""
    adj = {}
    for a, b in links:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    dist, count, q = {src: 0}, {src: 1}, deque([src])
    while q:
        u = q.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v], count[v] = dist[u] + 1, count[u]
                q.append(v)
            elif dist[v] == dist[u] + 1:
                count[v] += count[u]
    return dist[dst], count[dst]


def test_the_router_topology_is_what_its_file_says():
    path = experiments_dir() / partition.ROUTERS
    api.validate(path)
    doc = tomllib.loads(path.read_text())
    t = doc["topology"]
    routers = [f"r{i}" for i in range(5)]
    # The paper: 20 hosts numbered 0-19, 5 switches numbered 20-24 (node ids follow list order).
    assert t["nodes"] == [f"h{i}" for i in range(20)] + routers and t["switches"] == routers
    links = [(l["a"], l["b"]) for l in t["links"]]
    assert all(l["rate"] == "40Gbps" and l["delay"] == "1us" for l in t["links"])
    # Four hosts per router, in order.
    assert sorted((a, b) for a, b in links if a.startswith("h")) == sorted((f"h{i}", f"r{i // 4}") for i in range(20))
    # Router-router links: every pair but r0-r4 (the routers of hosts 0 and 19).
    rr = {frozenset(x) for x in links if x[0].startswith("r") and x[1].startswith("r")}
    assert rr == {frozenset((a, b)) for a in routers for b in routers if a < b} - {frozenset(("r0", "r4"))}
    # Hence three equal-cost paths from host 0 to host 19, each four links (topology 1's length),
    # while hosts on linked routers have one.
    assert _shortest_paths(links, "h0", "h19") == (4, 3)
    assert _shortest_paths(links, "h0", "h4") == (3, 1)
    flows = doc["traffic"][0]["flows"]
    assert flows == [{"src": 0, "dst": 19, "size": "10MB", "start": "1ms"}]
    assert doc["traffic"][1]["flows"] == 200


def test_the_large_topology_is_the_papers_128_hosts_and_12_routers():
    path = experiments_dir() / partition.LARGE
    sc = api.validate(path)
    e = estimate(sc)
    assert (e["hosts"], e["switches"]) == (128, 12)
    t = sc.data["topology"]
    # 8 second-level routers of 16 hosts, each linked to all 4 first-level ones: hosts 0 and 19
    # are on leaves 0 and 1, four equal-cost paths apart.
    assert (t["kind"], t["leaves"], t["hosts_per_leaf"], t["spines"]) == ("leaf-spine", 8, 16, 4)
    assert sc.data["traffic"][0]["flows"][0]["dst"] == 19 and sc.data["traffic"][1]["flows"] == 200


def _cells(scenario, qps, seeds):
    runs = [Run(f"q{q}", scenario, s, partition.measure_transfer, (partition._mw(q, "32KB"),)) for q in qps for s in seeds]
    e = Experiment("test/partition-cells", "", "", lambda full: runs, lambda m: [])
    return execute([e], jobs=2)[0].measures


def test_two_qps_beat_one_on_the_router_topology():
    # Two background seeds: 2 QPs beat 1 in each (measured 12.61 -> 10.77 and 12.36 -> 11.86 ms
    # since the members' ports are drawn from the seed, issue 27; before, with the same ports in
    # every seed, 11.3 -> 8.9 and 11.0 -> 5.5 ms).
    ms = _cells(partition.ROUTERS, (1, 2), (1, 2))
    for one, two in zip(ms["q1"], ms["q2"]):
        assert two["fct_ms"] < one["fct_ms"], (one["fct_ms"], two["fct_ms"])
        assert len(two["chunks"]) == 2 and min(two["chunks"]) > 0
        assert sum(two["chunks"]) == sum(one["chunks"]) == 313  # 10^7 B in chunks of 32,000 B


def test_two_qps_beat_one_on_the_large_topology_on_average():
    # The 200 background flows spread over 128 hosts meet the transfer rarely; over four seeds the
    # mean falls (3.50 -> 2.34 ms with the members' ports drawn from the seed, issue 27; with the
    # fixed ports before, 3.14 -> 2.94 ms, and seed 1 went the other way).
    ms = _cells(partition.LARGE, (1, 2), (1, 2, 3, 4))
    one = sum(r["fct_ms"] for r in ms["q1"]) / 4
    two = sum(r["fct_ms"] for r in ms["q2"]) / 4
    assert two < 0.97 * one, (one, two)
    # Still far from topology 1's congestion: the transfer runs near its 2.1 ms at line rate.
    assert 2.0 < two < one < 5.0


def _made_up(q1, per_q, worse128=0.0, t1=(11.0, 8.0)):
    """Measures as the experiments' summaries receive them: per_q[q] ms for every chunk size up
    to 32K, times (1 + worse128) at 128K."""
    m = {"q1 32KB": [{"fct_ms": q1}]}
    for q, v in per_q.items():
        m[f"q{q} 4KB"] = [{"fct_ms": v}]
        m[f"q{q} 32KB"] = [{"fct_ms": v}]
        m[f"q{q} 128KB"] = [{"fct_ms": v * (1 + worse128)}]
    m["t1 q1 32KB"] = [{"fct_ms": t1[0]}]
    m["t1 q2 32KB"] = [{"fct_ms": t1[1]}]
    return m


def _oks(rows):
    return {r.quantity.split(" (")[0].split(",")[0]: r.ok for r in rows if r.ok is not None}


def test_topology_summaries_follow_the_measurements():
    reg = registry()
    routers, large = reg["partition/routers"].summarize, reg["partition/large"].summarize
    # The paper's shape: 2 QPs well below 1, steady from the path count on, worse above 32K.
    paperish = _oks(routers(_made_up(10.0, {2: 6.0, 3: 5.9, 4: 5.8}, worse128=0.3, t1=(12.0, 7.0))))
    assert all(paperish.values()), paperish
    # No gain from a second QP, more QPs still helping, 128K no worse, slower than topology 1.
    flat = _oks(routers(_made_up(10.0, {2: 9.9, 3: 7.0, 4: 5.0}, t1=(9.0, 7.0))))
    assert not any(flat[k] for k in flat if not k.startswith("2+ QPs: chunks")), flat
    # Topology 3: the paper has it ~1% above topology 1; far below is not its shape.
    near = _oks(large(_made_up(11.2, {2: 7.0, 4: 6.5}, t1=(11.0, 8.0))))
    far = _oks(large(_made_up(3.0, {2: 2.9, 4: 2.4}, t1=(11.0, 8.0))))
    assert near["1 QP vs topology 1"] and not far["1 QP vs topology 1"]
    assert near["1 -> 2 QPs"] and not far["1 -> 2 QPs"]

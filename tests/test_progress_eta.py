"""The run's progress bar measures against the end of the traffic, not `duration`: a run whose flows
are all known ends soon after the last one arrives (here at 100 us of a 1 s duration), so a bar
against `duration` would sit at 0% and jump to the end."""

from __future__ import annotations

import braid
from braid.api import bar_state, build

US = 1_000_000  # ps


def scenario(apps=()):
    return {
        "name": "eta",
        "duration": "1s",
        "topology": {"kind": "dumbbell", "left": 2, "right": 2,
                     "host_link": {"rate": "100Gbps", "delay": "1us"},
                     "bottleneck": {"rate": "100Gbps", "delay": "1us"}},
        "traffic": [{"pattern": "flows", "flows": [
            {"src": 0, "dst": 2, "size": "10KB", "start": "0us"},
            {"src": 1, "dst": 3, "size": "10KB", "start": "100us"},
            {"src": 0, "dst": 3, "size": "10KB", "start": "20us"},
        ]}],
        "apps": list(apps),
    }


def test_the_last_arrival_is_known_up_front():
    _sc, sim, _ = build(scenario())
    assert sim.end_ps() == 1_000_000 * US
    assert sim.last_arrival_ps() == 100 * US
    # An application's end is not known up front: no traffic end to measure against.
    _sc, sim, _ = build(scenario([{"kind": "write_bw", "src": 0, "dst": 2, "size": "4KB", "iterations": 3}]))
    assert sim.last_arrival_ps() is None


def test_the_bar_measures_against_the_last_arrival_with_an_eta():
    # Half-way to the last arrival after 2 s of wall time: 50% done, 2 s left at that pace.
    frac, text = bar_state(50 * US, 1_000_000 * US, 100 * US, 2.0)
    assert frac == 0.5
    assert "/ 100 us (last arrival)" in text and "ETA 0:02" in text
    # Past it, the flows in flight drain: full bar, no estimate.
    frac, text = bar_state(150 * US, 1_000_000 * US, 100 * US, 5.0)
    assert frac == 1.0 and "draining" in text and "ETA" not in text
    # Unknown traffic end: against the duration, still with an estimate.
    frac, text = bar_state(250 * US, 1_000 * US, None, 1.0)
    assert frac == 0.25 and "(end)" in text and "ETA 0:03" in text


def test_a_run_with_the_bar_ends_at_its_traffic(tmp_path):
    res = braid.run(scenario(), seed=1, progress=True)
    assert res.finished and res.stats["sim_time_ps"] < 1_000 * US

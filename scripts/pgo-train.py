"""The training runs of the profile-guided build (scripts/build-ext.sh): about a second of the
simulator's main workload through the instrumented extension, so the compiler learns which
branches and calls are hot.

- a 3-tier fat-tree (k = 12, 432 hosts) with DCQCN and web-search flows at 0.3 load: the event
  loop, the switch hop, PFC/ECN, the NIC and DCQCN (the simulator's hot path);
- the demo's runs: the two-ToR permutation with DCQCN and with MP-RDMA, an incast with PFC.

Not the HPCC anchor nor any `braid bench` scenario: the benchmark measures a build trained on other
inputs. Host middleware scenarios (PeRF, Virtuoso, data partition) are left out on purpose: with
them in the set the anchor gained a fraction as much (`braid bench`, alternated: 4.79 s for the
ordinary build, 4.72 s with them, 4.46 s without), and without them those scenarios run as fast as
with an ordinary build (docs/performance.md, round 9). Runs print one line each; a failure exits non-zero (the build then falls back to an
ordinary one).
"""

from __future__ import annotations

import sys
import time

from braid import api
from braid.bench import _fat_tree
from braid.scenario import packaged_scenario

RUNS = [
    ("fat-tree k=12, DCQCN, web-search 0.3", _fat_tree(12, 1000.0, 200.0), []),
    ("two-ToR permutation, DCQCN", packaged_scenario("two-tor-permutation"), []),
    ("two-ToR permutation, MP-RDMA", packaged_scenario("two-tor-permutation"), ["transport.kind=mp-rdma"]),
    ("incast, PFC", packaged_scenario("incast"), []),
]


def main() -> int:
    for label, scenario, overrides in RUNS:
        t0 = time.perf_counter()
        res = api.run(scenario, overrides=overrides)
        print(f"  trained: {label} ({res.stats.get('events', 0) / 1e6:.1f} M events, {time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

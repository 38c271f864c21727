"""HPCC ns-3's base RTTs of a topology, for ``GLOBAL_T 1`` (one T for every HPCC flow: the
largest base RTT of any host pair).

The definition is HPCC ns-3's (its ``third.cc`` computes them after routing; only the definition
is used here): from each host a breadth-first search over switches (hosts are never a middle
point, links that are down are skipped); along the first path it finds to a node, the one-way
delay is the sum of the links' delays and the transmission delay the sum over those links of one
payload (``PACKET_PAYLOAD_SIZE``, headers not counted) at the link's rate, in whole nanoseconds
per link. A pair's base RTT is twice its one-way delay plus its transmission delay (one way)."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterable, List, Sequence, Tuple

#: (a, b, rate in bit/s, delay in ps, error rate), as ``_core.hpcc_topology`` gives links.
Link = Tuple[int, int, int, int, float]


def base_rtts_ns(hosts: Sequence[int], switches: Iterable[int], links: Sequence[Link], payload: int) -> Dict[Tuple[int, int], int]:
    """Every ordered host pair's base RTT in ns (pairs the search does not reach are left out)."""
    is_switch = set(switches)
    nbr: Dict[int, List[Tuple[int, int, int]]] = defaultdict(list)
    for a, b, rate, delay_ps, _err in links:
        # HPCC keeps delays in ns; braid's reader gives ps.
        nbr[a].append((b, delay_ps // 1000, rate))
        nbr[b].append((a, delay_ps // 1000, rate))
    out: Dict[Tuple[int, int], int] = {}
    for h in hosts:
        delay, tx = {h: 0}, {h: 0}
        queue = [h]
        for now in queue:
            for nxt, d, rate in nbr[now]:
                if nxt in delay:
                    continue
                delay[nxt] = delay[now] + d
                tx[nxt] = tx[now] + payload * 1_000_000_000 * 8 // rate
                if nxt in is_switch:
                    queue.append(nxt)
        for other in hosts:
            if other != h and other in delay:
                out[(other, h)] = 2 * delay[other] + tx[other]
    return out


def max_base_rtt_ns(hosts: Sequence[int], switches: Iterable[int], links: Sequence[Link], payload: int) -> int:
    """The largest base RTT of any host pair (HPCC ns-3's ``maxRtt``), 0 without pairs."""
    return max(base_rtts_ns(hosts, switches, links, payload).values(), default=0)

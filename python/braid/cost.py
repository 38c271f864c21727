"""What a scenario will cost, estimated from its text before anything is built.

``braid validate`` prints the estimate; ``validate`` and ``run`` refuse a scenario whose estimated
memory exceeds what the machine has, with one line naming the key that drives the cost and the
estimate (a typo such as ``measure.interval = "1ps"``, ``qps = 1e8`` or a fat-tree with k = 200
would otherwise fill the memory, or hang, minutes later).

The figures are upper-bound-ish estimates, calibrated on this simulator (see ``BYTES_*``):

* a node (host or switch, its ports, NIC and tables) costs about 9 KB; routes are one ECMP group
  per (switch, edge switch) (4 B each) and one 12 B record per host (``world/table.rs``: a
  switch's next hops towards a host depend only on the switch the host hangs off); measured: the
  k = 48 fat-tree's tables 13.6 MB, its build 280 MB (docs/performance.md);
* a QP about 2.2 KB once running (measured with 20,000 and 100,000 QPs of one write_bw);
* a flow two QPs and its record;
* a time-series sample (a row of ``throughput`` or ``queues``) about 64 B through the run and
  its results. Rows: sampling intervals × (series alive at once: at most the flows, taken as at
  most 4 per host, plus the applications' QPs and the sampled ports);
* a congestion-control sample (``measure.cc``, a row of ``cc``) about 400 B at its peak (the
  core's row, its table and the DataFrame): intervals × chosen QPs (``max_qps`` for ``"all"``);
* a captured frame (``measure.pcap``) min(``snaplen``, ``nic.mtu`` + 80) + 16 bytes, held three
  times at the end (the core's buffer, the file it assembles, Python's copy): ``max_packets`` of
  them at most.

The budget is the memory available now (``MemAvailable``), or ``BRAID_MEMORY_LIMIT`` (e.g.
``"2GB"``) when set.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .scenario import BraidError, Scenario

__all__ = ["Estimate", "estimate", "check_cost", "memory_budget"]

BYTES_PER_NODE = 9_000
BYTES_PER_ROUTE = 4  # one ECMP group id per (switch, edge switch)
BYTES_PER_HOST_ROUTE = 12  # a host's edge switch and port
BYTES_PER_QP = 2_200
BYTES_PER_FLOW_RECORD = 200
BYTES_PER_SAMPLE = 64
BYTES_PER_CC_SAMPLE = 400
BASE_BYTES = 50_000_000  # the interpreter, polars and the core, before any scenario

_UNITS_T = {"ps": 1, "ns": 10**3, "us": 10**6, "µs": 10**6, "ms": 10**9, "s": 10**12}
_UNITS_B = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_NUM = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"


def _ps(v) -> Optional[float]:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        m = re.fullmatch(_NUM + r"(ps|ns|us|µs|ms|s)\s*", v)
        if m:
            return float(m.group(1)) * _UNITS_T[m.group(2)]
    return None


def _bytes(v) -> Optional[float]:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        m = re.fullmatch(_NUM + r"([kKmMgGtT]i?[bB]|[bB])\s*", v)
        if m:
            return float(m.group(1)) * _UNITS_B[m.group(2).lower()]
    return None


def _int(v) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return int(v)
    return None


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _count(n: float) -> str:
    return f"{n:,.0f}" if n < 1e9 else f"{n:.2g}"


@dataclass
class Estimate:
    hosts: float = 0
    switches: float = 0
    qps: float = 0
    flows: float = 0
    samples: float = 0
    memory: float = 0
    #: Bytes by the key that causes them, for naming the culprit.
    by_key: dict = field(default_factory=dict)
    #: What each key's figure is (for the message).
    why: dict = field(default_factory=dict)

    def add(self, key: str, nbytes: float, why: str) -> None:
        self.by_key[key] = self.by_key.get(key, 0) + nbytes
        self.why.setdefault(key, why)
        self.memory += nbytes

    def line(self) -> str:
        return (
            f"{_count(self.hosts + self.switches)} nodes, {_count(self.qps)} QPs, {_count(self.flows)} flows, "
            f"{_count(self.samples)} time-series samples, ~{fmt_bytes(self.memory)} of memory"
        )


def _topology(t: dict, base: Path) -> tuple:
    """(hosts, switches, edge switches (those with hosts; at most all switches), the key that
    sizes it) or None if unknown."""
    kind = t.get("kind")
    g = lambda k: _int(t.get(k)) or 0  # noqa: E731
    if kind == "fat-tree":
        k = g("k")
        return k**3 / 4, 5 * k * k / 4, k * k / 2, "topology.k"
    if kind == "leaf-spine":
        return g("leaves") * g("hosts_per_leaf"), g("leaves") + g("spines"), g("leaves"), "topology"
    if kind == "two-tor":
        return 2 * g("hosts_per_tor"), 2 + g("paths"), 2, "topology"
    if kind == "dumbbell":
        return g("left") + g("right"), 2, 2, "topology"
    if kind == "edges":
        nodes = t.get("nodes")
        n = len(nodes) if isinstance(nodes, list) else (_int(nodes) or 0)
        sw = len(t.get("switches") or []) if isinstance(t.get("switches"), list) else 0
        return n - sw, sw, sw, "topology.nodes"
    if kind == "hpcc" and isinstance(t.get("file"), str):
        head = _first_numbers(base, t["file"], 2)
        if head:
            n, s = head
            return n - s, s, s, "topology.file"
    return None


def _first_numbers(base: Path, name: str, k: int) -> Optional[list]:
    p = Path(name)
    p = p if p.is_absolute() else base / p
    try:
        # A FIFO or device is not opened here (it would block or never end); the core refuses it.
        if not p.is_file():
            return None
        with open(p, "rb") as f:
            toks = f.read(4096).split()[:k]
        vals = [int(x) for x in toks]
        return vals if len(vals) == k else None
    except (OSError, ValueError):
        return None


def _flows_of(tr: dict, hosts: float, base: Path, duration_ps: float) -> float:
    pat = tr.get("pattern")
    hl = tr.get("hosts")
    n = len(hl) if isinstance(hl, list) else hosts
    if pat == "permutation":
        return n * (2 if tr.get("both_ways") else 1)
    if pat == "incast":
        s = tr.get("senders")
        return len(s) if isinstance(s, list) else (_int(s) or 0)
    if pat == "all-to-all":
        return n * max(0, n - 1)
    if pat == "flows":
        return len(tr.get("flows") or [])
    if pat == "poisson":
        f = _int(tr.get("flows"))
        return f if f is not None else 0  # by duration: the core generates and bounds them
    if pat == "hpcc" and isinstance(tr.get("file"), str):
        head = _first_numbers(base, tr["file"], 1)
        return head[0] if head else 0
    return 0


def estimate(sc: Scenario) -> Optional[Estimate]:
    """The estimate, or None where the scenario is too malformed to say (the core reports it)."""
    d = sc.data
    t = d.get("topology")
    if not isinstance(t, dict):
        return None
    topo = _topology(t, sc.base_dir)
    if topo is None:
        return None
    hosts, switches, edges, tkey = topo
    e = Estimate(hosts=hosts, switches=switches)
    routes = switches * edges * BYTES_PER_ROUTE + hosts * BYTES_PER_HOST_ROUTE
    e.add(tkey, (hosts + switches) * BYTES_PER_NODE + routes, f"{_count(hosts)} hosts and {_count(switches)} switches")
    duration = _ps(d.get("duration", "10ms")) or 0
    measure = d.get("measure") if isinstance(d.get("measure"), dict) else {}
    interval = _ps(measure.get("interval", "10us")) or 0
    intervals = duration / interval if interval > 0 else 0
    series = 0.0
    traffic = d.get("traffic") if isinstance(d.get("traffic"), list) else []
    for i, tr in enumerate(traffic):
        if not isinstance(tr, dict):
            continue
        n = _flows_of(tr, hosts, sc.base_dir, duration)
        e.flows += n
        e.qps += 2 * n
        e.add(f"traffic[{i}]", n * (2 * BYTES_PER_QP + BYTES_PER_FLOW_RECORD), f"{_count(n)} flows")
    series += min(e.flows, 4 * max(hosts, 1))
    apps = d.get("apps") if isinstance(d.get("apps"), list) else []
    for i, a in enumerate(apps):
        if not isinstance(a, dict):
            continue
        q = a.get("qps", 1)
        q = float(q) if isinstance(q, (int, float)) and not isinstance(q, bool) and q > 0 else 1.0
        e.qps += 2 * q
        e.flows += 1
        series += 1
        e.add(f"apps[{i}].qps", 2 * q * BYTES_PER_QP, f"{_count(2 * q)} QPs")
    queues = measure.get("queues") if isinstance(measure.get("queues"), list) else []
    for q in queues:
        # "all-fabric": every switch port that faces a switch (at most all switch ports).
        series += (3 * hosts if t.get("kind") == "fat-tree" else 2 * (hosts + switches)) if q == "all-fabric" else 1
    e.samples = intervals * series
    e.add("measure.interval", e.samples * BYTES_PER_SAMPLE, f"{_count(e.samples)} time-series samples ({_count(intervals)} intervals of {measure.get('interval', '10us')} over duration {d.get('duration', '10ms')})")
    cc = measure.get("cc") if isinstance(measure.get("cc"), dict) else {}
    sel = cc.get("qps")
    n_cc = (_int(cc.get("max_qps", 64)) or 0) if sel == "all" else (len(sel) if isinstance(sel, list) else 0)
    if n_cc > 0:
        cc_iv = _ps(cc.get("interval", measure.get("interval", "10us"))) or 0
        rows = n_cc * (duration / cc_iv if cc_iv > 0 else 0)
        e.samples += rows
        e.add("measure.cc.interval", rows * BYTES_PER_CC_SAMPLE, f"{_count(rows)} congestion-control samples ({_count(n_cc)} QPs)")
    pcap = measure.get("pcap") if isinstance(measure.get("pcap"), dict) else {}
    if pcap.get("flows") or pcap.get("ports"):
        n_pk = _int(pcap.get("max_packets", 100_000)) or 0
        nic = d.get("nic") if isinstance(d.get("nic"), dict) else {}
        mtu = _int(nic.get("mtu", 1000)) or 1000
        snap = min(_int(pcap.get("snaplen", 65535)) or 0, mtu + 80)
        e.add("measure.pcap.max_packets", 3 * n_pk * (snap + 16), f"a packet trace of up to {_count(n_pk)} frames of {snap} bytes")
    e.memory += BASE_BYTES
    return e


def memory_budget() -> tuple:
    """(bytes, where the figure comes from)."""
    env = os.environ.get("BRAID_MEMORY_LIMIT")
    if env:
        b = _bytes(env)
        if b is None or b <= 0:
            raise BraidError("BRAID_MEMORY_LIMIT", f'expected a size like "8GB", got {env!r}')
        return b, "BRAID_MEMORY_LIMIT"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available on this machine"
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"), "available on this machine"
    except (ValueError, OSError, AttributeError):
        return math.inf, ""


_ADVICE = {
    "measure.interval": 'use a longer interval (e.g. "10us") or a shorter duration',
    "measure.cc.interval": "sample fewer QPs, less often, or over a shorter duration",
    "measure.pcap.max_packets": "keep fewer frames (max_packets) or fewer bytes of each (snaplen)",
    "topology.k": "use a smaller k",
    "topology": "use a smaller topology",
    "topology.nodes": "use fewer nodes",
    "topology.file": "use a smaller topology file",
}


def check_cost(sc: Scenario) -> Optional[Estimate]:
    """Raises BraidError naming the costliest key when the estimate does not fit in memory."""
    e = estimate(sc)
    if e is None:
        return None
    budget, where = memory_budget()
    if e.memory > budget:
        key = max(e.by_key, key=lambda k: e.by_key[k])
        advice = _ADVICE.get(key) or ("use fewer QPs" if key.endswith(".qps") else "use fewer flows")
        raise BraidError(
            key,
            f"the run would need ~{fmt_bytes(e.memory)} of memory ({e.why[key]}: ~{fmt_bytes(e.by_key[key])}), "
            f"more than the {fmt_bytes(budget)} {where}; {advice}",
        )
    return e

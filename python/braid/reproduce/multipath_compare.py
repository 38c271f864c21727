"""Which multipath scheme, on which fabric and traffic, at what cost: the comparison none of the
papers has (issue 13, experiment 6; issue 27 §3 against the strongest baselines).

Single-path DCQCN on ECMP, the switch-side schemes (WCMP, LetFlow flowlets, per-packet spraying,
adaptive routing), data partition (N = 4 and 8 QPs per connection, static and dynamic
assignment), Virtuoso and MP-RDMA run the same scenario files side by side; each scheme is one
set of overrides (:data:`SCHEMES`). Every RC-based scheme runs with go-back-N RC (the files'
transport) and, where selective repeat changes what it can do, with IRN (``+ IRN``,
``transport.recovery = "irn"``). Spraying and adaptive routing run on IRN only: over go-back-N
every reordered packet is a loss (docs/load-balancing.md measured it: spraying finished no flow).
MP-RDMA has its own transport (a bitmap receiver, no RC recovery) and sprays by itself over ECMP
switches. The fabrics are the MP-RDMA paper's two-ToR testbed (5 + 5 hosts, 4 spines, 40G), the
same with spine3's link to tor1 at a quarter rate (asymmetric), and a leaf-spine of 4 spines x 8
leaves (32 hosts, 40G, non-blocking); the traffic is a permutation of long flows, an incast,
web-search at 30% and 70% load, and the testbed with a spine link failing (without and with fast
failover, detection scaled to 1 ms) or dropping 0.1% of packets
(python/braid/experiments/multipath/compare-*.toml; their headers say what they model). Every NIC caches 256 QP contexts (the MP-RDMA
paper's Fig. 2), so the QPs a software scheme multiplies have a price.

Per run: total goodput and the slowest flow's (long-flow workloads), completion time of the
incast, FCT p50/p99 by flow size (web-search), retransmissions, QPs created, QP-cache misses and
host CPU per GB delivered. ``braid reproduce multipath/compare`` prints one row per workload and
scheme and writes a bar chart (``multipath-compare.png``) to ``--out`` (or
``$BRAID_REPRODUCE_OUT``, default ``./braid-reproduce``). docs/multipath.md discusses the results.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .metrics import flow_goodput_gbps, mean
from .registry import Row, Run, experiment

DOC = "docs/multipath.md (Which multipath scheme)"

IRN = ('transport.recovery="irn"',)
WCMP = ('switch.lb={kind="wcmp"}',)
FLOWLET = ('switch.lb={kind="flowlet"}',)
SPRAY = ('switch.lb={kind="spray"}',)
ADAPTIVE = ('switch.lb={kind="adaptive"}',)

#: One set of overrides per scheme. Single-path DCQCN on ECMP over go-back-N RC is what the
#: scenario files say. Every policy runs with its defaults (docs/load-balancing.md, docs/irn.md).
SCHEMES: Dict[str, Tuple[str, ...]] = {
    "DCQCN": (),
    "ECMP + IRN": IRN,
    "WCMP": WCMP,
    "WCMP + IRN": WCMP + IRN,
    "flowlets": FLOWLET,
    "flowlets + IRN": FLOWLET + IRN,
    "spraying + IRN": SPRAY + IRN,
    "adaptive + IRN": ADAPTIVE + IRN,
    "partition-4 static": ('middleware.default=[{kind="partition",qps=4,assign="static"}]',),
    "partition-4 dynamic": ('middleware.default=[{kind="partition",qps=4,assign="dynamic"}]',),
    "partition-8 static": ('middleware.default=[{kind="partition",qps=8,assign="static"}]',),
    "partition-8 dynamic": ('middleware.default=[{kind="partition",qps=8,assign="dynamic"}]',),
    "Virtuoso": ('middleware.default=[{kind="virtuoso",paths=4}]', "nic.addresses=4"),
    # The same with the paths' capacities given (every fabric link here is 40G): no probes.
    "Virtuoso, capacities given": ('middleware.default=[{kind="virtuoso",paths=4,capacities=["40Gbps","40Gbps","40Gbps","40Gbps"]}]', "nic.addresses=4"),
    "partition-8 dynamic + IRN": ('middleware.default=[{kind="partition",qps=8,assign="dynamic"}]',) + IRN,
    "Virtuoso + IRN": ('middleware.default=[{kind="virtuoso",paths=4}]', "nic.addresses=4") + IRN,
    "MP-RDMA": ('transport.kind="mp-rdma"',),
}
#: The schemes that spread one connection over several paths (host- or switch-side); ECMP + IRN
#: and WCMP keep each flow on one path, as DCQCN does.
SWITCH_SIDE = ("WCMP", "WCMP + IRN", "flowlets", "flowlets + IRN", "spraying + IRN", "adaptive + IRN")
MULTIPATH = tuple(s for s in SCHEMES if s not in ("DCQCN", "ECMP + IRN"))


@dataclass(frozen=True)
class Workload:
    label: str
    scenario: str
    #: "goodput" (long flows: total and slowest flow over ``window`` ms), "incast" (the last
    #: flow's completion) or "fct" (FCT by size).
    metric: str
    window: Tuple[float, float] = (5.0, 20.0)
    overrides: Tuple[str, ...] = ()
    #: Seeds in the quick and the full sweep (ECMP collisions make single-path runs vary by seed).
    seeds: Tuple[int, int] = (2, 5)


WORKLOADS: Tuple[Workload, ...] = (
    Workload("two-ToR permutation", "multipath/compare-two-tor-permutation.toml", "goodput"),
    Workload("two-ToR, spine link down at 5 ms", "multipath/compare-two-tor-failure.toml", "goodput", (6.0, 20.0)),
    # Failover's detection scaled from BFD's 150 ms (docs/load-balancing.md) to 1 ms, to fit a
    # 20 ms run: what matters is that the switches reroute at all.
    Workload("two-ToR, spine link down at 5 ms, failover", "multipath/compare-two-tor-failure.toml", "goodput", (6.0, 20.0), ('switch.failover={detect="1ms"}',)),
    Workload("two-ToR asymmetric (one spine downlink at 10G)", "multipath/compare-two-tor-asymmetric.toml", "goodput"),
    Workload("two-ToR, spine1 drops 0.1%", "multipath/compare-two-tor-lossy.toml", "goodput"),
    Workload("two-ToR incast 9 → 1", "multipath/compare-two-tor-incast.toml", "incast", seeds=(1, 2)),
    Workload("leaf-spine permutation", "multipath/compare-leaf-spine-permutation.toml", "goodput"),
    Workload("leaf-spine incast 16 → 1", "multipath/compare-leaf-spine-incast.toml", "incast", seeds=(1, 2)),
    Workload("leaf-spine web-search 30%", "multipath/compare-leaf-spine-web-search.toml", "fct", overrides=("traffic[0].load=0.3",), seeds=(1, 3)),
    Workload("leaf-spine web-search 70%", "multipath/compare-leaf-spine-web-search.toml", "fct", overrides=("traffic[0].load=0.7",), seeds=(1, 3)),
)

#: The goodput windows of the long-flow workloads (ms), measured for every run.
WINDOWS = tuple(sorted({w.window for w in WORKLOADS if w.metric == "goodput"}))

#: Flow-size classes of the FCT columns (bytes, upper bounds exclusive).
SIZE_CLASSES = (("< 100KB", 0, 100_000), ("100KB–1MB", 100_000, 1_000_000), ("≥ 1MB", 1_000_000, 1 << 62))

# `mp_rdma_early_retx`: the part of `retransmissions` that MP-RDMA sent early on a suspected (not
# detected) loss; shown apart so that it is not read as loss recovery.
_COUNTERS = ("retransmissions", "mp_rdma_early_retx", "timeouts", "drops", "qps_created", "qp_cache_misses")


def measure(res) -> dict:
    """Everything one run reports; the summary picks what its workload's metric needs."""
    import polars as pl

    out: dict = {c: float(res.counters.get(c, 0)) for c in _COUNTERS}
    end_ms = res.stats.get("sim_time_ps", 0.0) / 1e9
    for t0, t1 in WINDOWS:
        out[f"goodput_{t0:g}"] = flow_goodput_gbps(res, t0, t1)
    fl = res.flows.filter(pl.col("kind") == "flow")
    out["flows"] = fl.height
    done = fl.filter(pl.col("finish_ps").is_not_null())
    out["unfinished"] = fl.height - done.height
    out["last_finish_ms"] = float(done["finish_ps"].max()) / 1e9 if done.height else math.nan
    out["first_start_ms"] = float(fl["start_ps"].min()) / 1e9 if fl.height else math.nan
    for name, lo, hi in SIZE_CLASSES:
        c = done.filter((pl.col("size") >= lo) & (pl.col("size") < hi))
        fct = c["fct_ps"].cast(pl.Float64) / 1e6
        out[f"fct_p50_{name}"] = float(fct.quantile(0.5, "nearest")) if c.height else math.nan
        out[f"fct_p99_{name}"] = float(fct.quantile(0.99, "nearest")) if c.height else math.nan
        out[f"n_{name}"] = c.height
    delivered = float(res.throughput["bytes"].sum()) if res.throughput.height else 0.0
    out["delivered_gb"] = delivered / 1e9
    out["cpu_ns"] = float(res.tenants["cpu_ns"].sum()) if res.tenants.height else 0.0
    out["end_ms"] = end_ms
    return out


def _runs(full: bool, schemes: Sequence[str] = tuple(SCHEMES), workloads: Sequence[Workload] = WORKLOADS) -> List[Run]:
    runs = []
    for w in workloads:
        for s in schemes:
            for seed in range(1, w.seeds[1 if full else 0] + 1):
                runs.append(Run(f"{w.label} | {s}", w.scenario, seed, measure, w.overrides + SCHEMES[s]))
    return runs


def headline(w: Workload, ms: List[dict]) -> float:
    """The one number a workload is judged by (mean over seeds): total goodput (Gbps, higher is
    better), the incast's completion (ms, lower) or the large flows' p99 FCT (µs, lower)."""
    if w.metric == "goodput":
        key = f"goodput_{w.window[0]:g}"
        return mean(sum(m[key]) for m in ms)
    if w.metric == "incast":
        return mean(m["last_finish_ms"] - m["first_start_ms"] for m in ms)
    return mean(m[f"fct_p99_{SIZE_CLASSES[-1][0]}"] for m in ms)


def higher_is_better(w: Workload) -> bool:
    return w.metric == "goodput"


def _fmt(x: float, nd: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _cost(ms: List[dict]) -> str:
    gb = sum(m["delivered_gb"] for m in ms)
    cpu = sum(m["cpu_ns"] for m in ms) / 1e6 / gb if gb > 0 else math.nan  # ms of CPU per GB
    return (
        f"retx {mean(m['retransmissions'] for m in ms):.0f} (early {mean(m.get('mp_rdma_early_retx', 0.0) for m in ms):.0f}), QPs {mean(m['qps_created'] for m in ms):.0f}, "
        f"cache misses {mean(m['qp_cache_misses'] for m in ms):.0f}, CPU {_fmt(cpu, 2)} ms/GB"
    )


def describe(w: Workload, ms: List[dict]) -> str:
    """One scheme on one workload, as the row shows it."""
    if w.metric == "goodput":
        key = f"goodput_{w.window[0]:g}"
        lo = mean(min(m[key]) if m[key] else math.nan for m in ms)
        s = f"{headline(w, ms):.1f} Gbps (slowest flow {lo:.1f})"
    elif w.metric == "incast":
        s = f"done in {headline(w, ms):.2f} ms"
        unfinished = sum(m["unfinished"] for m in ms)
        if unfinished:
            s += f" ({unfinished} flows unfinished)"
    else:
        parts = []
        for name, _, _ in SIZE_CLASSES:
            p50 = mean(m[f"fct_p50_{name}"] for m in ms)
            p99 = mean(m[f"fct_p99_{name}"] for m in ms)
            parts.append(f"{name} {_fmt(p50, 0)}/{_fmt(p99, 0)}")
        s = "FCT p50/p99 µs: " + ", ".join(parts)
        unfinished = sum(m["unfinished"] for m in ms)
        if unfinished:
            s += f" ({unfinished} unfinished)"
    return f"{s}; {_cost(ms)}"


def out_dir() -> Path:
    """Where the chart goes: ``$BRAID_REPRODUCE_OUT``, else ``./braid-reproduce``."""
    return Path(os.environ.get("BRAID_REPRODUCE_OUT") or "braid-reproduce")


def chart(table: Dict[Tuple[str, str], float], path: Path) -> Path:
    """One panel per workload: each scheme's headline number, DCQCN's as a dashed line."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    wls = [w for w in WORKLOADS if any((w.label, s) in table for s in SCHEMES)]
    cols = 4
    rows_n = max(1, math.ceil(len(wls) / cols))
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.4 * rows_n), squeeze=False)
    for ax in axes.flat[len(wls):]:
        ax.axis("off")
    for ax, w in zip(axes.flat, wls):
        names = [s for s in SCHEMES if (w.label, s) in table]
        vals = [table[(w.label, s)] for s in names]
        ax.bar(range(len(names)), vals, color=["#888888" if s in ("DCQCN", "ECMP + IRN") else "#8e5fb0" if s in SWITCH_SIDE else "#3b75af" if s.startswith("partition") else "#d1802f" if s.startswith("Virtuoso") else "#4f9a4f" for s in names])
        base = table.get((w.label, "DCQCN"))
        if base is not None and not math.isnan(base):
            ax.axhline(base, color="k", ls="--", lw=0.8)
        ax.set_xticks(range(len(names)), [n.replace("partition-", "part-").replace(" dynamic", " dyn").replace(" static", " st").replace(", capacities given", " (caps)").replace(" + IRN", "+IRN") for n in names], rotation=45, ha="right", fontsize=7)
        unit = {"goodput": "total goodput (Gbps) ↑", "incast": "incast completion (ms) ↓", "fct": "≥1MB flows p99 FCT (µs) ↓"}[w.metric]
        ax.set_title(f"{w.label}\n{unit}", fontsize=8.5)
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle("multipath schemes side by side (mean over seeds; dashed: single-path DCQCN)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path


#: Host-side multipath and per-packet switch schemes: on the testbed, where single-path DCQCN's
#: five flows collide on four spines, each should beat it (per-flow WCMP and flowlets without
#: gaps need not: on a symmetric fabric they are ECMP with another hash).
BEATS_DCQCN_ON_TESTBED = tuple(x for x in MULTIPATH if x not in ("WCMP", "WCMP + IRN", "flowlets", "flowlets + IRN"))

_SYM = "two-ToR permutation"
_ASYM = "two-ToR asymmetric (one spine downlink at 10G)"
_DOWN = "two-ToR, spine link down at 5 ms"
_FAILOVER = "two-ToR, spine link down at 5 ms, failover"

#: Orderings the baselines' papers claim, judged on braid's runs: (workload, scheme) should beat
#: (workload, scheme), and where the claim comes from. Judged on the workload's headline number,
#: except the failover claims, judged on the slowest flow's goodput (:data:`SLOWEST`): what
#: rerouting rescues is the flows hashed onto the dead link; the total can fall when the
#: rerouted flows collide with the others on fewer spines. The direction is the verdict; the
#: magnitude (braid's relative difference) is reported beside it, not judged: none of these
#: papers measured this fabric.
CLAIMS: Tuple[Tuple[Tuple[str, str], Tuple[str, str], str], ...] = (
    ((_SYM, "spraying + IRN"), (_SYM, "ECMP + IRN"), "per-packet spraying removes ECMP's flow collisions (DRILL, SIGCOMM '17; Presto)"),
    ((_SYM, "adaptive + IRN"), (_SYM, "ECMP + IRN"), "adaptive routing beats ECMP on a symmetric fabric (DRILL, SIGCOMM '17)"),
    ((_ASYM, "WCMP"), (_ASYM, "DCQCN"), "capacity weights beat ECMP's equal split on an asymmetric fabric (WCMP, EuroSys '14)"),
    ((_ASYM, "adaptive + IRN"), (_ASYM, "spraying + IRN"), "load-aware choice beats oblivious spraying under asymmetry (CONGA, SIGCOMM '14; DRILL §5)"),
    ((_FAILOVER, "DCQCN"), (_DOWN, "DCQCN"), "rerouting after detection rescues the flows on a failed link (BFD, RFC 5880)"),
    ((_FAILOVER, "ECMP + IRN"), (_DOWN, "ECMP + IRN"), "the same with selective repeat"),
)


SLOWEST = (_FAILOVER,)


def slowest_flow(w: Workload, ms: List[dict]) -> float:
    """The slowest flow's goodput over the workload's window (Gbps; mean over seeds)."""
    key = f"goodput_{w.window[0]:g}"
    return mean(min(m[key]) if m[key] else math.nan for m in ms)


def claim_rows(table: Dict[Tuple[str, str], float], m: Optional[Dict[str, List[dict]]] = None) -> List[Row]:
    """One row per claim whose two runs are present: direction judged, magnitude beside it."""
    by_label = {w.label: w for w in WORKLOADS}
    rows = []
    for a, b, source in CLAIMS:
        if a not in table or b not in table:
            continue
        w = by_label[a[0]]
        x, y = table[a], table[b]
        if a[0] in SLOWEST and m is not None:
            x = slowest_flow(w, m[f"{a[0]} | {a[1]}"])
            y = slowest_flow(by_label[b[0]], m[f"{b[0]} | {b[1]}"])
            source += " (slowest flow's goodput, Gbps)"
        if math.isnan(x) or math.isnan(y):
            ok, rel = None, math.nan
        else:
            ok = x > y if higher_is_better(w) else x < y
            rel = (x / y - 1) * 100 if y else math.inf
        where = a[1] if a[0] == b[0] else a[0]
        other = b[1] if a[0] == b[0] else b[0]
        rows.append(Row(f"{a[0]}: {a[1]} vs {b[1]}" if a[0] == b[0] else f"{a[1]}: {a[0]} vs {b[0]}", f"{where} better than {other}: {source}", f"{_fmt(x, 2)} vs {_fmt(y, 2)} ({rel:+.1f}%)", ok, "magnitude not judged (no paper number for this fabric)", braid_value=rel))
    return rows


def summarize(m: Dict[str, List[dict]], write_chart: bool = True) -> List[Row]:
    rows: List[Row] = []
    table: Dict[Tuple[str, str], float] = {}
    for w in WORKLOADS:
        present = [s for s in SCHEMES if f"{w.label} | {s}" in m]
        if not present:
            continue
        for s in present:
            table[(w.label, s)] = headline(w, m[f"{w.label} | {s}"])
        base = table.get((w.label, "DCQCN"))
        for s in present:
            ms = m[f"{w.label} | {s}"]
            ok: Optional[bool] = None
            paper = "-"
            note = ""
            if s != "DCQCN" and base is not None:
                x = table[(w.label, s)]
                better = x > base if higher_is_better(w) else x < base
                rel = x / base - 1 if base else math.nan
                note = f"{rel:+.0%} vs DCQCN"
                if w.label == _SYM and s in BEATS_DCQCN_ON_TESTBED:
                    # Every connection-spreading scheme beats single-path DCQCN's total goodput
                    # on the testbed (ECMP collisions leave a spine idle).
                    paper, ok = "> DCQCN", better
            rows.append(Row(f"{w.label}: {s}", paper, describe(w, ms), ok, note))
        # Who wins this workload, and by how much.
        best = (max if higher_is_better(w) else min)(present, key=lambda s: table[(w.label, s)] if not math.isnan(table[(w.label, s)]) else (-math.inf if higher_is_better(w) else math.inf))
        rows.append(Row(f"{w.label}: best", "-", f"{best} ({_fmt(table[(w.label, best)], 2)})"))
    rows.extend(claim_rows(table, m))
    if write_chart and table:
        try:
            path = chart(table, out_dir() / "multipath-compare.png")
            rows.append(Row("chart", "-", str(path.resolve())))
        except OSError as e:  # an unwritable folder costs the figure, not the table
            rows.append(Row("chart", "-", f"not written: {e}"))
    return rows


@experiment(
    "multipath/compare",
    "beyond the papers (issues 13, 27): single-path DCQCN, ECMP/WCMP/flowlets/spraying/adaptive routing on RC and IRN, data partition, Virtuoso, MP-RDMA",
    "symmetric, asymmetric and leaf-spine fabrics × permutation, incast, web-search 30/70%, failed link (with and without failover) and lossy link; goodput, FCT, retransmissions, QPs, cache misses, CPU/GB; the baselines' claimed orderings",
    _runs,
    cost="slow",
    doc=DOC,
    scenarios=tuple(sorted({w.scenario for w in WORKLOADS})),
)
def _compare(m: Dict[str, List[dict]]) -> List[Row]:
    return summarize(m)

"""Virtuoso (Tian, Zhang, Feng, Zhang: software multipath RDMA): §4.3-§4.6, paper vs braid.

Each experiment is one scenario file of ``experiments/multipath/virtuoso-*.toml`` (their headers
say what they model and how they are scaled down: MB flows instead of the paper's GB, a mouse
every 2 ms instead of every 2 s) and one override per point of its sweep. The paper's figures give
shapes, not numbers we could read (Fig. 5-8), except Table 2 (trunk sizes); docs/virtuoso.md
discusses what does not reproduce and why.
"""

from __future__ import annotations

import math
import statistics
from typing import Dict, List

from .registry import Row, Run, experiment

DOC = "docs/virtuoso.md (Measured)"

PATHS_TOML = "multipath/virtuoso-paths.toml"
TRUNK_TOML = "multipath/virtuoso-trunk.toml"
MICE_TOML = "multipath/virtuoso-mice.toml"
CPU_TOML = "multipath/virtuoso-cpu.toml"

PATHS = (1, 2, 4, 6, 8, 10)
#: The paper's Table 2 (bytes): paths -> (max, avg).
TABLE2 = {1: (700417, 700417), 2: (1300482, 650241), 4: (2537172, 634293), 6: (4405660, 734280), 8: (9371656, 1171457), 9: (18984993, 2109400)}


def mw(paths: int, **kw) -> str:
    """The override selecting Virtuoso with ``paths`` paths (and more keys)."""
    extra = "".join(f",{k}={v}" for k, v in kw.items())
    return f"middleware.default=[{{kind=\"virtuoso\",paths={paths}{extra}}}]"


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def _counters(res, label_prefix: str, host: int = 0) -> dict:
    """The virtuoso layer's counters (``virtuoso_*`` columns) of a tenant on ``host``."""
    out = {}
    for row in res.tenants.iter_rows(named=True):
        if row["host"] == host and row["label"].startswith(label_prefix):
            for k, v in row.items():
                if k.startswith("virtuoso_") or k.startswith("cpu_ns"):
                    out[k] = _num(v)
    return out


def measure_flows(res) -> dict:
    """FCT (ms) of every flow in id order (NaN: unfinished), and each traffic table's counters."""
    f = res.flows
    fct = [_num(x) / 1e9 for x in f["fct_ps"].to_list()]
    return {
        "fct_ms": fct,
        "size": [int(x) for x in f["size"].to_list()],
        "t0": _counters(res, "traffic[0]"),
        "t1": _counters(res, "traffic[1]"),
    }


def measure_app(res) -> dict:
    """The write_bw client's CPU (ns in all, per message, the virtuoso layer's) and goodput."""
    out = _counters(res, "apps[0].client")
    for row in res.tenants.iter_rows(named=True):
        if row["label"] == "apps[0].client":
            for k in ("goodput_gbps", "msg_rate_mps", "posts", "polls"):
                if k in row:
                    out[k] = _num(row[k])
    return out


def _one(m: Dict[str, List[dict]], label: str) -> dict:
    return m[label][0]


def _ms(x: float) -> str:
    return "unfinished" if math.isnan(x) else f"{x:.2f}"


# ---------------------------------------------------------------- §4.3 multi-path utilization

SIZES = ("1MB", "16MB")


def _paths_runs(full: bool) -> List[Run]:
    runs = [Run(f"{n} paths", PATHS_TOML, 1, measure_flows, (mw(n),)) for n in PATHS]
    runs.append(Run("raw", PATHS_TOML, 1, measure_flows, ('middleware.default=["raw"]',)))
    for s in SIZES:
        for n in (1, 10):
            runs.append(Run(f"{s} {n} paths", PATHS_TOML, 1, measure_flows, (mw(n), f'traffic[0].flows[0].size="{s}"')))
    return runs


@experiment(
    "virtuoso/paths",
    "Virtuoso §4.3, Fig. 5 and 6",
    "FCT of one flow over 1-10 core paths, core links a tenth of the host links",
    _paths_runs,
    doc=DOC,
    scenarios=(PATHS_TOML,),
)
def _paths(m: Dict[str, List[dict]]) -> List[Row]:
    fct = [_one(m, f"{n} paths")["fct_ms"][0] for n in PATHS]
    raw = _one(m, "raw")["fct_ms"][0]
    falls = all(b < a for a, b in zip(fct, fct[1:]))
    ten = _one(m, "10 paths")["t0"]
    per_path = [ten.get(f"virtuoso_path{i}_bytes", 0.0) for i in range(10)]
    rows = [
        Row("FCT of a 4 MB flow over 1/2/4/6/8/10 paths (ms)", "falls as paths are added (Fig. 5, 100 GB)", " / ".join(_ms(x) for x in fct), falls),
        Row("raw RDMA (one QP, one path)", "-", f"{_ms(raw)} ms", None, "the 1-path Virtuoso row is the same transfer with one QP"),
        Row(
            "speed-up 10 paths vs 1",
            "≈ paths (the core is the bottleneck)",
            f"×{fct[0] / fct[-1]:.2f}",
            fct[0] / fct[-1] > 3.0,
            "512 KiB probes per path (4.2 ms at 1 Gbit/s) precede the first split; 4 MB over 10 Gbit/s of core is 3.2 ms",
        ),
        Row(
            "bytes per path at 10 paths (min / max, kB)",
            "all paths used",
            f"{min(per_path) / 1e3:.0f} / {max(per_path) / 1e3:.0f}",
            min(per_path) > 0.5 * max(per_path),
        ),
    ]
    for s in SIZES:
        a, b = _one(m, f"{s} 1 paths")["fct_ms"][0], _one(m, f"{s} 10 paths")["fct_ms"][0]
        rows.append(Row(f"{s} flow: FCT 1 → 10 paths (ms)", "falls at every size (Fig. 6: 10 MB-100 GB)", f"{_ms(a)} → {_ms(b)} (×{a / b:.2f})", b < a))
    return rows


# ---------------------------------------------------------------- §4.4 trunk size (Table 2)

TRUNK_PATHS = (1, 2, 4, 6, 8, 10)


def _trunk_override(n: int) -> str:
    caps = ",".join(['"1Gbps"'] * n)
    return mw(n, lossy="true", retry_cnt=0, capacities=f"[{caps}]")


def _trunk_runs(full: bool) -> List[Run]:
    return [Run(f"{n} paths", TRUNK_TOML, 1, measure_flows, (_trunk_override(n),)) for n in TRUNK_PATHS]


@experiment(
    "virtuoso/trunk",
    "Virtuoso §4.4, Table 2",
    "lossy core: the trunk size chunk-size congestion avoidance finds, per number of paths",
    _trunk_runs,
    doc=DOC,
    scenarios=(TRUNK_TOML,),
)
def _trunk(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    sums = {}
    for n in TRUNK_PATHS:
        r = _one(m, f"{n} paths")
        c = r["t0"]
        t = [c.get(f"virtuoso_path{i}_trunk", float("nan")) for i in range(n)]
        sums[n] = sum(t)
        paper = TABLE2.get(n) or TABLE2.get(9 if n == 10 else n)
        ptxt = f"{paper[0]:,} / {paper[1]:,}" + (" (9 paths)" if n == 10 else "") if paper else "-"
        done = all(not math.isnan(x) for x in r["fct_ms"])
        rows.append(
            Row(
                f"{n} paths: trunk sum / mean (B); RetryExceeded; FCTs (ms)",
                ptxt,
                f"{sums[n]:,.0f} / {sums[n] / n:,.0f}; {c.get('virtuoso_retry_exceeded', 0):.0f}; " + " ".join(_ms(x) for x in r["fct_ms"]),
                None if done else False,
                "every flow finished and was delivered whole" if done else "a flow did not finish",
            )
        )
    rows.append(
        Row(
            "sum of trunk sizes grows with paths",
            "yes (Max Size 0.7 MB at 1 path → 19 MB at 9)",
            " → ".join(f"{sums[n] / 1e6:.2f}" for n in TRUNK_PATHS) + " MB",
            all(b >= a for a, b in zip([sums[n] for n in TRUNK_PATHS], [sums[n] for n in TRUNK_PATHS][1:])),
            "does not reproduce below 10 paths: the ToR's shared buffer takes every path's burst, braid's RNIC recovers most losses by go-back-N rather than RetryExceeded; at 10 paths the core matches the host link and nothing is lost: docs/virtuoso.md",
        )
    )
    return rows


# ---------------------------------------------------------------- §4.5 mice beside an elephant


def _mice_runs(full: bool) -> List[Run]:
    return [
        Run("split", MICE_TOML, 1, measure_flows),
        Run("not split", MICE_TOML, 1, measure_flows, ('traffic[0].middleware=[{kind="virtuoso",paths=1}]',)),
        Run("no elephant", MICE_TOML, 1, measure_flows, ('traffic[0].flows[0].size="1B"',)),
    ]


def _mice_stats(r: dict) -> tuple:
    fct = [x for x, s in zip(r["fct_ms"], r["size"]) if s == 256_000 and not math.isnan(x)]
    big = [x for x, s in zip(r["fct_ms"], r["size"]) if s != 256_000]
    q = sorted(fct)
    p99 = q[min(len(q) - 1, int(math.ceil(0.99 * len(q))) - 1)] if q else float("nan")
    return (statistics.mean(fct) if fct else float("nan"), p99, len(fct), big[0] if big else float("nan"))


@experiment(
    "virtuoso/mice",
    "Virtuoso §4.5, Fig. 7",
    "256 KB mice every 5 ms beside an elephant split over 10 paths or not",
    _mice_runs,
    doc=DOC,
    scenarios=(MICE_TOML,),
)
def _mice(m: Dict[str, List[dict]]) -> List[Row]:
    s_mean, s_p99, s_n, s_el = _mice_stats(_one(m, "split"))
    n_mean, n_p99, n_n, n_el = _mice_stats(_one(m, "not split"))
    a_mean, a_p99, _, _ = _mice_stats(_one(m, "no elephant"))
    return [
        Row("mice FCT alone: mean / p99 (ms)", "-", f"{a_mean:.2f} / {a_p99:.2f}"),
        Row("mice FCT, elephant not split: mean / p99 (ms)", "elephant blocks the mice", f"{n_mean:.2f} / {n_p99:.2f} ({n_n} mice)", n_mean > 1.3 * a_mean),
        Row("mice FCT, elephant split over 10 paths: mean / p99 (ms)", "lower than not split", f"{s_mean:.2f} / {s_p99:.2f} ({s_n} mice)", s_mean < n_mean and s_n == n_n),
        Row("elephant FCT: split / not split (ms)", "-", f"{_ms(s_el)} / {_ms(n_el)}", s_el < n_el),
    ]


# ---------------------------------------------------------------- §4.6 CPU overhead

CPU_SIZES = ("4KB", "256KB", "4MB")
CPU_MECHS = {"raw": ('middleware.default=["raw"]',), "virtuoso 1 path": (mw(1),), "virtuoso 4 paths": (mw(4),)}


def _cpu_runs(full: bool) -> List[Run]:
    runs = []
    for k, ov in CPU_MECHS.items():
        for s in CPU_SIZES:
            runs.append(Run(f"{k} {s}", CPU_TOML, 1, measure_app, ov + (f'apps[0].size="{s}"',)))
        runs.append(Run(f"{k} connect", CPU_TOML, 1, measure_app, ov + ('apps[0].size="4KB"', "apps[0].iterations=1")))
    return runs


def _cpu_txt(x: float) -> str:
    return "-" if math.isnan(x) else (f"{x / 1000:,.1f} µs" if x >= 10_000 else f"{x:,.0f} ns")


@experiment(
    "virtuoso/cpu",
    "Virtuoso §4.6, Fig. 8",
    "CPU per operation and per connect: Virtuoso vs plain verbs (host CPU cost model)",
    _cpu_runs,
    doc=DOC,
    scenarios=(CPU_TOML,),
)
def _cpu(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    per = {}
    for k in CPU_MECHS:
        vals = []
        for s in CPU_SIZES:
            r = _one(m, f"{k} {s}")
            per[(k, s)] = r.get("cpu_ns_per_msg", float("nan"))
            layer = r.get("cpu_ns_virtuoso", float("nan")) / 200
            vals.append(f"{s} {_cpu_txt(per[(k, s)])}" + ("" if math.isnan(layer) else f" (layer {_cpu_txt(layer)})"))
        # A run of one 4 KB message: its CPU is the setup plus that one message.
        c1 = _one(m, f"{k} connect")
        connect = c1.get("cpu_ns", float("nan")) - per[(k, "4KB")]
        per[(k, "connect")] = connect
        rows.append(Row(f"{k}: CPU per message", "-", "; ".join(vals), None, "client's cpu_ns_per_msg; (layer): the virtuoso layer's own share"))
        rows.append(Row(f"{k}: CPU per connect (setup, one QP)", "-", _cpu_txt(connect)))
    small_more = per[("virtuoso 4 paths", "4KB")] >= per[("raw", "4KB")]
    big = per[("virtuoso 4 paths", "4MB")] / per[("raw", "4MB")]
    wire_4mb_ns = 4e6 * 8 / 40e9 * 1e9
    rows.append(
        Row(
            "4 paths vs raw, 4 MB: CPU per message, and as a share of its wire time",
            "negligible overhead for large messages",
            f"×{big:.2f}; {per[('virtuoso 4 paths', '4MB')] / wire_4mb_ns:.2%} of 0.8 ms",
            per[("virtuoso 4 paths", "4MB")] < 0.01 * wire_4mb_ns and small_more,
            "CPU grows with paths for small messages (more WRs per message) and is amortized by large ones",
        )
    )
    rows.append(Row("connect: 4 paths vs raw", "more CPU with more paths", f"{_cpu_txt(per[('virtuoso 4 paths', 'connect')])} vs {_cpu_txt(per[('raw', 'connect')])}", per[("virtuoso 4 paths", "connect")] > per[("raw", "connect")]))
    return rows

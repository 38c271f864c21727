"""Data partition (Wang, Jiang, Ma, Tian, Bai, Zhang: "RDMA Load Balancing via Data Partition"):
paper vs braid.

``partition/twotier`` is the paper's experiment 1 (§IV, Figs. 7 and 10): 10 MB from host 0 to
host 19 beside 200 background flows on the two-tier topology of 20 hosts and 10 switches, the
transfer through the ``partition`` layer with 1-16 QPs and 1K-128K chunks
(experiments/multipath/partition-twotier.toml). The paper's numbers (one run each): 1 QP
20,639,592 ns whatever the chunk size; 2 QPs 12.53-12.65 ms for 1K-32K chunks (-39%), 15.0 ms at
64K and 17.8 ms at 128K; "up to 81.03%" less in the best case; flat up to 32K chunks, worse above.
braid reports the mean of several background seeds per cell (one seed is noisy: which path the
background congests changes with every chunk size's timing).

``partition/routers`` and ``partition/large`` are experiments 2 and 3 (Figs. 8/11 and 9/12): the
same transfer and background on the paper's second topology (20 hosts on 5 routers linked to each
other, no upper tier: experiments/multipath/partition-routers.toml) and third (128 hosts, 8
leaves of 16 and 4 spines: partition-large.toml). The paper's numbers: topology 2, 1 QP 17.77 ms
(~3 ms below topology 1), the same trends, 128K chunks steady only beyond 3 QPs and 16K/32K with
almost no gain from 2 to 3 QPs; topology 3, the trends of topology 1's first half, times ~0.2 ms
above topology 1's. Each also runs topology 1 at 1 and 2 QPs (labels ``t1 ...``, same seeds) so
the cross-topology rows compare braid with braid.

``partition/assignment`` is Figs. 2 and 3: static (even) vs dynamic (completion-driven) assignment
when one of two paths has a tenth of the rate (experiments/multipath/partition-slowpath.toml).

docs/partition.md discusses where braid differs and why.
"""

from __future__ import annotations

import math
from typing import Dict, List

from .metrics import mean
from .registry import Row, Run, experiment

DOC = "docs/partition.md (Reproducing the paper)"
TWOTIER = "multipath/partition-twotier.toml"
SLOWPATH = "multipath/partition-slowpath.toml"
ROUTERS = "multipath/partition-routers.toml"
LARGE = "multipath/partition-large.toml"

QUICK_QPS = (1, 2, 4)
QUICK_CHUNKS = ("4KB", "32KB", "128KB")
FULL_QPS = (1, 2, 3, 4, 5, 8, 16)
FULL_CHUNKS = ("1KB", "2KB", "4KB", "8KB", "16KB", "32KB", "64KB", "128KB")
LITERAL_QPS = (1, 2, 4)

#: The paper's Fig. 7/10 numbers (ms) that its text gives.
PAPER_1QP_MS = 20.64
#: Topology 2 (Fig. 8): "the total transmission time of 10MB data is 17772320 ns" with one QP.
PAPER_ROUTERS_1QP_MS = 17.77
PAPER_2QP_MS = {"1KB-32KB": "12.53-12.65", "64KB": "15.01", "128KB": "17.82"}


def _mw(qps: int, chunk: str, assign: str = "dynamic", window: str = "") -> str:
    w = f',window="{window}"' if window else ""
    return f'traffic[0].middleware=[{{kind="partition",qps={qps},chunk="{chunk}",assign="{assign}"{w}}}]'


def measure_transfer(res) -> dict:
    """The measured transfer (flow 0): completion time, and the partition layer's counters on
    its sender (chunks per member QP, re-sends) with the CPU the layer charged."""
    f = res.flows.filter(res.flows["flow"] == 0)
    fct = f["fct_ps"][0] if f.height else None
    out: dict = {"fct_ms": float("nan") if fct is None or fct < 0 else fct / 1e9}
    for row in res.tenants.iter_rows(named=True):
        if row["label"] == "traffic[0].sender":
            chunks = [row.get(f"partition_chunks_q{i}") for i in range(16)]
            out["chunks"] = [float(c) for c in chunks if c is not None and not math.isnan(c)]
            out["resent"] = float(row.get("partition_resent") or 0.0)
            out["cpu_ns_partition"] = float(row.get("cpu_ns_partition") or 0.0)
    return out


def _kb(c: str) -> int:
    return int(c[:-2])


def _grid(scenario: str, full: bool, seeds: range) -> List[Run]:
    """QPs x chunk sizes x background seeds on one topology (the paper's Figs. 7-12 grid)."""
    qps, chunks = (FULL_QPS, FULL_CHUNKS) if full else (QUICK_QPS, QUICK_CHUNKS)
    return [Run(f"q{q} {c}", scenario, s, measure_transfer, (_mw(q, c),)) for q in qps for c in chunks for s in seeds]


def _twotier_runs(full: bool) -> List[Run]:
    runs = _grid(TWOTIER, full, range(1, (4 if full else 2) + 1))
    chunks = FULL_CHUNKS if full else QUICK_CHUNKS
    if full:
        # Algorithm 1 literally: one chunk per QP until it completes (window = chunk).
        runs += [Run(f"lit q{q} {c}", TWOTIER, s, measure_transfer, (_mw(q, c, window=c),)) for q in LITERAL_QPS for c in chunks for s in range(1, 3)]
    return runs


def _cell(m: Dict[str, List[dict]], q: int, c: str, prefix: str = "") -> float:
    return mean(r["fct_ms"] for r in m[f"{prefix}q{q} {c}"])


@experiment(
    "partition/twotier",
    "Data partition §IV experiment 1, Figs. 7 and 10",
    "10 MB host 0 -> 19 beside 200 background flows, two-tier 20 hosts + 10 switches; QPs x chunk size",
    _twotier_runs,
    doc=DOC,
    scenarios=(TWOTIER,),
)
def _twotier(m: Dict[str, List[dict]]) -> List[Row]:
    main = [k for k in m if not k.startswith("lit ")]
    qps = sorted({int(k.split()[0][1:]) for k in main})
    chunks = sorted({k.split()[1] for k in main}, key=_kb)
    small = [c for c in chunks if _kb(c) <= 32]
    rows: List[Row] = []
    one = mean(_cell(m, 1, c) for c in chunks)
    two = mean(_cell(m, 2, c) for c in small)
    cut = 1 - two / one
    rows.append(Row("1 QP: completion time (mean over chunk sizes)", f"{PAPER_1QP_MS:.2f} ms", f"{one:.2f} ms", None, "paper: 200 background flows of unstated sizes; braid: web-search sizes at 90% load", paper_value=PAPER_1QP_MS, braid_value=one))
    one_spread = max(_cell(m, 1, c) for c in chunks) / min(_cell(m, 1, c) for c in chunks) - 1
    rows.append(Row("1 QP: chunk size has little effect", "all 20.64 ms", f"max/min {one_spread:+.0%}", one_spread <= 0.1))
    rows.append(Row("1 -> 2 QPs, chunks <= 32K: completion time falls", f"-39% ({PAPER_2QP_MS['1KB-32KB']} ms)", f"{-cut:+.0%} ({two:.2f} ms)", cut > 0, paper_value=-39.0, braid_value=-cut * 100))
    best = min(_cell(m, q, c) for q in qps if q > 1 for c in chunks)
    rows.append(Row("best multi-QP cell vs 1 QP", "up to -81%", f"{best / one - 1:+.0%} ({best:.2f} ms)", best < one, paper_value=-81.0, braid_value=(best / one - 1) * 100))
    multi = [q for q in qps if q >= 2]
    if len(small) >= 2:
        spread = max(max(_cell(m, q, c) for c in small) / min(_cell(m, q, c) for c in small) - 1 for q in multi)
        rows.append(Row(f"2+ QPs: chunks {small[0]}-{small[-1]} flat (largest max/min over QP counts)", "within 1% at 2 QPs", f"{spread:+.1%}", spread <= 0.1))
    if chunks[-1] != "32KB" and "32KB" in chunks:
        worse = [_cell(m, q, chunks[-1]) / _cell(m, q, "32KB") - 1 for q in multi]
        at2 = _cell(m, 2, chunks[-1]) / _cell(m, 2, "32KB") - 1
        rows.append(Row(f"2+ QPs: {chunks[-1]} vs 32KB chunks: worse above 32K", "+41% at 2 QPs (17.82 vs 12.6 ms)", f"{at2:+.1%} at 2 QPs, {min(worse):+.1%} to {max(worse):+.1%}", min(worse) > 0, "see docs/partition.md", paper_value=41.0, braid_value=at2 * 100))
    for q in qps:
        cells = ", ".join(f"{c} {_cell(m, q, c):.2f}" for c in chunks)
        rows.append(Row(f"{q} QP{'s' if q > 1 else ''}: ms by chunk", "Fig. 7/10", cells))
    lit = sorted({int(k.split()[1][1:]) for k in m if k.startswith("lit ")})
    for q in lit:
        cells = ", ".join(f"{c} {_cell(m, q, c, 'lit '):.2f}" for c in chunks)
        rows.append(Row(f"window = chunk (one chunk per QP), {q} QP{'s' if q > 1 else ''}: ms by chunk", "Fig. 7/10", cells))
    return rows


# ---------------------------------------------------------------- topologies 2 and 3

#: Topology 1 runs beside each other topology's grid, so that "lower/higher than topology 1"
#: compares braid with braid (1 and 2 QPs, 32K chunks, the same background seeds).
REF_QPS = (1, 2)


def _topo_seeds(full: bool) -> range:
    """Background seeds for topologies 2 and 3: more than topology 1's, since a run costs ~1 s
    and one seed's few heavy background flows decide whether they meet the transfer (on the
    128-host fabric, seed 1 has 2 QPs slower than 1; 16 seeds give -15%)."""
    return range(1, (8 if full else 4) + 1)


def _with_reference(scenario: str, full: bool) -> List[Run]:
    seeds = _topo_seeds(full)
    grid = _grid(scenario, full, seeds)
    if not full:
        # Quick: one QP only at 32K (one QP carries the chunks back to back whatever their size:
        # --full shows it), to keep the quick sweep near half a minute on 2 cores.
        grid = [r for r in grid if not r.label.startswith("q1 ") or r.label == "q1 32KB"]
    ref = [Run(f"t1 q{q} 32KB", TWOTIER, s, measure_transfer, (_mw(q, "32KB"),)) for q in REF_QPS for s in seeds]
    return grid + ref


def _routers_runs(full: bool) -> List[Run]:
    return _with_reference(ROUTERS, full)


def _large_runs(full: bool) -> List[Run]:
    return _with_reference(LARGE, full)


def _axes(m: Dict[str, List[dict]]):
    main = [k for k in m if k.startswith("q")]
    qps = sorted({int(k.split()[0][1:]) for k in main})
    chunks = sorted({k.split()[1] for k in main}, key=_kb)
    return qps, chunks, [c for c in chunks if _kb(c) <= 32]


def _shape_rows(m: Dict[str, List[dict]], paper_one: str, paths: int) -> List[Row]:
    """The rows topologies 2 and 3 share with topology 1's (the paper: "the trend of the curves
    ... is the same"): 1 QP, 1 -> 2 QPs, the best cell, QPs beyond the topology's ``paths``
    equal-cost paths, flat up to 32K, worse above."""
    qps, chunks, small = _axes(m)
    ones = [c for c in chunks if f"q1 {c}" in m]
    rows: List[Row] = []
    one = mean(_cell(m, 1, c) for c in ones)
    rows.append(Row(f"1 QP: completion time (mean over {len(ones)} chunk size{'s' if len(ones) > 1 else ''})", paper_one, f"{one:.2f} ms"))
    if len(ones) > 1:
        spread = max(_cell(m, 1, c) for c in ones) / min(_cell(m, 1, c) for c in ones) - 1
        rows.append(Row("1 QP: chunk size has little effect", "as topology 1 (all 20.64 ms there)", f"max/min {spread:+.0%}", spread <= 0.1))
    if 2 in qps:
        two = mean(_cell(m, 2, c) for c in small)
        rows.append(Row("1 -> 2 QPs, chunks <= 32K: completion time falls", "falls, as topology 1's (-39% there)", f"{two / one - 1:+.0%} ({two:.2f} ms)", two / one <= 0.95))
    best_q, best_c = min(((q, c) for q in qps if q > 1 for c in chunks), key=lambda qc: _cell(m, *qc))
    best = _cell(m, best_q, best_c)
    rows.append(Row("best multi-QP cell vs 1 QP", "topology 1: up to -81%", f"{best / one - 1:+.0%} ({best:.2f} ms: {best_q} QPs, {best_c})", None))
    beyond = [q for q in qps if q > paths]
    if paths in qps and beyond:
        at = mean(_cell(m, paths, c) for c in small)
        most = mean(_cell(m, beyond[-1], c) for c in small)
        rows.append(Row(f"{paths} -> {beyond[-1]} QPs, chunks <= 32K ({paths} equal-cost paths)", "steady beyond a few QPs: limited paths", f"{most / at - 1:+.0%} ({at:.2f} -> {most:.2f} ms)", most / at >= 0.9, "each QP runs its own DCQCN: see docs/partition.md"))
    multi = [q for q in qps if q >= 2]
    if len(small) >= 2:
        flat = max(max(_cell(m, q, c) for c in small) / min(_cell(m, q, c) for c in small) - 1 for q in multi)
        rows.append(Row(f"2+ QPs: chunks {small[0]}-{small[-1]} flat (largest max/min over QP counts)", "as topology 1 (within 1% at 2 QPs)", f"{flat:+.1%}", flat <= 0.1))
    if chunks[-1] != "32KB" and "32KB" in chunks:
        worse = [_cell(m, q, chunks[-1]) / _cell(m, q, "32KB") - 1 for q in multi]
        rows.append(Row(f"2+ QPs: {chunks[-1]} vs 32KB chunks: worse above 32K", "as topology 1 (+41% at 2 QPs there)", f"{min(worse):+.1%} to {max(worse):+.1%}", min(worse) > 0.05, "see docs/partition.md"))
    return rows


def _grid_rows(m: Dict[str, List[dict]], fig: str) -> List[Row]:
    qps, chunks, _ = _axes(m)
    return [Row(f"{q} QP{'s' if q > 1 else ''}: ms by chunk", fig, ", ".join(f"{c} {_cell(m, q, c):.2f}" for c in chunks if f"q{q} {c}" in m)) for q in qps]


def _vs_topology1(m: Dict[str, List[dict]], paper: str, ok) -> List[Row]:
    """This topology's 1- and 2-QP times against topology 1's, same seeds, 32K chunks."""
    rows = []
    for q in REF_QPS:
        here, t1 = _cell(m, q, "32KB"), _cell(m, q, "32KB", "t1 ")
        rows.append(Row(f"{q} QP{'s' if q > 1 else ''} vs topology 1 (32K chunks, same seeds)", paper if q == 1 else "—", f"{here / t1 - 1:+.0%} ({here:.2f} vs {t1:.2f} ms)", ok(here, t1) if q == 1 else None))
    return rows


@experiment(
    "partition/routers",
    "Data partition §IV experiment 2, Figs. 8 and 11",
    "10 MB host 0 -> 19 beside 200 background flows, 20 hosts on 5 routers linked to each other; QPs x chunk size",
    _routers_runs,
    doc=DOC,
    scenarios=(ROUTERS, TWOTIER),
)
def _routers(m: Dict[str, List[dict]]) -> List[Row]:
    qps, chunks, _ = _axes(m)
    rows = _shape_rows(m, f"{PAPER_ROUTERS_1QP_MS:.2f} ms", paths=3)
    rows[1:1] = _vs_topology1(m, f"-14% ({PAPER_ROUTERS_1QP_MS:.2f} vs {PAPER_1QP_MS:.2f} ms)", lambda here, t1: here < t1)
    mid = [c for c in ("16KB", "32KB") if c in chunks]
    if {2, 3} <= set(qps) and mid:
        gain = mean(_cell(m, 3, c) / _cell(m, 2, c) - 1 for c in mid)
        rows.append(Row(f"2 -> 3 QPs at {'/'.join(mid)} chunks", "almost no decrease (topology 1: a small one)", f"{gain:+.1%}", gain >= -0.05))
    return rows + _grid_rows(m, "Fig. 8/11")


@experiment(
    "partition/large",
    "Data partition §IV experiment 3, Figs. 9 and 12",
    "10 MB host 0 -> 19 beside 200 background flows, 128 hosts on 8 leaves x 4 spines; QPs x chunk size",
    _large_runs,
    doc=DOC,
    scenarios=(LARGE, TWOTIER),
)
def _large(m: Dict[str, List[dict]]) -> List[Row]:
    rows = _shape_rows(m, "~20.8 ms (topology 1's + ~0.2 ms)", paths=4)
    rows[1:1] = _vs_topology1(m, "+~1% (\"only a little increase ... about 200000 ns\")", lambda here, t1: abs(here / t1 - 1) <= 0.1)
    return rows + _grid_rows(m, "Fig. 9/12")


# ---------------------------------------------------------------- Figs. 2 and 3


def _assign_runs(full: bool) -> List[Run]:
    # One chunk per QP until it completes (window = chunk): the paper's Algorithm 1.
    return [Run(a, SLOWPATH, 1, measure_transfer, (_mw(2, "32KiB", a, window="32KiB"),)) for a in ("static", "dynamic")]


@experiment(
    "partition/assignment",
    "Data partition §III-B, Figs. 2 and 3",
    "static vs dynamic assignment, 4 MB over two QPs, one path at a tenth of the rate",
    _assign_runs,
    doc=DOC,
    scenarios=(SLOWPATH,),
)
def _assign(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    out = {}
    for a in ("static", "dynamic"):
        r = m[a][0]
        ch = r["chunks"]
        share = ch[1] / sum(ch)
        out[a] = (share, r["fct_ms"])
    (s_share, s_fct), (d_share, d_fct) = out["static"], out["dynamic"]
    rows.append(Row("static: slow path's share of the chunks", "even (Fig. 2)", f"{s_share:.0%}", abs(s_share - 0.5) < 0.02))
    rows.append(Row("dynamic: slow path's share of the chunks", "fewer (Fig. 3); issue: <= 1/5", f"{d_share:.0%}", d_share <= 0.2))
    rows.append(Row("completion time static vs dynamic", "static waits for the slow path", f"{s_fct:.2f} vs {d_fct:.2f} ms", s_fct > 2 * d_fct))
    return rows

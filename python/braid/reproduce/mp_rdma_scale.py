"""MP-RDMA (NSDI'18): OOO control on the testbed (Fig. 14) and the large-scale simulations
(Fig. 12b, Fig. 13), paper vs braid. The large ones are "slow" (a 320-host fabric): run them by
name or with `braid reproduce --all`."""

from __future__ import annotations

from typing import Dict, List

from .metrics import flow_goodput_gbps, mean, total_goodput_gbps
from .registry import Row, Run, experiment

DOC = "docs/mp-rdma.md"


def _seeds(full: bool, quick: int, paper: int) -> range:
    return range(1, (paper if full else quick) + 1)


# ---------------------------------------------------------------- §5.2.1 OOO control

# Goodput of the 5 flows at the ideal fair share (experiments/mp-rdma/ooo-normal.toml): 160 Gbps
# of paths (121 with path 4 at 1G) at 1000 payload bytes per 1062 on the wire.
OOO_CASES = {"normal": ("ooo-normal.toml", 150.6), "ECN mis-config": ("ooo-ecn-misconfig.toml", 150.6), "link degradation": ("ooo-link-degradation.toml", 113.9)}


def _measure_ooo(res) -> dict:
    return {"ood_p999": res.counters.get("mp_rdma_ood_p999", float("nan")), "gbps": total_goodput_gbps(res, 1.0, 4.0)}


def _ooo_runs(full: bool) -> List[Run]:
    runs = []
    for case, (file, _) in OOO_CASES.items():
        for delta in (0, 32) if not full else (0, 64, 32, 16):
            # The OOD tail after the first ms (the start-up's initial windows would dominate it).
            ov = (f"transport.mp_rdma.delta={delta}", "transport.mp_rdma.bitmap=16384", 'measure.transport_from="1ms"')
            runs += [Run(f"ood {case} {delta}", f"mp-rdma/{file}", s, _measure_ooo, ov) for s in _seeds(full, 1, 3)]
        for delta in (32, 0):
            ov = (f"transport.mp_rdma.delta={delta}", "transport.mp_rdma.bitmap=64")
            runs += [Run(f"tput {case} {delta}", f"mp-rdma/{file}", s, _measure_ooo, ov) for s in _seeds(full, 1, 3)]
    return runs


@experiment(
    "mp-rdma/ooo-control",
    "MP-RDMA §5.2.1, Fig. 14",
    "the testbed permutation with path 4 normal, ECN mis-configured, or degraded to 1G",
    _ooo_runs,
    doc=DOC + " (OOO control)",
)
def _ooo(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    paper_ood = {"normal": "-", "ECN mis-config": "179", "link degradation": "5324"}
    paper_cut = {"ECN mis-config": "~5x", "link degradation": "~50x"}
    paper_cut_value = {"ECN mis-config": 5.0, "link degradation": 50.0}
    for case in OOO_CASES:
        none = mean(r["ood_p999"] for r in m[f"ood {case} 0"])
        d32 = mean(r["ood_p999"] for r in m[f"ood {case} 32"])
        pv = float(paper_ood[case]) if paper_ood[case] != "-" else None
        rows.append(Row(f"{case}: 99.9th OOD without OOO control", paper_ood[case], f"{none:.0f}", None, "from 1 ms on (measure.transport_from); L = 16384", paper_value=pv, braid_value=none))
        if case in paper_cut:
            cut = none / max(d32, 1.0)
            rows.append(Row(f"{case}: OOD cut by delta = 32", paper_cut[case], f"{cut:.1f}x ({d32:.0f})", cut > 1.0, paper_value=paper_cut_value[case], braid_value=cut))
    paper_tput = {"normal": ("optimal", "-"), "ECN mis-config": ("optimal", "-25.1%"), "link degradation": ("-3.94%", "-67.5%")}
    # The paper's numbers as change vs ideal in %; "optimal" is 0.
    paper_tput_value = {"normal": (0.0, None), "ECN mis-config": (0.0, -25.1), "link degradation": (-3.94, -67.5)}
    lost = {}
    for case, (_, ideal) in OOO_CASES.items():
        with_c = mean(r["gbps"] for r in m[f"tput {case} 32"]) / ideal
        without = mean(r["gbps"] for r in m[f"tput {case} 0"]) / ideal
        p_with, p_without = paper_tput[case]
        v_with, v_without = paper_tput_value[case]
        # A loss of 0 cannot be matched within ±25%: "optimal" is judged by direction only.
        rows.append(Row(f"{case}: throughput vs ideal, L = 64, delta = 32", p_with, f"{with_c - 1:+.1%}", with_c > 0.9, paper_value=v_with or None, braid_value=(with_c - 1) * 100))
        if p_without != "-":
            lost[case] = without - 1
            rows.append(Row(f"{case}: the same without OOO control", p_without, f"{without - 1:+.1%}", without < with_c, paper_value=v_without, braid_value=(without - 1) * 100))
    if {"ECN mis-config", "link degradation"} <= set(lost):
        # The paper's order across the two cases: without control, the degraded link costs more
        # (-67.5%) than the mis-configured ECN (-25.1%). Judged on its own (the review found
        # each row's `without < with` check passing with this order reversed).
        deg, mis = lost["link degradation"], lost["ECN mis-config"]
        rows.append(Row("without OOO control: link degradation costs more than ECN mis-config", "-67.5% vs -25.1%", f"{deg:+.1%} vs {mis:+.1%}", deg < mis))
    return rows


# ---------------------------------------------------------------- §5.1.2 large-scale permutation

LARGE_DCQCN_ECN = ("switch.ecn.kmin=5KB", "switch.ecn.kmax=200KB", "switch.ecn.pmax=0.01")


def _measure_large(res) -> dict:
    return {"flows": flow_goodput_gbps(res, 10.0, 20.0)}


def _large_runs(full: bool) -> List[Run]:
    runs = []
    for s in _seeds(full, 1, 3):
        runs.append(Run("mp-rdma", "mp-rdma/large-permutation.toml", s, _measure_large, ("transport.kind=mp-rdma",)))
        runs.append(Run("dcqcn", "mp-rdma/large-permutation.toml", s, _measure_large, ("transport.kind=dcqcn",) + LARGE_DCQCN_ECN))
    return runs


@experiment(
    "mp-rdma/large-permutation",
    "MP-RDMA §5.1.2, Fig. 12b",
    "permutation of 160 flows on a 320-host leaf-spine (4 spines, 32 leaves, 40G/100G)",
    _large_runs,
    cost="slow",
    doc=DOC + " (Large-scale permutation)",
)
def _large(m: Dict[str, List[dict]]) -> List[Row]:
    mp = [g for r in m["mp-rdma"] for g in r["flows"]]
    dc = [g for r in m["dcqcn"] for g in r["flows"]]
    gain = mean(mp) / mean(dc) - 1
    slow = sum(g < 15 for g in dc) / len(dc)
    return [
        Row("MP-RDMA mean over DCQCN", "+34.78%", f"{gain:+.1%}", gain > 0, "DCQCN with its paper's ECN curve (Kmin 5 KB, Kmax 200 KB, Pmax 1%)", paper_value=34.78, braid_value=gain * 100),
        Row("MP-RDMA lowest connection (Gbps)", "32.95", f"{min(mp):.1f}", min(mp) > 0.8 * 35.1, paper_value=32.95, braid_value=min(mp)),
        Row("DCQCN connections under 15 Gbps", "many", f"{slow:.0%} (min {min(dc):.1f})", slow > 0),
        Row("mean goodput, MP-RDMA / DCQCN (Gbps)", "-", f"{mean(mp):.1f} / {mean(dc):.1f}", None),
    ]


# ---------------------------------------------------------------- §5.1.2 web-search FCT

FCT_LOADS_QUICK, FCT_LOADS_FULL = (0.5,), (0.3, 0.5, 0.7)


def _measure_fct(res) -> dict:
    import polars as pl

    f = res.flows.filter(pl.col("kind") == "flow")
    done = f.filter(pl.col("fct_ps") >= 0)
    small = done.filter(pl.col("size") < 100_000)
    large = done.filter(pl.col("size") > 10_000_000)
    us = lambda d: float(d["fct_ps"].mean()) / 1e6 if d.height else float("nan")  # noqa: E731
    return {"mean": us(done), "small": us(small), "large": us(large), "unfinished": f.height - done.height, "flows": f.height}


def _fct_runs(full: bool) -> List[Run]:
    return [
        Run(f"{kind} {load}", "mp-rdma/web-search-fct.toml", s, _measure_fct, (f"transport.kind={kind}", f"traffic[0].load={load}"))
        for load in (FCT_LOADS_FULL if full else FCT_LOADS_QUICK)
        for kind in ("mp-rdma", "dcqcn")
        for s in _seeds(full, 1, 2)
    ]


@experiment(
    "mp-rdma/web-search-fct",
    "MP-RDMA §5.1.2, Fig. 13",
    "web-search flows with Poisson arrivals on the 320-host leaf-spine",
    _fct_runs,
    cost="slow",
    doc=DOC + " (Web-search FCT)",
)
def _fct(m: Dict[str, List[dict]]) -> List[Row]:
    loads = sorted({float(k.split()[1]) for k in m})
    rows = []
    for load in loads:
        mp, dc = m[f"mp-rdma {load}"], m[f"dcqcn {load}"]
        unfinished = sum(r["unfinished"] for r in mp + dc)
        for key, what, paper in (("mean", "all flows", "6.0–17.7%"), ("small", "< 100 KB", "3.6–13.3%"), ("large", "> 10 MB", "16.7–77.7%")):
            cut = 1 - mean(r[key] for r in mp) / mean(r[key] for r in dc)
            note = f"{unfinished} flows unfinished (not averaged)" if unfinished else ""
            rows.append(Row(f"load {load}: FCT cut, {what}", paper, f"{cut:+.1%}", cut > 0, note))
    return rows

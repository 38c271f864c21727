"""DRUM's host agent (ToN 2023, §V test case 1 and Fig. 2a): a 32 B foreground WRITE's
completion time beside a background tenant posting WQE batches on many connections, under RAW
(every connection its own QP), SHARE (5 connections per shared QP, behind a lock) and DRUM (the
agent's pool, shared QPs and CQ, rates from a host-local NUM solve). One scenario file,
experiments/drum/test-case-1.toml; each point is one override of it. docs/drum-agent.md
("Measured") says where braid's magnitudes differ from the paper's and why.
"""

from __future__ import annotations

import math
from typing import Dict, List

from .registry import Row, Run, experiment

DOC = "docs/drum-agent.md (Measured)"
TC1 = "drum/test-case-1.toml"

# DRUM is the scenario file's own agent (the online decider, beta > 0, joint QP and CQ
# allocation; Q = C = 52 M WQEs/s, shared QPs sized to their rates' bandwidth-delay product);
# RAW and SHARE replace it, and so does the baseline "DRUM-equal": the same agent deciding by a
# host-local one-sided solve with a = 1 and beta = 0, which at equal weights is an equal split.
MECHANISMS = {
    "RAW": ('middleware.default=["raw"]',),
    "SHARE": ('middleware.default=["share"]',),
    "DRUM": (),
    "DRUM-equal": ('middleware.default=[{ kind = "drum", decider = "local", path_delay = true, pipe_bdp = 1.0, wqe_rate = 52e6, cqe_rate = 52e6 }]',),
}
CCS = (20, 50, 100)
# The paper's 80th percentiles (Fig. 10 and §V), µs; None where it gives none.
PAPER = {20: (7.1, 7.2, 8.8), 50: (26.5, None, 14.5), 100: (90.4, 41.0, 24.0)}


def measure(res) -> dict:
    """The foreground's (apps[0]) completion-time percentiles and the background's (apps[1])
    goodput, from the tenants table."""
    out: dict = {}
    for row in res.tenants.iter_rows(named=True):
        if row["label"] == "apps[0].client":
            out["p80"] = _num(row.get("lat_p80_us"))
            out["p50"] = _num(row.get("lat_p50_us"))
        elif row["label"] == "apps[1].client":
            out["bg_gbps"] = _num(row.get("goodput_gbps"))
    return out


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def _runs(full: bool) -> List[Run]:
    runs = []
    for cc in CCS:
        for name, mw in MECHANISMS.items():
            runs.append(Run(f"{name} cc={cc}", TC1, 1, measure, mw + (f"apps[1].qps={cc}",)))
    for batch in (20, 100):
        runs.append(
            Run(
                f"fig2a batch={batch}",
                TC1,
                1,
                measure,
                ('middleware.default=["raw"]', "apps[1].qps=1", 'apps[1].size="1KB"', f"apps[1].tx_depth={batch}", f"apps[1].cq_mod={batch}", 'nic.tx_prefetch="128KB"'),
            )
        )
    return runs


@experiment(
    "drum/test-case-1",
    "DRUM ToN'23 §V test case 1 (Fig. 10) and §II-A (Fig. 2a)",
    "32 B WQE completion time beside a batch tenant on cc connections: RAW vs SHARE vs DRUM",
    _runs,
    doc=DOC,
    scenarios=(TC1,),
)
def _summary(m: Dict[str, List[dict]]) -> List[Row]:
    def p80(label: str) -> float:
        return m[label][0]["p80"]

    rows = []
    a, b = p80("fig2a batch=20"), p80("fig2a batch=100")
    r = b / a
    rows.append(Row("Fig. 2a: raw foreground p80, batch 20 → 100", "20 → 78 µs (3.9×)", f"{a:.2f} → {b:.2f} µs ({r:.2f}×)", r > 1, paper_value=3.9, braid_value=r))

    def order(vals) -> list:
        """The mechanisms' names from fastest to slowest, among those with a number."""
        return [k for k, v in sorted(((k, v) for k, v in zip(("RAW", "SHARE", "DRUM"), vals) if v is not None), key=lambda kv: kv[1])]

    for cc in CCS:
        raw, share, drum = (p80(f"{k} cc={cc}") for k in ("RAW", "SHARE", "DRUM"))
        pr, ps, pd = PAPER[cc]
        paper = " / ".join("–" if v is None else f"{v:g}" for v in (pr, ps, pd)) + " µs"
        # Direction: the paper's order of the mechanisms it gives a number for (at cc = 20 its
        # DRUM is the slowest; the review found this row judged on RAW alone). Magnitude: RAW,
        # the one braid's model is calibrated to load like the paper's; DRUM's foreground waits
        # one pass of the agent's scheduler thread over the connections (165 ns each).
        mine = order([raw, share if ps is not None else None, drum])
        ok = mine == order([pr, ps, pd])
        note = {
            20: "SHARE's lock holds its background to a third of RAW's: nothing queues; DRUM waits a pass of 21 connections at 165 ns (paper: all ~7-9 µs)",
            50: "RAW thrashes the 32-entry QP cache (0.5 µs a turn); DRUM waits a pass of 51 connections (paper 14.5)",
            100: "DRUM waits a pass of 101 connections at 165 ns (paper 24.0)",
        }[cc]
        rows.append(Row(f"p80 RAW / SHARE / DRUM at cc={cc} (direction: the paper's order; magnitude: RAW)", paper, f"{raw:.1f} / {share:.1f} / {drum:.1f} µs", ok, note, paper_value=pr, braid_value=raw))
    raw, share, drum = (p80(f"{k} cc=100") for k in ("RAW", "SHARE", "DRUM"))
    unloaded = "docs/drum-agent.md#measured (braid's DRUM foreground waits only for the agent's pass, 165 ns a connection, with no intercept: the paper's line has 5.0 µs at cc = 0)"
    rows.append(Row("DRUM faster than RAW at cc=100", "3.1×", f"{raw / drum:.1f}×", raw / drum > 1, paper_value=3.1, braid_value=raw / drum, documented=unloaded))
    rows.append(Row("DRUM faster than SHARE at cc=100", "1.7×", f"{share / drum:.1f}×", share / drum > 1, paper_value=1.7, braid_value=share / drum, documented=unloaded))
    r20, r50, r100 = (p80(f"RAW cc={cc}") for cc in CCS)
    grows = r20 < r50 < r100
    rows.append(Row("RAW degrades with connections (cc 20 → 50 → 100, QP-cache thrashing): p80 at cc=100 over cc=20", "7.1 → 26.5 → 90.4 µs (12.7×)", f"{r20:.1f} → {r50:.1f} → {r100:.1f} µs ({r100 / r20:.1f}×)", grows, paper_value=90.4 / 7.1, braid_value=r100 / r20))
    bg = {cc: {k: m[f"{k} cc={cc}"][0]["bg_gbps"] for k in MECHANISMS} for cc in CCS}
    finite = all(not math.isnan(v) for d in bg.values() for v in d.values())
    # DRUM within 15 % of RAW where RAW's QPs fit the cache, at least RAW's where RAW thrashes.
    kept = finite and bg[20]["DRUM"] >= 0.85 * bg[20]["RAW"] and all(bg[cc]["DRUM"] >= bg[cc]["RAW"] for cc in (50, 100))
    rows.append(
        Row(
            "background goodput RAW / SHARE / DRUM / DRUM-equal at cc=20 | 50 | 100",
            "- (the paper: DRUM costs throughput little)",
            " | ".join(" / ".join(f"{v:.1f}" for v in bg[cc].values()) for cc in CCS) + " Gbit/s",
            kept,
            "DRUM protects the foreground without starving the background",
        )
    )
    return rows

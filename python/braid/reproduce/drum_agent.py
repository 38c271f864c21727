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

MECHANISMS = {"RAW": '["raw"]', "SHARE": '["share"]', "DRUM": '["drum"]'}
CCS = (20, 100)


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
            runs.append(Run(f"{name} cc={cc}", TC1, 1, measure, (f"middleware.default={mw}", f"apps[1].qps={cc}")))
    for batch in (20, 100):
        runs.append(
            Run(
                f"fig2a batch={batch}",
                TC1,
                1,
                measure,
                ('middleware.default=["raw"]', "apps[1].qps=1", f"apps[1].tx_depth={batch}", f"apps[1].cq_mod={batch}", 'nic.tx_prefetch="128KB"'),
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
    rows.append(Row("Fig. 2a: raw foreground p80, batch 20 → 100", "20 → 78 µs (3.9×)", f"{a:.2f} → {b:.2f} µs ({r:.2f}×)", 2.5 <= r <= 6.0))
    for cc in CCS:
        raw, share, drum = (p80(f"{k} cc={cc}") for k in ("RAW", "SHARE", "DRUM"))
        paper = "7.1 / 7.2 / 8.8 µs" if cc == 20 else "90.4 / ~41 / 24.0 µs"
        ok = None if cc == 20 else (raw / drum >= 3.1 and share / drum >= 1.7 and raw > share)
        note = "" if cc != 20 else "braid's background fills the link: DRUM's shallow shared QPs win already (the paper: all ~7 µs)"
        rows.append(Row(f"p80 RAW / SHARE / DRUM at cc={cc}", paper, f"{raw:.1f} / {share:.1f} / {drum:.1f} µs", ok, note))
    raw, share, drum = (p80(f"{k} cc=100") for k in ("RAW", "SHARE", "DRUM"))
    rows.append(Row("DRUM faster than RAW / SHARE at cc=100", "3.1× / 1.7×", f"{raw / drum:.1f}× / {share / drum:.1f}×", raw / drum >= 3.1 and share / drum >= 1.7, "braid's gaps are wider (docs/drum-agent.md)"))
    grows = p80("RAW cc=100") > 3 * p80("RAW cc=20")
    rows.append(Row("RAW degrades with connections (cc 20 → 100)", "26.5 → 90.4 µs (cc 50 → 100)", f"{p80('RAW cc=20'):.1f} → {p80('RAW cc=100'):.1f} µs", grows))
    bg = {k: m[f"{k} cc=100"][0]["bg_gbps"] for k in MECHANISMS}
    kept = all(not math.isnan(v) for v in bg.values()) and bg["DRUM"] >= 0.9 * bg["RAW"]
    rows.append(Row("background goodput at cc=100, RAW / SHARE / DRUM", "-", " / ".join(f"{v:.1f}" for v in bg.values()) + " Gbit/s", kept, "DRUM protects the foreground without starving the background"))
    return rows

"""``braid demo``: the tour.

1. The MP-RDMA paper's two-ToR testbed (5 + 5 hosts, 4 parallel 40G paths) under permutation
   traffic with DCQCN: per-flow goodput and the spine each flow's ECMP hash chose, so collisions
   (two flows on one path) and idle paths are plain to see; then the same traffic with MP-RDMA,
   which spreads every connection over many virtual paths (one key: transport.kind).
2. An 8:1 incast with and without PFC: drops, pauses, retransmissions, goodput, FCT.

Results go into one folder (default ``./braid-demo``), written atomically, with a report.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import List, Optional

import polars as pl
from rich.panel import Panel
from rich.table import Table

from . import api
from .results import atomic_dir, write_into, write_json
from .scenario import packaged_scenario
from .show import console, fmt, fmt_ps

TWO_TOR = "two-tor-permutation"
INCAST = "incast"

#: (folder, packaged scenario, overrides, label)
RUNS = [
    ("two-tor-dcqcn", TWO_TOR, [], "two-ToR permutation, DCQCN, ECMP"),
    ("two-tor-mp-rdma", TWO_TOR, ["transport.kind=mp-rdma"], "two-ToR permutation, MP-RDMA"),
    ("incast-pfc", INCAST, [], "8:1 incast, PFC on"),
    ("incast-no-pfc", INCAST, ["switch.pfc.enabled=false"], "8:1 incast, PFC off"),
]


def _via(path: str) -> str:
    """The fabric part of a path "h0>tor0>spine2>tor1>h7": the nodes between the two ToRs."""
    nodes = [n for n in (path or "").split(">") if n]
    if len(nodes) >= 5:
        return ">".join(nodes[2:-2])
    return ">".join(nodes[1:-1]) if len(nodes) > 2 else "-"


def _flows_of(res) -> pl.DataFrame:
    f = res.flows
    if "kind" in f.columns:
        f = f.filter(pl.col("kind") == "flow")
    return f


def spine_names(res) -> List[str]:
    """Spine switch names of the two-ToR scenario (spine0..spine{paths-1})."""
    topo = res.scenario.data.get("topology", {})
    n = int(topo.get("paths", 0) or 0)
    return [f"spine{i}" for i in range(n)]


def two_tor_tables(res):
    flows = _flows_of(res)
    has_path = "path" in flows.columns
    t = Table(title="Per-flow goodput and the path ECMP chose", header_style="bold")
    for col, j in (("flow", "right"), ("src → dst", "left"), ("path (via)", "left"), ("goodput", "right"), ("FCT", "right")):
        t.add_column(col, justify=j)
    load: dict = {s: [] for s in spine_names(res)}
    rows = []
    for r in flows.iter_rows(named=True):
        via = _via(r["path"]) if has_path else "?"
        gp = r.get("goodput_gbps")
        load.setdefault(via, []).append((r["flow"], gp))
        rows.append((r["flow"], f"h{r['src']} → h{r['dst']}", via, gp, r.get("fct_ps")))
    shared = {v for v, fl in load.items() if len(fl) > 1}
    for flow, pair, via, gp, fct in rows:
        style = "yellow" if via in shared else None
        t.add_row(str(flow), pair, via, f"{gp:.1f} Gbps" if gp is not None and math.isfinite(gp) else "-", fmt_ps(fct), style=style)
    s = Table(title="Load per spine (each path 40 Gbps)", header_style="bold")
    s.add_column("spine")
    s.add_column("flows", justify="right")
    s.add_column("goodput", justify="right")
    s.add_column("")
    per_spine = []
    for via, fl in sorted(load.items()):
        tot = sum(g for _, g in fl if g is not None and math.isfinite(g))
        if not fl:
            s.add_row(via, "0", "0.0 Gbps", "[red]idle[/red]")
        elif len(fl) > 1:
            s.add_row(via, str(len(fl)), f"{tot:.1f} Gbps", f"[yellow]collision: flows {', '.join(str(f) for f, _ in fl)}[/yellow]")
        else:
            s.add_row(via, "1", f"{tot:.1f} Gbps", "")
        per_spine.append({"spine": via, "flows": [int(f) for f, _ in fl], "goodput_gbps": tot})
    total = sum(g for _, _, _, g, _ in rows if g is not None and math.isfinite(g))
    return t, s, rows, per_spine, total


INCAST_METRICS = [
    ("drops", "packets dropped", lambda r: r.counters.get("drops")),
    ("pfc_pauses", "PFC pause frames", lambda r: r.counters.get("pfc_pauses")),
    ("retransmissions", "retransmitted packets", lambda r: r.counters.get("retransmissions")),
    ("timeouts", "retransmission timeouts", lambda r: r.counters.get("timeouts")),
    ("ecn_marks", "ECN marks", lambda r: r.counters.get("ecn_marks")),
    ("cnps", "CNPs", lambda r: r.counters.get("cnps")),
    ("goodput", "receiver goodput (Gbps)", lambda r: incast_goodput(r)),
    ("fct_mean_us", "mean FCT (µs)", lambda r: r.headline.get("fct_mean_us")),
    ("fct_max_us", "last flow done (µs)", lambda r: incast_last_us(r)),
    ("completed", "flows completed", lambda r: f"{int(r.headline.get('flows_completed', 0))}/{int(r.headline.get('flows', 0))}"),
]


def mp_rdma_table(dcqcn, mp):
    """The same five connections under DCQCN (one ECMP path each) and MP-RDMA (many virtual
    paths): goodput side by side, and how many virtual paths each MP-RDMA sender used."""
    vps = {}
    tr = mp.transport
    if tr.height and "vps_used" in tr.columns:
        for h, v in zip(tr["host"].to_list(), tr["vps_used"].to_list()):
            vps[int(h)] = int(v) if v == v else 0
    d, m = _flows_of(dcqcn), _flows_of(mp)
    t = Table(title="The same traffic with MP-RDMA", header_style="bold")
    for col, j in (("flow", "right"), ("src → dst", "left"), ("DCQCN path", "left"), ("DCQCN", "right"), ("MP-RDMA", "right"), ("virtual paths", "right")):
        t.add_column(col, justify=j)
    rows, total = [], 0.0
    for a, b in zip(d.iter_rows(named=True), m.iter_rows(named=True)):
        g = b.get("goodput_gbps")
        g = g if g is not None and math.isfinite(g) else None
        total += g or 0.0
        n_vp = vps.get(int(b["src"]), 0)
        rows.append({"flow": int(b["flow"]), "pair": f"h{b['src']} → h{b['dst']}", "goodput_gbps": g, "vps": n_vp})
        t.add_row(str(b["flow"]), f"h{b['src']} → h{b['dst']}", _via(a["path"]), fmt(a.get("goodput_gbps")), fmt(g), str(n_vp))
    return t, rows, total


def incast_last_us(res) -> Optional[float]:
    f = _flows_of(res)
    if f.height == 0 or "finish_ps" not in f.columns:
        return None
    done = f.filter(pl.col("finish_ps") >= 0)
    if done.height == 0:
        return None
    return (done["finish_ps"].max() - f["start_ps"].min()) / 1e6


def incast_goodput(res) -> Optional[float]:
    """Bytes delivered to the receiver over the time until the last flow finished."""
    f = _flows_of(res)
    last = incast_last_us(res)
    if not last:
        return res.headline.get("aggregate_goodput_gbps")
    done = f.filter(pl.col("finish_ps") >= 0)
    return float(done["size"].sum()) * 8 / (last * 1e-6) / 1e9


def incast_table(results: list):
    t = Table(title="8:1 incast, 1 MB per sender, 40 Gbps links", header_style="bold")
    t.add_column("")
    for label, _ in results:
        t.add_column(label, justify="right")
    rows = []
    for _key, label, get in INCAST_METRICS:
        vals = [get(r) for _, r in results]
        rows.append((label, vals))
        t.add_row(label, *[v if isinstance(v, str) else fmt(v) for v in vals])
    return t, rows


def run_demo(out: Path, seed: Optional[int] = None) -> Path:
    c = console()
    c.print(
        Panel.fit(
            "[bold]braid demo[/bold]: a packet-level RoCEv2 datacenter, simulated.\n"
            "1. ECMP on the MP-RDMA paper's two-ToR testbed: 5 flows, 4 × 40G paths,\n"
            "   DCQCN; then the same traffic with MP-RDMA (one connection, many paths).\n"
            "2. An 8:1 incast with and without PFC.",
            border_style="cyan",
        )
    )
    t0 = time.perf_counter()
    meta: dict = {"runs": [r[0] for r in RUNS], "seed": seed, "labels": {r[0]: r[3] for r in RUNS}}
    results = {}
    earlier = (out / "demo.json").exists()
    if earlier:
        # The tour's own folder: re-running the demo replaces it, and says so.
        c.print(f"[dim]replacing the earlier demo in {out}[/dim]")
    with atomic_dir(out, overwrite=earlier) as tmp:
        for folder, scen, overrides, _label in RUNS:
            res = api.run(packaged_scenario(scen), seed=seed, overrides=overrides, progress=console(stderr=True).is_terminal)
            (tmp / folder).mkdir()
            write_into(res, tmp / folder)
            results[folder] = res
            if folder == "two-tor-dcqcn":
                ft, st, rows, per_spine, total = two_tor_tables(res)
                c.print()
                c.print(ft)
                c.print(st)
                idle = [p["spine"] for p in per_spine if not p["flows"]]
                c.print(
                    f"Total goodput [bold]{total:.1f} Gbps[/bold] of 160 Gbps between the ToRs"
                    + (f"; idle: {', '.join(idle)}" if idle else "")
                    + ". Each flow is pinned to one path by its 5-tuple hash.\n"
                )
                meta["two_tor"] = {
                    "flows": [
                        {"flow": int(f), "pair": p, "via": v, "goodput_gbps": g if g is not None and math.isfinite(g) else None, "fct_ps": fct}
                        for f, p, v, g, fct in rows
                    ],
                    "spines": per_spine,
                    "total_gbps": total,
                }
        mt, mp_rows, mp_total = mp_rdma_table(results["two-tor-dcqcn"], results["two-tor-mp-rdma"])
        c.print(mt)
        c.print(
            f"MP-RDMA: [bold]{mp_total:.1f} Gbps[/bold] against DCQCN's {meta['two_tor']['total_gbps']:.1f}: every connection "
            "sprays its packets over many UDP source ports (virtual paths), so ECMP spreads it over all spines, and "
            "one congestion window clocks packets onto the paths whose ACKs return (the paper: 150.68 vs 102.46 "
            "Gbps on this testbed; `braid reproduce mp-rdma` for the rest of the paper).\n"
        )
        meta["mp_rdma"] = {"flows": mp_rows, "total_gbps": mp_total}
        inc = [(RUNS[2][3].split(", ")[1], results["incast-pfc"]), (RUNS[3][3].split(", ")[1], results["incast-no-pfc"])]
        it, irows = incast_table(inc)
        c.print(it)
        c.print(
            "With PFC the switch pauses senders before its buffer overflows: nothing is lost. Without it the "
            "shared buffer overflows, packets are dropped and go-back-N resends everything after each loss.\n"
        )
        meta["incast"] = {"columns": [l for l, _ in inc], "rows": [[label, vals] for label, vals in irows]}
        meta["wall_s"] = time.perf_counter() - t0
        write_json(tmp / "demo.json", meta)
        from .report.html import render
        from .report import demo_page
        from .results import write_text_atomic

        page, _made = demo_page(tmp, meta, write_parts=True, shown=out)
        write_text_atomic(tmp / "report.html", render(page))
        write_demo_report(tmp, meta)
    c.print(f"Results and report: [bold]{out}/report.html[/bold] (and report.md)  (demo took {time.perf_counter() - t0:.1f} s)")
    return out


def _md(rows, head) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join("-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in r) + " |")
    return "\n".join(out)


def write_demo_report(folder: Path, meta: dict) -> List[Path]:
    folder_root = Path(folder)
    md = ["# braid demo", ""]
    tt = meta.get("two_tor")
    if tt:
        md += [
            "## 1. ECMP on the two-ToR testbed (DCQCN)",
            "",
            "Five hosts under `tor0` each send one long flow to a host under `tor1`; four spines give four",
            "40 Gbps paths. ECMP pins each flow to the spine its 5-tuple hashes to.",
            "",
            _md([(f["flow"], f["pair"], f["via"], f["goodput_gbps"], None if f["fct_ps"] is None or f["fct_ps"] < 0 else f["fct_ps"] / 1e6) for f in tt["flows"]], ("flow", "src → dst", "via", "goodput (Gbps)", "FCT (µs)")),
            "",
            _md([(s["spine"], len(s["flows"]), s["goodput_gbps"], "idle" if not s["flows"] else ("collision" if len(s["flows"]) > 1 else "")) for s in tt["spines"]], ("spine", "flows", "goodput (Gbps)", "")),
            "",
            f"Total goodput: {tt['total_gbps']:.1f} Gbps of 160.",
            "",
            "![throughput](two-tor-dcqcn/throughput.png)",
            "",
            "Details: [two-tor-dcqcn/report.md](two-tor-dcqcn/report.md)",
            "",
        ]
    mp = meta.get("mp_rdma")
    if mp:
        md += [
            "### The same traffic with MP-RDMA (`transport.kind = \"mp-rdma\"`)",
            "",
            "Each connection sprays its packets over many UDP source ports (virtual paths), which ECMP maps",
            "onto all four spines; one congestion window clocks new packets onto the paths whose ACKs return.",
            "",
            _md([(f["flow"], f["pair"], f["goodput_gbps"], f["vps"]) for f in mp["flows"]], ("flow", "src → dst", "goodput (Gbps)", "virtual paths")),
            "",
            f"Total goodput: {mp['total_gbps']:.1f} Gbps of 160 (the MP-RDMA paper: 150.68 vs 102.46 with DCQCN).",
            "",
            "![throughput](two-tor-mp-rdma/throughput.png)",
            "",
            "Details: [two-tor-mp-rdma/report.md](two-tor-mp-rdma/report.md)",
            "",
        ]
    inc = meta.get("incast")
    if inc:
        md += ["## 2. 8:1 incast with and without PFC", "", _md([[label] + list(vals) for label, vals in inc["rows"]], [""] + inc["columns"]), ""]
        for sub, label in (("incast-pfc", "PFC on"), ("incast-no-pfc", "PFC off")):
            md.append(f"### {label}")
            md.append("")
            for img in ("queues.png", "throughput.png"):
                if (folder_root / sub / img).exists():
                    md.append(f"![{label} {img[:-4]}]({sub}/{img})")
            md.append("")
            md.append(f"Details: [{sub}/report.md]({sub}/report.md)")
            md.append("")
    p = folder_root / "report.md"
    tmp = folder_root / ".report.md.tmp"
    tmp.write_text("\n".join(md))
    os.replace(tmp, p)
    return [p]

"""The isolation matrix: attackers × victims × mechanisms, each cell pass/fail against α = 0.8.

Beyond the papers (DESIGN.md's fidelity table): a victim tenant beside an attacker tenant on one
RNIC (experiments/perf/matrix.toml, both on host 0 sending to host 1), under each mechanism of
PeRF's comparison. A cell is the victim's metric over a window, relative to the victim alone (raw
RDMA, same window): D_App's p99 round trip inverted (alone / beside), M_App's message rate, B_App's
goodput. A cell passes when it is at least α times the victim's *fair* part of what it gets alone:
all of it for D_App and M_App (they need a sliver of the link), half of it for B_App (two tenants
saturating one link can each keep half; no work-conserving mechanism can give a bandwidth victim
more beside a bandwidth attacker, and SP only by starving the attacker).

The table is printed as one row per victim and attacker; the heat map goes to
``$BRAID_REPRODUCE_OUT/perf-matrix.png`` (default ``./braid-reproduce``). ``--full`` runs every cell
(9 attackers, the last three Husky-style ones that go after the victim's memory and QPs, × 3 victims
× 6 mechanisms); the default is a quick subset. An attacker row of the Husky kind passes only if, as
well, every access the attacker tried was refused (``attack_refused``). docs/perf.md,
"Reproducing PeRF", discusses the cells.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Dict, List, Tuple

from .metrics import flow_goodput_gbps
from .perf import DOC, MECHANISMS
from .registry import Row, Run, experiment

FILE = "perf/matrix.toml"
ALPHA = 0.8
MS = 1_000_000_000  # picoseconds per millisecond

# Victims: (name, overrides over the file's D_App, fair part of alone). The workloads are the
# PeRF artifact's perftest runs (its README; the slides' "B_App 1MB, M_App 16B x 32, D_App 16B"):
# D_App `ib_write_lat -s 16` (one message in flight, the file's apps[0]); M_App `ib_write_bw -s 16
# -l 32`: post lists of 32 at perftest's default depth 128 (DEF_TX_BW); B_App `ib_write_bw -s
# 1048576` at depth 128 (1 MiB: perftest's -s is in bytes).
VICTIMS: Dict[str, Tuple[str, Tuple[str, ...], float]] = {
    "D": ("delay-sensitive: write_lat 16 B", ("measure.messages=true",), 1.0),
    "M": ("message-intensive: write_bw 16 B, lists of 32, depth 128", ('apps[0].kind="write_bw"', "apps[0].tx_depth=128", "apps[0].post_list=32"), 1.0),
    "B": ("bandwidth: write_bw 1 MiB, depth 128", ('apps[0].kind="write_bw"', 'apps[0].size="1MiB"', "apps[0].tx_depth=128"), 0.5),
}

# Timelines: PeRF limits active QPs only every 10 ms, so the multi-QP attackers run 25 ms and the
# victim is measured over 12-24 ms (the file's own timing); single-QP attackers are cut to 6 ms
# and measured over 1.5-5.5 ms.
TIMELINES: Dict[str, Tuple[Tuple[str, ...], float, float]] = {
    "long": ((), 12.0, 24.0),
    "short": (('duration="10ms"', 'apps[0].duration="5.6ms"', 'apps[1].duration="6ms"'), 1.5, 5.5),
}

# Attackers: (name, overrides over the file's 1 MiB write_bw at perftest's depth 128, timeline, ETS
# type: B weighs 16). Every attacker keeps perftest's defaults for what it does not set: depth 128
# per QP (ib_write_bw / ib_send_bw / ib_read_bw DEF_TX_BW; READs are further held to the QP's 16
# outstanding, max_rd_atomic, as perftest's `-o` default on ConnectX), one WR per post (no -l).
ATTACKERS: Dict[str, Tuple[str, Tuple[str, ...], str, str]] = {
    "large": ("large messages: write_bw 1 MiB", (), "short", "B"),
    "qps": ("many QPs: write_bw 4 KB × 16 QPs", ('apps[1].size="4KB"', "apps[1].qps=16"), "long", "B"),
    "deep": ("deep batches: write_bw 64 B, depth 128", ('apps[1].size="64B"', "apps[1].tx_depth=128"), "short", "M"),
    "thrash": ("QP-cache thrashing: write_bw 1 KB × 256 QPs, qp_cache 64", ('apps[1].size="1KB"', "apps[1].qps=256", "nic.qp_cache=64"), "long", "B"),
    "read": ("READ flood: read_bw 64 KB", ('apps[1].kind="read_bw"', 'apps[1].size="64KB"'), "short", "B"),
    "send": ("small SENDs: send_bw 64 B, depth 128", ('apps[1].kind="send_bw"', 'apps[1].size="64B"', "apps[1].tx_depth=128"), "short", "M"),
    # Husky-style attackers (braid_apps::attack; docs/perf.md, "What the agents check"): they go
    # after the victim's memory and QPs, not its share of the NIC.
    "thief": ("rkey thief: 12 READs/WRITEs, learned + guessed rkeys, out of bounds", ('apps[1].kind="rkey_thief"', 'apps[1].size="4KB"', "apps[1].qps=12", "apps[1].victim=0", 'apps[1].start="1ms"'), "short", "M"),
    "hijack": ("QP hijacker: SEND/WRITE/READ 64 KB on the victim's QP numbers", ('apps[1].kind="qp_hijacker"', 'apps[1].size="64KB"', "apps[1].victim=0", 'apps[1].start="1ms"'), "short", "M"),
    "mrflood": ("registration flood: 10,000 reg_mr of 4 KB", ('apps[1].kind="mr_flood"', 'apps[1].size="4KB"', "apps[1].iterations=10000"), "short", "M"),
}

# The attackers whose cells also require the attack to fail: the attacker's accesses all refused
# (none succeeded; each success is a breach of the victim's memory or QPs). The flood's
# registrations are its own memory: a NIC without registration limits (braid's) grants them all,
# and only the victim's metric is judged.
BREACHES = ("thief", "hijack")
ATTACK_ROWS = ("thief", "hijack", "mrflood")

ORDER = ("raw", "SP", "ETS", "Justitia", "Justitia_R", "PeRF")
SHORT = {"raw": "raw", "SP": "SP", "ETS": "ETS", "Justitia": "J", "Justitia_R": "J_R", "PeRF": "PeRF"}

# The quick subset: the attacks of the paper's two anomalies (and the cheapest of the others),
# every victim, every mechanism.
QUICK_ATTACKERS = ("large", "qps", "read")

# Cells where the slides claim PeRF isolates (Message-level and QP-level Isolation).
CLAIMED = {
    ("D", "large"): "PeRF isolates (msg-level)",
    ("M", "large"): "PeRF isolates (msg-level)",
    ("D", "qps"): "PeRF isolates (QP-level)",
    ("M", "qps"): "PeRF isolates (QP-level)",
    ("B", "qps"): "PeRF isolates (QP-level)",
}


def _ets_weights(victim: str, attacker: str) -> str:
    w = lambda t: 16 if t == "B" else 1  # noqa: E731
    return f"nic.ets_weights=[1,{w(victim)},{w(ATTACKERS[attacker][3])}]"


def mechanism_overrides(mech: str, victim: str, attacker: str) -> Tuple[str, ...]:
    """The keys one mechanism sets in a cell (ETS's weights follow the tenants' types)."""
    ov = MECHANISMS[mech]
    if mech == "ETS":
        ov = ov + (_ets_weights(victim, attacker),)
    return ov


def measure_cell(res, victim: str, t0: float, t1: float) -> dict:
    """The victim's metric over (t0, t1] ms, and the attacker's goodput there."""
    g = flow_goodput_gbps(res, t0, t1)
    out = {"attacker_gbps": g[1] if len(g) > 1 else float("nan")}
    t = res.tenants
    if "attack_tries" in t.columns:
        import polars as pl

        row = t.filter(pl.col("label") == "apps[1].client")
        if row.height:
            out["attack"] = tuple(int(row[c][0]) for c in ("attack_tries", "attack_refused", "attack_succeeded"))
    if victim == "D":
        # write_lat posts its next ping when the pong arrives: the gaps between the client's pings
        # are its round trips (equal to the tenants table's latencies over a whole run). A ping's
        # own completion is not: it comes with the responder's ACK, which goes out ahead of data.
        import polars as pl

        pings = res.messages.filter((pl.col("host") == 0) & (pl.col("op") == "write_imm") & (pl.col("bytes") == 16)).sort("post_ps")
        post = pings["post_ps"]
        rtt = pl.DataFrame({"post_ps": post[:-1], "rtt_ps": post.diff()[1:]})
        lat = rtt.filter((pl.col("post_ps") > int(t0 * MS)) & (pl.col("post_ps") <= int(t1 * MS)))["rtt_ps"]
        out["samples"] = lat.len()
        out["p50_us"] = float(lat.quantile(0.5, "nearest")) / 1e6 if lat.len() else float("nan")
        out["value"] = out["p99_us"] = float(lat.quantile(0.99, "nearest")) / 1e6 if lat.len() else float("nan")
    elif victim == "M":
        out["value"] = g[0] * 1e9 / 8 / 16 / 1e6  # Mops of 16 B messages
    else:
        out["value"] = g[0]
    return out


def _cells(full: bool):
    attackers = tuple(ATTACKERS) if full else QUICK_ATTACKERS
    return [(v, a, k) for v in VICTIMS for a in attackers for k in ORDER]


def _matrix_runs(full: bool) -> List[Run]:
    runs = []
    used = {ATTACKERS[a][2] for _, a, _ in _cells(full)}
    for v, (_, vov, _) in VICTIMS.items():
        for tl in sorted(used):
            tov, t0, t1 = TIMELINES[tl]
            meas = functools.partial(measure_cell, victim=v, t0=t0, t1=t1)
            runs.append(Run(f"{v} alone {tl}", FILE, 1, meas, vov + tov + ("apps[1].enabled=false",)))
    for v, a, k in _cells(full):
        tov, t0, t1 = TIMELINES[ATTACKERS[a][2]]
        meas = functools.partial(measure_cell, victim=v, t0=t0, t1=t1)
        runs.append(Run(f"{v} {a} {k}", FILE, 1, meas, VICTIMS[v][1] + ATTACKERS[a][1] + tov + mechanism_overrides(k, v, a)))
    return runs


def score(m: Dict[str, List[dict]], v: str, a: str, k: str) -> float:
    """The victim's metric relative to alone (higher is better)."""
    alone = m[f"{v} alone {ATTACKERS[a][2]}"][0]["value"]
    x = m[f"{v} {a} {k}"][0]["value"]
    return alone / x if v == "D" else x / alone


def passes(v: str, rel: float) -> bool:
    return not math.isnan(rel) and rel >= ALPHA * VICTIMS[v][2]


def attack_refused(m: Dict[str, List[dict]], v: str, a: str, k: str) -> bool:
    """An attacker cell's second criterion: every access the attacker tried was refused."""
    if a not in BREACHES:
        return True
    t = m[f"{v} {a} {k}"][0].get("attack")
    return t is not None and t[0] > 0 and t[1] == t[0] and t[2] == 0


def cell_passes(m: Dict[str, List[dict]], rel: Dict[Tuple[str, str, str], float], v: str, a: str, k: str) -> bool:
    return passes(v, rel[(v, a, k)]) and attack_refused(m, v, a, k)


def out_dir() -> Path:
    """Where the heat map goes: ``$BRAID_REPRODUCE_OUT``, else ``./braid-reproduce``."""
    return Path(os.environ.get("BRAID_REPRODUCE_OUT") or "braid-reproduce")


def heat_map(rel: Dict[Tuple[str, str, str], float], path: Path) -> Path:
    """One panel per victim: attackers × mechanisms, coloured by the cell over its pass mark."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    attackers = [a for a in ATTACKERS if any((v, a, k) in rel for v in VICTIMS for k in ORDER)]
    fig, axes = plt.subplots(1, len(VICTIMS), figsize=(5.2 * len(VICTIMS), 0.62 * len(attackers) + 2.2), squeeze=False)
    for ax, v in zip(axes[0], VICTIMS):
        mark = ALPHA * VICTIMS[v][2]
        grid = [[rel.get((v, a, k), math.nan) / mark for k in ORDER] for a in attackers]
        # Red to yellow: fails (0 .. the pass mark); yellow to green: passes.
        im = ax.imshow(grid, cmap="RdYlGn", norm=TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=1.25), aspect="auto")
        for i, a in enumerate(attackers):
            for j, k in enumerate(ORDER):
                x = rel.get((v, a, k), math.nan)
                if math.isnan(x):
                    continue
                ax.text(j, i, f"{x:.2f}\n{'pass' if passes(v, x) else 'fail'}", ha="center", va="center", fontsize=7.5)
        ax.set_xticks(range(len(ORDER)), [SHORT[k] for k in ORDER])
        ax.set_yticks(range(len(attackers)), [ATTACKERS[a][0].split(":")[0] for a in attackers] if v == "D" else [""] * len(attackers))
        ax.set_title(f"victim {v}: {VICTIMS[v][0].split(': ')[1]}\npass: ≥ {mark:.2f} of alone", fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="victim relative to alone / pass mark")
    fig.suptitle(f"isolation matrix (α = {ALPHA}): victim's metric relative to running alone", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path


@experiment(
    "perf/matrix",
    "beyond the papers (DESIGN.md): PeRF's mechanisms against six attacks",
    "attackers × victims × {raw, SP, ETS, Justitia, Justitia_R, PeRF}, pass at α = 0.8 of alone",
    _matrix_runs,
    # The full matrix is ~90 s of compute (114 runs); the default subset ~18 s.
    cost="slow",
    doc=DOC,
    scenarios=(FILE,),
)
def _matrix(m: Dict[str, List[dict]]) -> List[Row]:
    cells = [tuple(label.split(" ")) for label in m if " alone " not in label]
    rel = {(v, a, k): score(m, v, a, k) for v, a, k in cells}
    attackers = [a for a in ATTACKERS if any(c[1] == a for c in cells)]
    rows = []
    for v in VICTIMS:
        for a in attackers:
            shown = "  ".join(f"{SHORT[k]} {rel[(v, a, k)]:.2f}{'✓' if cell_passes(m, rel, v, a, k) else '✗'}" for k in ORDER)
            claim = CLAIMED.get((v, a))
            ok = cell_passes(m, rel, v, a, "PeRF") if claim else None
            note = "B_App victims pass at α × 1/2 (their fair share beside a saturating attacker)" if v == "B" else ""
            if a in ATTACK_ROWS:
                tallies = "; ".join(f"{SHORT[k]} {m[f'{v} {a} {k}'][0].get('attack')}" for k in ORDER)
                note = (note + "; " if note else "") + f"attacker (tries, refused, succeeded): {tallies}"
            rows.append(Row(f"{v} ← {ATTACKERS[a][0].split(':')[0]}", claim or "-", shown, ok, note))
    n = len(VICTIMS) * len(attackers)
    counts = ", ".join(f"{SHORT[k]} {sum(cell_passes(m, rel, v, a, k) for v in VICTIMS for a in attackers)}/{n}" for k in ORDER)
    rows.append(Row("cells passed (α = 0.8)", "-", counts))
    try:
        path = heat_map(rel, out_dir() / "perf-matrix.png")
        rows.append(Row("heat map", "-", str(path.resolve())))
    except OSError as e:  # an unwritable folder costs the figure, not the table
        rows.append(Row("heat map", "-", f"not written: {e}"))
    return rows

"""DRUM's workloads (ToN 2023, §V test cases 2–4) and the agent at scale: message sizes 5 B–1 MB
(Fig. 12), KV and Redis clients over 6 servers, one- and two-sided (Figs. 13–16), the agent's CPU
against connections (Fig. 17), and 64 hosts × 100 connections under the agent. RAW / SHARE / DRUM
are overrides of one scenario file per test case (experiments/drum/). docs/drum-agent.md
("Measured") says what was scaled and where braid's magnitudes differ from the paper's, and why.
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

from .registry import Row, Run, experiment

DOC = "docs/drum-agent.md (Measured)"
TC2 = "drum/test-case-2.toml"
TC3 = "drum/test-case-3.toml"
TC4 = "drum/test-case-4.toml"
SCALE = "drum/scale.toml"

# DRUM as the paper runs it (the scenario files' own); "DRUM-equal" is the baseline of a
# host-local one-sided solve with a = 1 and beta = 0: at equal weights, an equal split.
MECHANISMS = {
    "RAW": '["raw"]',
    "SHARE": '["share"]',
    "DRUM": '[{ kind = "drum", decider = "online", beta = 1e-3, path_delay = true }]',
    "DRUM-equal": '[{ kind = "drum", path_delay = true }]',
}
SERVERS = 6


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def requests(res) -> dict:
    """The client rows' requests (apps[0..5] in test case 3; apps[0] in test case 2): mean latency
    over every sample, and the number of samples."""
    n, total = 0.0, 0.0
    for row in res.tenants.iter_rows(named=True):
        label = row["label"]
        if not label.endswith(".client") or label.startswith(f"apps[{SERVERS}]"):
            continue
        k, m = _num(row.get("lat_samples")), _num(row.get("lat_mean_us"))
        if not (math.isnan(k) or math.isnan(m)) and k > 0:
            n += k
            total += k * m
    return {"n": n, "mean_us": total / n if n else float("nan")}


def agent_cpu(res) -> dict:
    """Host 0's agent row: the poller's cores and the three functions' CPU (ns)."""
    for row in res.tenants.iter_rows(named=True):
        if row["label"] == "agent" and row["host"] == 0:
            return {
                "poller": _num(row.get("drum_poller_cores")),
                "conv": _num(row.get("drum_cpu_ns_verb_convertor")),
                "map": _num(row.get("drum_cpu_ns_qp_map")),
                "sche": _num(row.get("drum_cpu_ns_qp_sche")),
                # The online decider's rounds (0 with decider = "local", docs/drum-agent.md).
                "solver": _num(row.get("drum_cpu_ns_solver")),
                "wrs": _num(row.get("drum_wr_posted")),
                "sim_s": res.stats.get("sim_time_ps", 0) / 1e12,
            }
    return {}


def completes(res) -> dict:
    return {"unfinished": float(res.unfinished), "wall_s": float(res.wall_s), "flows": float(res.flows.height)}


# ------------------------------------------------------------------------------ test case 2

TC2_SIZES = ("5B", "1KB", "64KB", "1MB")
LONG = ("64KB", "1MB")


def _tc2_window(size: str) -> float:
    return 8e-3 if size in LONG else 2e-3


def _tc2_runs(full: bool) -> List[Run]:
    runs = []
    for size in TC2_SIZES:
        for name, mw in MECHANISMS.items():
            o: Tuple[str, ...] = (f"middleware.default={mw}", f'apps[0].size="{size}"')
            if size in LONG:
                o += ('apps[0].duration="8ms"', 'apps[1].duration="8.4ms"', 'duration="12ms"')
            runs.append(Run(f"{name} {size}", TC2, 1, requests, o))
    return runs


@experiment(
    "drum/test-case-2",
    "DRUM ToN'23 §V test case 2 (Fig. 12)",
    "mean latency and throughput of 5 B – 1 MB messages beside a batch tenant: RAW vs SHARE vs DRUM",
    _tc2_runs,
    doc=DOC,
    scenarios=(TC2,),
)
def _tc2(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    got = {}
    for size in TC2_SIZES:
        lat = {k: m[f"{k} {size}"][0]["mean_us"] for k in MECHANISMS}
        kops = {k: m[f"{k} {size}"][0]["n"] / _tc2_window(size) / 1e3 for k in MECHANISMS}
        got[size] = (lat, kops)
        rows.append(Row(f"{size}: mean latency RAW / SHARE / DRUM / DRUM-equal", "-", " / ".join(f"{v:.1f}" for v in lat.values()) + " µs"))
        rows.append(Row(f"{size}: throughput RAW / SHARE / DRUM / DRUM-equal", "-", " / ".join(f"{v:.1f}" for v in kops.values()) + " Kops"))
    lat, kops = got["5B"]
    ok = lat["DRUM"] * 2 < lat["SHARE"] < lat["RAW"] and kops["DRUM"] > 2 * kops["SHARE"] > 0
    rows.append(Row("5 B: DRUM's latency below SHARE's", "43–98.1 % better (5–200 B)", f"{(1 - lat['DRUM'] / lat['SHARE']) * 100:.1f} % better", ok))
    lat, kops = got["1MB"]
    ok = kops["DRUM"] >= kops["RAW"] and lat["DRUM"] <= 1.05 * lat["SHARE"]
    rows.append(
        Row(
            "1 MB: DRUM's throughput over RAW's; SHARE's latency over DRUM's",
            "+35.9–64.1 %; +14.7–27.8 %",
            f"{(kops['DRUM'] / kops['RAW'] - 1) * 100:+.1f} %; {(lat['SHARE'] / lat['DRUM'] - 1) * 100:+.1f} %",
            ok,
            "braid's wider gaps: its background fills the link (docs/drum-agent.md)",
        )
    )
    return rows


# ------------------------------------------------------------------------------ test case 3

# (label, per-app overrides of apps[0..5] beside their kv defaults, clients)
TC3_POINTS = (
    ("kv one-sided 95/5", (), 60),
    ("kv one-sided 95/5", (), 300),
    ("kv one-sided 50/50", ("get_ratio=0.5",), 300),
    ("kv two-sided 50/50", ('mode="two-sided"', "get_ratio=0.5"), 300),
)
REDIS_OPS = ("set", "get", "ping")


def _redis(mode: str, op: str) -> Tuple[str, ...]:
    mix = ", ".join(f"{k} = {1 if k == op else 0}" for k in REDIS_OPS)
    return ('kind="redis"', f'mode="{mode}"', 'size="16KB"', 'min_size="10B"', f"mix={{ {mix} }}", 'chunk="4KB"')


def _tc3_points():
    for p in TC3_POINTS:
        yield p
    for mode in ("one-sided", "two-sided"):
        for op in REDIS_OPS:
            yield (f"redis {mode} {op}", _redis(mode, op), 120)


def _tc3_runs(full: bool) -> List[Run]:
    runs = []
    for label, keys, clients in _tc3_points():
        per = clients // SERVERS
        for name, mw in MECHANISMS.items():
            o = [f"middleware.default={mw}"]
            for a in range(SERVERS):
                o.append(f"apps[{a}].qps={per}")
                o.extend(f"apps[{a}].{k}" for k in keys)
            runs.append(Run(f"{name} {label} {clients}", TC3, 1, requests, tuple(o)))
    return runs


@experiment(
    "drum/test-case-3",
    "DRUM ToN'23 §V test case 3 (Figs. 13–16)",
    "KV and Redis clients over 6 servers, one- and two-sided: RAW vs SHARE vs DRUM",
    _tc3_runs,
    doc=DOC,
    scenarios=(TC3,),
)
def _tc3(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    window = 1e-3

    def point(label: str, clients: int):
        lat = {k: m[f"{k} {label} {clients}"][0]["mean_us"] for k in MECHANISMS}
        kops = {k: m[f"{k} {label} {clients}"][0]["n"] / window / 1e3 for k in MECHANISMS}
        return lat, kops

    for label, _, clients in _tc3_points():
        lat, kops = point(label, clients)
        rows.append(
            Row(
                f"{label}, {clients} clients: mean latency; throughput (RAW / SHARE / DRUM / DRUM-equal)",
                "-",
                " / ".join(f"{v:.1f}" for v in lat.values()) + " µs; " + " / ".join(f"{v:.0f}" for v in kops.values()) + " Kops",
            )
        )
    lat, kops = point("kv one-sided 95/5", 300)
    ok = kops["DRUM"] > 1.3 * kops["SHARE"] and kops["SHARE"] > kops["RAW"] and lat["SHARE"] > 1.3 * lat["DRUM"]
    rows.append(
        Row(
            "KV, 300 clients: DRUM's throughput over SHARE's; SHARE's latency over DRUM's",
            "1.8×; +67.3 %",
            f"{kops['DRUM'] / kops['SHARE']:.2f}×; {(lat['SHARE'] / lat['DRUM'] - 1) * 100:+.1f} %",
            ok,
        )
    )
    lat, _ = point("kv two-sided 50/50", 300)
    ok = lat["DRUM"] < lat["SHARE"] and lat["DRUM"] < lat["RAW"]
    rows.append(Row("two-sided KV: DRUM's latency below SHARE's", "10–21 % lower", f"{(1 - lat['DRUM'] / lat['SHARE']) * 100:.1f} % lower", ok))
    for mode in ("one-sided", "two-sided"):
        lats = [point(f"redis {mode} {op}", 120)[0] for op in REDIS_OPS]
        kops = [point(f"redis {mode} {op}", 120)[1] for op in REDIS_OPS]
        ok = all(lt["DRUM"] < lt["RAW"] for lt in lats) and all(k["DRUM"] > k["RAW"] for k in kops)
        rows.append(
            Row(
                f"Redis {mode} SET / GET / PING: mean latency RAW → DRUM",
                "16 → 9.1 / 21.8 → 9 / 12.4 → 7.1 µs",
                " / ".join(f"{lt['RAW']:.0f} → {lt['DRUM']:.0f}" for lt in lats) + " µs",
                ok,
                "braid: one- and two-sided tie under RAW (a SEND and a WRITE cost the same on its wire); under DRUM one-sided WRITE_WITH_IMM costs two WRs (docs/drum-agent.md)",
            )
        )
    return rows


# ------------------------------------------------------------------------------ test case 4

TC4_POINTS = ((60, "50us"), (120, "50us"), (240, "50us"), (240, "500us"))


def _tc4_runs(full: bool) -> List[Run]:
    runs = []
    for clients, interval in TC4_POINTS:
        per = clients // SERVERS
        o = tuple(f"apps[{a}].qps={per}" for a in range(SERVERS)) + (f'middleware.default=[{{ kind = "drum", decider = "online", beta = 1e-3, path_delay = true, solve_interval = "{interval}" }}]',)
        runs.append(Run(f"{clients} {interval}", TC4, 1, agent_cpu, o))
    return runs


@experiment(
    "drum/test-case-4",
    "DRUM ToN'23 §V test case 4 (Fig. 17)",
    "the agent's CPU (poller core, verb_convertor, qp_map, qp_sche) against connections",
    _tc4_runs,
    doc=DOC,
    scenarios=(TC4,),
)
def _tc4(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    share = {}
    for clients, interval in TC4_POINTS:
        a = m[f"{clients} {interval}"][0]
        # The rate computation is qp_sche under the local decider and the online solver's
        # rounds (`solver`) under the online one: both are the scheduler's computation.
        a = dict(a, sche=a["sche"] + (0.0 if math.isnan(a["solver"]) else a["solver"]))
        core = {k: a[k] * 1e-9 / a["sim_s"] * 100 for k in ("conv", "map", "sche")}
        share[(clients, interval)] = (core, a)
        rows.append(
            Row(
                f"{clients} connections, a decision every {interval}: verb_convertor / qp_map / qp_sche",
                "-",
                " / ".join(f"{v:.1f}" for v in core.values()) + f" % of a core; poller {a['poller']:.0f} core",
            )
        )
    core, a = share[(240, "500us")]
    total = sum(core.values())
    ok = a["poller"] == 1 and total < 30 and core["conv"] + core["map"] > core["sche"]
    rows.append(Row("240 connections: agent CPU besides the poller's core", "< 30 % (> 250 connections), qp_sche ~4.22 %", f"{total:.1f} %, qp_sche {core['sche']:.1f} %", ok, "with decisions every 500 µs (the paper re-solves when connections change)"))
    g = share[(240, "50us")][0]["sche"] / share[(60, "50us")][0]["sche"]
    rows.append(Row("qp_sche, 60 → 240 connections (decisions every 50 µs)", "grows, the growth slowing (top-k)", f"×{g:.1f}", None, "braid charges every connection at every decision: linear (docs/drum-agent.md)"))
    return rows


# ------------------------------------------------------------------------------ scale


def _scale_runs(full: bool) -> List[Run]:
    return [Run("64x100", SCALE, 1, completes)]


@experiment(
    "drum/scale",
    "DRUM ToN'23 (issue 14): the agent at scale",
    "64 hosts × 100 connections each under the agent",
    _scale_runs,
    doc=DOC,
    scenarios=(SCALE,),
)
def _scale(m: Dict[str, List[dict]]) -> List[Row]:
    r = m["64x100"][0]
    ok = r["unfinished"] == 0 and r["flows"] == 64
    return [Row("64 hosts × 100 connections under the agent: every app completes; wall time", "under a minute (the issue)", f"{int(r['flows'])} apps, {int(r['unfinished'])} unfinished; {r['wall_s']:.1f} s wall", ok)]

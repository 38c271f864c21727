"""HPCC ns-3's ``config.txt`` as a braid scenario (``braid import-hpcc``).

Maps the keys braid models (DCQCN, ECN, PFC, buffer, payload, ACKs, links, run length) onto the
scenario format of ``docs/scenario.md`` and lists every key it ignores and why. The config is read
by ``config.py``, its congestion-control keys mapped by ``cc.py``; the topology and flow files are
read by the core's reader (braid-topo, through ``braid._core``), the one a run reads them with, so
the importer refuses a bad file as the run would. Only the format is used, none of HPCC's code.

Unit conventions of HPCC's ``third.cc`` that matter here:

* ``KMIN_MAP``/``KMAX_MAP`` thresholds are in KB of 1000 bytes (``ConfigEcn`` multiplies by 1000);
* ``BUFFER_SIZE`` is in MB of 1024 × 1024 bytes (``ConfigBufferSize(buffer_size * 1024 * 1024)``),
  so ``BUFFER_SIZE 32`` is 33,554,432 bytes, written ``"32MiB"``;
* ``ALPHA_RESUME_INTERVAL``, ``RATE_DECREASE_INTERVAL`` and ``RP_TIMER`` are microseconds;
* ``SIMULATOR_STOP_TIME`` and flow start times are seconds; ``LINK_DOWN a b c`` takes the link
  b–c down at 2 s + a µs (HPCC's applications start at 2 s).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..toml_out import fmt_bytes, fmt_duration, fmt_rate, to_toml
from . import cc
from .config import ARITY, Entry, HpccImportError, _dec, _flag, _int, _rate_bps, _us_to_ps, _where, parse_config  # noqa: F401 (cc.py reads them here)

__all__ = ["HpccImportError", "Imported", "convert", "parse_config", "IGNORED", "ARITY", "CC_NAMES"]


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------

#: Keys braid ignores, with the reason printed to the user.
IGNORED: Dict[str, str] = {
    "TRACE_FILE": "which nodes HPCC traces: braid captures chosen flows and ports with [measure.pcap] (flows, ports)",
    "TRACE_OUTPUT_FILE": "HPCC's mix.tr: braid writes trace.pcap ([measure.pcap]) beside its results",
    "FCT_OUTPUT_FILE": "FCT output: braid writes flows.parquet; `braid export --format hpcc` writes HPCC's fct.txt from it",
    "PFC_OUTPUT_FILE": "PFC output: braid writes pfc.parquet ([measure] pfc); `braid export --format hpcc` writes HPCC's pfc.txt",
    "ENABLE_TRACE": "packet-trace switch: braid's packet trace is [measure.pcap] (a pcap file, not mix.tr)",
    "QLEN_MON_FILE": "queue-length monitor output: use [measure] queues/interval; `braid export --format hpcc` writes qlen.txt",
    "QLEN_MON_START": "queue-length monitor window: use [measure] queues/interval",
    "QLEN_MON_END": "queue-length monitor window: use [measure] queues/interval",
    "U_TARGET": "HPCC-only (CC_MODE 3)",
    "MI_THRESH": "HPCC-only (CC_MODE 3)",
    "INT_MULTI": "HPCC-only (INT telemetry)",
    "MULTI_RATE": "HPCC-only (CC_MODE 3)",
    "SAMPLE_FEEDBACK": "HPCC-only (CC_MODE 3)",
    "FAST_REACT": "HPCC/TIMELY-only (per-ACK reaction)",
    "PINT_LOG_BASE": "HPCC-PINT-only (CC_MODE 10)",
    "PINT_PROB": "HPCC-PINT-only (CC_MODE 10)",
    "L2_CHUNK_SIZE": "go-back granularity of HPCC's NIC: braid goes back to the NAKed PSN",
}

CC_NAMES = {1: "DCQCN", 3: "HPCC", 7: "TIMELY", 8: "DCTCP", 10: "HPCC-PINT"}


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _find_file(config: Path, key: str, given: Optional[str], override: Optional[str], option: str) -> Path:
    """HPCC paths (``mix/topology.txt``) are relative to the ns-3 run directory. Look next to the
    config (as given, then by basename), then relative to the working directory."""
    if override is not None:
        p = Path(override)
        if not p.is_file():
            raise HpccImportError(f"{option} {override}: no such file")
        return p.resolve()
    if given is None:
        raise HpccImportError(f"{config}: {key} is not set; give it in the config or pass {option}")
    g = Path(given)
    cands = [g, config.parent / g.name] if g.is_absolute() else [config.parent / g, config.parent / g.name, Path.cwd() / g]
    for c in cands:
        if c.is_file():
            return c.resolve()
    looked = ", ".join(str(c) for c in cands)
    raise HpccImportError(f"{config}: {key} {given}: file not found (looked at {looked}); pass {option} FILE")


# --------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------


@dataclass
class TopologyInfo:
    """What the conversion needs of an HPCC topology."""

    n_nodes: int
    switches: List[int]
    hosts: List[int]
    link_rates: List[int]
    links: List[tuple]  # (a, b, rate bit/s, delay ps, error rate)


@dataclass
class Imported:
    """The result of a conversion: the scenario as a dict, its TOML text, and what was left out."""

    scenario: dict
    toml: str
    ignored: List[Tuple[str, str]] = field(default_factory=list)  # (key, reason)
    notes: List[str] = field(default_factory=list)  # how values were mapped / approximated


def convert(
    config: "str | os.PathLike[str]",
    *,
    topology: Optional[str] = None,
    flows: Optional[str] = None,
    cc_fallback: Optional[str] = None,
    lenient: bool = False,
    out_dir: "Optional[str | os.PathLike[str]]" = None,
) -> Imported:
    """Converts an HPCC config file. ``out_dir`` is where the scenario will be written (file paths
    are made relative to it); ``None`` writes absolute paths. ``cc_fallback`` ("dcqcn" or "none")
    accepts CC modes braid does not model; ``lenient`` accepts settings braid approximates
    (HAS_WIN 1, RATE_BOUND 0, L2_BACK_TO_ZERO 1) with a note instead of an error."""
    cpath = Path(config)
    cfg = parse_config(cpath)
    ignored: List[Tuple[str, str]] = []
    notes: List[str] = []
    used = set()

    def get(key: str) -> Optional[Entry]:
        e = cfg.get(key)
        if e is not None:
            used.add(key)
        return e

    def approx(msg: str) -> None:
        if not lenient:
            raise HpccImportError(msg + " (pass --lenient to import it anyway, approximated)")
        notes.append("approximated: " + msg)

    # ---- files
    te, fe = get("TOPOLOGY_FILE"), get("FLOW_FILE")
    topo_path = _find_file(cpath, "TOPOLOGY_FILE", te.values[0] if te else None, topology, "--topology")
    flow_path = _find_file(cpath, "FLOW_FILE", fe.values[0] if fe else None, flows, "--flows")
    info, prios = _read_inputs(topo_path, flow_path)

    def rel(p: Path) -> str:
        if out_dir is None:
            return str(p)
        try:
            return os.path.relpath(p, Path(out_dir).resolve())
        except ValueError:  # different drive (Windows)
            return str(p)

    scen: dict = {"name": f"imported from HPCC config {cpath.name}", "seed": 1}
    scen["duration"] = _run_length(cpath, get)
    scen["topology"] = _topology(cpath, get, notes, rel(topo_path))
    scen["switch"], qcn = _switch(cpath, get, notes, info, prios, flow_path)
    scen["nic"] = _nic(cpath, get, notes, prios)
    # ---- transport (cc.py: CC_MODE and the keys of each controller)
    scen["transport"] = cc.transport(sys.modules[__name__], cpath, cfg, get, qcn, cc_fallback, ignored, notes, approx, info)
    events = _link_events(cpath, get, ignored, notes, info, topo_path)
    if events is not None:
        scen["link_events"] = events

    scen["traffic"] = [{"pattern": "hpcc", "file": rel(flow_path), "topology": rel(topo_path)}]
    hosts = info.hosts
    if hosts != list(range(len(hosts))):
        notes.append(
            f"hosts are not the lowest node ids in {topo_path.name} (switches: {_ranges(info.switches)}): "
            "flow node ids are mapped to host indices through the topology (traffic.topology)"
        )

    for key, reason in IGNORED.items():
        if key in cfg and key not in used:
            ignored.append((key, reason))
            used.add(key)
    for key in ("VAR_WIN", "GLOBAL_T", "HAS_WIN", "RATE_BOUND", "L2_BACK_TO_ZERO", "LINK_DOWN"):
        used.add(key)
    leftover = sorted(set(cfg) - used)
    assert not leftover, leftover  # every key of ARITY is either mapped or in IGNORED
    ignored.sort(key=lambda kv: cfg[kv[0]].line if kv[0] in cfg else 0)

    text = _render(cpath, scen, ignored, notes)
    return Imported(scenario=scen, toml=text, ignored=ignored, notes=notes)


def _render(cpath: Path, scen: dict, ignored: List[Tuple[str, str]], notes: List[str]) -> str:
    """The scenario's TOML text, with the ignored keys and the notes as comments at the end."""
    header = [
        f"# braid scenario imported from the HPCC ns-3 config {cpath}",
        "# by `braid import-hpcc`. Keys HPCC has and braid ignores are listed at the end.",
    ]
    footer = ["", "# Ignored HPCC keys:"] + [f"#   {k}: {r}" for k, r in ignored] if ignored else []
    if notes:
        footer += ["#", "# Notes:"] + [f"#   {n}" for n in notes]
    text = "\n".join(header) + "\n\n" + to_toml(scen) + ("\n".join(footer) + "\n" if footer else "")
    return text


def _read_inputs(topo_path: Path, flow_path: Path) -> Tuple[TopologyInfo, List[int]]:
    """The topology and the flows' priorities, read by the core's HPCC reader (braid-topo, the
    one a run uses): every flow between two hosts of the topology, none of 0 bytes."""
    from .. import _core

    try:
        t = _core.hpcc_topology(str(topo_path))
        f = _core.hpcc_flows(str(flow_path), str(topo_path))
    except ValueError as e:
        raise HpccImportError(str(e)) from None
    info = TopologyInfo(t["nodes"], list(t["switches"]), list(t["hosts"]), [link[2] for link in t["links"]], list(t["links"]))
    return info, sorted({int(p) for p in f["priority"]})


def _run_length(cpath: Path, get) -> str:
    """SIMULATOR_STOP_TIME (seconds) as ``duration``."""
    e = get("SIMULATOR_STOP_TIME")
    if e is None:
        raise HpccImportError(f"{cpath}: SIMULATOR_STOP_TIME is not set (the run's length in seconds)")
    stop_ps = int((_dec(cpath, e, e.values[0], "a time in seconds") * 10**12).to_integral_value())
    if stop_ps <= 0:
        raise HpccImportError(f"{_where(cpath, e)}: must be positive")
    return fmt_duration(stop_ps)


def _topology(cpath: Path, get, notes: List[str], file: str) -> dict:
    """``[topology]``: the HPCC file, and ERROR_RATE_PER_LINK as the default loss."""
    topo: dict = {"kind": "hpcc", "file": file}
    e = get("ERROR_RATE_PER_LINK")
    if e is not None:
        loss = _dec(cpath, e, e.values[0], "an error rate between 0 and 1")
        if loss > 1:
            raise HpccImportError(f"{_where(cpath, e)}: expected an error rate between 0 and 1, got {e.values[0]}")
        if loss > 0:
            topo["default_loss"] = float(loss)
            notes.append(
                f"ERROR_RATE_PER_LINK {e.values[0]} → topology.default_loss: the loss rate of links whose error_rate in the "
                "topology file is 0 (as HPCC's third.cc; links with their own error_rate keep it)"
            )
    return topo


def _switch(cpath: Path, get, notes: List[str], info: TopologyInfo, prios: List[int], flow_path: Path) -> Tuple[dict, bool]:
    """``[switch]``: buffer, priorities, ECN and PFC; and whether ECN marks (ENABLE_QCN)."""
    sw: dict = {}
    e = get("BUFFER_SIZE")
    if e is not None:
        mb = _dec(cpath, e, e.values[0], "a buffer size in MB")
        b = mb * 1024 * 1024
        if b != b.to_integral_value() or b <= 0:
            raise HpccImportError(f"{_where(cpath, e)}: expected a positive buffer size in MB, got {e.values[0]}")
        sw["buffer"] = fmt_bytes(int(b))
        notes.append(f"BUFFER_SIZE {e.values[0]} → switch.buffer = \"{sw['buffer']}\" ({int(b)} bytes: HPCC's third.cc multiplies MB by 1024*1024)")
    # HPCC protects every data queue with PFC; queue 0 carries ACK/NAK/CNP unpaused.
    sw["priorities"] = 8
    sw["lossless"] = [1, 2, 3, 4, 5, 6, 7]
    bad = [p for p in prios if not 1 <= p <= 7]
    if bad:
        raise HpccImportError(f"{flow_path}: flow priorities {bad} are outside 1–7 (HPCC reserves queue 0 for control packets)")

    sw["ecn"], qcn = _ecn(cpath, get, notes, info)
    sw["pfc"] = _pfc(cpath, get, notes, info)
    return sw, qcn


def _ecn(cpath: Path, get, notes: List[str], info: TopologyInfo) -> Tuple[dict, bool]:
    """``switch.ecn``: ENABLE_QCN and the per-rate KMIN/KMAX/PMAX maps."""
    qcn = True
    e = get("ENABLE_QCN")
    if e is not None:
        qcn = _flag(cpath, e)
    ecn: dict = {"enabled": qcn}
    maps = {}
    for key in ("KMIN_MAP", "KMAX_MAP", "PMAX_MAP"):
        e = get(key)
        if e is None:
            continue
        v = e.values
        if not v:
            raise HpccImportError(f"{_where(cpath, e)}: expected `n rate1 value1 ... raten valuen`")
        n = _int(cpath, e, v[0], "the number of entries")
        if len(v) != 1 + 2 * n:
            raise HpccImportError(f"{_where(cpath, e)}: says {n} entries but has {(len(v) - 1) / 2:g}")
        m = {}
        for i in range(n):
            r = _rate_bps(cpath, e, v[1 + 2 * i])
            if r in m:
                raise HpccImportError(f"{_where(cpath, e)}: rate {r} is given twice")
            val = _dec(cpath, e, v[2 + 2 * i], "a threshold in KB" if key != "PMAX_MAP" else "a probability")
            if key == "PMAX_MAP" and val > 1:
                raise HpccImportError(f"{_where(cpath, e)}: pmax {v[2 + 2 * i]} is not a probability (0–1)")
            m[r] = val
        maps[key] = m
    if maps:
        if set(maps) != {"KMIN_MAP", "KMAX_MAP", "PMAX_MAP"}:
            missing = sorted({"KMIN_MAP", "KMAX_MAP", "PMAX_MAP"} - set(maps))
            raise HpccImportError(f"{cpath}: KMIN_MAP, KMAX_MAP and PMAX_MAP go together; missing {', '.join(missing)}")
        rates = set(maps["KMIN_MAP"])
        if set(maps["KMAX_MAP"]) != rates or set(maps["PMAX_MAP"]) != rates:
            raise HpccImportError(f"{cpath}: KMIN_MAP, KMAX_MAP and PMAX_MAP must list the same link rates")
        by_rate = []
        for r in sorted(rates):
            kmin = maps["KMIN_MAP"][r] * 1000
            kmax = maps["KMAX_MAP"][r] * 1000
            if kmin != kmin.to_integral_value() or kmax != kmax.to_integral_value():
                raise HpccImportError(f"{cpath}: ECN thresholds at {fmt_rate(r)} are not whole bytes")
            if kmin > kmax:
                raise HpccImportError(f"{cpath}: at {fmt_rate(r)} KMIN ({maps['KMIN_MAP'][r]}) exceeds KMAX ({maps['KMAX_MAP'][r]})")
            by_rate.append({"rate": fmt_rate(r), "kmin": fmt_bytes(int(kmin)), "kmax": fmt_bytes(int(kmax)), "pmax": float(maps["PMAX_MAP"][r])})
        ecn["by_rate"] = by_rate
        notes.append("KMIN_MAP/KMAX_MAP → switch.ecn.by_rate in KB of 1000 bytes (HPCC's ConfigEcn multiplies by 1000)")
        uncovered = sorted(set(info.link_rates) - rates)
        if uncovered:
            notes.append(
                "link rates without an ECN map entry (HPCC would stop with an assertion; braid uses switch.ecn.kmin/kmax/pmax): "
                + ", ".join(fmt_rate(r) for r in uncovered)
            )
    return ecn, qcn


def _pfc(cpath: Path, get, notes: List[str], info: TopologyInfo) -> dict:
    """``switch.pfc``: always on (HPCC protects every data queue), dynamic thresholds or not."""
    pfc: dict = {"enabled": True}
    e = get("USE_DYNAMIC_PFC_THRESHOLD")
    if e is not None:
        pfc["dynamic"] = _flag(cpath, e)
        if pfc["dynamic"]:
            pfc["alpha"] = 0.125
            nic_rate = min(info.link_rates) if info.link_rates else 0
            faster = sorted({r for r in info.link_rates if r > nic_rate})
            msg = "USE_DYNAMIC_PFC_THRESHOLD 1 → switch.pfc.dynamic = true, alpha = 1/8 (HPCC's pfc_a_shift 3)"
            if faster:
                msg = (
                    "approximated: " + msg + "; HPCC doubles alpha per doubling of a port's rate over the NIC rate "
                    f"(e.g. {fmt_rate(faster[-1])} ports: 1/{8 >> min(3, (faster[-1] // max(nic_rate, 1)).bit_length() - 1)}); "
                    "braid uses one alpha for every port"
                )
            notes.append(msg)
    return pfc


def _nic(cpath: Path, get, notes: List[str], prios: List[int]) -> dict:
    """``[nic]``: payload size, ACK coalescing and priority, the flows' priority."""
    nic: dict = {}
    e = get("PACKET_PAYLOAD_SIZE")
    if e is not None:
        mtu = _int(cpath, e)
        if not 64 <= mtu <= 65536:
            raise HpccImportError(f"{_where(cpath, e)}: expected a payload size between 64 and 65536 bytes, got {mtu}")
        nic["mtu"] = mtu
    e = get("L2_ACK_INTERVAL")
    if e is not None:
        n = _int(cpath, e)
        if n < 1:
            raise HpccImportError(f"{_where(cpath, e)}: expected at least 1 (1 = ACK every packet)")
        nic["ack_every"] = n
    e = get("ACK_HIGH_PRIO")
    if e is not None:
        # HPCC ns-3's third.cc applies ACK_HIGH_PRIO to the NICs only (RdmaEgressQueue::ack_q_idx:
        # 0 or 3; either way the NIC sends a queued ACK before data). It never sets the switches'
        # AckHighPrio attribute (default 0), so every switch queues ACKs and NAKs in the packet's
        # own priority, with the data. braid's "data" is exactly that: ACKs first at the NIC, in
        # the data priority on the wire (docs/topologies.md, "HPCC fidelity").
        high = _flag(cpath, e)
        nic["ack_priority"] = "data"
        if high:
            notes.append(
                "ACK_HIGH_PRIO 1 → nic.ack_priority = \"data\": HPCC's third.cc gives ACKs priority at the "
                "NICs only; its switches queue them with the data (SwitchNode's AckHighPrio is never set)"
            )
    if len(prios) == 1:
        nic["priority"] = prios[0]
    return nic


def _link_events(cpath: Path, get, ignored: List[Tuple[str, str]], notes: List[str], info: TopologyInfo, topo_path: Path) -> Optional[List[dict]]:
    """LINK_DOWN as ``link_events`` (None: no failure)."""
    events: Optional[List[dict]] = None
    e = get("LINK_DOWN")
    if e is not None:
        t_us = _dec(cpath, e, e.values[0], "a time in microseconds")
        a = _int(cpath, e, e.values[1], "a node id")
        b = _int(cpath, e, e.values[2], "a node id")
        if t_us == 0 and a == 0 and b == 0:
            ignored.append(("LINK_DOWN", "0 0 0: no link failure"))
        else:
            for nid in (a, b):
                if nid >= info.n_nodes:
                    raise HpccImportError(f"{_where(cpath, e)}: node {nid} does not exist ({info.n_nodes} nodes in {topo_path.name})")
            down_ps = 2 * 10**12 + int((t_us * 10**6).to_integral_value())
            events = [{"a": str(a), "b": str(b), "down": fmt_duration(down_ps)}]
            notes.append(f"LINK_DOWN {' '.join(e.values)} → link {a}–{b} down at 2 s + {e.values[0]} µs = {fmt_duration(down_ps)}, never restored (as HPCC)")
    return events


def _ranges(ids: Sequence[int]) -> str:
    ids = sorted(ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}–{ids[j]}")
        i = j + 1
    return ", ".join(out)

"""``braid import-hpcc CONFIG [-o scenario.toml]``: turn an HPCC ns-3 ``config.txt`` into a braid
scenario.

The HPCC simulator (github alibaba-edu/High-Precision-Congestion-Control) is configured by a text
file of ``KEY value...`` lines (every key is described in its ``config_doc.txt``). This module maps
the keys braid models — DCQCN, ECN, PFC, buffer, payload, ACKs, links, run length — onto the
scenario format of ``docs/scenario.md``, and lists every key it ignores and why. Only the format is
used here, none of HPCC's code.

Unit conventions of HPCC's ``third.cc`` that matter here:

* ``KMIN_MAP``/``KMAX_MAP`` thresholds are in KB of 1000 bytes (``ConfigEcn`` multiplies by 1000);
* ``BUFFER_SIZE`` is in MB of 1024 × 1024 bytes (``ConfigBufferSize(buffer_size * 1024 * 1024)``),
  so ``BUFFER_SIZE 32`` is 33,554,432 bytes, written ``"32MiB"``;
* ``ALPHA_RESUME_INTERVAL``, ``RATE_DECREASE_INTERVAL`` and ``RP_TIMER`` are microseconds;
* ``SIMULATOR_STOP_TIME`` and flow start times are seconds; ``LINK_DOWN a b c`` takes the link
  b–c down at 2 s + a µs (HPCC's applications start at 2 s).

This module depends only on the standard library and click, so it can be imported (and tested)
without the compiled core.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import click


def _sibling(name: str):
    """``braid.<name>``, imported from the package, or from its file beside this one when this
    module is loaded alone (it needs no compiled core)."""
    try:
        import importlib

        return importlib.import_module(f".{name}", __package__) if __package__ else _load_file(name)
    except ImportError:
        return _load_file(name)


def _load_file(name: str):
    import importlib.util

    key = f"braid_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


def _inputs():
    """``braid.inputs`` (regular files only, bounded sizes)."""
    return _sibling("inputs")


_toml_out = _sibling("toml_out")
fmt_bytes, fmt_duration, fmt_rate, to_toml = _toml_out.fmt_bytes, _toml_out.fmt_duration, _toml_out.fmt_rate, _toml_out.to_toml


def read_input_text(path: Path, limit: Optional[int] = None) -> str:
    m = _inputs()
    return m.read_input_text(path, m.TEXT_LIMIT if limit is None else limit)


__all__ = ["HpccImportError", "Imported", "convert", "import_hpcc", "parse_config"]


class HpccImportError(click.ClickException):
    """A malformed or unsupported HPCC configuration (exit code 2)."""

    exit_code = 2

    def show(self, file=None) -> None:  # pragma: no cover - formatting only
        click.echo(f"error: {self.format_message()}", err=True, file=file)


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

#: Every key of HPCC's config_doc.txt, with the number of values it takes (None: variable).
ARITY: Dict[str, Optional[int]] = {
    "ENABLE_QCN": 1,
    "USE_DYNAMIC_PFC_THRESHOLD": 1,
    "PACKET_PAYLOAD_SIZE": 1,
    "TOPOLOGY_FILE": 1,
    "FLOW_FILE": 1,
    "TRACE_FILE": 1,
    "TRACE_OUTPUT_FILE": 1,
    "FCT_OUTPUT_FILE": 1,
    "PFC_OUTPUT_FILE": 1,
    "SIMULATOR_STOP_TIME": 1,
    "CC_MODE": 1,
    "ALPHA_RESUME_INTERVAL": 1,
    "RATE_DECREASE_INTERVAL": 1,
    "CLAMP_TARGET_RATE": 1,
    "RP_TIMER": 1,
    "EWMA_GAIN": 1,
    "FAST_RECOVERY_TIMES": 1,
    "RATE_AI": 1,
    "RATE_HAI": 1,
    "MIN_RATE": 1,
    "DCTCP_RATE_AI": 1,
    "ERROR_RATE_PER_LINK": 1,
    "L2_CHUNK_SIZE": 1,
    "L2_ACK_INTERVAL": 1,
    "L2_BACK_TO_ZERO": 1,
    "HAS_WIN": 1,
    "GLOBAL_T": 1,
    "VAR_WIN": 1,
    "FAST_REACT": 1,
    "U_TARGET": 1,
    "MI_THRESH": 1,
    "INT_MULTI": 1,
    "MULTI_RATE": 1,
    "SAMPLE_FEEDBACK": 1,
    "PINT_LOG_BASE": 1,
    "PINT_PROB": 1,
    "RATE_BOUND": 1,
    "ACK_HIGH_PRIO": 1,
    "LINK_DOWN": 3,
    "ENABLE_TRACE": 1,
    "KMAX_MAP": None,
    "KMIN_MAP": None,
    "PMAX_MAP": None,
    "BUFFER_SIZE": 1,
    "QLEN_MON_FILE": 1,
    "QLEN_MON_START": 1,
    "QLEN_MON_END": 1,
}

CC_NAMES = {1: "DCQCN", 3: "HPCC", 7: "TIMELY", 8: "DCTCP", 10: "HPCC-PINT"}


@dataclass
class Entry:
    key: str
    values: List[str]
    line: int


def parse_config(path: Path, text: Optional[str] = None) -> Dict[str, Entry]:
    """Reads ``KEY value...`` lines. ``{...}`` (config_doc.txt style) and ``#`` comments and blank
    lines are skipped. Unknown keys, wrong value counts and repeated keys are errors."""
    if text is None:
        try:
            text = read_input_text(path)
        except OSError as e:
            raise HpccImportError(f"{path}: cannot read: {e.strerror or e}") from None
    out: Dict[str, Entry] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"\{[^}]*\}", " ", raw).split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        key, values = parts[0], parts[1:]
        where = f"{path}:{no}"
        if key not in ARITY:
            raise HpccImportError(f"{where}: unknown key {key!r} (HPCC's config_doc.txt lists the keys braid reads)")
        n = ARITY[key]
        if n is not None and len(values) != n:
            raise HpccImportError(f"{where}: {key} takes {n} value{'s' if n > 1 else ''}, got {len(values)}: {line!r}")
        if key in out:
            raise HpccImportError(f"{where}: {key} is given twice (also line {out[key].line})")
        out[key] = Entry(key, values, no)
    return out


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def _where(path: Path, e: Entry) -> str:
    return f"{path}:{e.line}: {e.key}"


def _dec(path: Path, e: Entry, s: str, what: str) -> Decimal:
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise HpccImportError(f"{_where(path, e)}: expected {what}, got {s!r}") from None
    if not d.is_finite() or d < 0:
        raise HpccImportError(f"{_where(path, e)}: expected {what}, got {s!r}")
    return d


def _int(path: Path, e: Entry, s: Optional[str] = None, what: str = "a non-negative integer") -> int:
    s = e.values[0] if s is None else s
    if not re.fullmatch(r"\d+", s):
        raise HpccImportError(f"{_where(path, e)}: expected {what}, got {s!r}")
    return int(s)


def _flag(path: Path, e: Entry) -> bool:
    s = e.values[0]
    if s not in ("0", "1"):
        raise HpccImportError(f"{_where(path, e)}: expected 0 or 1, got {s!r}")
    return s == "1"


_RATE_UNITS = {
    "bps": 1, "b/s": 1,
    "kbps": 10**3, "Kbps": 10**3, "kb/s": 10**3, "Kb/s": 10**3,
    "Mbps": 10**6, "Mb/s": 10**6,
    "Gbps": 10**9, "Gb/s": 10**9,
    "Tbps": 10**12, "Tb/s": 10**12,
    "Bps": 8, "B/s": 8,
    "KBps": 8 * 10**3, "kBps": 8 * 10**3, "KB/s": 8 * 10**3, "kB/s": 8 * 10**3,
    "MBps": 8 * 10**6, "MB/s": 8 * 10**6,
    "GBps": 8 * 10**9, "GB/s": 8 * 10**9,
}


def _rate_bps(path: Path, e: Entry, s: str) -> int:
    """An ns-3 DataRate string ("20Mb/s", "100Gbps") or a bare number of bit/s (as in the maps)."""
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([A-Za-z/]*)", s)
    if not m:
        raise HpccImportError(f"{_where(path, e)}: expected a rate like 20Mb/s, got {s!r}")
    num, unit = m.groups()
    scale = _RATE_UNITS.get(unit or "bps")
    if scale is None:
        raise HpccImportError(f"{_where(path, e)}: unknown rate unit {unit!r} in {s!r}")
    v = _dec(path, e, num, "a rate like 20Mb/s") * scale
    if v != v.to_integral_value():
        raise HpccImportError(f"{_where(path, e)}: {s!r} is not a whole number of bit/s")
    return int(v)


def _us_to_ps(path: Path, e: Entry) -> int:
    v = _dec(path, e, e.values[0], "a time in microseconds") * 10**6
    return int(v.to_integral_value())


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


@dataclass
class TopologyInfo:
    n_nodes: int
    switches: List[int]
    link_rates: List[int]

    @property
    def hosts(self) -> List[int]:
        s = set(self.switches)
        return [i for i in range(self.n_nodes) if i not in s]


def _read_topology(path: Path) -> TopologyInfo:
    """A light read of an HPCC topology file (the core reads it again, fully)."""
    try:
        toks = [(no, t) for no, line in enumerate(read_input_text(path).splitlines(), 1) for t in line.split()]
    except OSError as e:
        raise HpccImportError(f"{path}: cannot read: {e.strerror or e}") from None
    it = iter(toks)

    def nxt(what: str) -> Tuple[int, str]:
        try:
            return next(it)
        except StopIteration:
            raise HpccImportError(f"{path}: file ends early: expected {what}") from None

    def num(what: str) -> int:
        no, t = nxt(what)
        if not t.isdigit():
            raise HpccImportError(f"{path}:{no}: expected {what}, got {t!r}")
        return int(t)

    n, ns, nl = num("the number of nodes"), num("the number of switches"), num("the number of links")
    if ns > n:
        raise HpccImportError(f"{path}:1: {ns} switches but only {n} nodes")

    def node(what: str) -> int:
        no, t = nxt(what)
        if not t.isdigit():
            raise HpccImportError(f"{path}:{no}: expected {what}, got {t!r}")
        if int(t) >= n:
            raise HpccImportError(f"{path}:{no}: node {t} does not exist (line 1 declares {n} nodes: ids 0 to {n - 1})")
        return int(t)

    switches = []
    for _ in range(ns):
        sw = node("a switch id")
        if sw in switches:
            raise HpccImportError(f"{path}:2: switch {sw} is listed twice")
        switches.append(sw)
    rates = []
    for _ in range(nl):
        a = node("a link's source")
        b = node("a link's destination")
        if a == b:
            raise HpccImportError(f"{path}: a link joins node {a} to itself")
        no, r = nxt("a link rate")
        rates.append(_rate_bps(path, Entry("link rate", [r], no), r))
        nxt("a link delay"), nxt("a link error rate")
    return TopologyInfo(n, switches, rates)


def _flow_priorities(path: Path, topo: Optional[TopologyInfo] = None) -> List[int]:
    try:
        lines = read_input_text(path, _inputs().FLOWS_LIMIT).split("\n")
    except OSError as e:
        raise HpccImportError(f"{path}: cannot read: {e.strerror or e}") from None
    toks = lines[0].split() if lines else []
    if not toks or not toks[0].isdigit():
        raise HpccImportError(f"{path}:1: expected the number of flows")
    n = int(toks[0])
    prios = set()
    body = lines[1 : n + 1]
    if len([x for x in body if x.strip()]) < n:
        raise HpccImportError(f"{path}: line 1 declares {n} flows, the file has {len([x for x in body if x.strip()])}")
    switches = set(topo.switches) if topo is not None else set()
    for no, line in enumerate(body, 2):
        f = line.split()
        if len(f) != 6 or not all(x.isdigit() for x in (f[0], f[1], f[2], f[3], f[4])):
            raise HpccImportError(f"{path}:{no}: expected `src dst priority dport size start_s`, got {line.strip()!r}")
        try:
            start = float(f[5])
        except ValueError:
            start = -1.0
        if not start >= 0 or start != start or start == float("inf"):
            raise HpccImportError(f"{path}:{no}: expected a start time in seconds >= 0, got {f[5]!r}")
        if int(f[4]) == 0:
            raise HpccImportError(f"{path}:{no}: a flow of 0 bytes")
        src, dst = int(f[0]), int(f[1])
        if topo is not None:
            for what, v in (("source", src), ("destination", dst)):
                if v >= topo.n_nodes:
                    raise HpccImportError(f"{path}:{no}: flow {what} {v} does not exist (the topology has nodes 0 to {topo.n_nodes - 1})")
                if v in switches:
                    raise HpccImportError(f"{path}:{no}: flow {what} {v} is a switch in the topology; flows run between hosts")
        if src == dst:
            raise HpccImportError(f"{path}:{no}: flow from node {src} to itself")
        prios.add(int(f[2]))
    return sorted(prios)


# --------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------


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
    info = _read_topology(topo_path)
    prios = _flow_priorities(flow_path, info)

    def rel(p: Path) -> str:
        if out_dir is None:
            return str(p)
        try:
            return os.path.relpath(p, Path(out_dir).resolve())
        except ValueError:  # different drive (Windows)
            return str(p)

    scen: dict = {"name": f"imported from HPCC config {cpath.name}", "seed": 1}

    # ---- run length
    e = get("SIMULATOR_STOP_TIME")
    if e is None:
        raise HpccImportError(f"{cpath}: SIMULATOR_STOP_TIME is not set (the run's length in seconds)")
    stop_ps = int((_dec(cpath, e, e.values[0], "a time in seconds") * 10**12).to_integral_value())
    if stop_ps <= 0:
        raise HpccImportError(f"{_where(cpath, e)}: must be positive")
    scen["duration"] = fmt_duration(stop_ps)

    # ---- topology
    topo: dict = {"kind": "hpcc", "file": rel(topo_path)}
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
    scen["topology"] = topo

    # ---- switch
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
    sw["ecn"] = ecn

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
    sw["pfc"] = pfc
    scen["switch"] = sw

    # ---- NIC
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
    scen["nic"] = nic

    # ---- transport (hpcc_cc.py: CC_MODE and the keys of each controller)
    scen["transport"] = _sibling("hpcc_cc").transport(sys.modules[__name__], cpath, cfg, get, qcn, cc_fallback, ignored, notes, approx)

    # ---- link failures
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
            scen["link_events"] = [{"a": str(a), "b": str(b), "down": fmt_duration(down_ps)}]
            notes.append(f"LINK_DOWN {' '.join(e.values)} → link {a}–{b} down at 2 s + {e.values[0]} µs = {fmt_duration(down_ps)}, never restored (as HPCC)")

    # ---- traffic
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

    header = [
        f"# braid scenario imported from the HPCC ns-3 config {cpath}",
        "# by `braid import-hpcc`. Keys HPCC has and braid ignores are listed at the end.",
    ]
    footer = ["", "# Ignored HPCC keys:"] + [f"#   {k}: {r}" for k, r in ignored] if ignored else []
    if notes:
        footer += ["#", "# Notes:"] + [f"#   {n}" for n in notes]
    text = "\n".join(header) + "\n\n" + to_toml(scen) + ("\n".join(footer) + "\n" if footer else "")
    return Imported(scenario=scen, toml=text, ignored=ignored, notes=notes)


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


# --------------------------------------------------------------------------------------------
# Command
# --------------------------------------------------------------------------------------------


@click.command("import-hpcc")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="FILE", help="Write the scenario here (default: standard output).")
@click.option("--topology", metavar="FILE", help="The topology file, instead of the config's TOPOLOGY_FILE.")
@click.option("--flows", metavar="FILE", help="The flow file, instead of the config's FLOW_FILE.")
@click.option(
    "--cc-fallback",
    type=click.Choice(["dcqcn", "none"]),
    help="Import a CC_MODE other than 1 (DCQCN) with this transport instead of failing.",
)
@click.option("--lenient", is_flag=True, help="Approximate HAS_WIN 1, RATE_BOUND 0 and L2_BACK_TO_ZERO 1 instead of failing.")
def import_hpcc(config: str, output: Optional[str], topology: Optional[str], flows: Optional[str], cc_fallback: Optional[str], lenient: bool) -> None:
    """Turn an HPCC ns-3 CONFIG (config.txt) into a braid scenario.

    Maps the DCQCN, ECN, PFC, buffer, payload, ACK, link-loss and link-failure keys, and lists the
    keys it ignores and why (on standard error). Exit code 2 on an unknown key or a bad value."""
    out_dir = Path(output).resolve().parent if output else None
    imp = convert(config, topology=topology, flows=flows, cc_fallback=cc_fallback, lenient=lenient, out_dir=out_dir)
    if output:
        tmp = Path(output + ".tmp")
        try:
            tmp.write_text(imp.toml)
            os.replace(tmp, output)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise HpccImportError(f"{output}: cannot write: {e.strerror or e}") from None
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(imp.toml, nl=False)
    if imp.ignored:
        click.echo("ignored HPCC keys:", err=True)
        w = max(len(k) for k, _ in imp.ignored)
        for k, r in imp.ignored:
            click.echo(f"  {k:<{w}}  {r}", err=True)
    if imp.notes:
        click.echo("notes:", err=True)
        for n in imp.notes:
            click.echo(f"  {n}", err=True)


if __name__ == "__main__":  # pragma: no cover
    import_hpcc()

"""HPCC ns-3's ``config.txt``: its keys, reading them, and the forms of their values.

The simulator (github alibaba-edu/High-Precision-Congestion-Control) is configured by a text file of
``KEY value...`` lines; every key is described in its ``config_doc.txt``. Only the format is used
here, none of HPCC's code. Errors name the file, the line and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Dict, List, Optional

import click

from .. import inputs


def read_input_text(path: Path, limit: Optional[int] = None) -> str:
    """A text input (regular files only, bounded sizes: ``braid.inputs``)."""
    return inputs.read_input_text(path, inputs.TEXT_LIMIT if limit is None else limit)


class HpccImportError(click.ClickException):
    """A malformed or unsupported HPCC configuration (exit code 2)."""

    exit_code = 2

    def show(self, file=None) -> None:  # pragma: no cover - formatting only
        click.echo(f"error: {self.format_message()}", err=True, file=file)


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

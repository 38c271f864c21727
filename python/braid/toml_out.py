"""Scenario values in braid's units ("100Gbps", "32MiB", "1.5us") and the TOML subset scenarios
use (strings, numbers, booleans, arrays, tables), written without a TOML library.

Standard library only (``braid.hpcc.convert`` writes its scenarios with it).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import List

__all__ = ["fmt_bytes", "fmt_duration", "fmt_rate", "to_toml"]


def fmt_rate(bps: int) -> str:
    for unit, scale in (("Tbps", 10**12), ("Gbps", 10**9), ("Mbps", 10**6), ("Kbps", 10**3)):
        if bps >= scale:
            return f"{_trim(Decimal(bps) / scale)}{unit}"
    return f"{bps}bps"


def fmt_duration(ps: int) -> str:
    for unit, scale in (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3)):
        if ps >= scale:
            return f"{_trim(Decimal(ps) / scale)}{unit}"
    return f"{ps}ps"


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def _trim(d: Decimal) -> str:
    s = format(d, "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r if any(c in r for c in ".eEn") else r + ".0"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def to_toml(doc: dict) -> str:
    """Nested dicts become tables; top-level lists of dicts become arrays of tables
    (``[[traffic]]``); deeper lists of dicts stay inline (``by_rate = [{ ... }]``)."""
    lines: List[str] = []

    def is_sub(k: str, v, top: bool) -> bool:
        return isinstance(v, dict) or (top and isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v))

    def table(prefix: str, d: dict, array: bool = False) -> None:
        top = prefix == ""
        if not top:
            lines.append(f"[[{prefix}]]" if array else f"[{prefix}]")
        subs = []
        for k, v in d.items():
            if is_sub(k, v, top):
                subs.append((k, v))
            else:
                lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        lines.append("")
        for k, v in subs:
            p = f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k)
            if isinstance(v, dict):
                table(p, v)
            else:
                for item in v:
                    table(p, item, array=True)

    table("", doc)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"

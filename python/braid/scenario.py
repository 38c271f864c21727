"""Scenario files: read TOML, apply ``--set`` overrides, hand JSON to the core.

A scenario is a TOML file (see ``docs/scenario.md``); the core validates it against one schema.
This module only parses and edits the document; it never evaluates a value as code.

Overrides
---------
``key.path=value`` sets one value, creating missing tables on the way:

* keys are separated by dots: ``switch.pfc.enabled=false``;
* an element of an array of tables is addressed by its index in brackets:
  ``traffic[0].size="1MB"``, ``apps[1].enabled=false`` (the element must exist; ``[-1]`` is the
  last one);
* a key that is not a bare word (letters, digits, ``_``, ``-``) is quoted:
  ``middleware.per_host."3"=["raw"]``; a bare number is a key too: ``middleware.per_host.3``;
* the value is read as a TOML value (``false``, ``12``, ``0.5``, ``"1MB"``, ``[3]``,
  ``{ rate = "40Gbps", delay = "1us" }``); anything that is not valid TOML is taken as a string,
  so ``transport.kind=none`` and ``traffic[0].size=1MB`` work unquoted.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older Pythons only
    import tomli as tomllib

__all__ = ["BraidError", "ScenarioError", "Scenario", "load_scenario", "apply_override", "parse_override", "packaged_scenario"]


class BraidError(ValueError):
    """A user mistake: ``path`` names what is wrong (a key path, a file, an option), ``message``
    says what was expected. ``str(e)`` is ``"<path>: <message>"``."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class ScenarioError(BraidError):
    """A scenario is not valid (raised by the core when it checks a scenario): ``path`` is the
    dotted key path (e.g. ``topology.host_link.rate``; empty for the whole scenario), ``message``
    what was expected. A kind of BraidError, so one ``except BraidError`` (or ``ValueError``)
    catches every user mistake."""


@dataclass
class Scenario:
    """A parsed scenario with overrides applied.

    ``data`` is the document as plain Python values; ``base_dir`` is where relative file names in
    it resolve; ``source`` is the file it came from (None for a dict)."""

    data: dict
    base_dir: Path
    source: Path | None = None
    overrides: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        n = self.data.get("name")
        if isinstance(n, str) and n:
            return n
        return self.source.stem if self.source else "scenario"

    def to_json(self) -> str:
        return json.dumps(self.data, default=_json_default)


def _json_default(o: Any) -> Any:
    import numbers

    # numpy scalars in a scenario built from Python (a sweep's np.arange values) are numbers.
    if isinstance(o, numbers.Integral) and not isinstance(o, bool):
        return int(o)
    if isinstance(o, numbers.Real):
        return float(o)
    # tomllib yields datetime/date/time for TOML dates; the schema has none, so pass them as text
    # and let the core say where a string is not expected.
    if hasattr(o, "isoformat"):
        return o.isoformat()
    raise TypeError(f"cannot convert {type(o).__name__} to JSON")


_TOML_POS = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)\s*$", re.S)
_TOML_EOD = re.compile(r"^(?P<msg>.*?)\s*\(at end of document\)\s*$", re.S)


def _toml_error(e: Exception, where: str, text: str) -> BraidError:
    msg = str(e)
    m = _TOML_POS.match(msg)
    if m:
        return BraidError(f"{where}:{m['line']}:{m['col']}", f"invalid TOML: {m['msg']}")
    m = _TOML_EOD.match(msg)
    if m:
        lines = text.splitlines() or [""]
        return BraidError(f"{where}:{len(lines)}:{len(lines[-1]) + 1}", f"invalid TOML: {m['msg']}")
    return BraidError(where, f"invalid TOML: {msg}")


def read_toml(path: Union[str, Path]) -> dict:
    """Reads a TOML file; every problem becomes a BraidError naming the file (and line:col)."""
    from .inputs import BOM, read_input_bytes

    p = Path(path)
    try:
        raw = read_input_bytes(p)
    except FileNotFoundError:
        raise BraidError(str(path), "no such file (expected a scenario .toml file)") from None
    except IsADirectoryError:
        raise BraidError(str(path), "is a directory (expected a scenario .toml file)") from None
    except OSError as e:
        raise BraidError(str(path), f"cannot read: {e.strerror or e}") from None
    # A byte-order mark (Notepad writes one) is not TOML, but it is plainly not the user's text.
    if raw.startswith(BOM):
        raw = raw[len(BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BraidError(str(path), f"not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _toml_error(e, str(path), text) from None
    except RecursionError:
        raise BraidError(str(path), f"invalid TOML: arrays or tables nested too deeply (a scenario needs at most {MAX_DEPTH} levels)") from None


#: Deepest nesting of tables and arrays a scenario may have (the deepest real one has about 6).
MAX_DEPTH = 32


# --- overrides -------------------------------------------------------------------------------

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _parse_key_path(spec: str, keypath: str) -> list[Union[str, int]]:
    """``a.b[0]."c d".e`` -> ["a", "b", 0, "c d", "e"]."""
    parts: list[Union[str, int]] = []
    i, n = 0, len(keypath)
    expect_key = True
    bad = BraidError(f"--set {spec}", 'expected key.path=value, e.g. switch.pfc.enabled=false or traffic[0].size="1MB"')
    if n == 0:
        raise bad
    while i < n:
        c = keypath[i]
        if expect_key:
            if c in "\"'":
                j = keypath.find(c, i + 1)
                if j < 0:
                    raise BraidError(f"--set {spec}", f"unterminated quoted key at column {i + 1}")
                parts.append(keypath[i + 1 : j])
                i = j + 1
            else:
                m = _BARE.match(keypath, i)
                if not m:
                    raise BraidError(f"--set {spec}", f"expected a key at column {i + 1} (letters, digits, _ and -, or a quoted key)")
                parts.append(m.group(0))
                i = m.end()
            expect_key = False
        elif c == ".":
            i += 1
            expect_key = True
        elif c == "[":
            j = keypath.find("]", i)
            idx = keypath[i + 1 : j] if j > 0 else ""
            if j < 0 or not re.fullmatch(r"-?\d+", idx.strip()):
                raise BraidError(f"--set {spec}", f"expected an array index like [0] at column {i + 1}")
            parts.append(int(idx))
            i = j + 1
        else:
            raise bad
    if expect_key:
        raise bad
    return parts


def _fmt_path(parts: Iterable[Union[str, int]]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            k = p if _BARE.fullmatch(p) else json.dumps(p)
            out += ("." if out else "") + k
    return out


#: What may be given unquoted as a string (`transport.kind=none`, `size=1MB`, `queues=tor0:5`):
#: one word (or nothing) without spaces, quotes, brackets, braces, commas or '#'.
_BARE_WORD = re.compile(r"[^\s\"'\[\]{},#]*")


def _parse_value(text: str, spec: str = "") -> Any:
    try:
        return tomllib.loads("v = " + text)["v"]
    except tomllib.TOMLDecodeError as e:
        if _BARE_WORD.fullmatch(text):
            return text
        msg = _TOML_POS.sub(r"\g<msg>", str(e)) if _TOML_POS.match(str(e)) else str(e)
        raise BraidError(
            f"--set {spec}" if spec else "--set",
            f"the value {text!r} is not valid TOML ({msg}); quote a string (key=\"...\"), or give a number, "
            "true/false, a list [..] or a table { .. }",
        ) from None
    except RecursionError:
        raise BraidError(f"--set {spec}" if spec else "--set", f"the value is nested too deeply (at most {MAX_DEPTH} levels)") from None


def parse_override(spec: str) -> tuple[list[Union[str, int]], Any]:
    """``"switch.pfc.enabled=false"`` -> (["switch", "pfc", "enabled"], False)."""
    if not isinstance(spec, str) or "=" not in spec:
        raise BraidError(f"--set {spec}", 'expected key.path=value, e.g. switch.pfc.enabled=false or traffic[0].size="1MB"')
    # The key path ends at the first '=' outside quotes.
    q = None
    for pos, c in enumerate(spec):  # noqa: B007 (pos is read after the break)
        if q:
            if c == q:
                q = None
        elif c in "\"'":
            q = c
        elif c == "=":
            break
    else:
        raise BraidError(f"--set {spec}", "expected key.path=value")
    keypath, value = spec[:pos].strip(), spec[pos + 1 :].strip()
    parts = _parse_key_path(spec, keypath)
    return parts, _parse_value(value, spec)


def apply_override(data: dict, spec: str) -> None:
    """Applies one ``key.path=value`` override to ``data`` in place."""
    parts, value = parse_override(spec)
    cur: Any = data
    for depth, key in enumerate(parts[:-1]):
        here = _fmt_path(parts[: depth + 1])
        nxt = parts[depth + 1]
        if isinstance(key, int):
            if not isinstance(cur, list):
                raise BraidError(f"--set {spec}", f"{_fmt_path(parts[:depth]) or 'the scenario'} is not an array")
            if not -len(cur) <= key < len(cur):
                raise BraidError(f"--set {spec}", f"{here}: index out of range (the array has {len(cur)} elements)")
            cur = cur[key]
        else:
            if not isinstance(cur, dict):
                raise BraidError(f"--set {spec}", f"{_fmt_path(parts[:depth])} is not a table")
            if key not in cur:
                if isinstance(nxt, int):
                    raise BraidError(f"--set {spec}", f"{here} does not exist (an index needs an existing array)")
                cur[key] = {}
            cur = cur[key]
    last = parts[-1]
    parent = _fmt_path(parts[:-1]) or "the scenario"
    if isinstance(last, int):
        if not isinstance(cur, list):
            raise BraidError(f"--set {spec}", f"{parent} is not an array")
        if not -len(cur) <= last < len(cur):
            raise BraidError(f"--set {spec}", f"{_fmt_path(parts)}: index out of range (the array has {len(cur)} elements)")
        cur[last] = value
    else:
        if not isinstance(cur, dict):
            raise BraidError(f"--set {spec}", f"{parent} is not a table")
        cur[last] = value


# --- loading ---------------------------------------------------------------------------------


def load_scenario(
    source: Union[str, Path, Mapping, Scenario],
    overrides: Iterable[str] = (),
    base_dir: Union[str, Path, None] = None,
) -> Scenario:
    """Reads a scenario (a TOML file, a dict, or a Scenario) and applies ``key.path=value``
    overrides. Raises BraidError for unreadable or malformed input; schema validation happens in
    the core (``braid.validate`` / building a run)."""
    if isinstance(source, Scenario):
        data, src, base = copy.deepcopy(source.data), source.source, source.base_dir
        prior = list(source.overrides)
    elif isinstance(source, Mapping):
        data, src, base, prior = copy.deepcopy(dict(source)), None, Path.cwd(), []
    elif isinstance(source, (str, Path)):
        src = Path(source)
        data = read_toml(src)
        base, prior = src.resolve().parent, []
    else:
        raise TypeError("scenario must be a path, a dict or a Scenario")
    if base_dir is not None:
        base = Path(base_dir)
    if isinstance(overrides, str):
        overrides = [overrides]
    overrides = list(overrides)
    for spec in overrides:
        apply_override(data, spec)
    _check_json_safe(data, [])
    return Scenario(data=data, base_dir=base, source=src, overrides=prior + overrides)


def _check_json_safe(v: Any, path: list) -> None:
    """Finite numbers only, and at most MAX_DEPTH levels of nesting (iterative: a deep document
    must give this error, not a RecursionError)."""
    stack = [(v, list(path))]
    while stack:
        x, p = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            raise BraidError(_fmt_path(p) or "scenario", f"{x} is not allowed (expected a finite number)")
        if isinstance(x, (dict, list)) and len(p) >= MAX_DEPTH:
            raise BraidError(_fmt_path(p[:MAX_DEPTH]) or "scenario", f"nested too deeply (a scenario has at most {MAX_DEPTH} levels of tables and arrays)")
        if isinstance(x, dict):
            stack.extend((y, p + [str(k)]) for k, y in x.items())
        elif isinstance(x, list):
            stack.extend((y, p + [i]) for i, y in enumerate(x))


def packaged_scenario(name: str) -> Path:
    """Path of a scenario shipped with braid (``python/braid/scenarios/<name>.toml``)."""
    p = Path(__file__).parent / "scenarios" / f"{name}.toml"
    if not p.exists():
        raise BraidError(name, "no such packaged scenario")
    return p

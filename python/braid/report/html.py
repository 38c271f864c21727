"""One self-contained HTML page (``braid report``, ``braid compare --html``).

A page is plain data (:class:`Page` of sections of blocks) rendered by one jinja2 template with
autoescaping on: every value from a scenario or results (names, keys, values, overrides, error
strings) is HTML-escaped by default; nothing in the template marks a value as safe. Plots are
embedded as base64 PNG ``data:`` URIs; the page has no script, loads nothing from the network, and
says so to the browser with a Content-Security-Policy (``default-src 'none'``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

__all__ = ["Page", "Section", "render", "toml_dump", "cell"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp }}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="braid {{ page.version }}">
<title>{{ page.title }}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1d2330;
       margin: 0 auto; max-width: 1100px; padding: 1.2em 1.6em 3em; background: #fff; }
h1 { font-size: 1.55em; margin: 0.2em 0 0.1em; word-break: break-word; }
h2 { font-size: 1.2em; border-bottom: 1px solid #d8dce5; padding-bottom: 0.2em; margin-top: 1.8em; }
h3 { font-size: 1.05em; margin-top: 1.3em; }
.sub { color: #5a6275; margin: 0 0 1em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d8dce5; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f4f8; }
td.num { text-align: right; }
caption { caption-side: bottom; color: #5a6275; font-size: 0.9em; text-align: left; padding-top: 0.3em; }
pre { background: #f6f8fa; border: 1px solid #d8dce5; padding: 0.7em; overflow-x: auto; font-size: 12.5px; }
code { background: #f2f4f8; padding: 0 0.25em; border-radius: 3px; }
img { max-width: 100%; height: auto; border: 1px solid #eceef3; margin: 0.4em 0; display: block; }
.warn { background: #fff6db; border-left: 4px solid #e0a800; padding: 0.5em 0.8em; }
nav a { margin-right: 1em; }
footer { margin-top: 3em; color: #7a8194; font-size: 0.85em; }
</style>
</head>
<body>
<h1>{{ page.title }}</h1>
{% if page.subtitle %}<p class="sub">{{ page.subtitle }}</p>{% endif %}
{% if page.meta %}
<table class="meta">
{% for k, v in page.meta %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}</table>
{% endif %}
{% if page.sections|length > 2 %}
<nav>{% for s in page.sections %}{% if s.level == 2 %}<a href="#s{{ loop.index }}">{{ s.title }}</a>{% endif %}{% endfor %}</nav>
{% endif %}
{% for s in page.sections %}
<section id="s{{ loop.index }}">
<h{{ s.level }}>{{ s.title }}</h{{ s.level }}>
{% for b in s.blocks %}
{% if b.kind == "text" %}<p>{{ b.text }}</p>
{% elif b.kind == "warn" %}<p class="warn">{{ b.text }}</p>
{% elif b.kind == "list" %}<ul>{% for i in b["items"] %}<li><code>{{ i }}</code></li>{% endfor %}</ul>
{% elif b.kind == "pre" %}{% if b.summary %}<details><summary>{{ b.summary }}</summary>{% endif %}<pre>{{ b.text }}</pre>{% if b.summary %}</details>{% endif %}
{% elif b.kind == "image" %}<figure><img alt="{{ b.alt }}" src="data:image/png;base64,{{ b.data }}"></figure>
{% elif b.kind == "table" %}<table>
{% if b.caption %}<caption>{{ b.caption }}</caption>{% endif %}
{% if b.head|select|list %}<thead><tr>{% for h in b.head %}<th>{{ h }}</th>{% endfor %}</tr></thead>{% endif %}
<tbody>{% for r in b.rows %}<tr>{% for c in r %}<td{% if c.num %} class="num"{% endif %}>{{ c.text }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{% endif %}
{% endfor %}
</section>
{% endfor %}
<footer>Written by braid {{ page.version }} on {{ page.created }}. This page is self-contained: no scripts, no network.</footer>
</body>
</html>
"""


@dataclass
class Section:
    title: str
    blocks: List[dict] = field(default_factory=list)
    level: int = 2

    def text(self, t: str) -> "Section":
        self.blocks.append({"kind": "text", "text": str(t)})
        return self

    def warn(self, t: str) -> "Section":
        self.blocks.append({"kind": "warn", "text": str(t)})
        return self

    def items(self, xs: Iterable[Any]) -> "Section":
        self.blocks.append({"kind": "list", "items": [str(x) for x in xs]})
        return self

    def pre(self, t: str, summary: Optional[str] = None) -> "Section":
        self.blocks.append({"kind": "pre", "text": str(t), "summary": summary})
        return self

    def image(self, png: bytes, alt: str) -> "Section":
        self.blocks.append({"kind": "image", "data": base64.b64encode(png).decode("ascii"), "alt": str(alt)})
        return self

    def table(self, head: Sequence[Any], rows: Iterable[Sequence[Any]], caption: Optional[str] = None) -> "Section":
        self.blocks.append({"kind": "table", "head": [str(h) for h in head], "rows": [[cell(c) for c in r] for r in rows], "caption": caption})
        return self


@dataclass
class Page:
    title: str
    subtitle: str = ""
    meta: List[Tuple[str, str]] = field(default_factory=list)
    sections: List[Section] = field(default_factory=list)
    version: str = ""
    created: str = ""

    def section(self, title: str, level: int = 2) -> Section:
        s = Section(str(title), level=level)
        self.sections.append(s)
        return s


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        if v != 0 and (abs(v) >= 1e15 or abs(v) < 1e-3):
            return f"{v:.4g}"
        if v == int(v) and abs(v) < 1e15:
            return f"{v:,.0f}"
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def cell(v: Any) -> dict:
    """A table cell: its text and whether it is a number (right-aligned)."""
    if isinstance(v, dict) and "text" in v:
        return v
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    return {"text": fmt(v), "num": num}


def render(page: Page) -> str:
    """The page as HTML text; every value escaped (jinja2 autoescape)."""
    import jinja2

    from .. import __version__

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    if not page.version:
        page.version = __version__
    if not page.created:
        page.created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return env.from_string(TEMPLATE).render(page=page, csp=CSP)


# --- TOML text of a scenario, for display -----------------------------------------------------


def _key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _value(k)


def _value(v: Any) -> str:
    from ..sweep.plan import toml_text

    try:
        return toml_text(v)
    except Exception:  # noqa: BLE001 - display only: a value TOML cannot hold is shown as text
        return repr(v)


def toml_dump(data: dict) -> str:
    """A scenario document (plain values, as read from TOML) as TOML text: scalars and inline
    values first, then [tables] and [[arrays of tables]]."""
    out: List[str] = []

    def is_table_array(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    def emit(d: dict, path: List[str]) -> None:
        simple = [(k, v) for k, v in d.items() if not isinstance(v, dict) and not is_table_array(v)]
        for k, v in simple:
            out.append(f"{_key(str(k))} = {_value(v)}")
        for k, v in d.items():
            p = path + [_key(str(k))]
            if isinstance(v, dict):
                if out:
                    out.append("")
                out.append(f"[{'.'.join(p)}]")
                emit(v, p)
            elif is_table_array(v):
                for x in v:
                    if out:
                        out.append("")
                    out.append(f"[[{'.'.join(p)}]]")
                    emit(x, p)

    if isinstance(data, dict):
        emit(data, [])
    return "\n".join(out) + "\n"

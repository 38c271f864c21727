"""The HTML report in a real browser (issue 12): headless Chromium (Debian's `chromium`, installed in
CI by scripts/ci-install-chromium.sh) opens the page of a run whose scenario is named
``<script>alert(1)</script>`` and of a comparison, over the DevTools protocol (tests/chromium.py).

Checked: no console error, no uncaught exception, no JavaScript dialog (the alert did not run),
no script element in the page, no request leaving the page; the title and heading show the
name as text; every embedded plot decodes; the screenshot is a PNG with real content. Skipped,
with the reason, where chromium is absent (CI installs it).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

from braid.cli import main

import chromium

XSS = "<script>alert(1)</script>"

pytestmark = pytest.mark.skipif(chromium.find() is None, reason="chromium is not installed (scripts/ci-install-chromium.sh installs it; CI runs this test)")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    scen = d / "small.toml"
    scen.write_text(SMALL_TOML)
    assert invoke("run", scen, "-o", d / "xss", "--set", f'name="{XSS}"', "--set", "transport.kind=none", "--no-progress").exit_code == 0
    assert invoke("run", scen, "-o", d / "plain", "--no-progress").exit_code == 0
    assert invoke("report", d / "xss", "-o", d / "run.html").exit_code == 0
    assert invoke("compare", d / "xss", d / "plain", "--html", d / "compare.html").exit_code == 0
    return d


def _pixels(png: bytes) -> np.ndarray:
    import matplotlib.image as mpimg

    return mpimg.imread(io.BytesIO(png), format="png")


def _check(v, title: str) -> None:
    assert v.errors() == [], v.errors()
    assert v.dialogs == [], f"a dialog opened: {v.dialogs}"
    assert v.requests == [], f"the page fetched {v.requests}"
    f = v.facts
    assert f["scripts"] == 0
    assert f["title"] == title
    assert f["images"] and all(i["ok"] for i in f["images"]), f["images"]
    # A screenshot with content: a PNG, not one colour, with text and plots (many colours).
    assert v.screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    px = _pixels(v.screenshot)
    assert px.shape[0] > 500 and px.shape[1] > 500
    assert float(px[..., :3].std()) > 0.05
    colours = np.unique((px[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50


def test_run_report_in_chromium(pages):
    v = chromium.open_page(pages / "run.html")
    _check(v, XSS)
    assert v.facts["h1"] == XSS
    assert XSS in v.facts["text"]
    assert len(v.facts["images"]) == 6  # as test_report.py
    keep = os.environ.get("BRAID_REPORT_SCREENSHOT")
    if keep:
        Path(keep).write_bytes(v.screenshot)


def test_compare_page_in_chromium(pages):
    v = chromium.open_page(pages / "compare.html")
    _check(v, "braid compare: xss, plain")
    assert XSS in v.facts["text"]
    assert len(v.facts["images"]) == 4  # as test_report.py


def test_the_checks_can_fail(tmp_path):
    """The same checks on a page that does run a script: the dialog and the error are seen."""
    p = tmp_path / "bad.html"
    p.write_text("<!DOCTYPE html><title>t</title><h1>t</h1><script>alert(1); console.error('boom'); fetch('http://127.0.0.1:9/x')</script>")
    v = chromium.open_page(p)
    assert [d["type"] for d in v.dialogs] == ["alert"]
    assert any("boom" in e for e in v.errors())
    assert v.facts["scripts"] == 1
    assert v.requests == ["http://127.0.0.1:9/x"]

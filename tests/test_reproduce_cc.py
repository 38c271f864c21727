"""`braid reproduce cc/compare`: one set of overrides per controller, every run a valid scenario,
the HPCC paper's claims listed without a verdict while HPCC is not among the controllers, and a
short run of two controllers measured and charted."""

from __future__ import annotations

import pytest

from braid.api import run
from braid.reproduce import experiments_dir, registry
from braid.reproduce import cc_compare as cc

pytestmark = pytest.mark.core


def test_compare_is_registered_with_its_scenarios():
    e = registry()["cc/compare"]
    assert e.doc.startswith("docs/congestion.md")
    for s in e.scenarios:
        assert (experiments_dir() / s).is_file(), s
    assert set(cc.CONTROLLERS) >= {"DCQCN", "DCTCP", "TIMELY", "Swift"}
    labels = {r.label for r in e.runs(False)}
    assert len(labels) == len(cc.WORKLOADS) * len(cc.CONTROLLERS)


def test_hpcc_claims_wait_for_hpcc_without_a_verdict():
    rows = cc.summarize({}, write_chart=False)
    claims = [r for r in rows if r.quantity.startswith("HPCC vs")]
    assert len(claims) == 4
    if "HPCC" not in cc.CONTROLLERS:
        assert all(r.ok is None and r.braid_value is None and "not run" in r.braid for r in claims)


def test_a_short_run_is_measured_and_charted(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAID_REPRODUCE_OUT", str(tmp_path))
    w = cc.WORKLOADS[1]
    m = {}
    for c in ("DCQCN", "Swift"):
        res = run(experiments_dir() / w.scenario, seed=1, overrides=list(cc.CONTROLLERS[c]) + ['duration="6ms"'])
        m[f"{w.label} | {c}"] = [cc.measure_incast(res)]
    for ms in m.values():
        x = ms[0]
        assert x["flows"] > 0 and x["rx_max_kb"] > 0, x
    rows = cc.summarize(m)
    assert any(r.quantity == f"{w.label}: Swift" for r in rows)
    assert (tmp_path / "cc-compare.png").stat().st_size > 10_000

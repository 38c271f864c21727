"""`braid reproduce multipath/compare`: the schemes are one set of overrides each, every run of
the sweep is a valid scenario, and on the two-ToR testbed (where single-path DCQCN's five flows
collide on four spines) every multipath scheme beats it, with the chart written."""

from __future__ import annotations

import math

import pytest

from braid.api import run
from braid.reproduce import experiments_dir, registry, select
from braid.reproduce import multipath_compare as mc

pytestmark = pytest.mark.core


def test_compare_is_registered_slow_with_its_scenarios():
    e = registry()["multipath/compare"]
    assert e.cost == "slow" and e.doc.startswith("docs/multipath.md")
    assert "multipath/compare" not in [x.id for x in select([], False)]
    for s in e.scenarios:
        assert (experiments_dir() / s).is_file(), s
    assert set(mc.MULTIPATH) == {"partition-4 static", "partition-4 dynamic", "partition-8 static", "partition-8 dynamic", "Virtuoso", "Virtuoso, capacities given", "MP-RDMA",
                                 "WCMP", "WCMP + IRN", "flowlets", "flowlets + IRN", "spraying + IRN", "adaptive + IRN", "partition-8 dynamic + IRN", "Virtuoso + IRN"}
    # Per-packet switch schemes only on selective repeat; every claim names runs of the sweep.
    for s in ("spraying + IRN", "adaptive + IRN"):
        assert 'transport.recovery="irn"' in mc.SCHEMES[s]
    labels_run = {(w.label, s) for w in mc.WORKLOADS for s in mc.SCHEMES}
    for a, b, _ in mc.CLAIMS:
        assert a in labels_run and b in labels_run, (a, b)
    labels = {r.label for r in e.runs(False)}
    assert len(labels) == len(mc.WORKLOADS) * len(mc.SCHEMES)


def test_every_multipath_scheme_beats_single_path_dcqcn_on_the_testbed(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAID_REPRODUCE_OUT", str(tmp_path))
    w = mc.WORKLOADS[0]
    assert w.label == "two-ToR permutation"
    m = {}
    for s in ("DCQCN", "partition-4 dynamic", "Virtuoso", "MP-RDMA"):
        # Seed 3 hashes three of DCQCN's five flows onto one spine; 12 ms, goodput 5-12 ms.
        res = run(experiments_dir() / w.scenario, seed=3, overrides=list(w.overrides + mc.SCHEMES[s]) + ['duration="12ms"'])
        x = mc.measure(res)
        x["goodput_5"] = mc.flow_goodput_gbps(res, 5.0, 12.0)
        m[f"{w.label} | {s}"] = [x]
    rows = mc.summarize(m)
    judged = [r for r in rows if r.ok is not None]
    assert len(judged) == 3 and all(r.ok for r in judged), [(r.quantity, r.braid) for r in rows]
    for r in rows:
        assert "nan" not in r.braid.lower(), r
    # The cost columns: software multipath multiplies the QPs, MP-RDMA does not.
    qps = {s: m[f"{w.label} | {s}"][0]["qps_created"] for s in ("DCQCN", "partition-4 dynamic", "MP-RDMA")}
    assert qps["partition-4 dynamic"] == 4 * qps["DCQCN"] and qps["MP-RDMA"] == qps["DCQCN"]
    assert (tmp_path / "multipath-compare.png").stat().st_size > 10_000
    best = [r for r in rows if r.quantity.endswith(": best")][0]
    assert best.braid.startswith("MP-RDMA")
    assert not math.isnan(mc.headline(w, m[f"{w.label} | DCQCN"]))

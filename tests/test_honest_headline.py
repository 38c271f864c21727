"""Honest headline numbers (issue 28, section 2; the review's D12, D15, D17, D19, D21, D22).

Each test fails on the code before the change."""

from __future__ import annotations

import tomllib

import polars as pl
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.show import headline_table

LINK = '{ rate = "10Gbps", delay = "1us" }'

#: Two flows one after the other on one path (the second starts when the first has ended), then a
#: third that starts after the run's end: the run stops with one never-started flow.
SERIAL = f"""
name = "serial flows"
duration = "1ms"
[topology]
kind = "dumbbell"
left = 2
right = 2
host_link = {LINK}
bottleneck = {LINK}
[transport]
kind = "none"
[[traffic]]
pattern = "flows"
flows = [
  {{ src = 0, dst = 2, size = "100KB", start = "0us" }},
  {{ src = 1, dst = 3, size = "100KB", start = "400us" }},
  {{ src = 1, dst = 3, size = "100KB", start = "2ms" }},
]
[measure]
interval = "20us"
"""

#: An apps-only scenario: a bandwidth app and a latency app on one host.
APPS = f"""
name = "two apps"
duration = "2ms"
[topology]
kind = "dumbbell"
left = 1
right = 1
host_link = {LINK}
bottleneck = {LINK}
[[apps]]
kind = "write_bw"
src = 0
dst = 1
size = "64KB"
iterations = 20
[[apps]]
kind = "write_lat"
src = 0
dst = 1
size = "16B"
iterations = 100
[measure]
interval = "20us"
"""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def serial():
    return braid.run(tomllib.loads(SERIAL), seed=1)


def test_no_sum_of_goodputs_of_flows_that_never_overlapped(serial):
    """D21: `flow_goodput_sum_gbps` added the goodputs of the two serial flows (each near 10
    Gbps: ~19 Gbps on a 10 Gbps path). It is gone; the rate the path carried is below 10."""
    h = serial.headline
    assert "flow_goodput_sum_gbps" not in h
    assert 0 < h["aggregate_goodput_gbps"] <= 10.0


def test_unfinished_splits_never_started_from_in_flight(serial):
    """D19: the never-started flow (start 2 ms, run ends at 1 ms) is counted apart."""
    assert serial.unfinished == 1
    assert (serial.not_started, serial.in_flight) == (1, 0)
    s = serial.summary
    assert (s["unfinished_not_started"], s["unfinished_in_flight"]) == (1, 0)


def test_apps_only_run_says_how_many_apps_completed():
    """D22: the headline of an apps-only run said `flows completed 0 / 0`; D21: Jain's index
    over a bandwidth app and a latency app (0.50) is not fairness and is not shown."""
    res = braid.run(tomllib.loads(APPS), seed=1)
    h = res.headline
    assert (h["apps"], h["apps_completed"]) == (2, 2)
    assert "app_goodput_jain" not in h
    from rich.console import Console

    c = Console(width=200, record=True)
    c.print(headline_table(res))
    text = c.export_text()
    assert "apps completed" in text and "2 / 2" in text
    assert "flows completed" not in text


def test_an_unfinished_apps_size_is_the_requested_size():
    """D17: an app stopped halfway showed the bytes it had moved as its `size`."""
    text = APPS.replace('duration = "2ms"', 'duration = "300us"')
    res = braid.run(tomllib.loads(text), seed=1)
    f = res.flows.filter(pl.col("kind") == "write_bw")
    assert f["finish_ps"].to_list() == [None], "the scenario should stop the app halfway"
    assert f["size"].to_list() == [20 * 64_000]  # "64KB" is 64,000 bytes


def test_report_on_a_flows_table_without_fct(tmp_path):
    """D12: `braid report` on a flows.parquet without `fct_ps` exited 0 and dropped the FCT plot."""
    braid.run(tomllib.loads(SERIAL), seed=1, out_dir=tmp_path / "r")
    p = tmp_path / "r" / "flows.parquet"
    pl.read_parquet(p).drop("fct_ps").write_parquet(p)
    r = invoke("report", tmp_path / "r")
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == "error: flows.parquet: lacks the column(s) fct_ps (damaged, or not written by this braid); re-run to write it again"


def test_import_hpcc_notes_are_current():
    """D15: the notes said braid has no packet trace and counts pauses only in summary.json."""
    from braid.hpcc import IGNORED

    assert "no packet trace" not in IGNORED["ENABLE_TRACE"] and "measure.pcap" in IGNORED["ENABLE_TRACE"]
    assert "pfc.parquet" in IGNORED["PFC_OUTPUT_FILE"] and "export --format hpcc" in IGNORED["PFC_OUTPUT_FILE"]
    assert "export --format hpcc" in IGNORED["FCT_OUTPUT_FILE"]


def test_counters_of_layers_a_tenant_lacks_are_plain_zero():
    """D18: a raw tenant's columns for another tenant's layer (here PeRF's) were -0.0. They are
    0 (the layer counted nothing for this tenant; a choice, documented in docs/scenario.md:
    summed over tenants, a null or NaN would poison the sum)."""
    import math

    text = APPS.replace("[[apps]]\nkind = \"write_lat\"", "[[apps]]\nmiddleware = [\"perf\"]\nkind = \"write_lat\"")
    res = braid.run(tomllib.loads(text), seed=1)
    t = res.tenants
    perf_cols = [c for c in t.columns if c.startswith("perf_")]
    assert perf_cols, t.columns
    stacks = t["stack"].to_list() if "stack" in t.columns else None
    raw = [i for i, s in enumerate(stacks) if "perf" not in str(s)]
    assert raw, stacks
    for c in perf_cols:
        for i in raw:
            v = t[c][i]
            assert v == 0 and math.copysign(1.0, v) == 1.0, (c, i, v)

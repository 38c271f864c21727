"""The run's tables as the core's registry declares them (``braid.tables``): every table a run
writes is there with its declared columns and types, and a missing value is a null, never a
NaN or a -1 standing for one (issue 29 step 4)."""

from __future__ import annotations

import tomllib

import polars as pl

import braid
from braid import _core
from braid.results import TABLES
from braid.tables import SPECS, spec

DTYPES = {"u64": pl.UInt64, "i64": pl.Int64, "f64": pl.Float64, "str": pl.String}

# Two flows into host 2 of a dumbbell: the 6 MB one cannot finish in 300 us at 40 Gbit/s; DCQCN's
# state sampled; an MP-RDMA run would have a window instead of a rate.
SCENARIO = """
name = "tables"
duration = "300us"
[topology]
kind = "dumbbell"
left = 2
right = 1
host_link = { rate = "40Gbps", delay = "1us" }
bottleneck = { rate = "40Gbps", delay = "1us" }
[[traffic]]
pattern = "flows"
flows = [{ src = 0, dst = 2, size = "6MB" }, { src = 1, dst = 2, size = "10KB" }]
[measure]
interval = "50us"
queues = ["swR:0"]
cc = { qps = [0, 1], interval = "10us" }
"""


def test_the_python_side_takes_its_table_list_from_the_core():
    assert TABLES == tuple(s["name"] for s in _core.table_specs())
    assert {"flows", "messages", "throughput", "queues", "transport", "tenants", "ports", "pfc", "cc"} <= set(TABLES)
    for s in SPECS:
        assert s["doc"] and s["columns"], s["name"]
        for c in s["columns"]:
            assert c["type"] in DTYPES and isinstance(c["nullable"], bool) and c["doc"], (s["name"], c)


def test_every_table_has_its_declared_columns_types_and_nulls(tmp_path):
    res = braid.run(tomllib.loads(SCENARIO), out_dir=tmp_path / "r")
    back = braid.read_results(tmp_path / "r")
    for r in (res, back):
        assert list(r.tables)[: len(TABLES)] == list(TABLES)
        for name in TABLES:
            df = r.tables[name]
            declared = spec(name)["columns"]
            present = [c for c in df.columns if c in {d["name"] for d in declared}]
            assert present == [d["name"] for d in declared], name
            for d in declared:
                assert df.schema[d["name"]] == DTYPES[d["type"]], (name, d["name"], df.schema[d["name"]])
                if not d["nullable"]:
                    assert df[d["name"]].null_count() == 0, (name, d["name"])


def test_a_missing_value_is_a_null_not_a_nan_or_minus_one():
    res = braid.run(tomllib.loads(SCENARIO))
    f = res.flows.sort("flow")
    assert f["finish_ps"].to_list()[0] is None and f["finish_ps"].to_list()[1] is not None
    assert f["slowdown"].to_list()[0] is None
    assert f["latency_p50_ps"].null_count() == 2
    # No table carries a NaN: "unknown" and "not applicable" are nulls.
    for name, df in res.tables.items():
        for c, dt in df.schema.items():
            if dt == pl.Float64:
                assert not df[c].is_nan().any(), (name, c)
    # No -1 in a nullable integer column either, nor a "no such host" maximum.
    for name in TABLES:
        for d in spec(name)["columns"]:
            if d["nullable"] and d["type"] == "i64":
                assert not (res.tables[name][d["name"]] < 0).any(), (name, d["name"])
    ports = res.ports
    assert ports.filter(pl.col("role") == "switch")["host"].null_count() == ports.filter(pl.col("role") == "switch").height
    assert ports.filter(pl.col("role") == "host")["host"].null_count() == 0
    cc = res.cc
    assert cc.height and cc["cwnd"].null_count() == cc.height and cc["rate_bps"].null_count() == 0
    assert cc.schema["signals"] == pl.Int64


def test_the_report_lists_every_table(tmp_path):
    from braid.folders import table_files

    braid.run(tomllib.loads(SCENARIO), out_dir=tmp_path / "r")
    files = [row[0] for row in table_files(tmp_path / "r")]
    assert files == [f"{n}.parquet" for n in TABLES]


def test_compare_lists_every_table_of_the_runs(tmp_path):
    from braid.report.compare import table_rows
    from braid.folders import load_run

    braid.run(tomllib.loads(SCENARIO), out_dir=tmp_path / "a")
    braid.run(tomllib.loads(SCENARIO), seed=2, out_dir=tmp_path / "b")
    rows = table_rows([load_run(tmp_path / "a"), load_run(tmp_path / "b")])
    assert [r[0] for r in rows] == [f"{n}.parquet" for n in TABLES]
    flows = next(r for r in rows if r[0] == "flows.parquet")
    assert flows[1:] == ["2", "2"]

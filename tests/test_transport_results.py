"""The per-QP transport table and the MP-RDMA counters reach Python and the results folder; the
MP-RDMA experiment files are valid scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import braid
from braid.results import read_results

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments" / "mp-rdma"


def _small(kind: str) -> dict:
    import tomllib

    from conftest import SMALL_TOML

    d = tomllib.loads(SMALL_TOML)
    d["duration"] = "300us"
    d["transport"] = {"kind": kind}
    d["traffic"][0]["size"] = "2MB"
    return d


@pytest.fixture(scope="module")
def mp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mp") / "run"
    return braid.run(_small("mp-rdma"), seed=3, out_dir=out), out


def test_mp_rdma_transport_table_has_one_row_per_qp(mp_run):
    r, _ = mp_run
    t = r.transport
    # 3 flows, each a sender QP and a receiver QP.
    assert t.height == 6
    assert set(t["kind"]) == {"mp-rdma"}
    for col in ("host", "qpn", "qp_type", "remote_host", "tx_bytes", "rx_bytes", "cwnd", "nacks", "ood_samples", "ood_p50", "ood_p99", "ood_p999", "ood_max"):
        assert col in t.columns, col
    # Every QP's percentiles are ordered and below the bitmap length (L = 64 by default).
    recv = t.filter(pl.col("ood_samples") > 0)
    assert recv.height >= 3
    assert (recv["ood_p50"] <= recv["ood_p99"]).all() and (recv["ood_p99"] <= recv["ood_p999"]).all()
    assert (recv["ood_p999"] <= recv["ood_max"]).all() and (recv["ood_max"] < 64).all()


def test_run_counters_sum_the_qps(mp_run):
    r, _ = mp_run
    t = r.transport
    assert r.counters["mp_rdma_acks"] == int(t["acks"].sum()) > 0
    assert r.counters["mp_rdma_nacks"] == int(t["nacks"].sum())
    assert r.counters["mp_rdma_ood_samples"] == int(t["ood_samples"].sum())
    assert r.counters["mp_rdma_ood_max"] == int(t["ood_max"].max())


def test_results_folder_holds_the_transport_table(mp_run):
    r, out = mp_run
    assert (out / "transport.parquet").exists()
    back = read_results(out)
    assert back["transport"].equals(r.transport)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counters"]["mp_rdma_ood_p999"] == r.counters["mp_rdma_ood_p999"]


def test_dcqcn_run_has_no_mp_rdma_counters():
    r = braid.run(_small("dcqcn"), seed=3)
    assert not [k for k in r.counters if k.startswith("mp_rdma")]
    assert set(r.transport["kind"]) == {"dcqcn"}
    assert "ood_p999" not in r.transport.columns


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_experiment_files_are_valid(path):
    braid.validate(path)


def test_ecn_by_port_error_names_the_key():
    import tomllib

    d = tomllib.loads((EXPERIMENTS / "ooo-ecn-misconfig.toml").read_text())
    d["switch"]["ecn"]["by_port"][1]["peer"] = "spine0"
    with pytest.raises(braid.ScenarioError) as e:
        braid.validate(d)
    assert e.value.path == "switch.ecn.by_port[1].peer"
    assert "no link" in e.value.message

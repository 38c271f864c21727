"""`braid reproduce`: the registry, the sweep runner, its determinism, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from braid import BraidError
from braid.cli import main
from braid.reproduce import Row, Run, experiment, experiments_dir, registry, reproduce, select
from braid.reproduce.metrics import flow_goodput_gbps, jain

pytestmark = pytest.mark.core

ONE_FLOW = """\
name = "one flow"
seed = 1
duration = "2ms"

[topology]
kind = "two-tor"
hosts_per_tor = 1
paths = 1
host_link = { rate = "10Gbps", delay = "1us" }
fabric_link = { rate = "10Gbps", delay = "1us" }

[[traffic]]
pattern = "flows"
flows = [{ src = 0, dst = 1, size = "1GB" }]

[measure]
interval = "100us"
messages = false
"""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _goodput(res) -> dict:
    return {"g": flow_goodput_gbps(res, 1.0, 2.0)[0]}


def _fake_runs(full: bool):
    return [Run("one", "one-flow.toml", s, _goodput) for s in range(1, (3 if full else 1) + 1)]


# A test experiment over a scenario with an analytical answer: one long flow alone on a 10 Gbps
# path delivers 1000 payload bytes per 1062 on the wire (RoCEv2 framing: 62 bytes).
@experiment("test/one-flow", "analytical", "one flow alone on a 10G path", _fake_runs, cost="slow")
def _fake_summary(m):
    g = m["one"][0]["g"]
    expect = 10 * 1000 / 1062
    return [
        Row("goodput (Gbps)", f"{expect:.3f}", f"{g:.3f}", abs(g / expect - 1) < 0.005),
        Row("impossible", "> line rate", f"{g:.3f}", g > 10),
    ]


@pytest.fixture
def one_flow_dir(tmp_path: Path) -> Path:
    (tmp_path / "one-flow.toml").write_text(ONE_FLOW)
    return tmp_path


def test_registry_lists_the_mp_rdma_experiments_and_their_files_validate():
    reg = registry()
    for id in ("mp-rdma/testbed-permutation", "mp-rdma/lossy-paths", "mp-rdma/ecn-balance", "mp-rdma/path-failure", "drum/admm-convergence"):
        assert id in reg
    folder = experiments_dir()
    from braid.api import build

    for e in reg.values():
        if e.id.startswith("test/"):
            continue
        for full in (False, True):
            runs = e.runs(full)
            assert runs, e.id
            for r in runs:
                # Every run's scenario exists and its overrides are valid (built, not run).
                if r.scenario is not None:
                    build(folder / r.scenario, r.seed, list(r.overrides))


def test_goodput_metric_matches_line_rate_minus_headers(one_flow_dir):
    (o,) = reproduce(["test/one-flow"], jobs=1, folder=one_flow_dir)
    assert o.rows[0].ok is True, o.rows[0]
    assert o.rows[1].ok is False


def test_runs_are_deterministic_and_independent_of_worker_count():
    a = reproduce(["mp-rdma/ecn-balance"], jobs=1)
    b = reproduce(["mp-rdma/ecn-balance"], jobs=2)
    strip = lambda o: {k: [{x: v for x, v in m.items() if x != "_wall_s"} for m in ms] for k, ms in o.measures.items()}  # noqa: E731
    assert strip(a[0]) == strip(b[0])
    assert [r.__dict__ for r in a[0].rows] == [r.__dict__ for r in b[0].rows]


def test_select_by_prefix_and_unknown_names():
    assert [e.id for e in select(["mp-rdma/lossy"], False)] == ["mp-rdma/lossy-paths"]
    assert all(e.id.startswith("mp-rdma/") for e in select(["mp-rdma"], False))
    assert "test/one-flow" not in [e.id for e in select([], False)]  # slow: only when named or --all
    with pytest.raises(BraidError, match="no experiment 'nope'"):
        select(["nope"], False)


def test_cli_prints_paper_vs_braid_and_check_fails_on_a_differing_shape(one_flow_dir, tmp_path):
    out = tmp_path / "r.json"
    res = invoke("reproduce", "test/one-flow", "--experiments", one_flow_dir, "-j", 1, "--json", out)
    assert res.exit_code == 0, res.output
    assert "goodput (Gbps)" in res.output and "9.416" in res.output
    assert "direction 1 of 2, magnitude 0 of 0" in res.output
    doc = json.loads(out.read_text())
    assert doc["experiments"][0]["id"] == "test/one-flow"
    assert doc["experiments"][0]["rows"][0]["ok"] is True
    res = invoke("reproduce", "test/one-flow", "--experiments", one_flow_dir, "-j", 1, "--check")
    assert res.exit_code == 1


def test_cli_user_errors():
    res = invoke("reproduce", "nope")
    assert res.exit_code == 2 and res.stderr.startswith("error: reproduce: no experiment 'nope'")
    res = invoke("reproduce", "test/one-flow", "--experiments", "/nonexistent")
    assert res.exit_code == 2 and "--experiments" in res.stderr
    res = invoke("reproduce", "--jobs", 0)
    assert res.exit_code == 2 and "--jobs" in res.stderr


def test_cli_out_must_be_a_folder(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    res = invoke("reproduce", "test/one-flow", "--out", f)
    assert res.exit_code == 2 and "--out" in res.stderr


def test_missing_scenario_is_a_clear_error(tmp_path):
    with pytest.raises(BraidError, match="one-flow.toml is missing"):
        reproduce(["test/one-flow"], jobs=1, folder=tmp_path)


def test_cli_list():
    res = invoke("reproduce", "--list")
    assert res.exit_code == 0
    assert "mp-rdma/lossy-paths" in res.output


def test_jain():
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0]) == pytest.approx(0.5)


def test_kept_runs_are_reused_only_for_the_same_scenario_content(one_flow_dir, tmp_path):
    from braid.reproduce import execute

    starts = []
    run = lambda: execute(select(["test/one-flow"], False), jobs=1, folder=one_flow_dir, out=tmp_path / "o", on_start=lambda t, s: starts.append((t, s)))  # noqa: E731
    (a,) = run()
    (b,) = run()
    assert starts == [(1, 0), (0, 1)]
    assert a.measures == b.measures
    # The scenario file changed (a comment is enough): its run is not the kept one.
    f = one_flow_dir / "one-flow.toml"
    f.write_text(f.read_text() + "# edited\n")
    run()
    assert starts[-1] == (1, 0)

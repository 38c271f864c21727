"""Results folders are atomic; the Python API is deterministic."""

from __future__ import annotations

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import braid
from braid import results as results_mod
from braid.results import atomic_dir, read_results, write_results
from braid.scenario import BraidError


def listing(d):
    return sorted(p.name for p in d.iterdir())


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from conftest import SMALL_TOML
    import tomllib

    return braid.run(tomllib.loads(SMALL_TOML), seed=5)


# --- atomicity --------------------------------------------------------------------------------


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failure_while_writing_leaves_nothing(tmp_path, small_run, monkeypatch, exc):
    calls = []
    real = pl.DataFrame.write_parquet

    def failing(self, path, *a, **k):
        calls.append(path)
        if len(calls) == 2:  # fail after one table is on disk
            raise exc
        return real(self, path, *a, **k)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)
    out = tmp_path / "out"
    with pytest.raises(type(exc)):
        write_results(small_run, out)
    assert listing(tmp_path) == []


def test_failure_keeps_the_previous_results(tmp_path, small_run, monkeypatch):
    out = tmp_path / "out"
    write_results(small_run, out)
    before = (out / "summary.json").read_text()

    def boom(res, folder):
        (folder / "summary.json").write_text("half")
        raise RuntimeError("boom")

    monkeypatch.setattr(results_mod, "write_into", boom)
    with pytest.raises(RuntimeError):
        write_results(small_run, out, overwrite=True)
    assert (out / "summary.json").read_text() == before
    assert listing(tmp_path) == ["out"]


def test_replaces_an_old_results_folder(tmp_path, small_run):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / "stale.png").write_text("x")
    write_results(small_run, out, overwrite=True)
    assert "stale.png" not in listing(out)
    assert json.loads((out / "summary.json").read_text())["seed"] == 5
    assert listing(tmp_path) == ["out"]


def test_refuses_foreign_folders_and_files(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    (tmp_path / "f").write_text("x")
    for target in ("d", "f"):
        with pytest.raises(BraidError):
            with atomic_dir(tmp_path / target):
                pass
    assert listing(tmp_path) == ["d", "f"]


def test_failing_run_writes_nothing(tmp_path, small_toml):
    import tomllib

    d = tomllib.loads(small_toml)
    d["topology"]["paths"] = 0
    with pytest.raises(ValueError):
        braid.run(d, out_dir=tmp_path / "out")
    assert listing(tmp_path) == []


def test_interrupted_run_writes_nothing(tmp_path, small_toml):
    import tomllib

    def interrupt(now, end):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        braid.run(tomllib.loads(small_toml), out_dir=tmp_path / "out", progress=interrupt)
    assert listing(tmp_path) == []


def test_round_trip(tmp_path, small_run):
    write_results(small_run, tmp_path / "r")
    back = read_results(tmp_path / "r")
    for name in ("flows", "messages", "throughput", "queues"):
        assert_frame_equal(back[name], getattr(small_run, name))
    assert back["summary"]["headline"]["flows"] == small_run.headline["flows"]


# --- the API ----------------------------------------------------------------------------------


def test_api_tables_and_dicts(small_run):
    r = small_run
    assert r.finished
    assert r.flows.height == 3
    for col in ("flow", "src", "dst", "size", "start_ps", "finish_ps", "fct_ps", "slowdown", "goodput_gbps", "path"):
        assert col in r.flows.columns
    assert r.flows["fct_ps"].min() > 0
    assert r.throughput.height > 0 and r.queues.height > 0 and r.messages.height > 0
    assert r.flows["size"].sum() == 600_000
    assert isinstance(r.counters["drops"], int)
    assert r.summary["seed"] == 5
    assert r.stats["events"] > 0


def test_api_accepts_path_and_overrides(small_file):
    r = braid.run(small_file, overrides=["transport.kind=none"])
    assert r.counters["cnps"] == 0
    assert r.seed == 1  # the scenario's seed


def test_progress_callback(small_file):
    seen = []
    braid.run(small_file, progress=lambda now, end: seen.append((now, end)))
    assert seen and all(e == seen[0][1] for _, e in seen)
    assert [n for n, _ in seen] == sorted(n for n, _ in seen)


def test_scenario_error_attributes(small_toml):
    import tomllib

    d = tomllib.loads(small_toml)
    d["nic"] = {"mtu": 10}
    with pytest.raises(braid.ScenarioError) as e:
        braid.run(d)
    assert isinstance(e.value, ValueError)
    assert e.value.path == "nic.mtu"
    assert "between" in e.value.message


# --- determinism ------------------------------------------------------------------------------

TABLES = ("flows", "messages", "throughput", "queues", "tenants")


def _run(seed):
    from conftest import SMALL_TOML
    import tomllib

    d = tomllib.loads(SMALL_TOML)
    # A bigger ECMP choice so that different seeds are very unlikely to coincide.
    d["topology"].update(hosts_per_tor=4, paths=4)
    return braid.run(d, seed=seed)


def test_same_seed_identical_results():
    a, b = _run(11), _run(11)
    for t in TABLES:
        assert_frame_equal(getattr(a, t), getattr(b, t))
    assert a.counters == b.counters
    assert a.headline == b.headline or json.dumps(a.headline) == json.dumps(b.headline)  # NaN-safe


def test_different_seeds_differ():
    a, b = _run(11), _run(12)
    assert any(not getattr(a, t).equals(getattr(b, t)) for t in TABLES)

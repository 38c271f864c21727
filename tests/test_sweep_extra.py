"""`make demo` installs braid without the sweep extra; `--dask` then names the command that adds
it to this checkout (by its path), never `pip install 'braid[sweep]'`, which would fetch the
unrelated "braid" from the public package index."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from braid.scenario import BraidError
from braid.sweep import slurm
from braid.sweep.executors import DaskExecutor

ROOT = Path(__file__).resolve().parents[1]


def assert_names_this_checkout(message: str) -> None:
    assert f"-e {ROOT}[sweep]" in message or f"-e '{ROOT}[sweep]'" in message, message
    assert f"{sys.executable} -m pip install" in message, message
    assert "pip install 'braid[sweep]'" not in message


def test_dask_without_the_extra_names_this_checkout(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as when not installed
    with pytest.raises(BraidError) as e:
        DaskExecutor("local", jobs=1)
    assert e.value.path == "--dask"
    assert "\n" not in str(e.value)
    assert_names_this_checkout(str(e.value))


def test_slurm_without_dask_jobqueue_names_this_checkout(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    with pytest.raises(BraidError) as e:
        slurm.check_available()
    assert_names_this_checkout(str(e.value))


def test_outside_a_checkout_it_names_the_packages(tmp_path):
    from braid.sweep.executors import sweep_extra_install

    cmd = sweep_extra_install(tmp_path)
    assert "dask[distributed]" in cmd and "dask-jobqueue" in cmd and "braid" not in cmd.split("install", 1)[1]

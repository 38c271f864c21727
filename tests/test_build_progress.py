"""Build progress (issue 12, "Progress"): the core reports each build stage; the front shows a
bar for large topologies only (`braid.buildprogress.LARGE_NODES`), never for small ones, and
never with `--no-progress`."""

from __future__ import annotations

import io
import tomllib

import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML
from rich.console import Console

import braid
from braid import api, buildprogress, show
from braid.cli import main

LINK = {"rate": "100Gbps", "delay": "1us"}


def fat_tree(k: int) -> dict:
    # k = 32: 8,192 hosts and 1,280 switches (9,472 nodes, above LARGE_NODES); no traffic so
    # that the test stays fast.
    return {"name": f"ft{k}", "duration": "10us", "topology": {"kind": "fat-tree", "k": k, "host_link": LINK, "fabric_link": LINK}, "measure": {"interval": "0us", "messages": False}}


@pytest.fixture
def terminal(monkeypatch):
    """stderr as a terminal whose output the test reads."""
    buf = io.StringIO()
    monkeypatch.setitem(show._consoles, True, Console(file=buf, force_terminal=True, width=120))
    return buf


def test_a_callback_gets_every_stage_to_its_end():
    got = []
    braid.validate(fat_tree(8), progress=lambda s, d, t: got.append((s, d, t)))
    stages = [s for i, (s, _, _) in enumerate(got) if i == 0 or got[i - 1][0] != s]
    assert stages == [s for s in buildprogress.STAGES]
    assert ("routes", 32, 32) in got  # one route search per edge switch (k²/2)
    assert all(0 <= d <= t for _, d, t in got)


def test_a_large_build_shows_progress_and_a_small_one_does_not(terminal):
    assert buildprogress.is_large(api.build(fat_tree(32), progress=False)[0])
    api.build(fat_tree(32), progress=True)
    out = terminal.getvalue()
    # Rich redraws on a timer; its last frame (drawn when the bar stops) is the last stage's.
    assert "building ft32" in out and "tenants 0/0" in out, out[-500:]
    terminal.seek(0)
    terminal.truncate()
    assert not buildprogress.is_large(api.build(fat_tree(16), progress=False)[0])
    api.build(fat_tree(16), progress=True)
    api.build(tomllib.loads(SMALL_TOML), progress=True)
    assert "building" not in terminal.getvalue()


def test_validate_and_run_show_it_unless_no_progress(terminal, tmp_path):
    p = tmp_path / "ft.toml"
    p.write_text(
        'name = "big"\nduration = "1ns"\n[topology]\nkind = "fat-tree"\nk = 32\n'
        'host_link = { rate = "100Gbps", delay = "1us" }\nfabric_link = { rate = "100Gbps", delay = "1us" }\n'
        '[measure]\ninterval = "0us"\nmessages = false\n'
    )
    r = CliRunner().invoke(main, ["validate", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "building big" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    r = CliRunner().invoke(main, ["validate", "--no-progress", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["run", "--no-progress", "--no-write", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "building" not in terminal.getvalue()
    r = CliRunner().invoke(main, ["run", "--no-write", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "building big" in terminal.getvalue()


def test_an_exception_in_the_callback_is_raised_after_the_build():
    def boom(stage, done, total):
        if stage == "routes":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        api.build(fat_tree(4), progress=boom)

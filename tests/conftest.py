"""Shared fixtures: a small, fast scenario as TOML text and as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

SMALL_TOML = """\
name = "small two-tor"
seed = 1
duration = "5ms"

[topology]
kind = "two-tor"
hosts_per_tor = 3
paths = 2
host_link = { rate = "10Gbps", delay = "1us" }
fabric_link = { rate = "10Gbps", delay = "1us" }

[transport]
kind = "dcqcn"

[[traffic]]
pattern = "permutation"
cross = true
size = "200KB"
start = "0us"

[measure]
interval = "10us"
queues = ["all-fabric"]
"""


@pytest.fixture
def small_toml() -> str:
    return SMALL_TOML


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL_TOML)
    return p

"""`braid perftest` / `braid conformance`: the front to the real-NIC binaries of crates/braid-rdma.

They hand every argument to the binary unchanged and return its exit code; without the binary they
say in one line how to build it, exit 2. (The binaries themselves run on Soft-RoCE in
scripts/softroce-test.sh, which CI runs.)"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def _braid(*args: str, env_bin: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, BRAID_RDMA_BIN=str(env_bin))
    return subprocess.run([sys.executable, "-m", "braid.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("cmd,binary", [("perftest", "braid-perftest"), ("conformance", "braid-conformance")])
def test_without_the_binary_one_line_says_how_to_build_it(tmp_path, cmd, binary):
    r = _braid(cmd, "write_bw", "-d", "rxe0", env_bin=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {binary}: not found")
    assert "cargo build --release -p braid-rdma --features rdma --bins" in lines[0]


@pytest.mark.parametrize("cmd,binary", [("perftest", "braid-perftest"), ("conformance", "braid-conformance")])
def test_arguments_reach_the_binary_unchanged_and_its_exit_code_comes_back(tmp_path, cmd, binary):
    fake = tmp_path / binary
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\nexit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    args = ["write_bw", "-d", "rxe0", "-s", "65536", "--report_gbits", "--middleware", "raw,justitia", "--json", "--help", "10.0.0.1"]
    r = _braid(cmd, *args, env_bin=tmp_path)
    assert r.returncode == 3
    assert r.stdout.splitlines() == args

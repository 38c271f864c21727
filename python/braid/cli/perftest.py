"""``braid perftest`` and ``braid conformance``: the real-NIC tools of ``crates/braid-rdma``
(``braid-perftest``, ``braid-conformance``), run from the ``braid`` command.

They are Rust binaries built with the ``rdma`` cargo feature (rdma-core's libibverbs is loaded at
run time), not part of the Python extension: the simulator needs no RDMA library, and a machine
without one still installs braid. This front finds the binary and hands it every argument
unchanged, so ``braid perftest write_bw -d rxe0 -s 65536 --report_gbits`` is
``braid-perftest write_bw -d rxe0 -s 65536 --report_gbits``. When the binary is not there it says
how to build it, in one line, with exit code 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import click

from ..scenario import BraidError

BUILD = "cargo build --release -p braid-rdma --features rdma --bins"


def find_tool(name: str) -> Optional[Path]:
    """The binary ``name``: $BRAID_RDMA_BIN/name, then PATH, then the source tree's target/ (an
    editable install: this file is three folders below the workspace)."""
    env = os.environ.get("BRAID_RDMA_BIN")
    if env:
        p = Path(env) / name
        return p if p.is_file() and os.access(p, os.X_OK) else None
    hit = shutil.which(name)
    if hit:
        return Path(hit)
    root = Path(__file__).resolve().parents[3]
    for profile in ("release", "debug"):
        p = root / "target" / profile / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def run_tool(name: str, args: tuple) -> int:
    exe = find_tool(name)
    if exe is None:
        where = f" in $BRAID_RDMA_BIN ({os.environ['BRAID_RDMA_BIN']})" if os.environ.get("BRAID_RDMA_BIN") else " on PATH or in the source tree's target/"
        raise BraidError(
            name,
            f"not found{where}: it is braid's real-NIC backend, built apart from the simulator with "
            f"`{BUILD}` (needs clang, libclang-dev and cmake; running it needs rdma-core's "
            "libibverbs1 and ibverbs-providers); see docs/rdma.md",
        )
    try:
        return subprocess.call([str(exe), *args])
    except KeyboardInterrupt:
        return 130


_PASS = dict(ignore_unknown_options=True, allow_extra_args=True, help_option_names=[])


@click.command("perftest", context_settings=_PASS, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def perftest(args: tuple) -> None:
    """perftest's benchmarks (write_bw, write_lat, send_bw, send_lat, read_bw, read_lat) on a real RDMA device,
    through braid's apps and middleware: ``braid perftest TEST [-d DEV] [-x GID] [-s BYTES]
    [-n ITERS] [-D SECONDS] [-q QPS] [-t DEPTH] [-c RC|UC|UD] [-p PORT] [--report_gbits]
    [--middleware NAME[,NAME]] [--json] [SERVER]`` (server without SERVER). Runs braid-perftest."""
    sys.exit(run_tool("braid-perftest", args))


@click.command("conformance", context_settings=_PASS, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def conformance(args: tuple) -> None:
    """The verbs conformance suite on a real RDMA device (``-d DEV [--middleware NAME]
    [--busy-poll]``). Runs braid-conformance."""
    sys.exit(run_tool("braid-conformance", args))


COMMANDS = (perftest, conformance)

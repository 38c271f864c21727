"""``braid bench``: fixed scenarios, each run in a fresh child process so that CPU time and peak
memory (``ru_maxrss`` from ``wait4``) belong to that scenario alone.

The child imports only the core and the scenario reader (no polars, no numpy), builds the run,
advances it to the end and prints its statistics as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, List, Optional

from .scenario import BraidError, load_scenario, packaged_scenario

__all__ = ["run_bench", "find_anchors", "benchmarks"]


def find_anchors(explicit: Optional[str] = None) -> Optional[Path]:
    """The HPCC anchor folder: --anchors, $BRAID_HPCC_ANCHORS, ../shared/anchors/hpcc (from the
    working directory or the repository) or /work/shared/anchors/hpcc."""
    cands = []
    if explicit:
        p = Path(explicit)
        if not (p / "topology-fattree-320.txt").exists():
            raise BraidError("--anchors", f"{explicit}: expected the HPCC anchor folder (with topology-fattree-320.txt)")
        return p
    if os.environ.get("BRAID_HPCC_ANCHORS"):
        cands.append(Path(os.environ["BRAID_HPCC_ANCHORS"]))
    repo = Path(__file__).resolve().parents[2]
    cands += [Path.cwd().parent / "shared/anchors/hpcc", repo.parent / "shared/anchors/hpcc", Path("/work/shared/anchors/hpcc")]
    for c in cands:
        if (c / "topology-fattree-320.txt").exists():
            return c
    return None


def _hpcc_dcqcn(anchors: Path, config: str, topo: str, flows: str) -> dict:
    """An anchor scenario as `braid import-hpcc` turns it into a braid scenario (DCQCN with the
    config's timers and rates, per-rate ECN maps, 32 MiB buffers, dynamic PFC, 1000-byte
    payloads, high-priority ACKs). Time series and per-message records are off: the benchmark
    measures the simulator, as HPCC's own run wrote only its FCT file."""
    from .hpcc_import import convert

    sc = convert(anchors / config, topology=str(anchors / topo), flows=str(anchors / flows)).scenario
    sc["name"] = f"HPCC anchors: {Path(flows).stem}"
    sc["measure"] = {"interval": "0ns", "messages": False}
    return sc


def benchmarks(anchors: Optional[Path], quick: bool) -> List[tuple]:
    """(name, description, scenario dict or path, base_dir)."""
    out: List[tuple] = [
        ("two-tor", "demo: two-ToR permutation, 5 x 10 MB, DCQCN", packaged_scenario("two-tor-permutation"), None),
        ("incast-8to1", "demo: 8:1 incast, 1 MB each, PFC", packaged_scenario("incast"), None),
    ]
    if anchors is not None:
        out.append(
            ("hpcc-incast", "HPCC anchors 1: star of 65, 2 x 200 MB to one host, DCQCN", _hpcc_dcqcn(anchors, "config-dcqcn-incast.txt", "topology-star-65.txt", "flows-incast-2to1.txt"), anchors)
        )
        if not quick:
            out.append(
                (
                    "hpcc-fattree",
                    "HPCC anchors 2 (headline): fat-tree 320 hosts, 3,100 web-search flows, DCQCN",
                    _hpcc_dcqcn(anchors, "config-dcqcn-fattree-websearch.txt", "topology-fattree-320.txt", "flows-websearch-320h-30pct-5ms.txt"),
                    anchors,
                )
            )
    return out


def _child(spec_file: str) -> None:
    """Runs one benchmark; prints one JSON line of statistics."""
    spec = json.loads(Path(spec_file).read_text())
    from . import _core

    t0 = time.perf_counter()
    sim = _core.Simulation(spec["json"], spec["base_dir"], None)
    t_build = time.perf_counter() - t0
    end = sim.end_ps()
    while not sim.advance(end):
        pass
    wall = time.perf_counter() - t0
    r = sim.results(tables=False)
    print(json.dumps({"build_s": t_build, "wall_s": wall, "stats": r["stats"], "headline": r["headline"], "counters": r["counters"]}))


def run_one(name: str, source, base_dir: Optional[Path]) -> dict:
    sc = load_scenario(source, base_dir=base_dir)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"json": sc.to_json(), "base_dir": str(sc.base_dir)}, f)
        spec = f.name
    try:
        with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
            p = subprocess.Popen([sys.executable, "-m", "braid.bench", "--child", spec], stdout=fo, stderr=fe, text=True)
            try:
                _, status, ru = os.wait4(p.pid, 0)
            except BaseException:
                p.kill()
                p.wait()
                raise
            p.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            fe.seek(0)
            stdout, stderr = fo.read(), fe.read()
    finally:
        os.unlink(spec)
    if p.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": name, "error": f"exit {p.returncode}: {last}"}
    data = json.loads(stdout.strip().splitlines()[-1])
    data["name"] = name
    data["cpu_s"] = ru.ru_utime + ru.ru_stime
    data["max_rss_mb"] = ru.ru_maxrss / 1024.0  # KiB on Linux
    return data


def run_bench(only: Iterable[str] = (), quick: bool = False, anchors: Optional[str] = None, json_out: Optional[str] = None) -> List[dict]:
    from rich.table import Table

    from .show import console, fmt

    anc = find_anchors(anchors)
    todo = benchmarks(anc, quick)
    only = list(only)
    if only:
        names = {b[0] for b in todo}
        for o in only:
            if o not in names:
                raise BraidError("--only", f"unknown benchmark {o!r}; available: {', '.join(sorted(names))}")
        todo = [b for b in todo if b[0] in only]
    c = console()
    if anc is None:
        c.print("[dim]HPCC anchors not found (../shared/anchors/hpcc): skipping the HPCC scenarios[/dim]")
    rows = []
    for name, desc, source, base in todo:
        c.print(f"[bold]{name}[/bold]: {desc} ...", end="")
        r = run_one(name, source, base)
        r["description"] = desc
        rows.append(r)
        c.print(" [red]failed[/red]" if "error" in r else f" {r['cpu_s']:.2f} s CPU")
    t = Table(title="braid bench", header_style="bold")
    for col in ("scenario", "events", "Mev/s", "sim/wall", "wall s", "CPU s", "RSS MB", "flows"):
        t.add_column(col, justify="left" if col == "scenario" else "right", no_wrap=True)
    for r in rows:
        if "error" in r:
            t.add_row(r["name"], f"[red]{r['error']}[/red]", "", "", "", "", "", "")
            continue
        st, h = r["stats"], r["headline"]
        wall = r["wall_s"]
        ev = st.get("events", 0)
        t.add_row(
            r["name"],
            f"{ev / 1e6:.2f} M",
            f"{ev / wall / 1e6:.2f}" if wall else "-",
            f"{st.get('sim_time_ps', 0) / 1e12 / wall:.3g}" if wall else "-",
            f"{wall:.2f}",
            f"{r['cpu_s']:.2f}",
            f"{r['max_rss_mb']:.0f}",
            f"{int(h.get('flows_completed', 0))}/{int(h.get('flows', 0))}",
        )
    c.print(t)
    if any(r["name"] == "hpcc-fattree" and "error" not in r for r in rows):
        c.print("HPCC ns-3 on the fat-tree anchor: 118.8 M events, 220.5 s CPU, 347 MB peak (target: <= 22 s CPU, <= 347 MB).")
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":  # pragma: no cover - the child side of run_one
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        sys.exit("usage: python -m braid.bench --child SPEC.json")

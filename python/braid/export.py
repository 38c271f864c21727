"""``braid export``: a results folder in other tools' formats.

``hpcc`` writes the text files HPCC ns-3 (alibaba-edu/High-Precision-Congestion-Control,
``simulation/scratch/third.cc``) writes, so its plotting scripts read braid runs unchanged:

* ``fct.txt``: one line per completed flow, in completion order:
  ``sip dip sport dport size start_time fct standalone_fct`` — addresses as 8 hex digits in
  HPCC's scheme (node id n -> 0x0b000001 + (n // 256) << 16 + (n % 256) << 8), times in ns.
  ``dport`` is the flow's own (its traffic table's ``dport``, default 100 as HPCC's generator
  writes, or the HPCC flow file's); an application, which has none, and folders written before
  braid kept it show RoCEv2's UDP port 4791, the port every packet carries.
* ``pfc.txt``: one line per PFC frame a port received (what HPCC's ``QbbPfc`` trace records):
  ``time node_id node_type if_index type`` — time in ns, node_type 0 host / 1 switch, if_index
  = braid port + 1 (HPCC's device 0 is the loopback), type 1 pause / 0 resume.
* ``qlen.txt`` (only when ``measure.queues`` sampled switch ports): HPCC's queue-length
  distribution, ``time: T`` then per port ``node_id if_index c0 c1 ...`` where ``ck`` counts the
  samples whose queue held k KB (1 KB = 1000 B). HPCC samples every ``QLEN_MON_INTERVAL``
  (100 ns) and all switch ports; braid's samples are the sampled ports every
  ``measure.interval``, so the counts are of those samples, written once at the last sample.

``csv`` writes every Parquet table of the folder as ``<table>.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import polars as pl

from .results import TABLES, layer_table_names, read_results, write_file_atomic
from .scenario import BraidError

FORMATS = ("hpcc", "csv")
ROCEV2_PORT = 4791


def hpcc_ip(node: int) -> str:
    """HPCC ns-3's address of node ``node``, as its files print it."""
    return f"{0x0B000001 + (node // 256) * 0x10000 + (node % 256) * 0x100:08x}"


def _host_nodes(ports: pl.DataFrame) -> dict:
    if ports.is_empty() or "host" not in ports.columns:
        raise BraidError("ports.parquet", "missing: the HPCC export needs the port map (re-run with this braid version)")
    h = ports.filter(pl.col("host") >= 0).select("host", "node").unique()
    return dict(zip(h["host"].to_list(), h["node"].to_list()))


def _fct_lines(flows: pl.DataFrame, host_node: dict) -> list[str]:
    if flows.is_empty():
        return []
    done = flows.filter(pl.col("fct_ps").is_not_null() & (pl.col("fct_ps") >= 0)).sort(["finish_ps", "flow"])
    # HPCC's standalone FCT is the flow alone on its own route (third.cc: base RTT + bytes at the
    # route's bottleneck): braid's path_ideal_fct_ps, not the fabric-wide ideal_fct_ps.
    alone = "path_ideal_fct_ps" if "path_ideal_fct_ps" in done.columns else "ideal_fct_ps"
    out = []
    for f in done.iter_rows(named=True):
        dport = f.get("dport") or ROCEV2_PORT
        out.append(
            f"{hpcc_ip(host_node[f['src']])} {hpcc_ip(host_node[f['dst']])} {f['sport']} {dport} "
            f"{f['size']} {f['start_ps'] // 1000} {f['fct_ps'] // 1000} {f[alone] // 1000}"
        )
    return out


def _pfc_lines(pfc: pl.DataFrame, ports: pl.DataFrame) -> Optional[list[str]]:
    if "direction" not in pfc.columns:
        return None if pfc.is_empty() else []
    role = dict(zip(ports["node"].to_list(), ports["role"].to_list()))
    out = []
    for r in pfc.filter(pl.col("direction") == "received").iter_rows(named=True):
        kind = 0 if role[r["node"]] == "host" else 1
        out.append(f"{r['time_ps'] // 1000} {r['node']} {kind} {r['port'] + 1} {1 if r['type'] == 'pause' else 0}")
    return out


def _qlen_lines(queues: pl.DataFrame, ports: pl.DataFrame) -> Optional[list[str]]:
    if queues.is_empty():
        return None
    ids = dict(zip(ports["node_name"].to_list(), ports["node"].to_list()))
    role = dict(zip(ports["node_name"].to_list(), ports["role"].to_list()))
    hist: dict = {}
    for name, b in zip(queues["port"].to_list(), queues["bytes"].to_list()):
        node, port = name.rsplit(":", 1)
        if role.get(node) != "switch":
            continue
        cnt = hist.setdefault((ids[node], int(port) + 1), [])
        kb = b // 1000
        if len(cnt) < kb + 1:
            cnt.extend([0] * (kb + 1 - len(cnt)))
        cnt[kb] += 1
    if not hist:
        return None
    out = [f"time: {int(queues['time_ps'].max()) // 1000}"]
    for (node, ifx), cnt in sorted(hist.items()):
        out.append(f"{node} {ifx} " + " ".join(str(c) for c in cnt))
    return out


def export(folder: Union[str, Path], fmt: str, out: Optional[Union[str, Path]] = None) -> list[Path]:
    """Writes the results folder ``folder`` in format ``fmt`` into ``out`` (default: the
    folder itself); returns the files written."""
    if fmt not in FORMATS:
        raise BraidError("--format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    r = read_results(folder)
    dest = Path(out) if out is not None else Path(folder)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BraidError(str(dest), f"cannot create the output folder: {e.strerror or e}") from None
    written: list[Path] = []

    def put(name: str, lines: list[str]) -> None:
        p = dest / name
        # Whole or absent: a full disk leaves no empty or truncated file behind.
        write_file_atomic(p, lambda t: t.write_text("".join(line + "\n" for line in lines)))
        written.append(p)

    if fmt == "csv":
        for name in (*TABLES, *layer_table_names(folder)):
            df = r[name]
            # A table a folder written before it existed lacks (read back without columns).
            if df.is_empty() and not df.columns:
                continue
            p = dest / f"{name}.csv"
            write_file_atomic(p, lambda t, df=df: df.write_csv(t))
            written.append(p)
        return written
    ports = r["ports"]
    put("fct.txt", _fct_lines(r["flows"], _host_nodes(ports)))
    pfc = _pfc_lines(r["pfc"], ports)
    if pfc is not None:
        put("pfc.txt", pfc)
    q = _qlen_lines(r["queues"], ports)
    if q is not None:
        put("qlen.txt", q)
    return written

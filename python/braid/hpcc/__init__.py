"""HPCC ns-3 interop: its ``config.txt`` as a braid scenario (``convert``: ``braid import-hpcc``;
the config read by ``config.py``, its congestion-control keys by ``cc.py``) and a run's slowdowns
beside HPCC's ``fct.txt`` (``compare``: ``braid compare-hpcc``). HPCC's topology and flow files
are read by the core (braid-topo's reader, ``braid._core.hpcc_topology`` / ``hpcc_flows``), the
reader a run uses."""

from __future__ import annotations

from ..toml_out import fmt_bytes, fmt_duration, fmt_rate
from .config import ARITY, HpccImportError, parse_config
from .convert import CC_NAMES, IGNORED, Imported, convert

__all__ = ["ARITY", "CC_NAMES", "IGNORED", "HpccImportError", "Imported", "convert", "parse_config", "fmt_bytes", "fmt_duration", "fmt_rate"]

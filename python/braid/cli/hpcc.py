"""``braid import-hpcc`` and ``braid compare-hpcc``: HPCC ns-3's inputs and outputs."""

from __future__ import annotations

from ..hpcc_compare import compare_hpcc
from ..hpcc_import import import_hpcc

COMMANDS = (import_hpcc, compare_hpcc)

"""Reading the files a user names (scenarios, HPCC configs, topology and flow files, fct.txt):
regular files only, of a bounded size, UTF-8 with an optional byte-order mark.

A device (``/dev/zero``), a FIFO or a socket given as an input would be read until memory runs
out or would block forever; such a file is refused before it is opened. A regular file larger
than the limit is refused from its size, and a file whose size the kernel does not report
(``/proc``) is read only up to the limit. The same rules hold in the core's readers
(``braid-topo``'s ``input.rs``); the limits are in docs/scenario.md ("Input files").

Failures are ``OSError`` with a ``strerror`` that says what is wrong, so the callers' existing
``cannot read: <strerror>`` lines carry them; no message quotes the file's content.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Union

__all__ = ["read_input_bytes", "read_input_text", "MIB", "TEXT_LIMIT", "FLOWS_LIMIT"]

MIB = 1 << 20
#: Scenario, config, topology and fct.txt files: the largest real one (a k = 48 fat-tree's
#: topology, 27,648 hosts) is a few MB.
TEXT_LIMIT = 256 * MIB
#: Flow lists: HPCC flow files of tens of millions of flows (~40 bytes a line).
FLOWS_LIMIT = 4096 * MIB
BOM = b"\xef\xbb\xbf"


def _size(n: int) -> str:
    return f"{n / MIB:,.0f} MiB" if n >= MIB else f"{n:,} bytes"


def read_input_bytes(path: Union[str, Path], limit: int = TEXT_LIMIT) -> bytes:
    """The file's bytes; OSError for a non-regular file or one over ``limit`` bytes."""
    p = Path(path)
    st = os.stat(p)  # follows links: a link to a FIFO is a FIFO
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder, expected a file", str(p))
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"is {kind}, not a regular file (braid reads inputs only from regular files)", str(p))
    if st.st_size > limit:
        raise OSError(errno.EFBIG, f"is {_size(st.st_size)}, more than the {_size(limit)} braid reads from an input file", str(p))
    # O_NONBLOCK: should the path have become a FIFO since the check, open does not wait.
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "is not a regular file (braid reads inputs only from regular files)", str(p))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"is more than the {_size(limit)} braid reads from an input file", str(p))
    return data


def read_input_text(path: Union[str, Path], limit: int = TEXT_LIMIT) -> str:
    """The file as UTF-8 text, a leading byte-order mark (Windows editors write one) dropped;
    OSError for a non-regular file, one over ``limit`` bytes, or bytes that are not UTF-8."""
    data = read_input_bytes(path, limit)
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OSError(errno.EILSEQ, f"is not UTF-8 text (byte {e.start})", str(path)) from None

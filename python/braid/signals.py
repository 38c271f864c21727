"""SIGTERM handled like Ctrl-C: it raises :class:`Terminated` (a KeyboardInterrupt) where the
program is, so the same clean-up runs (no half-written results), and the CLI exits with 143.

Lives in its own module so that one class exists even when ``braid.cli`` runs as ``__main__``."""

from __future__ import annotations

import signal


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived."""


def on_sigterm(signum, frame) -> None:
    # Once: a second SIGTERM during the clean-up must not interrupt the clean-up.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def install() -> None:
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, on_sigterm)

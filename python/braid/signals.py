"""SIGTERM handled like Ctrl-C: it raises :class:`Terminated` (a KeyboardInterrupt) where the
program is, so the same clean-up runs (no half-written results), and the CLI exits with 143.

Lives in its own module so that one class exists even when ``braid.cli`` runs as ``__main__``."""

from __future__ import annotations

import contextlib
import multiprocessing
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


@contextlib.contextmanager
def workers_stop_with_us():
    """Ctrl-C or SIGTERM stops the worker processes too, at once: the pool would otherwise wait
    for the runs in progress (and a SIGTERM reaches only this process, not its workers)."""

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for p in multiprocessing.active_children():
            with contextlib.suppress(Exception):
                p.terminate()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for p in multiprocessing.active_children():
            with contextlib.suppress(Exception):
                p.terminate()
                p.join(5)

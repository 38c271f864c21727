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

    # A stop terminates the workers while they hold the pool's semaphores; multiprocessing's
    # resource tracker (a process started with this interpreter's -W options) then unlinks them
    # and warns "There appear to be N leaked semaphore objects" after braid's one-line message.
    # The clean-up is the tracker's job and it does it: the warning is noise, kept off the
    # terminal when the tracker is started here.
    import sys

    quiet = "ignore:resource_tracker:UserWarning"
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)

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

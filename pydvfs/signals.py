"""Termination signals as exceptions, so that every path that changed the board unwinds through
its ``finally`` and restores it. Ctrl-C already does this (KeyboardInterrupt); SIGTERM (a job
scheduler, ``kill``), SIGHUP (a closed terminal or ssh session) and SIGQUIT do not by default.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Terminated(BaseException):
    """A termination signal arrived; like KeyboardInterrupt it is not an ordinary error."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


# While > 0 a termination signal is noted, not raised: see hold().
_held = 0
_pending: int | None = None


def hold() -> None:
    """Note termination signals instead of raising until :func:`release`: for a moment in which
    an exception would lose track of something, such as a child process half started."""
    global _held
    _held += 1


def release() -> int | None:
    """End a :func:`hold`; returns the signal that arrived meanwhile (once), or None."""
    global _held, _pending
    _held -= 1
    if _held > 0 or _pending is None:
        return None
    signum, _pending = _pending, None
    return signum


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """While inside, SIGTERM/SIGHUP/SIGQUIT raise :class:`Terminated` (main thread only; the
    previous handlers come back on exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        global _pending
        if _held:
            _pending = signum
            return
        raise Terminated(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)

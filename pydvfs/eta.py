"""A progress line with an ETA on stderr, for the long verbs off the board (train's LOOCV,
evaluate, analyse, roofline fit).

Library loops wrap what they iterate in :func:`track`; it costs nothing unless a caller turned
reporting on with :func:`reporting` (the CLI does, for its verbs). On a terminal the line is
redrawn in place; into a file or pipe a line is written at most every few seconds and once at
the end, so logs stay short. Dependency-free, like the on-board path.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from typing import Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")
_stream: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("pydvfs_eta_stream", default=None)
LOG_EVERY_S = 5.0  # not a terminal: one line per this many seconds, plus the last


@contextlib.contextmanager
def reporting(stream: TextIO | None = None) -> Iterator[None]:
    """Within the block, :func:`track` reports on ``stream`` (default stderr)."""
    token = _stream.set(stream or sys.stderr)
    try:
        yield
    finally:
        _stream.reset(token)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def track(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T] | Iterable[T]:
    """``items`` unchanged, reporting "label done/total pct elapsed ETA" while they are consumed."""
    stream = _stream.get()
    if stream is None:
        return items
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = 0
    return _tracked(items, label, total, stream)


def _tracked(items: Iterable[T], label: str, total: int, stream: TextIO) -> Iterator[T]:
    tty = getattr(stream, "isatty", lambda: False)()
    t0 = last = time.monotonic()
    done = 0

    def line(final: bool) -> str:
        elapsed = time.monotonic() - t0
        if total:
            eta = "" if final or not done else f", ETA {_clock(elapsed * (total - done) / done)}"
            return f"{label}: {done}/{total} ({100 * done // total}%) {_clock(elapsed)}{eta}"
        return f"{label}: {done} {_clock(elapsed)}"

    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if tty:
            stream.write("\r" + line(False) + "\033[K")
            stream.flush()
        elif now - last >= LOG_EVERY_S and done < total:
            stream.write(line(False) + "\n")
            stream.flush()
            last = now
    stream.write(("\r" if tty else "") + line(True) + ("\033[K\n" if tty else "\n"))
    stream.flush()

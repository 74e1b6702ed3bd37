"""One owner per GPU, on the Python side: the board's lock (govcore/lock.h) held by this process
from its first pin or apply until its restore, and for the whole of a ``governing()`` block
(``pydvfs run``, ``sweep``, ``governed``), so that no other process pins or restores the board
while this one governs it. The kernel drops the lock when the process exits (kill -9 included).

A flock belongs to an open file: this process takes each board's lock once and counts its
users here.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Iterator

from .. import _core

LOCK_WAIT_MS = 1000  # wait this long for another process's moment with the board (as govcore)


@dataclass
class Owner:
    """This process's hold on one board. ``pinned``: a pin or apply not yet restored."""

    lock: object | None
    holds: int = 0
    pinned: bool = False


_mutex = threading.Lock()
_owners: dict[str, Owner] = {}


@contextlib.contextmanager
def governing(board, state_dir: str | None) -> Iterator[Owner]:
    """Hold the board's lock for the block (taken if this process does not hold it yet;
    BoardBusyError naming the holder's pid if another process does). It stays held after the
    block while ``owner.pinned`` is set. Boards behind the daemon need no lock here: the daemon
    takes it."""
    if not isinstance(board, _core.Board):
        yield Owner(None)
        return
    from .remote import check_writable

    check_writable(board)
    key = board.state_path(state_dir)
    with _mutex:
        owner = _owners.get(key)
        if owner is None:
            owner = Owner(_core.Lock(board, state_dir, LOCK_WAIT_MS))
            _owners[key] = owner
        owner.holds += 1
    try:
        yield owner
    finally:
        with _mutex:
            owner.holds -= 1
            if owner.holds == 0 and not owner.pinned:
                owner.lock.release()
                del _owners[key]


def holds(board, state_dir: str | None) -> bool:
    """True if this process holds the board's lock."""
    return isinstance(board, _core.Board) and board.state_path(state_dir) in _owners


def holder_pid(board, state_dir: str | None) -> int:
    """The pid of the process that governs the board (0: none)."""
    return _core.lock_holder(board, state_dir) if isinstance(board, _core.Board) else 0

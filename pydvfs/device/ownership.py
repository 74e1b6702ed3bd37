"""One owner per GPU, on the Python side: the GPU's lock (govcore/lock.h) held by this process
from its first pin or apply until its restore, and for the whole of a ``governing()`` block
(``pydvfs run``, ``sweep``, ``governed``), so that no other process pins or restores the board
while this one governs it. The kernel drops the lock when the process exits (kill -9 included).

The lock belongs to the GPU (its devfreq node), not to a state folder: a second process with
another ``--state-dir`` is refused all the same.

Within this process, threads take turns: ``changing()`` serialises every pin, restore and apply
(the C calls run without the GIL, and two at once would each save the other's pin as the
"original"). A flock belongs to an open file: this process takes each GPU's lock once and counts
its users here.
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
    """This process's hold on one GPU. ``pinned``: a pin or apply not yet restored; ``blocks``:
    governing blocks open on it (an inner ``governed()`` leaves the board to the outer one)."""

    lock: object | None
    holds: int = 0
    pinned: bool = False
    blocks: int = 0


_mutex = threading.Lock()  # guards _owners
_changing = threading.RLock()  # one pin/restore/apply at a time in this process
_owners: dict[str, Owner] = {}
_remote_blocks: dict[str, int] = {}  # governing blocks on boards behind the daemon


@contextlib.contextmanager
def changing() -> Iterator[None]:
    """Hold this process's turn to change a board: every pin, restore and apply runs inside one,
    so threads never interleave a save, a pin and a restore."""
    with _changing:
        yield


def _key(board) -> str:
    return board.lock_path()


@contextlib.contextmanager
def governing(board, block: bool = False) -> Iterator[Owner]:
    """Hold the GPU's lock for the block (taken if this process does not hold it yet;
    BoardBusyError naming the holder's pid if another process does). It stays held after the
    block while ``owner.pinned`` is set. ``block``: a governing block (counted in
    ``owner.blocks``). Boards behind the daemon need no lock here: the daemon takes it."""
    if not isinstance(board, _core.Board):
        key = f"daemon:{board.sysfs_root}"
        with _mutex:
            _remote_blocks[key] = _remote_blocks.get(key, 0) + block
        try:
            yield Owner(None)
        finally:
            with _mutex:
                _remote_blocks[key] -= block
        return
    from .remote import check_writable

    check_writable(board)
    key = _key(board)
    with _mutex:
        owner = _owners.get(key)
        if owner is None:
            owner = Owner(_core.Lock(board, LOCK_WAIT_MS))
            _owners[key] = owner
        owner.holds += 1
        owner.blocks += block
    try:
        yield owner
    finally:
        with _mutex:
            owner.holds -= 1
            owner.blocks -= block
            if owner.holds == 0 and not owner.pinned:
                owner.lock.release()
                del _owners[key]


def in_block(board) -> bool:
    """True if a governing block of this process holds the GPU (any thread)."""
    if not isinstance(board, _core.Board):
        with _mutex:
            return _remote_blocks.get(f"daemon:{board.sysfs_root}", 0) > 0
    with _mutex:
        owner = _owners.get(_key(board))
        return owner is not None and owner.blocks > 0


def holds(board) -> bool:
    """True if this process holds the GPU's lock."""
    return isinstance(board, _core.Board) and _key(board) in _owners


def holder_pid(board) -> int:
    """The pid of the process that governs the GPU (0: none)."""
    return _core.lock_holder(board) if isinstance(board, _core.Board) else 0

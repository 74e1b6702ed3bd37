"""The progress file: how a training command tells ``pydvfs run``/``sweep`` how far it got.

The format (a public contract, documented here and in docs/online.md): one line holding the
number of training steps completed so far, a whole number >= 0 in decimal, e.g. ``1200\\n``.
The writer replaces the file atomically (it writes a temporary file in the same folder, created
O_EXCL|O_NOFOLLOW so a planted link is never followed, then renames it over the old one), so a
reader sees either the old count or the new one, never a partial line. A reader floors a decimal and treats a missing, empty or unreadable file as
"no count yet".

:func:`write_progress` is the one writer (used by ``pydvfs.workloads.finetune`` and the
simulated ``pydvfs.sim.train_process``); :func:`read_progress` the one reader.
"""
from __future__ import annotations

import contextlib
import math
import os
import stat

TMP_TRIES = 100  # names tried for the temporary file before giving up


def write_progress(path: str | os.PathLike, steps: float, tokens: float | None = None) -> None:
    """Replace ``path`` with ``int(steps)`` (and ``int(tokens)``), atomically (readers never
    see a partial file)."""
    replace_atomically(path, f"{int(steps)}\n" if tokens is None else f"{int(steps)} {int(tokens)}\n")


def replace_atomically(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text``, atomically: the one writer of the small files other
    processes read while they change (the progress file, the governor's status file).

    The folder may be one others can write (a user's, while the writer runs as root): the
    temporary file is created with O_EXCL|O_NOFOLLOW relative to the opened folder, so a
    symlink planted at its name is never followed, then renamed over ``path`` (a rename
    replaces a planted link itself, never its target)."""
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        tmp, fd = _create_tmp(dfd, name)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def _create_tmp(dfd: int, name: str) -> tuple[str, int]:
    """A fresh ``NAME.tmp.<pid>[.<n>]`` in the folder dfd: (its name, an open descriptor). An
    entry already there (a stale file, a planted link) is never opened: the next name is tried."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for n in range(TMP_TRIES):
        tmp = f"{name}.tmp.{os.getpid()}" + (f".{n}" if n else "")
        try:
            return tmp, os.open(tmp, flags, 0o644, dir_fd=dfd)
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {name}: {TMP_TRIES} names taken")


def read_progress(path: str | os.PathLike) -> int | None:
    """The step count in ``path`` (an integer; a decimal is floored), or None while it is
    missing, empty or unreadable."""
    return read_progress_tokens(path)[0]


def read_progress_tokens(path: str | os.PathLike) -> tuple[int | None, int | None]:
    """(the step count, the token count) in ``path``; each None where it is not there."""
    try:
        text = _read_regular(os.fspath(path)).strip()
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError):
        return None, None
    fields = text.split()
    if not 1 <= len(fields) <= 2:
        return None, None
    counts = []
    for field in fields:
        try:
            value = float(field)
        except ValueError:
            return None, None
        counts.append(int(value) if math.isfinite(value) and value >= 0 else None)
    return counts[0], counts[1] if len(counts) == 2 and counts[0] is not None else None


def _read_regular(path: str) -> str:
    """The text of a regular file; a FIFO or device at the path reads as "" (no count yet),
    never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(4096).decode()
    finally:
        os.close(fd)

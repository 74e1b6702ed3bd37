"""The progress file: how a training command tells ``pydvfs run``/``sweep`` how far it got.

The format (a public contract, documented here and in docs/online.md): one line holding the
number of training steps completed so far, a whole number from 0 to ``MAX_COUNT`` in ASCII
decimal, e.g. ``1200\\n`` (optionally a second, the tokens so far).
The writer replaces the file atomically (it writes a temporary file in the same folder, created
O_EXCL|O_NOFOLLOW so a planted link is never followed, then renames it over the old one), so a
reader sees either the old count or the new one, never a partial line. A reader floors a decimal and treats a missing, empty or unreadable file as
"no count yet".

:func:`write_progress` is the one writer (used by ``pydvfs.workloads.finetune`` and the
simulated ``pydvfs.sim.train_process``); :func:`read_progress` the one reader. A run counts the
steps it saw the count advance by (:class:`StepsSeen`), from what the file held when it
started (:func:`existing_count`: a file that is not a step count is refused, never touched).
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from .errors import InvalidValueError

TMP_TRIES = 100  # names tried for the temporary file before giving up
MAX_COUNT = 10**15  # the largest step (or token) count taken: beyond it, a garbled file, not a run


def write_progress(path: str | os.PathLike, steps: float, tokens: float | None = None) -> None:
    """Replace ``path`` with ``int(steps)`` (and ``int(tokens)``), atomically (readers never
    see a partial file)."""
    replace_atomically(path, f"{int(steps)}\n" if tokens is None else f"{int(steps)} {int(tokens)}\n")


def read_capped(fd: int, cap: int) -> bytes:
    """What the open file ``fd`` holds, read to ``cap`` + 1 bytes at most: a result longer than
    ``cap`` says the file is over it (the one bounded reader of files another user may grow:
    status files, board captures)."""
    data = b""
    while len(data) <= cap:
        chunk = os.read(fd, cap + 1 - len(data))
        if not chunk:
            break
        data += chunk
    return data


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


def check_replaceable(path: str | os.PathLike) -> None:
    """InvalidValueError where something other than a regular file is at ``path`` (a link, a
    folder, a FIFO): an output a verb rewrites is replaced, never written through a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise InvalidValueError(f"{path} is not a regular file (a link, a folder or a FIFO): not replaced")


def check_folders_above(path: str, what: str, error=InvalidValueError) -> None:
    """``error`` unless no user but root and this one can change where ``path`` leads: every
    symbolic link on the way, as written, owned by root or this user (another user's link chooses
    where the folder is), and every real folder above it owned by root or this user and writable
    by no one else unless sticky (/tmp: no one else can rename what this user owns there). A
    folder not made yet is skipped (the check runs again once it is). ``what`` names the folder
    in the message ("the run-record folder")."""
    me = os.geteuid()
    parts = path.rstrip("/").split("/")
    for i in range(2, len(parts)):
        p = "/".join(parts[:i])
        try:
            st = os.lstat(p)
        except OSError:
            break  # not made yet: nothing below it is either
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, me):
            raise error(f"refusing {what} {path}: {p} above it is a symbolic link owned by "
                        f"another user (uid {st.st_uid}); use a private folder")
    real = os.path.realpath(path)
    while real != "/":
        real = os.path.dirname(real)
        try:
            st = os.stat(real)
        except OSError:
            continue
        if st.st_uid not in (0, me) or (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX):
            raise error(f"refusing {what} {path}: {real} above it can be changed by another "
                        f"user (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):03o}); use a private folder")


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
        text = _read_regular(os.fspath(path))
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError):
        return None, None
    return _parse(text or "")


def _parse(text: str) -> tuple[int | None, int | None]:
    fields = text.strip().split()
    if not 1 <= len(fields) <= 2:
        return None, None
    counts = []
    for field in fields:
        if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", field):  # ASCII decimal: not '1e5', 'inf', '١٢'
            return None, None
        whole = field.partition(".")[0]
        value = int(whole) if len(whole) <= len(str(MAX_COUNT)) else None  # (int() of 4300 digits raises)
        counts.append(value if value is not None and value <= MAX_COUNT else None)  # past it: a glitch
    return counts[0], counts[1] if len(counts) == 2 and counts[0] is not None else None


def existing_count(path: str | os.PathLike) -> tuple[int | None, int | None]:
    """What ``path`` holds before a run that reads it starts: (steps, tokens) as
    :func:`read_progress_tokens`, (None, None) where nothing is there or the file is empty.
    ValueError saying what is there otherwise (a folder, a FIFO, a file that is not a step
    count): a run never takes, nor touches, a file that is not a step count."""
    try:
        text = _read_regular(os.fspath(path))
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        raise ValueError("it is a folder") from None
    except UnicodeDecodeError:
        raise ValueError("it is not a step count (not text)") from None
    except OSError as e:
        raise ValueError(f"it cannot be read ({e.strerror})") from None
    if text is None:
        raise ValueError("it is not a regular file")
    counts = _parse(text)
    if counts[0] is None and text.strip():
        raise ValueError("it is not a step count (one line: the steps done, a whole number)")
    return counts


def check_progress_file(progress: Path) -> tuple[int | None, int | None]:
    """The count at ``progress`` before a run that reads it starts (:func:`existing_count`);
    InvalidValueError where CMD could not write there or something that is not a step count is
    there, which is left as it is (the one check of ``run``'s and ``calibrate``'s file)."""
    if not progress.parent.is_dir():  # CMD could never write its count there
        raise InvalidValueError(f"--progress-file {progress}: no folder {progress.parent} to write the step count in")
    try:
        return existing_count(progress)
    except ValueError as e:
        raise InvalidValueError(f"--progress-file {progress}: {e}: refused, and left as it is (give the file "
                                "CMD writes its step count to)") from None


class StepsSeen:
    """The steps (and tokens) a run saw a progress file's count advance by, from the count it
    held when the run started (:func:`existing_count`): a count a writer already running had
    reached, or one left by an earlier run, is not the run's. A count that goes back is a new
    count from zero (CMD counting afresh over a count left before it): its value is added."""

    def __init__(self, start: tuple[int | None, int | None] = (None, None)):
        self.start = start
        self.last = list(start)
        self.counts: list[int | None] = [None, None]  # steps, tokens seen (None: no count seen)
        self.moved = False  # the step count differed from the start's once: CMD is counting

    def see(self, steps: int | None, tokens: int | None = None) -> None:
        """A reading of the file (each None where it holds no count)."""
        for i, now in enumerate((steps, tokens)):
            if now is None:
                continue
            last = self.last[i]
            self.counts[i] = (self.counts[i] or 0) + (now if last is None or now < last else now - last)
            self.last[i] = now
        self.moved = self.moved or (steps is not None and steps != self.start[0])

    @property
    def steps(self) -> int | None:
        return self.counts[0]

    @property
    def tokens(self) -> int | None:
        return self.counts[1]


def _read_regular(path: str) -> str | None:
    """The text of a regular file (its first 4096 bytes); None where a FIFO or a device is at
    the path, never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(4096).decode()
    finally:
        os.close(fd)

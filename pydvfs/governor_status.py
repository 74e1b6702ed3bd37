"""The governor's status file: what a running governor publishes for ``pydvfs exporter``.

The format (a public contract, documented here and in docs/metrics.md): one JSON object,
replaced atomically (written beside the file, then renamed over it, as the progress file is:
``pydvfs.progress``), so a reader never sees half a record::

    {"format": 1, "pid": 1234, "uid": 1000, "sysfs_root": "/", "board": "agx-orin",
     "updated_unix_s": 1764640000.0, "policy": "online", "objective": "energy",
     "phase": "search", "freq_mhz": 714.0, "domains_mhz": {"emc": 2133.0},
     "steps": 1200, "j_per_step": 3.21, "s_per_step": 0.41, "j_per_token": null,
     "saved_estimate_j": 512.0, "saved_reference": "maxn", "fallback": null}

``freq_mhz`` null: the clock is the board's own (MAXN). ``phase``: the search's phase
("search", "hold") or "static" (a one-off policy) or "fallback". ``saved_estimate_j``: the
energy the measured windows saved against the reference's J/step (``saved_reference``:
"maxn" where the search measured MAXN, else "start_clock"), an estimate as the run's report
gives it. A record whose ``pid`` no longer runs is stale: readers skip it.

Where: the path in ``$PYDVFS_GOVERNOR_STATUS`` (a file), set for ``pydvfs run`` and any
program using :class:`pydvfs.OnlineGovernor` or a trainer callback. The exporter reads every
``*.json`` of a folder (``--governor-status DIR``), so several runs on one board (one after the
other) can each write their own file there. Nothing here touches the board.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import time

from .progress import replace_atomically

FORMAT = 1
STATUS_ENV = "PYDVFS_GOVERNOR_STATUS"
MAX_BYTES = 64 * 1024  # a larger file is not a status record
REFERENCES = ("maxn", "start_clock")
PHASES = ("search", "hold", "static", "fallback")


def status_path() -> str | None:
    """Where this process publishes (``$PYDVFS_GOVERNOR_STATUS``), or None: not asked to."""
    return os.environ.get(STATUS_ENV) or None


def _clean(value):
    """JSON has no NaN: a number that is not finite is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    return value


def write_status(path: str | os.PathLike, record: dict) -> None:
    """Replace ``path`` with ``record`` (plus format, pid, uid, time), atomically."""
    data = {"format": FORMAT, "pid": os.getpid(), "uid": os.getuid(), "updated_unix_s": time.time(),
            **_clean(dict(record))}
    replace_atomically(path, json.dumps(data, sort_keys=True) + "\n")


def remove_status(path: str | os.PathLike) -> None:
    """Remove this process's record (the run ended); a record of another pid is left alone."""
    rec = read_status(path, check_alive=False)
    if rec is not None and rec.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            os.unlink(path)


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it runs
    return True


def read_status(path: str | os.PathLike, check_alive: bool = True) -> dict | None:
    """The record in ``path``, or None: missing, unreadable, not a record of this format, or
    (``check_alive``) its process no longer runs."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    try:
        rec = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        return None
    if check_alive and not _alive(rec.get("pid")):
        return None
    return rec


def read_folder(path: str | os.PathLike) -> list[dict]:
    """The live records of a folder's ``*.json`` (or of one file), newest first."""
    p = os.fspath(path)
    if os.path.isdir(p):
        try:
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
        except OSError:
            return []
        recs = [read_status(os.path.join(p, n)) for n in names]
    else:
        recs = [read_status(p)]
    live = [r for r in recs if r is not None]
    return sorted(live, key=lambda r: -float(r.get("updated_unix_s") or 0.0))


__all__ = ["FORMAT", "PHASES", "REFERENCES", "STATUS_ENV", "read_folder", "read_status", "remove_status",
           "status_path", "write_status"]

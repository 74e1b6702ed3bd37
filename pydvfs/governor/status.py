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
gives it. A record whose ``pid`` no longer runs is stale: readers skip it. A record counts only
for a process of the file's owner (anyone may write a file naming pid 1), and only with every
field of its type (:func:`load_status`): the folder is writable by every governed user.

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
import stat
import time

from ..progress import read_capped, replace_atomically

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


PID_MAX = 4194304  # Linux's PID_MAX_LIMIT: a larger pid is no process
_NUMBERS = ("freq_mhz", "steps", "j_per_step", "s_per_step", "j_per_token", "saved_estimate_j")
_TEXTS = ("sysfs_root", "board", "policy", "objective", "phase", "saved_reference", "fallback")


def _number(v) -> bool:
    """A JSON number a float holds (a 400-digit integer does not), not a bool."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _well_formed(rec) -> bool:
    """Every field of the format of its type (a reader then needs no check of its own)."""
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        return False
    pid, domains = rec.get("pid"), rec.get("domains_mhz")
    return (isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid <= PID_MAX
            and _number(rec.get("updated_unix_s"))
            and all(rec.get(k) is None or _number(rec[k]) for k in _NUMBERS)
            and all(rec.get(k) is None or (isinstance(rec[k], str) and "\0" not in rec[k]) for k in _TEXTS)
            and (domains is None or (isinstance(domains, dict)
                                     and all(v is None or _number(v) for v in domains.values()))))


def _owner_runs(pid: int, uid: int) -> bool:
    """True if process ``pid`` runs and belongs to ``uid`` (its /proc entry's owner)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


# why a file is not a live record: "bad" (damaged, not a status file, or a record naming a
# process its file's owner does not run) or "stale" (its process ended)
BAD, STALE = "bad", "stale"


def load_status(path: str | os.PathLike, check_alive: bool = True) -> tuple[dict | None, str | None]:
    """(record, None), or (None, why): missing or unreadable (why None), BAD or STALE. A record
    counts only for a live process of the file's owner: anyone may write a file naming pid 1."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO (held open by a writer), a device: not a record
            return None, BAD
        raw = read_capped(fd, MAX_BYTES)
    except OSError:
        return None, None
    finally:
        os.close(fd)
    try:
        rec = None if len(raw) > MAX_BYTES else json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        rec = None
    if not _well_formed(rec):
        return None, BAD
    if not check_alive:
        return rec, None
    if not _owner_runs(rec["pid"], st.st_uid):
        return None, (STALE if not os.path.exists(f"/proc/{rec['pid']}") else BAD)
    return rec, None


def read_status(path: str | os.PathLike, check_alive: bool = True) -> dict | None:
    """The record in ``path``, or None: missing, unreadable, not a well-formed record of this
    format, or (``check_alive``) not of a running process of the file's owner."""
    return load_status(path, check_alive)[0]


def read_folder(path: str | os.PathLike) -> tuple[list[dict], int]:
    """(the live records of a folder's ``*.json`` (or of one file), newest first; how many files
    were BAD). A bad file is skipped, never an error: anyone governed may write there."""
    p = os.fspath(path)
    if os.path.isdir(p):
        try:
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
        except OSError:
            return [], 0
        loaded = [load_status(os.path.join(p, n)) for n in names]
    else:
        loaded = [load_status(p)]
    live = [r for r, _ in loaded if r is not None]
    bad = sum(why == BAD for _, why in loaded)
    return sorted(live, key=lambda r: -float(r["updated_unix_s"])), bad


__all__ = ["BAD", "FORMAT", "PHASES", "REFERENCES", "STALE", "STATUS_ENV", "load_status", "read_folder", "read_status",
           "remove_status", "status_path", "write_status"]

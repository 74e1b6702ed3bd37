"""The per-board store of what online runs measured (docs/store.md).

Every ``pydvfs run --policy online`` and every :class:`pydvfs.OnlineGovernor` run (the Hugging
Face and Lightning callbacks included) appends one record: the board, the energy measure, the
workload and its features, J/step and s/step at each clock (or MAXN) it probed, the clock it
settled on. ``apply`` and the online search's start read them back (:mod:`pydvfs.policy.learned`).

Where: ``--data-dir`` / ``data_dir=``, else ``PYDVFS_DATA_DIR``, else ``/var/lib/pydvfs`` as
root and ``$XDG_DATA_HOME/pydvfs`` (``~/.local/share/pydvfs``) otherwise. One file per board,
``runs-<board id>.jsonl``: one JSON object per line, data only (nothing in it is ever run or
unpickled). Owned and private as the clock-state folder is (govcore/state.c): the folder is
created 0700, must be owned by this user and writable by no one else, is never itself a symbolic
link (O_NOFOLLOW), and no folder or link above it may be changed by another user; files are
created 0600 relative to the opened folder, with O_NOFOLLOW. A file holds at most
:data:`MAX_RUNS` records (the oldest are dropped) and is read to :data:`MAX_BYTES` at most; a
damaged line (checked strictly: :func:`check_record`) is skipped with a one-line warning.
"""
from __future__ import annotations

import errno
import fcntl
import functools
import json
import math
import os
import re
import stat
import time
from dataclasses import dataclass, field

from ..errors import StoreError
from ..measure.energy import MEASURES
from ..progress import check_folders_above

FORMAT = "pydvfs-runs/1"  # the record's "format": a record of another format is skipped
MAX_RUNS = 500  # records kept per board; the oldest go first
MAX_LINE_BYTES = 32 * 1024  # a longer line is damaged (a record is ~1 KiB)
MAX_PROBES = 64  # clocks (and MAXN) per record
MAX_BYTES = MAX_RUNS * MAX_LINE_BYTES  # read of a board's file: its last MAX_BYTES bytes at most
MAX_TEXT = 256  # characters of a string in a record's workload (its name, its model)
OPEN_TRIES = 100  # times a writer reopens a file another writer replaced while it waited
ENV = "PYDVFS_DATA_DIR"
_BOARD_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def default_data_dir() -> str | None:
    """``PYDVFS_DATA_DIR``, else /var/lib/pydvfs as root, else $XDG_DATA_HOME/pydvfs or
    ~/.local/share/pydvfs; None where there is no home to put it in."""
    env = os.environ.get(ENV)
    if env:
        return env
    if os.geteuid() == 0:
        return "/var/lib/pydvfs"
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "pydvfs")
    home = os.environ.get("HOME")
    return os.path.join(home, ".local", "share", "pydvfs") if home and os.path.isabs(home) else None


def resolve_data_dir(data_dir=None) -> str:
    """The store's folder: ``data_dir`` or :func:`default_data_dir`, as an absolute path."""
    d = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    if not d:
        raise StoreError("no folder for the board's run records: $HOME is not set; pass --data-dir DIR "
                         f"(or set {ENV})")
    if not os.path.isabs(d):
        raise StoreError(f"the run-record folder {d!r} is not an absolute path (--data-dir, {ENV}, data_dir=): "
                         "give a folder starting with /")
    return d


def _mkdir_private(path: str) -> None:
    """Create ``path`` and any missing folder above it, each 0700 (as govcore's gc_mkdir_p)."""
    parts = path.rstrip("/").split("/")
    for i in range(2, len(parts) + 1):
        p = "/".join(parts[:i])
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise StoreError(f"cannot create the run-record folder {path}: {e.strerror}") from None


def _check_ancestors(path: str) -> None:
    """No one but root and this user can change where the store's folder leads (a folder not
    made yet is skipped: the check runs again once it is)."""
    check_folders_above(path, "the run-record folder", StoreError)


def _check_owned(st: os.stat_result, what: str, path: str) -> None:
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StoreError(f"refusing {what} {path}: it must be owned by you (uid {os.geteuid()}) and writable by "
                         f"no one else (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):03o})")


@dataclass
class Loaded:
    """What a board's file held: the good records (oldest first) and why lines were skipped."""

    records: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "line N: why", one per damaged line
    path: str = ""
    unread_bytes: int = 0  # the file's first bytes, beyond the last MAX_RUNS lines, not read

    def warning(self) -> str | None:
        """One line for all damaged lines and an unread part, or None."""
        unread = (f"its first {self.unread_bytes} bytes, over the bound of {MAX_RUNS} records, were not read"
                  if self.unread_bytes else "")
        if not self.skipped:
            return f"{self.path}: {unread}" if unread else None
        more = f" (and {len(self.skipped) - 3} more)" if len(self.skipped) > 3 else ""
        return (f"skipped {len(self.skipped)} damaged run record(s) in {self.path}: "
                f"{'; '.join(self.skipped[:3])}{more}{'; ' + unread if unread else ''}")


def _number(v, what: str, positive: bool = True) -> float:
    try:
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and not (positive and v <= 0)
    except OverflowError:  # an integer too large for a float
        ok = False
    if not ok:
        raise ValueError(f"{what} is not a {'positive' if positive else 'finite'} number")
    return float(v)


def _no_duplicates(pairs: list) -> dict:
    """json's object hook: an object naming a key twice is damaged (which one counts is unsaid)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("a key given twice")
    return d


def _loads(line: bytes):
    """A record's line as JSON (ValueError where it is not, or names a key twice)."""
    return json.loads(line.decode("utf-8"), object_pairs_hook=_no_duplicates)


@functools.lru_cache(maxsize=None)
def _workload_types() -> dict:
    """A record's workload field -> (the JSON types it takes, null allowed): from the
    Workload's own field types (an ``int`` field takes a JSON integer, a ``float`` one any
    number, a ``str`` one a string)."""
    import dataclasses

    from ..workload import Workload

    kinds = {"int": (int,), "float": (int, float), "str": (str,)}
    out = {}
    for f in dataclasses.fields(Workload):
        names = [t.strip() for t in str(f.type).split("|")]
        out[f.name] = (tuple(t for n in names for t in kinds.get(n, ())), "None" in names)
    return out


def _check_workload(wl) -> None:
    from ..errors import InvalidValueError

    if not isinstance(wl, dict):
        raise ValueError("workload is not an object")
    types = _workload_types()
    for k, v in wl.items():
        if k not in types:
            raise ValueError(f"workload: unknown field {k!r}")
        kinds, nullable = types[k]
        if v is None and nullable:
            continue
        if isinstance(v, bool) or not isinstance(v, kinds):
            raise ValueError(f"workload: {k} is not a {'number' if float in kinds else kinds[0].__name__}")
        if isinstance(v, str) and (len(v) > MAX_TEXT or not v.isprintable()):
            # shown on the terminal (a name, a model): no control character or terminal escape
            raise ValueError(f"workload: {k} holds a control character or is over {MAX_TEXT} characters")
        if not isinstance(v, str):
            _number(v, f"workload: {k}", positive=False)
    try:
        workload_of(wl)
    except InvalidValueError as e:
        raise ValueError(f"workload: {e}") from None


def check_record(d, board_id: str | None = None) -> dict:
    """``d`` if it is a well-formed record (of ``board_id``'s board, where given; ValueError
    saying what is wrong otherwise)."""
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    if d.get("format") != FORMAT:
        raise ValueError(f"format {d.get('format')!r} is not {FORMAT}")
    if not isinstance(d.get("board"), str) or not _BOARD_ID.match(d["board"]):
        raise ValueError("no board id")
    if board_id is not None and d["board"] != board_id:
        raise ValueError(f"a record of another board ({d['board']})")
    if d.get("measure") not in MEASURES:
        raise ValueError(f"measure {d.get('measure')!r} is unknown")
    probes = d.get("probes")
    if not isinstance(probes, list) or not 1 <= len(probes) <= MAX_PROBES:
        raise ValueError("no probes")
    for p in probes:
        if not isinstance(p, dict):
            raise ValueError("a probe is not an object")
        if p.get("freq_mhz") is not None:
            _number(p["freq_mhz"], "a probe's freq_mhz")
        _number(p.get("j_per_step"), "a probe's j_per_step")
        _number(p.get("s_per_step"), "a probe's s_per_step")
        if isinstance(p.get("windows"), bool) or not isinstance(p.get("windows"), int) or p["windows"] < 1:
            raise ValueError("a probe's windows is not a count")
    if len({p.get("freq_mhz") for p in probes}) != len(probes):
        raise ValueError("a clock probed twice")
    if d.get("settled_mhz") is not None:
        _number(d["settled_mhz"], "settled_mhz")
    if d.get("workload") is not None:
        _check_workload(d["workload"])
    return d


_workloads: dict = {}  # a record's workload dict (as a key) -> its validated Workload


def workload_of(wl: dict):
    """The :class:`~pydvfs.workload.Workload` of a record's workload dict, validated once
    per distinct dict (a store repeats a few shapes hundreds of times)."""
    from ..workload import Workload

    try:
        key = tuple(sorted(wl.items()))
        hash(key)
    except TypeError:  # a value that is not hashable (a list): not a workload a run wrote
        return Workload.from_any(wl)
    w = _workloads.get(key)
    if w is None:
        w = Workload.from_any(wl)
        if len(_workloads) < 4096:
            _workloads[key] = w
    return w


class RunStore:
    """The store under ``data_dir`` (None: :func:`default_data_dir`)."""

    def __init__(self, data_dir=None):
        self.path = resolve_data_dir(data_dir)

    def file_name(self, board_id: str) -> str:
        if not isinstance(board_id, str) or not _BOARD_ID.match(board_id):
            raise StoreError(f"no run records for a board outside the board table ({board_id!r})")
        return f"runs-{board_id}.jsonl"

    def file_path(self, board_id: str) -> str:
        return os.path.join(self.path, self.file_name(board_id))

    # -- the folder -------------------------------------------------------------------------
    def _open_dir(self, create: bool) -> int | None:
        """The opened, checked folder (None where it does not exist and ``create`` is off)."""
        _check_ancestors(self.path)  # before anything is made or read below them
        if create:
            _mkdir_private(self.path)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StoreError(f"refusing the run-record folder {self.path}: it is a symbolic link or not a "
                                 "folder") from None
            raise StoreError(f"cannot open the run-record folder {self.path}: {e.strerror}") from None
        try:
            _check_owned(os.fstat(fd), "the run-record folder", self.path)
            _check_ancestors(self.path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_file(self, dfd: int, name: str, flags: int) -> int:
        """The board's file, opened without waiting (a FIFO in its place is refused, never
        waited on) and checked: a regular file of this user's."""
        path = os.path.join(self.path, name)
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise StoreError(f"refusing the run-record file {path}: it is a symbolic link") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(f"refusing the run-record file {path}: not a regular file")
            _check_owned(st, "the run-record file", path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_locked(self, dfd: int, name: str, flags: int) -> int:
        """The board's file under an exclusive lock, the one at its name once locked: a writer
        that waited while another renamed a rewritten file over it opens the new one (writing
        into the replaced one would lose the record)."""
        for _ in range(OPEN_TRIES):
            fd = self._open_file(dfd, name, flags)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    now = None
                st = os.fstat(fd)
                if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise StoreError(f"cannot lock {os.path.join(self.path, name)}: it was replaced {OPEN_TRIES} times while "
                         "waiting")

    # -- reading ----------------------------------------------------------------------------
    @staticmethod
    def _read(fd: int) -> tuple[bytes, int]:
        """The file's last :data:`MAX_RUNS` whole lines within its last :data:`MAX_BYTES`
        (bounded, whatever its size: a store never holds more than MAX_RUNS lines of
        MAX_LINE_BYTES), and how many bytes before them were not read."""
        size = os.fstat(fd).st_size
        skip = max(0, size - MAX_BYTES)
        os.lseek(fd, skip, os.SEEK_SET)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_BYTES)
        cut = data.find(b"\n") + 1 if skip else 0  # the line cut in two is not read either
        end = len(data) - 1
        for _ in range(MAX_RUNS):  # back to the newline before the MAX_RUNS-th line from the end
            end = data.rfind(b"\n", cut, end)
            if end < 0:
                break
        else:
            cut = end + 1
        return data[cut:], skip + cut

    @staticmethod
    def _parse(data: bytes, path: str, board_id: str | None = None, unread_bytes: int = 0) -> Loaded:
        out = Loaded(path=path, unread_bytes=unread_bytes)
        for n, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                if len(line) > MAX_LINE_BYTES:
                    raise ValueError(f"longer than {MAX_LINE_BYTES} bytes")
                out.records.append(check_record(_loads(line), board_id))
            except (ValueError, UnicodeDecodeError, RecursionError, OverflowError) as e:
                why = "not JSON" if isinstance(e, json.JSONDecodeError) else str(e) or type(e).__name__
                out.skipped.append(f"line {n}: {why}" if not unread_bytes else f"a line: {why}")
        return out

    def load(self, board_id: str) -> Loaded:
        """The board's records, oldest first (none where the folder or the file does not exist)."""
        name = self.file_name(board_id)
        path = os.path.join(self.path, name)
        dfd = self._open_dir(create=False)
        if dfd is None:
            return Loaded(path=path)
        try:
            try:
                fd = self._open_file(dfd, name, os.O_RDONLY)
            except FileNotFoundError:
                return Loaded(path=path)
            except OSError as e:
                raise StoreError(f"cannot read {path}: {e.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                data, unread = self._read(fd)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)
        return self._parse(data, path, board_id, unread)

    # -- writing ----------------------------------------------------------------------------
    def append(self, record: dict, max_runs: int = MAX_RUNS) -> str:
        """Add one record to its board's file (created 0600); past ``max_runs`` records the
        oldest are dropped (and damaged lines with them). Returns the file's path."""
        check_record(record)
        line = json.dumps(record, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        if len(line) > MAX_LINE_BYTES:
            raise StoreError(f"a run record of {len(line)} bytes is over the limit ({MAX_LINE_BYTES})")
        name = self.file_name(record["board"])
        path = os.path.join(self.path, name)
        dfd = self._open_dir(create=True)
        try:
            try:
                fd = self._open_locked(dfd, name, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            except OSError as e:
                raise StoreError(f"cannot write {path}: {e.strerror}") from None
            try:  # one writer at a time; readers wait for a whole line
                os.write(fd, line)
                data, unread = self._read(fd)
                if unread or data.count(b"\n") > max_runs:
                    loaded = self._parse(data, path, record["board"])
                    self._rewrite(dfd, name, loaded.records[-max_runs:])
            finally:
                os.close(fd)  # drops the lock
        finally:
            os.close(dfd)
        return path

    def _rewrite(self, dfd: int, name: str, records: list[dict]) -> None:
        """Replace the file by ``records``: a new 0600 file beside it (O_EXCL, O_NOFOLLOW),
        renamed over it (the caller holds the old one's lock: see :meth:`_open_locked`)."""
        tmp = f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                for r in records:
                    fh.write(json.dumps(r, separators=(",", ":"), allow_nan=False).encode() + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise

    def compact(self, board_id: str) -> Loaded:
        """Rewrite the board's file with its good records only (damaged lines dropped); returns
        what it held. Nothing is written where nothing was damaged."""
        name = self.file_name(board_id)
        path = os.path.join(self.path, name)
        dfd = self._open_dir(create=False)
        if dfd is None:
            return Loaded(path=path)
        try:
            try:
                fd = self._open_locked(dfd, name, os.O_RDWR)
            except FileNotFoundError:
                return Loaded(path=path)
            try:
                data, unread = self._read(fd)
                loaded = self._parse(data, path, board_id, unread)
                if loaded.skipped or loaded.unread_bytes:
                    self._rewrite(dfd, name, loaded.records)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)
        return loaded


def summarise_probes(trajectory: list[dict]) -> list[dict]:
    """Per clock measured (None: MAXN), the median J/step and s/step of its windows, their
    count and steps: what a record keeps of a run's trajectory (the windows themselves are not
    kept: a record stays small)."""
    by: dict = {}
    for w in trajectory:
        by.setdefault(w["freq_mhz"], []).append(w)

    def med(ws, key):
        v = sorted(w[key] for w in ws)
        n = len(v)
        return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])

    out = []
    for f, ws in by.items():
        j, s = med(ws, "j_per_step"), med(ws, "s_per_step")
        if not (math.isfinite(j) and j > 0 and math.isfinite(s) and s > 0):
            continue
        out.append({"freq_mhz": f, "j_per_step": j, "s_per_step": s, "windows": len(ws),
                    "steps": int(sum(w["steps"] for w in ws))})
    out.sort(key=lambda p: (p["freq_mhz"] is None, p["freq_mhz"] or 0.0))
    return out[:MAX_PROBES]


def make_record(report: dict, board_id: str, board_model: str, levels_mhz, workload, front_end: str) -> dict | None:
    """The record of an online run's report (None where it measured nothing to learn from: no
    window finished, or the joint search, whose modes are not GPU clocks alone)."""
    if report.get("search_kind") == "joint" or not report.get("trajectory"):
        return None
    probes = summarise_probes(report["trajectory"])
    if not probes:
        return None
    wl = None
    if workload is not None:
        from ..errors import InvalidValueError
        from ..workload import Workload

        try:
            wl = Workload.from_any(workload).to_dict()
        except InvalidValueError:  # a model without its sequence length: the run is kept, unlearnable
            wl = None
    objective = report.get("objective") or {}
    return {
        "format": FORMAT,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "board": board_id,
        "board_model": board_model,
        "levels_mhz": [float(f) for f in levels_mhz],
        "measure": objective.get("energy", "module"),
        "objective": {"kind": objective.get("kind", "energy"), "max_slowdown_pct": objective.get("max_slowdown_pct")},
        "front_end": front_end,
        "search_kind": report.get("search_kind"),
        "workload": wl,
        "probes": probes,
        "start_mhz": report.get("start_mhz"),
        "start_source": report.get("start_source"),
        "settled_mhz": report.get("chosen_mhz"),
        "converged": bool(report.get("converged")),
        "partial": bool(report.get("partial")),
        "fallback": report.get("fallback"),
    }


__all__ = ["ENV", "FORMAT", "MAX_RUNS", "Loaded", "RunStore", "check_record", "default_data_dir", "make_record",
           "resolve_data_dir", "summarise_probes"]

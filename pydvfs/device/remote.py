"""The board through ``govcore serve``: what pydvfs uses when it cannot write the board itself.

Chosen here, in one place (:func:`open_board`, :func:`sampler_socket`): with ``$PYDVFS_SOCKET``
set, always the daemon at that socket; as root, never; otherwise the daemon at the default
socket when the GPU's clock files are not writable by this process. Without root and without
a daemon, changing the clock fails with one line that says what to do.

:class:`RemoteBoard` answers what ``_core.Board`` answers, so :class:`pydvfs.Device`, ``apply``,
``governed``, ``run`` and ``sweep`` work unchanged; :class:`RemoteSampler` measures through the
daemon's sampler windows. A pin belongs to the connection: this process keeps one connection
per socket, and when the process ends (kill -9 included) the daemon restores the board.
Protocol: govcore/protocol.h.
"""
from __future__ import annotations

import errno
import json
import os
import select
import socket
import sys
import threading
import time

from .. import _core
from ..errors import BoardIOError, BoardPermissionError, InvalidValueError
from .levels import nearest_level

SOCKET_ENV = "PYDVFS_SOCKET"
DEFAULT_SOCKET = "/run/pydvfs/govcore.sock"      # GC_SERVE_SOCKET (govcore/serve.h)
REQUEST_MAX_BYTES = 512                          # GC_REQ_MAX (govcore/protocol.h)
REPLY_MAX_BYTES = 262144                         # GC_SERVE_OUT_MAX (govcore/serve.h): govcore's cap too
REPLY_TIMEOUT_S = 30.0
RECONNECT_WAIT_S = 5.0   # a lost connection: how long the daemon may take to come back (a restart)

NO_DAEMON = ("cannot change the GPU clock without root: run as root, or start the daemon "
             "(`sudo systemctl enable --now govcore` or `sudo govcore serve`) and join its group "
             "(`sudo usermod -aG pydvfs $USER`, then log in again)")


def sampler_socket() -> str | None:
    """The daemon's socket a Sampler measures through: only where $PYDVFS_SOCKET asks for it
    (the rails are readable without root)."""
    return os.environ.get(SOCKET_ENV) or None


def _writable(board: _core.Board) -> bool:
    return os.access(os.path.join(board.devfreq_dir, "max_freq"), os.W_OK)


def open_board(sysfs_root: str):
    """The board to govern: a RemoteBoard or the local _core.Board (see the module doc)."""
    path = os.environ.get(SOCKET_ENV)
    if path:
        return RemoteBoard(path)
    board = _core.Board(sysfs_root)
    if os.geteuid() != 0 and not _writable(board) and os.path.exists(DEFAULT_SOCKET):
        return RemoteBoard(DEFAULT_SOCKET)
    return board


def check_writable(board) -> None:
    """Before a local change: without root and without write access, the one line of what to do."""
    if isinstance(board, _core.Board) and os.geteuid() != 0 and not _writable(board):
        raise BoardPermissionError(NO_DAEMON)


class Connection:
    """One connection to the daemon, kept for the life of the process (it owns our pins).

    A connection the daemon closed (it restarted, or closed us for idleness) is not kept: the
    next request connects again. What lived with the old connection is put back on the new one,
    saying so on stderr: the pin (the last ``pin``/``apply`` not restored since) and the sampler
    windows still open, which then count from the new connection on."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._buf = b""
        self._held: str | None = None        # the request of the pin this process holds
        self._windows: list[str] = []        # windows begun and not ended, in order
        self.reconnects = 0                  # new connections that had a pin or windows to put back
        self._sock = self._connect()

    def _connect(self, wait_s: float = 0.0) -> socket.socket:
        deadline = time.monotonic() + wait_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
            except OSError as e:
                sock.close()
                if isinstance(e, PermissionError):
                    raise BoardPermissionError(
                        f"cannot reach the govcore daemon at {self.path}: permission denied (join its group: "
                        "`sudo usermod -aG pydvfs $USER`, then log in again)") from None
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise BoardIOError(
                    f"cannot reach the govcore daemon at {self.path}: {e.strerror or e} (start it: "
                    "`sudo systemctl start govcore` or `sudo govcore serve`)") from None
            sock.settimeout(REPLY_TIMEOUT_S)
            return sock

    def _stale(self) -> bool:
        """No request is outstanding: anything to read (EOF, a closing notice) means the daemon
        has closed this connection."""
        if self._sock is None:
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _exchange(self, data: bytes) -> bytes:
        try:
            self._sock.sendall(data + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # a daemon that refused us closed at once: its reply says why
        while b"\n" not in self._buf:
            if len(self._buf) > REPLY_MAX_BYTES:
                raise _ReplyTooLarge(errno.EMSGSIZE, f"its reply is larger than {REPLY_MAX_BYTES} bytes, "
                                                     "as no reply of govcore's is")
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("closed")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
        if len(raw) > REPLY_MAX_BYTES:
            raise _ReplyTooLarge(errno.EMSGSIZE, f"its reply is larger than {REPLY_MAX_BYTES} bytes, "
                                                 "as no reply of govcore's is")
        return raw

    def _reconnect(self, line: str) -> None:
        """A new connection in place of a lost one, with our pin and windows put back."""
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buf = None, b""
        self._sock = self._connect(RECONNECT_WAIT_S)
        # (kept until put back: a new connection lost meanwhile puts them back again)
        held, windows = self._held, list(self._windows)
        if held is None and not windows:
            return  # (closed for idleness, say): nothing was lost with it
        self.reconnects += 1
        if held is not None and line.split(" ", 1)[0] != "restore":  # (a restore: nothing to pin)
            reply = self._parse(self._exchange(held.encode("ascii")))
            if "error" in reply:
                self._held = None
                _warn(f"the connection to the govcore daemon at {self.path} was lost (the daemon "
                      f"restarted?) and the pin could not be made again: {reply['error']}")
            else:
                _warn(f"the connection to the govcore daemon at {self.path} was lost (the daemon "
                      f"restarted?); pinned {_fmt_mhz(reply.get('freq_mhz'))} MHz again on a new connection")
        if windows:
            self._windows = [name for name in windows
                             if "error" not in self._parse(self._exchange(f"begin {name}".encode("ascii")))]
            _warn(f"sampler windows open through the daemon were lost with the connection: "
                  f"{len(self._windows)} of {len(windows)} begun again, counting from now")

    def _parse(self, raw: bytes, line: str = "") -> dict:
        try:
            reply = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            raise BoardIOError(f"the govcore daemon at {self.path} sent a reply that is not JSON") from None
        except RecursionError:
            raise BoardIOError(f"the govcore daemon at {self.path} sent a reply nested too deeply "
                               "to be one of govcore's") from None
        if not isinstance(reply, dict):
            raise BoardIOError(f"the govcore daemon at {self.path} sent a reply that is not a record")
        return Reply(reply, f"the govcore daemon at {self.path}'s reply to {line.split(' ', 1)[0] or 'a request'!r}")

    def _track(self, line: str, reply: dict) -> None:
        """Note what lives with the connection: the pin, and the open windows."""
        verb, _, rest = line.partition(" ")
        if verb == "end":
            if rest in self._windows:
                self._windows.remove(rest)
        if "error" in reply:
            return
        if verb == "pin" or (verb == "apply" and "dry_run=1" not in rest.split(" ")):
            self._held = line if reply.get("freq_mhz") is not None else None  # maxn: nothing held
        elif verb == "restore":
            self._held = None
        elif verb == "begin":
            self._windows.append(rest)

    def request(self, line: str) -> dict:
        """Send one request, return its reply; an error reply raises the matching PydvfsError."""
        data = line.encode("ascii", "replace")
        if len(data) > REQUEST_MAX_BYTES or b"\n" in data:
            raise InvalidValueError(f"request too long or not one line ({len(data)} bytes)")
        with self._lock:
            try:
                if self._stale():
                    self._reconnect(line)
                try:
                    raw = self._exchange(data)
                except ConnectionError:
                    # lost while asking (the daemon went away): once more on a new connection
                    self._reconnect(line)
                    raw = self._exchange(data)
            except OSError as e:
                if self._sock is not None:
                    self._sock.close()
                self._sock, self._buf = None, b""
                if isinstance(e, _ReplyTooLarge):
                    raise BoardIOError(f"the govcore daemon at {self.path} is not one pydvfs can talk to: "
                                       f"{e.strerror}; the connection is closed") from None
                raise BoardIOError(f"lost the connection to the govcore daemon at {self.path}: "
                                   f"{e.strerror or e}") from None
            reply = self._parse(raw, line)
            self._track(line, reply)
        if "error" in reply and line in RETRIED and str(reply["error"]).startswith(TRANSIENT):
            # a read the board failed once (`cannot read .../cur_freq: Invalid argument`): once
            # more before the caller is told; a refusal of the request itself is not retried
            with self._lock:
                try:
                    reply = self._parse(self._exchange(data), line)
                except OSError:
                    pass
        if "error" in reply:
            code = reply.get("errno")
            if type(code) is not int or not 0 < code < 4096:  # noqa: E721 (true is not an errno)
                code = errno.EIO
            message = reply["error"] if isinstance(reply["error"], str) else json.dumps(reply["error"])[:200]
            _core.raise_for(-code, message)
        return reply


# Requests that only read the board, asked once more after an error reply that is the board's
# read failing (TRANSIENT) rather than the request's refusal. Pins are retried by their caller
# (governor/engine.py), which knows whether a pin may be repeated.
RETRIED = ("status", "version")
TRANSIENT = ("cannot read ",)


class _ReplyTooLarge(OSError):
    """A reply past REPLY_MAX_BYTES: the stream is not govcore's; the connection is dropped."""


class Reply(dict):
    """A reply of the daemon: a key it lacks is a BoardIOError naming the key (one line), not a
    KeyError; records inside it are Replies too."""

    def __init__(self, data: dict, what: str):
        super().__init__({k: _reply_value(v, what) for k, v in data.items()})
        self._what = what

    def __missing__(self, key):
        raise BoardIOError(f"{self._what} has no {key!r}: not a reply of this version's govcore")


def _reply_value(v, what: str):
    if isinstance(v, dict):
        return Reply(v, what)
    if isinstance(v, list):
        return [_reply_value(x, what) for x in v]
    return v


def _warn(message: str) -> None:
    print(f"pydvfs: warning: {message}", file=sys.stderr, flush=True)


def _fmt_mhz(mhz) -> str:
    return "?" if mhz is None else f"{float(mhz):g}"


def reconnects() -> int:
    """How many times this process lost a connection to a daemon that held its pin or its
    sampler windows (and connected again, putting them back)."""
    with _connections_lock:
        return sum(c.reconnects for c in _connections.values())


_connections: dict[str, Connection] = {}
_connections_lock = threading.Lock()


def connection(path: str) -> Connection:
    with _connections_lock:
        if path not in _connections:
            _connections[path] = Connection(path)
        return _connections[path]


def hz_text(hz: int) -> str:
    """A clock in Hz as the protocol's MHz, exactly (gc_parse_mhz reads back the same Hz)."""
    whole, frac = divmod(int(hz), 1000000)
    return f"{whole}.{frac:06d}".rstrip("0").rstrip(".") if frac else str(whole)


def _hz(mhz: float) -> int:
    return _core.mhz_to_hz(float(mhz))


class RemoteBoard:
    """The daemon's board, with the interface of ``_core.Board`` (Hz in, Hz out)."""

    def __init__(self, socket_path: str):
        self.socket_path = socket_path
        self._conn = connection(socket_path)
        self._status = self._conn.request("status")
        self._state_file = ""

    def _fresh(self) -> dict:
        self._status = self._conn.request("status")
        return self._status

    sysfs_root = property(lambda self: self._status["sysfs_root"])
    model = property(lambda self: self._status["model"])
    gpu_name = property(lambda self: self._status["gpu"])
    devfreq_dir = property(lambda self: self._status["devfreq_dir"])
    load_path = property(lambda self: "")
    board_id = property(lambda self: self._status.get("board") or "")
    jetpack = property(lambda self: self._status.get("jetpack"))
    l4t = property(lambda self: self._status.get("l4t"))
    warning = property(lambda self: self._status.get("warning") or "")
    roles = property(lambda self: {k: (None if v is None else tuple(v))
                                   for k, v in self._status.get("roles", {}).items()})
    module_partial = property(lambda self: bool(self._status.get("module_partial")))
    skipped_rails = property(lambda self: tuple((r["name"], r["why"])
                                                for r in self._status.get("skipped_rails", [])))
    sensor_interval_ms = property(lambda self: self._status["sensor_interval_ms"] or 0)

    @property
    def freqs_hz(self) -> tuple[int, ...]:
        return tuple(_hz(m) for m in self._status["available_mhz"])

    @property
    def rails(self) -> tuple:
        return tuple((r["name"], r["kind"], "", "", "") for r in self._status["rails"])

    def clock_state(self):
        st = self._fresh()
        return _hz(st["cur_mhz"]), _hz(st["min_mhz"]), _hz(st["max_mhz"]), st["governor"]

    def load_permille(self):
        pct = self._fresh()["gpu_load_pct"]
        return None if pct is None else round(pct * 10)

    def snap_hz(self, want_hz: int) -> int:
        """The nearest level (ties to the lower), as gc_snap_hz: for reading only (a search's
        table); a pin is snapped once, by the daemon."""
        if want_hz <= 0:
            raise InvalidValueError("not a clock: 0 Hz")
        return nearest_level(self.freqs_hz, want_hz)

    def state_path(self, state_dir=None) -> str:
        saved = self._fresh()["saved_state"]
        return saved["path"] if saved else self._state_file

    def saved_state(self, state_dir=None):
        saved = self._fresh()["saved_state"]
        return None if saved is None else (_hz(saved["min_mhz"]), _hz(saved["max_mhz"]), saved["governor"])

    def pin_hz(self, want_hz: int, state_dir=None, nearest: bool = True, above_power_mode: bool = False) -> int:
        """As ``_core.Board.pin_hz``: the clock asked for goes to the daemon exactly (Hz as a
        decimal of MHz, no rounding), the daemon snaps it (the one snap, in C), obeys the power
        mode's cap (lifting it is for root alone) and says the level it set, in Hz."""
        reply = self._pin(f"pin {hz_text(want_hz)}" + (" nearest=1" if nearest else ""), above_power_mode)
        return int(reply["freq_hz"])

    def _pin(self, request: str, above_power_mode: bool) -> dict:
        """A pin request; its reply, with what the cap did and the warning kept for the caller."""
        if above_power_mode:
            raise InvalidValueError("--above-power-mode is not available through the govcore daemon: run as root")
        reply = self._conn.request(request)
        self._state_file = reply["state_file"]
        cap, clamped = reply.get("power_cap_mhz"), reply.get("clamped_from_mhz")
        self._last_pin_cap = (_hz(cap) if cap else 0, _hz(clamped) if clamped else 0)
        self._pin_warning = reply.get("warning") or ""
        return reply

    _last_pin_cap = (0, 0)
    last_pin_cap = property(lambda self: self._last_pin_cap)
    _pin_warning = ""
    pin_warning = property(lambda self: self._pin_warning)

    def power_mode(self) -> dict:
        return self._fresh().get("power_mode") or {
            "id": None, "name": None, "gpu_max_mhz": None, "unknown": "the govcore daemon does not report it"}

    def gpu_cap(self, state_dir=None) -> dict | None:
        return self._fresh().get("gpu_cap")

    def domains(self, emc_table_hz=()) -> list:
        """The daemon's clock domains, in _core.Board.domains's shape (Hz)."""
        out = []
        for r in self._fresh().get("domains", []):
            st = None
            if r["pinned"] is not None:
                st = {"governor": r.get("governor", ""), "locked": bool(r.get("locked", False)),
                      "rate_hz": _hz(r["cur_mhz"]) if r.get("cur_mhz") else 0,
                      "min_hz": _hz(r["min_mhz"]) if "min_mhz" in r else 0,
                      "max_hz": _hz(r["max_mhz"]) if "max_mhz" in r else 0}
            out.append({"name": r["name"], "kind": r["kind"], "available": r["available"],
                        "why": r["why"], "levels_hz": tuple(_hz(m) for m in r["levels_mhz"]),
                        "cap_hz": _hz(r["cap_mhz"]) if r.get("cap_mhz") else None,
                        "related_cpus": r.get("related_cpus", ""), "devfreq": r.get("devfreq"), "state": st})
        return out

    def pin_mode_hz(self, gpu_hz: int, emc_hz: int, cpu_hz: int, state_dir=None, emc_table_hz=(),
                    above_power_mode: bool = False):
        """The joint pin in the daemon: every clock as asked, each snapped there (one snap, in C)."""
        parts = [f"pin {hz_text(gpu_hz)} nearest=1"]
        if emc_hz:
            parts.append(f"emc_mhz={hz_text(emc_hz)}")
        if cpu_hz:
            parts.append(f"cpu_mhz={hz_text(cpu_hz)}")
        reply = self._pin(" ".join(parts), above_power_mode)
        return int(reply["freq_hz"]), {k: _hz(v) for k, v in reply.get("domains", {}).items()}

    def restore(self, state_dir=None) -> bool:
        return bool(self._conn.request("restore")["restored"])

    def apply(self, policy: str, workload: tuple, model: str, model_dir=None, dry_run: bool = False,
              objective: str = "energy", max_slowdown_pct: float | None = None, energy: str | None = None) -> dict:
        """Decide (and unless dry_run pin) in the daemon; its decision record. The roofline policy
        and a slowdown bound use the roofline.txt of the installed model folder; ``energy``: the
        measure whose built-in policy the daemon takes (None: its default)."""
        tree = None
        if model_dir is not None:
            # root loads no code of ours: only a tree installed in the daemon's policy folder
            policy_dir = os.path.realpath(self._conn.request("version")["policy_dir"])
            real = os.path.realpath(model_dir)
            if os.path.dirname(real) != policy_dir:
                raise InvalidValueError(
                    f"through the govcore daemon only the built-in tree or one root installed under "
                    f"{policy_dir}/NAME can be used, not {model_dir}")
            tree = os.path.basename(real)
        return self._conn.request(_core.apply_request(policy, tuple(workload), model, objective, max_slowdown_pct,
                                                      energy, tree, dry_run))

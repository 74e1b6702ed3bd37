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

import json
import os
import select
import socket
import sys
import threading
import time
from types import MappingProxyType

from .. import _core
from ..errors import BoardIOError, BoardPermissionError, InvalidValueError
from ..sampler import Measurement, Sampler

SOCKET_ENV = "PYDVFS_SOCKET"
DEFAULT_SOCKET = "/run/pydvfs/govcore.sock"      # GC_SERVE_SOCKET (govcore/serve.h)
REQUEST_MAX_BYTES = 512                          # GC_REQ_MAX (govcore/protocol.h)
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


def plain_decimal(value: float) -> str:
    """A number as the protocol takes it: digits and at most one point, no exponent."""
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return text or "0"


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
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("closed")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
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

    def _parse(self, raw: bytes) -> dict:
        try:
            reply = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            raise BoardIOError(f"the govcore daemon at {self.path} sent a reply that is not JSON") from None
        if not isinstance(reply, dict):
            raise BoardIOError(f"the govcore daemon at {self.path} sent a reply that is not a record")
        return reply

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
                raise BoardIOError(f"lost the connection to the govcore daemon at {self.path}: "
                                   f"{e.strerror or e}") from None
            reply = self._parse(raw)
            self._track(line, reply)
        if "error" in reply:
            _core.raise_for(-int(reply.get("errno") or 5), reply["error"])
        return reply


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


def _hz(mhz: float) -> int:
    return _core.mhz_to_hz(float(mhz))


class RemoteBoard:
    """The daemon's board, with the interface of ``_core.Board`` (Hz in, Hz out)."""

    def __init__(self, socket_path: str):
        self.socket_path = socket_path
        self._conn = connection(socket_path)
        self._status = self._conn.request("status")
        self._state_file = ""
        self._pin_warning = ""

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
    pin_warning = property(lambda self: self._pin_warning)  # as _core.Board.pin_warning: the last pin's
    roles = property(lambda self: {k: (None if v is None else tuple(v))
                                   for k, v in self._status.get("roles", {}).items()})
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
        """The nearest level (ties to the lower), as gc_snap_hz."""
        if want_hz <= 0:
            raise InvalidValueError("not a clock: 0 Hz")
        return min(self.freqs_hz, key=lambda f: (abs(f - want_hz), f))

    def state_path(self, state_dir=None) -> str:
        saved = self._fresh()["saved_state"]
        return saved["path"] if saved else self._state_file

    def saved_state(self, state_dir=None):
        saved = self._fresh()["saved_state"]
        return None if saved is None else (_hz(saved["min_mhz"]), _hz(saved["max_mhz"]), saved["governor"])

    def pin_hz(self, want_hz: int, state_dir=None) -> int:
        level_hz = self.snap_hz(want_hz)  # the daemon takes only clocks of the table
        self._pin_warning = ""
        reply = self._conn.request(f"pin {plain_decimal(level_hz / 1e6)}")
        self._state_file = reply["state_file"]
        self._pin_warning = reply.get("warning") or ""  # the original it saved is itself a pin
        return _hz(reply["freq_mhz"])

    def restore(self, state_dir=None) -> bool:
        return bool(self._conn.request("restore")["restored"])

    def apply(self, policy: str, workload: tuple, model: str, model_dir=None, dry_run: bool = False,
              objective: str = "energy", max_slowdown_pct: float | None = None) -> dict:
        """Decide (and unless dry_run pin) in the daemon; its decision record. The roofline policy
        and a slowdown bound use the roofline.txt of the installed model folder."""
        is_decoder, util, layers, hidden, seq_len = workload
        parts = [f"apply policy={policy}", f"model={model}", f"layers={plain_decimal(layers)}",
                 f"hidden={plain_decimal(hidden)}", f"seq_len={plain_decimal(seq_len)}"]
        if util is not None:
            parts.append(f"util_pct={plain_decimal(util)}")
        if objective != "energy":
            parts.append(f"objective={objective}")
        if max_slowdown_pct is not None:
            parts.append(f"max_slowdown_pct={plain_decimal(max_slowdown_pct)}")
        if model_dir is not None:
            # root loads no code of ours: only a tree installed in the daemon's policy folder
            policy_dir = os.path.realpath(self._conn.request("version")["policy_dir"])
            real = os.path.realpath(model_dir)
            if os.path.dirname(real) != policy_dir:
                raise InvalidValueError(
                    f"through the govcore daemon only the built-in tree or one root installed under "
                    f"{policy_dir}/NAME can be used, not {model_dir}")
            parts.append(f"tree={os.path.basename(real)}")
        if dry_run:
            parts.append("dry_run=1")
        return self._conn.request(" ".join(parts))


class RemoteSampler(Sampler):
    """pydvfs.Sampler through the daemon's sampler: windows only (no trace); the daemon samples
    at the sensor's rate. Chosen by Sampler() itself where $PYDVFS_SOCKET is set."""

    _count = 0

    def __init__(self, rate_hz=None, sysfs_root=None, rails=None, trace_capacity=None):
        self._conn = connection(sampler_socket() or DEFAULT_SOCKET)
        status = self._conn.request("status")
        self._rail_names = tuple(r["name"] for r in status["rails"])
        self._board_id = status.get("board") or None
        self._warning = status.get("warning") or None
        if rails is not None:
            wanted = [rails] if isinstance(rails, str) else list(rails)
            unknown = [r for r in wanted if r not in self._rail_names]
            if unknown or not wanted:
                raise InvalidValueError(f"no rail {unknown!r} on this board (rails: {', '.join(self._rail_names)})")
        interval = status["sensor_interval_ms"]
        self._rate = 1000.0 / interval if interval else 0.0
        RemoteSampler._count += 1
        self._prefix = f"p{os.getpid()}s{RemoteSampler._count}-"
        self._lock = threading.Lock()
        self._windows: set[str] = set()
        self.measurement = None

    rails = property(lambda self: self._rail_names)
    rate_hz = property(lambda self: self._rate)
    board = property(lambda self: self._board_id)
    warning = property(lambda self: self._warning)
    running = property(lambda self: bool(self._windows))

    def start(self):
        return self

    def stop(self) -> None:
        """Windows still open stay open in the daemon until ended or this process exits."""

    def begin_window(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidValueError(f"a window needs a non-empty name, got {name!r}")
        with self._lock:
            if name in self._windows:
                raise InvalidValueError(f"window {name!r} is already open")
            reply = self._conn.request(f"begin {self._prefix}{name}")
            self._rate = reply["rate_hz"] or self._rate
            self._windows.add(name)

    def end_window(self, name: str) -> Measurement:
        with self._lock:
            if name not in self._windows:
                raise InvalidValueError(f"no open window {name!r}")
            self._windows.discard(name)
            w = self._conn.request(f"end {self._prefix}{name}")
        return Measurement(
            duration_s=w["duration_s"], energy_j=MappingProxyType(dict(w["energy_j"])),
            avg_power_w=MappingProxyType(dict(w["avg_power_w"])), cpu_gpu_energy_j=w["cpu_gpu_energy_j"],
            gpu_util_pct=w["gpu_util_pct"], samples=int(w["samples"]),
            read_errors=int(w["read_errors"]), rate_hz=float(w["rate_hz"]),
            module_energy_j=w.get("module_energy_j"), gpu_energy_j=w.get("gpu_energy_j"),
            board=w.get("board"))

    def trace(self):
        raise InvalidValueError("sample traces are not available through the govcore daemon")

    def stats(self) -> dict:
        return {"running": self.running, "rate_hz": self._rate, "remote": self._conn.path}

    def __repr__(self) -> str:
        return f"RemoteSampler(socket={self._conn.path!r}, rails={list(self.rails)!r})"

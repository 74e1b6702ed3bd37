"""Prometheus metrics of a board: energy, power, clocks and the governor's decisions.

``pydvfs exporter`` serves what :class:`BoardCollector` collects at each scrape: the page is
the ``prometheus_client`` library's (its WSGI app), served by the standard library's WSGI server
with a bound on open connections and a deadline on each (:func:`serve`). Every metric, its unit
and labels: docs/metrics.md (the table there is :data:`METRICS`, checked by the tests).

Energy is the C sampler's integral (govcore/sampler.c), never scraped power times an interval:

- reading the rails here (files readable by this user): one sampler window opened at start and
  read (peeked) at each scrape: the counter is the sampler's exact integral up to the scrape;
- through ``govcore serve`` (the rails unreadable here, or ``$PYDVFS_SOCKET``): a chain of
  daemon windows, each ended and the next begun at a scrape, their energies summed.

Either way the counters only grow: a sampler that stops (a read error that ends its thread) is
started afresh and counts on from where it was; a daemon that restarts loses the time it was
away (the window is begun again on the new connection, ``device/remote.py``): a gap, never a
jump back nor a double count. ``pydvfs_sampler_restarts_total`` counts both.

Nothing here writes a board file: clocks, caps and the GPU's holder are read only.
"""
from __future__ import annotations

import io
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from ..device import open_device, remote, resolve_sysfs_root
from ..device import table as boards
from ..errors import PydvfsError
from ..governor import status as governor_status

DEFAULT_LISTEN = "127.0.0.1:9450"
PREFIX = "pydvfs"
_WINDOW = "exporter"

# name (without prefix) -> (type, unit, labels, help). One table: the collector, the docs and the
# tests read it. Types as Prometheus names them; counters are exposed with "_total".
METRICS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "board_info": ("gauge", "", ("board", "board_type", "model", "source"),
                   "The board this exporter reads (1); source: local (the rail files) or daemon (govcore serve)"),
    "rail_energy_joules": ("counter", "J", ("board", "rail"),
                           "Energy of one rail, integrated by the C sampler"),
    "energy_joules": ("counter", "J", ("board", "role"),
                      "Energy by role (module: all the module draws; cpu_gpu; gpu), integrated by the C sampler"),
    "rail_power_watts": ("gauge", "W", ("board", "rail"), "Mean power of one rail since the previous scrape"),
    "power_watts": ("gauge", "W", ("board", "role"), "Mean power by role since the previous scrape"),
    "gpu_load_ratio": ("gauge", "1", ("board",), "Time-weighted GPU load since the previous scrape, 0..1"),
    "sampler_rate_hertz": ("gauge", "Hz", ("board",), "Samples per second achieved since the previous scrape"),
    "sampler_samples": ("counter", "1", ("board",), "Sample rounds taken"),
    "sampler_read_errors": ("counter", "1", ("board",),
                            "Failed rail reads (dropped samples; the integral bridges them)"),
    "sampler_restarts": ("counter", "1", ("board",),
                         "Times the sampler or the daemon connection started afresh (a gap in the energy)"),
    "sampler_up": ("gauge", "1", ("board",), "1 if the rails were read at this scrape, else 0"),
    "clock_hertz": ("gauge", "Hz", ("board", "domain"), "Current clock of a domain (gpu, emc, cpuN)"),
    "clock_min_hertz": ("gauge", "Hz", ("board", "domain"), "Lower bound the governor of a domain may use"),
    "clock_max_hertz": ("gauge", "Hz", ("board", "domain"), "Upper bound the governor of a domain may use"),
    "clock_cap_hertz": ("gauge", "Hz", ("board", "domain"), "The power mode's cap of a domain (gpu, emc)"),
    "clock_pinned": ("gauge", "1", ("board", "domain"), "1 if the domain is pinned (min == max, or EMC locked)"),
    "power_mode_info": ("gauge", "", ("board", "mode", "name"), "The nvpmodel mode in force (1)"),
    "gpu_holder_pid": ("gauge", "1", ("board",),
                       "pid of the process governing the GPU (its lock); 0: none; -1: not readable here"),
    "gpu_holder_uid": ("gauge", "1", ("board",), "uid of that process; -1: none or not readable"),
    "governor_up": ("gauge", "1", ("board",), "1 if a governor publishes a live status record"),
    "governor_bad_files": ("gauge", "1", ("board",),
                           "Files of --governor-status skipped at this scrape: damaged, not a status record, "
                           "or naming a process its owner does not run"),
    "governor_info": ("gauge", "", ("board", "policy", "objective", "phase"),
                      "The governor's policy, objective and search phase (1)"),
    "governor_clock_hertz": ("gauge", "Hz", ("board", "domain"),
                             "The clock the governor chose (absent: the board's own, MAXN)"),
    "governor_at_maxn": ("gauge", "1", ("board",), "1 if the governor leaves the clock to the board (MAXN)"),
    "governor_steps": ("gauge", "1", ("board",), "Training steps the governed run has completed"),
    "governor_joules_per_step": ("gauge", "J", ("board",), "Energy per training step of the last window"),
    "governor_seconds_per_step": ("gauge", "s", ("board",), "Time per training step of the last window"),
    "governor_joules_per_token": ("gauge", "J", ("board",), "Energy per token of the last window (where known)"),
    "governor_saved_estimate_joules": ("gauge", "J", ("board", "reference"),
                                       "Estimated energy saved so far against the reference (maxn or "
                                       "start_clock) J/step: an estimate"),
}


def metric_name(key: str) -> str:
    """The exposed name: counters end in _total."""
    kind = METRICS[key][0]
    return f"{PREFIX}_{key}" + ("_total" if kind == "counter" else "")


_PORT = re.compile(r"[0-9]{1,5}")
_NAME = re.compile(r"[A-Za-z0-9._-]+")                # a host name or an IPv4 address
_V6 = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9._-]+)?")  # inside brackets, with a zone


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT', ':PORT' or 'PORT' (host 127.0.0.1); '[V6]:PORT' -> (host, port). Strict:
    ASCII digits only (no '_', sign or blank that int() would take), an IPv6 address only in
    brackets (a bare '::1' is refused, not read as host ':' port 1)."""
    from ..errors import InvalidValueError

    text = str(text)
    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        if not close or not _V6.fullmatch(host) or ":" not in host or not rest.startswith(":"):
            raise InvalidValueError(f"--listen: not [IPV6]:PORT: {text!r}")
        port = rest[1:]
    else:
        host, sep, port = text.rpartition(":")
        if ":" in host:
            raise InvalidValueError(f"--listen: an IPv6 address goes in brackets, [ADDRESS]:PORT "
                                    f"(e.g. [::1]:9450): {text!r}")
        if host and not _NAME.fullmatch(host):
            raise InvalidValueError(f"--listen: not a host name or address: {host!r}")
    if not _PORT.fullmatch(port):
        raise InvalidValueError(f"--listen: not HOST:PORT (the port in ASCII digits): {text!r}")
    p = int(port)
    if p > 65535:
        raise InvalidValueError(f"--listen: port out of range: {p}")
    return host or "127.0.0.1", p


def listen_text(host: str, port: int) -> str:
    """HOST:PORT as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ---------------------------------------------------------------------------- energy ---

@dataclass
class Totals:
    """What the counters hold: only ever added to."""

    rail_j: dict = field(default_factory=dict)
    role_j: dict = field(default_factory=dict)
    samples: int = 0
    read_errors: int = 0
    restarts: int = 0

    def add(self, m) -> None:
        """Add one interval's Measurement (negative parts are not energy: never subtracted)."""
        for rail, e in m.energy_j.items():
            self.rail_j[rail] = self.rail_j.get(rail, 0.0) + max(0.0, float(e))
        for role, e in (("module", m.module_energy_j), ("cpu_gpu", m.cpu_gpu_energy_j), ("gpu", m.gpu_energy_j)):
            if e is not None:
                self.role_j[role] = self.role_j.get(role, 0.0) + max(0.0, float(e))
        self.samples += int(m.samples)
        self.read_errors += int(m.read_errors)


class LocalEnergy:
    """The rails read here: one C sampler, one window open since the start (or the last restart),
    peeked at every read. ``read()`` returns the interval since the previous read."""

    source = "local"

    def __init__(self, sysfs_root: str, rate_hz: float | None):
        from ..measure.sampler import Sampler

        self._sampler = Sampler(rate_hz=rate_hz, sysfs_root=sysfs_root, trace_capacity=1)
        self.board_id = self._sampler.board
        self._prev = None
        self._start()

    def _start(self) -> None:
        self._sampler.start()
        self._sampler.begin_window(_WINDOW)
        self._prev = None

    def read(self):
        """(interval Measurement-like, restarted: bool). A stopped sampler thread is started
        afresh: what it had counted stays counted, the time it was down is a gap."""
        restarted = False
        if not self._sampler.running:
            self._start()  # a fresh thread; the old window went with the old one
            restarted = True
        m = self._sampler.peek_window(_WINDOW)
        prev, self._prev = self._prev, m
        return (m if prev is None else _Diff(prev, m)), restarted

    def close(self) -> None:
        self._sampler.stop()


class _Diff:
    """The interval between two peeks of one window (the sampler's integral, exact)."""

    def __init__(self, a, b):
        self.duration_s = b.duration_s - a.duration_s
        self.energy_j = {r: b.energy_j[r] - a.energy_j.get(r, 0.0) for r in b.energy_j}

        def role(x, y):
            return None if y is None else y - (x or 0.0)

        self.module_energy_j = role(a.module_energy_j, b.module_energy_j)
        self.cpu_gpu_energy_j = role(a.cpu_gpu_energy_j, b.cpu_gpu_energy_j)
        self.gpu_energy_j = role(a.gpu_energy_j, b.gpu_energy_j)
        self.samples = b.samples - a.samples
        self.read_errors = b.read_errors - a.read_errors
        d = self.duration_s
        self.avg_power_w = {r: e / d for r, e in self.energy_j.items()} if d > 0 else {}
        self.rate_hz = self.samples / d if d > 0 else 0.0
        if a.gpu_util_pct is None or b.gpu_util_pct is None or d <= 0:
            self.gpu_util_pct = b.gpu_util_pct
        else:  # time-weighted means: the interval's is the difference of the integrals
            self.gpu_util_pct = (b.gpu_util_pct * b.duration_s - a.gpu_util_pct * a.duration_s) / d


class DaemonEnergy:
    """The rails through ``govcore serve``: a chain of windows, each ended and the next begun at a
    read (end first, then begin: the moment between is a gap, never counted twice)."""

    source = "daemon"

    def __init__(self, socket_path: str):
        self._conn = remote.connection(socket_path)
        status = self._conn.request("status")
        self.board_id = status.get("board") or None
        self._n = 0
        self._open = False
        self._reconnects = self._conn.reconnects
        self._begin()

    def _name(self) -> str:
        return f"pydvfs-exporter-{os.getpid()}-{self._n}"

    def _begin(self) -> None:
        self._n += 1
        self._conn.request(f"begin {self._name()}")
        self._open = True

    def read(self):
        """(interval Measurement or None, restarted). A window lost (the daemon restarted and
        did not take it back, an error) is begun afresh: the interval until then is a gap."""
        from types import MappingProxyType

        from ..measure.sampler import Measurement

        if not self._open:
            self._begin()
            return None, True
        try:
            w = self._conn.request(f"end {self._name()}")
        except PydvfsError:
            self._open = False  # begun afresh at the next read, under a new name
            raise
        self._open = False
        restarted = self._conn.reconnects != self._reconnects
        self._reconnects = self._conn.reconnects
        self._begin()
        m = Measurement(
            duration_s=w["duration_s"], energy_j=MappingProxyType(dict(w["energy_j"])),
            avg_power_w=MappingProxyType(dict(w["avg_power_w"])), cpu_gpu_energy_j=w.get("cpu_gpu_energy_j"),
            gpu_util_pct=w.get("gpu_util_pct"), samples=int(w["samples"]), read_errors=int(w["read_errors"]),
            rate_hz=float(w["rate_hz"]), module_energy_j=w.get("module_energy_j"),
            gpu_energy_j=w.get("gpu_energy_j"), board=w.get("board"))
        return m, restarted

    def close(self) -> None:
        if self._open:
            try:
                self._conn.request(f"end {self._name()}")
            except PydvfsError:
                pass


def _rails_readable(sysfs_root: str) -> bool:
    """True if this user can open the board's rail files (a sampler then reads them here)."""
    from ..measure.sampler import Sampler

    try:
        Sampler(sysfs_root=sysfs_root, trace_capacity=1).stop()
        return True
    except PydvfsError:
        return False


def open_energy(sysfs_root: str, rate_hz: float | None, socket_path: str | None = None):
    """The energy source: the daemon at ``socket_path`` (or ``$PYDVFS_SOCKET``) if given, else the
    rail files if readable here, else the daemon at its default socket."""
    path = socket_path or remote.sampler_socket()
    if path:
        return DaemonEnergy(path)
    if _rails_readable(sysfs_root) or not os.path.exists(remote.DEFAULT_SOCKET):
        return LocalEnergy(sysfs_root, rate_hz)
    return DaemonEnergy(remote.DEFAULT_SOCKET)


# --------------------------------------------------------------------------- collector ---

def _holder(dev) -> tuple[int, int]:
    """(pid, uid) of the process holding the GPU's lock: (0, -1) none; (-1, -1) not readable."""
    from .. import _core

    board = dev._board
    if not isinstance(board, _core.Board):
        return -1, -1  # the daemon's board: its lock is the daemon's to read
    try:
        pid = _core.lock_holder(board)
    except PydvfsError:
        return -1, -1
    if pid <= 0:
        return pid, -1
    try:
        return pid, os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return pid, -1


class BoardCollector:
    """A prometheus_client collector: every metric of :data:`METRICS`, read at each scrape.

    ``board_name``: the ``board`` label (default: the host name), one per exporter; the board
    table's id is ``board_type`` on ``pydvfs_board_info``. ``governor_status``: a status file or
    a folder of them (pydvfs/governor/status.py)."""

    def __init__(self, sysfs_root: str | None = None, rate_hz: float | None = None,
                 board_name: str | None = None, socket_path: str | None = None,
                 governor_path: str | None = None, state_dir: str | None = None):
        self.sysfs_root = resolve_sysfs_root(sysfs_root)
        if socket_path:  # the daemon named: its board for the clocks too
            from ..device import Device

            self.dev = Device(remote.RemoteBoard(socket_path), state_dir)
        else:
            self.dev = open_device(self.sysfs_root, state_dir)
        self.energy = open_energy(self.sysfs_root, rate_hz, socket_path)
        self.board = board_name or socket.gethostname()
        self.board_type = self.energy.board_id or self.dev.board_id or "unknown"
        self.governor_path = governor_path
        self.totals = Totals()
        self._last = None  # the last interval read
        self._up = 0
        self._lock = threading.Lock()
        self._said: set[str] = set()

    def _say_once(self, key: str, text: str) -> None:
        """What this user cannot read (the EMC's debugfs without root), said once, not dropped
        in silence at every scrape."""
        if key not in self._said:
            self._said.add(key)
            print(f"pydvfs exporter: {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.energy.close()

    # the registry calls describe() once: answering it with collect() would read the board
    def describe(self):
        return []

    def _read_energy(self) -> None:
        try:
            m, restarted = self.energy.read()
        except PydvfsError:
            self._up = 0
            return
        self._up = 1
        self.totals.restarts += bool(restarted)
        if m is not None:
            self.totals.add(m)
            self._last = m

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            self._read_energy()
            fams: dict[str, object] = {}

            def fam(key):
                if key not in fams:
                    kind, unit, labels, text = METRICS[key]
                    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                    fams[key] = cls(f"{PREFIX}_{key}", f"{text}" + (f" ({unit})" if unit and unit != "1" else ""),
                                    labels=list(labels))
                return fams[key]

            def put(key, value, *labels):
                if value is None:
                    return
                fam(key).add_metric([self.board, *map(str, labels)], float(value))

            b = self.board
            fam("board_info").add_metric([b, self.board_type, self.dev.model, self.energy.source], 1.0)
            for rail, e in sorted(self.totals.rail_j.items()):
                put("rail_energy_joules", e, rail)
            for role in boards.ROLES:
                if role in self.totals.role_j:
                    put("energy_joules", self.totals.role_j[role], role)
            put("sampler_samples", self.totals.samples)
            put("sampler_read_errors", self.totals.read_errors)
            put("sampler_restarts", self.totals.restarts)
            put("sampler_up", self._up)
            m = self._last
            if m is not None and m.duration_s > 0:
                for rail, e in sorted(m.energy_j.items()):
                    put("rail_power_watts", max(0.0, e) / m.duration_s, rail)
                for role, e in (("module", m.module_energy_j), ("cpu_gpu", m.cpu_gpu_energy_j),
                                ("gpu", m.gpu_energy_j)):
                    if e is not None:
                        put("power_watts", max(0.0, e) / m.duration_s, role)
                put("sampler_rate_hertz", m.samples / m.duration_s)
                if m.gpu_util_pct is not None:
                    put("gpu_load_ratio", m.gpu_util_pct / 100.0)
            try:
                self._clocks(put, fam)
            except PydvfsError:
                pass  # the board (or the daemon) did not answer: this scrape has no clocks
            self._governor(put, fam)
            yield from fams.values()

    def _clocks(self, put, fam) -> None:
        try:
            st = self.dev.state()
        except PydvfsError:
            return
        mhz = 1e6
        put("clock_hertz", st.cur_mhz * mhz, "gpu")
        put("clock_min_hertz", st.min_mhz * mhz, "gpu")
        put("clock_max_hertz", st.max_mhz * mhz, "gpu")
        put("clock_pinned", int(st.pinned), "gpu")
        cap = self.dev.gpu_cap()
        if cap and cap.get("cap_mhz"):
            put("clock_cap_hertz", cap["cap_mhz"] * mhz, "gpu")
        try:
            domains = self.dev.domains()
        except PydvfsError:
            domains = []
        for d in domains:
            if d["pinned"] is None:  # not readable here (the daemon's board reads it as root)
                self._say_once(d["name"], f"the {d['name']} clock is not exported: {d['why']}")
                continue
            name = d["name"]
            if d.get("cur_mhz") is not None:
                put("clock_hertz", d["cur_mhz"] * mhz, name)
            if d["kind"] == "emc":
                if d.get("cap_mhz"):
                    put("clock_cap_hertz", d["cap_mhz"] * mhz, name)
                levels = d["levels_mhz"]
                if levels:
                    put("clock_min_hertz", levels[0] * mhz, name)
                    put("clock_max_hertz", levels[-1] * mhz, name)
            else:
                put("clock_min_hertz", d["min_mhz"] * mhz, name)
                put("clock_max_hertz", d["max_mhz"] * mhz, name)
            put("clock_pinned", int(bool(d["pinned"])), name)
        pm = self.dev.power_mode()
        if pm.get("id") is not None:
            put("power_mode_info", 1, pm["id"], pm.get("name") or "")
        pid, uid = _holder(self.dev)
        put("gpu_holder_pid", pid)
        put("gpu_holder_uid", uid)

    def _governor(self, put, fam) -> None:
        recs, bad = governor_status.read_folder(self.governor_path) if self.governor_path else ([], None)
        put("governor_bad_files", bad)
        # the record of this board (its sysfs root); a record without one is taken as this board's
        mine = [r for r in recs if not r.get("sysfs_root")
                or os.path.realpath(str(r["sysfs_root"])) == os.path.realpath(self.dev.sysfs_root)]
        put("governor_up", int(bool(mine)))
        if not mine:
            return
        r = mine[0]
        phase = r.get("phase") if r.get("phase") in governor_status.PHASES else "search"
        put("governor_info", 1, str(r.get("policy") or "unknown")[:32], str(r.get("objective") or "energy")[:16],
            phase)
        freq = r.get("freq_mhz")  # every number of a record is checked (governor_status._well_formed)
        put("governor_at_maxn", int(freq is None and phase != "fallback"))
        if freq is not None:
            put("governor_clock_hertz", freq * 1e6, "gpu")
        for dom, v in (r.get("domains_mhz") or {}).items():
            if dom in ("emc", "cpu") and v is not None:
                put("governor_clock_hertz", v * 1e6, dom)
        put("governor_steps", r.get("steps"))
        put("governor_joules_per_step", r.get("j_per_step"))
        put("governor_seconds_per_step", r.get("s_per_step"))
        put("governor_joules_per_token", r.get("j_per_token"))
        ref = r.get("saved_reference") if r.get("saved_reference") in governor_status.REFERENCES else None
        if ref is not None:
            put("governor_saved_estimate_joules", r.get("saved_estimate_j"), ref)


MAX_CONNECTIONS = 32      # served at once (a thread each); more wait in the listen queue
REQUEST_TIMEOUT_S = 10.0  # to send the request and take the reply (Prometheus' default scrape timeout)
INDEX = b'<html><body><a href="/metrics">/metrics</a>: pydvfs exporter (docs/metrics.md)</body></html>\n'


class _Deadline(io.RawIOBase):
    """A connection's reads under one deadline: a client sending its request a byte at a time
    (slowloris) is cut off when the deadline passes, whatever it trickles."""

    def __init__(self, sock, timeout_s: float):
        self._sock, self._deadline = sock, time.monotonic() + timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not sent in time")
        self._sock.settimeout(left)  # the reply's writes keep what is left
        return self._sock.recv_into(buf)


def _server_classes():
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Handler(WSGIRequestHandler):
        def setup(self):
            super().setup()
            self.rfile = io.BufferedReader(_Deadline(self.connection, self.server.request_timeout_s))

        def log_message(self, *args):  # one line per scrape is noise
            pass

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True
        request_queue_size = 128

        def __init__(self, addr, family, max_connections: int, request_timeout_s: float):
            self.address_family = family
            self.request_timeout_s = request_timeout_s
            self._slots = threading.BoundedSemaphore(max_connections)
            super().__init__(addr, Handler)

        def process_request(self, request, client_address):
            # over the bound, the next connection waits for a slot (the others wait unaccepted in
            # the listen queue), at most a request's time: then it is closed, no thread started
            if not self._slots.acquire(timeout=self.request_timeout_s):
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self._slots.release()
                raise

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                self._slots.release()

        def handle_error(self, request, client_address):
            if not isinstance(sys.exc_info()[1], OSError):  # a client gone or too slow: nothing to say
                super().handle_error(request, client_address)

    return Server


def wsgi_app(registry):
    """/metrics: prometheus_client's page; /: a link to it; any other path: 404."""
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(registry)

    def app(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [INDEX]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: the metrics are at /metrics\n"]

    return app


def serve(collector: BoardCollector, host: str, port: int, max_connections: int = MAX_CONNECTIONS,
          request_timeout_s: float = REQUEST_TIMEOUT_S):
    """Serve /metrics on host:port with only this collector (and prometheus_client's process
    collector), in a thread: at most ``max_connections`` at once (more wait their turn), each
    closed ``request_timeout_s`` after it is taken up, whatever it sent. Returns (server, thread)."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)  # the exporter's own CPU and memory
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server = _server_classes()(addr[:2], family, max_connections, request_timeout_s)
    server.set_app(wsgi_app(registry))
    thread = threading.Thread(target=server.serve_forever, name="pydvfs-exporter-http", daemon=True)
    thread.start()
    return server, thread


__all__ = ["BoardCollector", "DEFAULT_LISTEN", "METRICS", "listen_text", "metric_name", "open_energy", "parse_listen",
           "serve"]

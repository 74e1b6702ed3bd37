"""Energy measurement on the INA3221 rails: a C sampler thread, windows, immutable results.

    with pydvfs.Sampler(rate_hz=1000) as s:
        train()
    print(s.measurement.module_energy_j, s.measurement.cpu_gpu_energy_j)

    s = pydvfs.Sampler()
    s.begin_window("epoch")            # windows may overlap and nest
    ...
    m = s.end_window("epoch")          # -> Measurement

The thread, the integration (exact trapezoid on P = mV x mA) and the ring buffer are in C
(govcore/sampler.c); this module only names windows and converts units at the boundary:
energy J, power W, time s, GPU utilisation %. Which rails make the module's energy and the
CPU+GPU energy is the board table's (pydvfs/device/table.py, docs/boards.md). See docs/sampler.md.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

from .. import _core
from ..device import remote, resolve_sysfs_root
from ..device import table as boards
from ..errors import InvalidValueError

MAX_INTERPOLATED_PCT = _core.MAX_INTERPOLATED_PCT  # see Measurement.readings_ok
MAX_RATE_HZ = 100000.0
MIN_RATE_HZ = 0.01  # GC_SAMPLER_MIN_RATE_HZ: one sample per 100 s


_WITH_WINDOW = "__with__"  # the window a `with Sampler()` block measures


def _board(board_id: str | None) -> boards.Board | None:
    return boards.boards().get(board_id) if board_id else None


def role_rails(board_id: str | None) -> dict[str, list[str] | None]:
    """{role: [rails] | None}: which rails make each role on a board of the table ([]: the board
    has no rail of its own for it; None: not known, as on a board outside the table)."""
    b = _board(board_id)
    return {role: (list(b.role_rails(role)) if b else None) for role in boards.ROLES}


@dataclass(frozen=True)
class Measurement:
    """What a window measured. Units are in the field names.

    Energy by rail role (docs/boards.md): ``module_energy_j`` is what the whole module drew (its
    input rail where it has one, else the sum of its rails, each once), ``cpu_gpu_energy_j`` the
    papers' measure (the CPU and GPU rails), ``gpu_energy_j`` the GPU alone where the board has a
    rail for it; each None where the board (``board``, the table's id) does not say. There is no
    "total" over all rails: on a board whose roles are unknown, a sum of the rails read could
    count a rail's parts twice (VDD_IN and the rails it feeds)."""

    duration_s: float
    energy_j: Mapping[str, float]          # per rail, J (trapezoid integral of the rail's power)
    avg_power_w: Mapping[str, float]       # per rail, W
    cpu_gpu_energy_j: float | None         # the CPU+GPU rails, by role
    gpu_util_pct: float | None             # time-weighted mean GPU load; None without a load file
    samples: int                           # sample rounds inside the window
    read_errors: int                       # failed file reads inside the window (skipped)
    rate_hz: float                         # achieved: samples / duration_s
    # Reading quality per rail. A failed reading is skipped: the trapezoid bridges the gap from
    # the last good reading to the next (interpolated), or holds the last one to the window's
    # end. A negative reading (negative current) counts as 0 W, never as negative energy.
    failed_reads: Mapping[str, int] = field(default_factory=dict)
    interpolated_pct: Mapping[str, float] = field(default_factory=dict)  # % of duration_s
    negative_readings: Mapping[str, int] = field(default_factory=dict)
    module_energy_j: float | None = None   # the module's rails, by role
    gpu_energy_j: float | None = None      # the GPU's own rail, where the board has one
    board: str | None = None               # the board table's id; None: a board outside it

    @property
    def roles(self) -> dict[str, list[str] | None]:
        """Which rails make each role (see :func:`role_rails`); None for a role whose rails were
        not all read (or one was labelled twice), as govcore reports it."""
        energy = {"module": self.module_energy_j, "cpu_gpu": self.cpu_gpu_energy_j,
                  "gpu": self.gpu_energy_j}
        return {role: ([r for r in rails if r in self.energy_j] if rails and energy[role] is not None
                       else rails if rails is not None and not rails else None)
                for role, rails in role_rails(self.board).items()}

    @property
    def module_partial(self) -> bool:
        """True where ``module_energy_j`` is summed over the rails present, an optional rail of
        the table missing (the AGX Orin without VDDQ_VDD2_1V8AO): see :attr:`module_missing`."""
        return bool(self.module_missing)

    @property
    def module_missing(self) -> tuple[str, ...]:
        """The optional rails the module's sum goes without (boards.missing_optional)."""
        return boards.missing_optional(self.energy_j, _board(self.board), "module")

    @property
    def incomplete_rails(self) -> tuple[str, ...]:
        """Rails with a failed or negative reading inside the window."""
        return tuple(r for r in self.energy_j
                     if self.failed_reads.get(r, 0) or self.negative_readings.get(r, 0))

    @property
    def readings_ok(self) -> bool:
        """False if a rail had more than MAX_INTERPOLATED_PCT of the window interpolated or
        held, or a negative reading: its energy is then partly made up."""
        return all(p <= MAX_INTERPOLATED_PCT for p in self.interpolated_pct.values()) and \
            not any(self.negative_readings.values())

    def quality_warnings(self) -> list[str]:
        """One sentence per rail whose readings are not to be trusted (empty if readings_ok)."""
        return [f"rail {r}: {self.failed_reads.get(r, 0)} failed reads, "
                f"{self.interpolated_pct.get(r, 0.0):.1f} % of the time interpolated or held, "
                f"{self.negative_readings.get(r, 0)} negative readings (counted as 0 W)"
                for r in self.energy_j
                if self.interpolated_pct.get(r, 0.0) > MAX_INTERPOLATED_PCT
                or self.negative_readings.get(r, 0)]

    @classmethod
    def from_window(cls, w: dict, board_id: str | None = None) -> "Measurement":
        duration_s = w["duration_ns"] / 1e9
        energy = dict(w["energy_j"])
        by_role = boards.energies(energy, _board(board_id))
        return cls(
            duration_s=duration_s,
            energy_j=MappingProxyType(energy),
            avg_power_w=MappingProxyType(dict(w["avg_power_w"])),
            cpu_gpu_energy_j=by_role["cpu_gpu"],
            module_energy_j=by_role["module"],
            gpu_energy_j=by_role["gpu"],
            board=board_id or None,
            gpu_util_pct=w["gpu_util_pct"],
            samples=int(w["samples"]),
            read_errors=int(w["read_errors"]),
            rate_hz=float(w["rate_hz"]),
            failed_reads=MappingProxyType({k: int(v) for k, v in w["failed_reads"].items()}),
            interpolated_pct=MappingProxyType({k: float(v) for k, v in w["interpolated_pct"].items()}),
            negative_readings=MappingProxyType({k: int(v) for k, v in w["negative_readings"].items()}),
        )

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; the same keys as ``pydvfs measure --json`` and
        ``govcore measure --json`` (which add ``command`` and ``exit_status``)."""
        return {
            "duration_s": self.duration_s,
            "board": self.board,
            "energy_j": dict(self.energy_j),
            "module_energy_j": self.module_energy_j,
            "cpu_gpu_energy_j": self.cpu_gpu_energy_j,
            "gpu_energy_j": self.gpu_energy_j,
            "roles": self.roles,
            "module_partial": self.module_partial,
            "avg_power_w": dict(self.avg_power_w),
            "gpu_util_pct": self.gpu_util_pct,
            "samples": self.samples,
            "read_errors": self.read_errors,
            "rate_hz": self.rate_hz,
            "failed_reads": dict(self.failed_reads),
            "interpolated_pct": dict(self.interpolated_pct),
            "negative_readings": dict(self.negative_readings),
            "incomplete_rails": list(self.incomplete_rails),
            "readings_ok": self.readings_ok,
        }


@dataclass(frozen=True)
class Trace:
    """The sampler's ring buffer, oldest sample first.

    t_ns: CLOCK_MONOTONIC ns (``time.monotonic_ns()`` on Linux); power_mw: rail -> mW per
    sample (NaN where the read failed); gpu_load_pct: % per sample (NaN where missing), or
    None without a load file. Plain ``array.array`` columns.
    """

    t_ns: object
    power_mw: Mapping[str, object] = field(default_factory=dict)
    gpu_load_pct: object | None = None

    def __len__(self) -> int:
        return len(self.t_ns)


def _check_rate(rate_hz) -> float:
    """User rate -> the C config: None follows the sensor (0)."""
    if rate_hz is None:
        return 0.0
    if isinstance(rate_hz, bool):
        raise InvalidValueError(f"not a sampling rate: {rate_hz!r}")
    try:
        value = float(rate_hz)
    except (TypeError, ValueError):
        raise InvalidValueError(f"not a sampling rate: {rate_hz!r} (expected Hz)") from None
    if not math.isfinite(value) or not MIN_RATE_HZ <= value <= MAX_RATE_HZ:
        raise InvalidValueError(
            f"sampling rate must be within {MIN_RATE_HZ:g}..{MAX_RATE_HZ:.0f} Hz, got {rate_hz!r}")
    return value


class Sampler:
    """Sample the board's power rails from a C thread and measure energy over windows.

    rate_hz: samples per second (None: follow the sensor's ``update_interval``, ~150 Hz on an
    Orin by default; the INA3221 gives a fresh value at most every ~0.84 ms). sysfs_root: as
    everywhere (argument, ``$PYDVFS_SYSFS_ROOT``, ``/``). rails: names to sample (None: all).
    trace_capacity: samples kept for :meth:`trace` (None: 65536).

    Raises DeviceNotFoundError without a Jetson GPU or without an INA3221 sensor.
    All methods may be called from any thread.
    """

    def __new__(cls, *args, **kwargs):
        # where $PYDVFS_SOCKET asks for it, measure through the govcore daemon (device/remote.py)
        if cls is Sampler and remote.sampler_socket():
            cls = RemoteSampler
        return super().__new__(cls)

    def __init__(self, rate_hz: float | None = None, sysfs_root: str | os.PathLike | None = None,
                 rails: Iterable[str] | None = None, trace_capacity: int | None = None):
        self._rate_cfg = _check_rate(rate_hz)
        if trace_capacity is not None and (not isinstance(trace_capacity, int)
                                           or not 1 <= trace_capacity <= 1 << 24):
            raise InvalidValueError("trace_capacity must be an int in 1..16777216")
        self._root = resolve_sysfs_root(sysfs_root)
        self._rails = None if rails is None else ([rails] if isinstance(rails, str) else list(rails))
        self._cap = trace_capacity or 0
        self._lock = threading.Lock()
        self._windows: dict[str, _core.Snapshot] = {}
        # Open the files now so a board without sensors fails at construction.
        self._core = self._new_core()
        self._started = False
        self.measurement: Measurement | None = None

    def _new_core(self) -> _core.Sampler:
        return _core.Sampler(self._root, self._rate_cfg, self._rails, self._cap)

    # -- the thread --------------------------------------------------------------------------
    @property
    def rails(self) -> tuple[str, ...]:
        return self._core.rail_names

    @property
    def board(self) -> str | None:
        """The board table's id of the sampled board; None where the board is not in the table."""
        return self._core.board_id or None

    @property
    def warning(self) -> str | None:
        """What discovery could not settle (an unknown board: no module or CPU+GPU energy; a
        role's rail missing; a label seen twice), one line; None if nothing."""
        return self._core.warning or None

    @property
    def rate_hz(self) -> float:
        """The configured rate, Hz (what the sensor's update_interval gave if None was asked)."""
        return self._core.stats()["rate_hz"]

    @property
    def running(self) -> bool:
        return self._core.stats()["running"]

    def start(self) -> "Sampler":
        """Start sampling (no-op if running). After a stop, starts a fresh thread; windows
        still open from before the stop are dropped."""
        with self._lock:
            if self._started and not self._core.stats()["running"]:
                self._core = self._new_core()
                self._windows.clear()
            self._started = True
            core = self._core
        core.start()
        return self

    def stop(self) -> None:
        """Stop sampling (safe to call twice, before start, and from any thread). Readings stay
        available until the next start."""
        with self._lock:
            core = self._core if self._started else None
        if core is not None:
            core.stop()

    def __enter__(self) -> "Sampler":
        self.start()
        self.begin_window(_WITH_WINDOW)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.measurement = self.end_window(_WITH_WINDOW)
        finally:
            self.stop()

    # -- windows -----------------------------------------------------------------------------
    def begin_window(self, name: str) -> None:
        """Open a named window now (starts the sampler if needed). Windows may overlap."""
        if not isinstance(name, str) or not name:
            raise InvalidValueError(f"a window needs a non-empty name, got {name!r}")
        if not self.running:
            self.start()
        with self._lock:
            if name in self._windows:
                raise InvalidValueError(f"window {name!r} is already open")
            self._windows[name] = self._core.snapshot()

    def end_window(self, name: str) -> Measurement:
        """Close a window and return what it measured."""
        with self._lock:
            begin = self._windows.pop(name, None)
            if begin is None:
                open_ = ", ".join(repr(n) for n in self._windows if n != _WITH_WINDOW) or "none"
                raise InvalidValueError(f"no open window {name!r} (open: {open_})")
            core = self._core
        return Measurement.from_window(core.window(begin, core.snapshot()), core.board_id)

    def peek_window(self, name: str) -> Measurement:
        """What an open window has measured so far; it stays open."""
        with self._lock:
            begin = self._windows.get(name)
            if begin is None:
                raise InvalidValueError(f"no open window {name!r}")
            core = self._core
        return Measurement.from_window(core.window(begin, core.snapshot()), core.board_id)

    # -- raw data ----------------------------------------------------------------------------
    def trace(self) -> Trace:
        """The ring buffer (the newest ``trace_capacity`` samples), oldest first."""
        t_ns, power, load = self._core.trace()
        return Trace(t_ns, MappingProxyType(power), load)

    def stats(self) -> dict:
        """Thread counters: samples, read_errors, overruns, reopens, thread_cpu_ns, rate_hz..."""
        return self._core.stats()

    def __repr__(self) -> str:
        return f"Sampler(rate_hz={self.rate_hz:g}, rails={list(self.rails)!r}, sysfs_root={self._root!r})"


class RemoteSampler(Sampler):
    """pydvfs.Sampler through the daemon's sampler: windows only (no trace); the daemon samples
    at the sensor's rate. Chosen by Sampler() itself where $PYDVFS_SOCKET is set."""

    _count = 0

    def __init__(self, rate_hz=None, sysfs_root=None, rails=None, trace_capacity=None):
        self._conn = remote.connection(remote.sampler_socket() or remote.DEFAULT_SOCKET)
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

"""The board as Python sees it: discovery, clock state, pinning and restoring.

All the work happens in govcore (C): discovery (govcore/board.c) finds the GPU, the power rails
and the board, whose row of the table (``pydvfs/device/table.py``, ``Device.board``) says which rails
make the module's and the CPU+GPU energy (``Device.roles``). This module turns Hz into MHz at the
user boundary and returns small immutable records. Every path resolves under a sysfs root: the argument, else
``$PYDVFS_SYSFS_ROOT``, else ``/``.

Imports: the root modules.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings
from dataclasses import asdict, dataclass, field
from typing import Iterator

from .. import _core
from ..errors import BoardBusyError, DeviceNotFoundError, InvalidValueError, PydvfsError
from . import ownership

SYSFS_ROOT_ENV = "PYDVFS_SYSFS_ROOT"


def resolve_sysfs_root(sysfs_root: str | os.PathLike | None = None) -> str:
    """The sysfs root to use: the argument, else $PYDVFS_SYSFS_ROOT, else '/'. Any bytes a
    file name may hold are kept (os.fsdecode), so a root that is not UTF-8 still opens."""
    if sysfs_root is not None and os.fsdecode(sysfs_root) != "":
        return os.fsdecode(sysfs_root)
    return os.environ.get(SYSFS_ROOT_ENV) or "/"


def hz_to_mhz(hz: int) -> float:
    return hz / 1e6


def mhz_to_hz(mhz: float | str) -> int:
    """A clock in MHz to Hz (what devfreq holds); InvalidValueError if it is not a clock. Text
    (a command line's, a config's) by govcore's one grammar (``_core.parse_mhz``, as ``govcore
    pin`` and the daemon read it); a number if it is finite and positive."""
    if isinstance(mhz, (str, bytes)):
        return _core.parse_mhz(mhz)
    if isinstance(mhz, bool) or not isinstance(mhz, numbers.Real):
        raise InvalidValueError(f"not a clock: {mhz!r} (expected a number of MHz)")
    value = float(mhz)
    hz = _core.mhz_to_hz(value) if math.isfinite(value) else 0
    if hz == 0:
        raise InvalidValueError(f"not a clock: {mhz!r} MHz (expected a positive number)")
    return hz


def _fmt_mhz(mhz: float) -> str:
    return f"{mhz:g}"


@dataclass(frozen=True)
class ClockState:
    """The GPU clock as devfreq reports it. Units: MHz."""

    cur_mhz: float
    min_mhz: float
    max_mhz: float
    governor: str

    @property
    def pinned(self) -> bool:
        return self.min_mhz == self.max_mhz

    def to_dict(self) -> dict:
        return {**asdict(self), "pinned": self.pinned}


class RestoreForcedWarning(UserWarning):
    """``restore(force=True)`` dropped a saved state it could not (wholly) put back."""


@dataclass(frozen=True)
class PinResult:
    """What a pin asked for and what the board was set to. Units: MHz. ``warning``: set when the
    original state saved by this pin is itself a pin (min == max, as jetson_clocks leaves it).
    ``power_cap_mhz``: the power mode's GPU cap the pin obeyed (None: none known, or lifted by
    above_power_mode); ``clamped_from_mhz``: the level asked for where the cap lowered it (else
    None). A joint pin (``--emc``, ``--cpu``) also gives the level each clock domain got
    (``domains_mhz``: "emc", "cpu0", ...)."""

    requested_mhz: float
    freq_mhz: float
    state_file: str
    warning: str | None = None
    power_cap_mhz: float | None = None
    clamped_from_mhz: float | None = None
    domains_mhz: dict = field(default_factory=dict)
    requested_cpu_mhz: float | None = None

    @property
    def snapped(self) -> bool:
        return abs(self.requested_mhz - self.freq_mhz) > 1e-6

    def to_dict(self) -> dict:
        """The record govcore's pin writes too (report.c gc_json_pin): "warning" only where set,
        "domains" only for a joint pin."""
        data = {"requested_mhz": self.requested_mhz, "freq_mhz": self.freq_mhz,
                "freq_hz": mhz_to_hz(self.freq_mhz) if self.freq_mhz else None, "snapped": self.snapped,
                "state_file": self.state_file, "power_cap_mhz": self.power_cap_mhz,
                "clamped_from_mhz": self.clamped_from_mhz}
        if self.warning is not None:
            data["warning"] = self.warning
        if self.domains_mhz:
            data["domains"] = dict(self.domains_mhz)
        return data

    def describe(self) -> str:
        text = f"pinned the GPU clock to {_fmt_mhz(self.freq_mhz)} MHz"
        if self.clamped_from_mhz is not None:
            text += f" (asked {_fmt_mhz(self.requested_mhz)} MHz: the power mode's GPU cap)"
        elif self.snapped:
            text += f" (asked {_fmt_mhz(self.requested_mhz)} MHz: snapped to the nearest level)"
        if "emc" in self.domains_mhz:
            text += f", the EMC to {_fmt_mhz(self.domains_mhz['emc'])} MHz"
        cpus = {k: v for k, v in self.domains_mhz.items() if k != "emc"}
        if cpus and self.requested_cpu_mhz is not None:
            if any(abs(v - self.requested_cpu_mhz) > 1e-6 for v in cpus.values()):
                text += ", every CPU policy: " + ", ".join(f"{k} to {_fmt_mhz(v)} MHz" for k, v in cpus.items())
                text += f" (asked {_fmt_mhz(self.requested_cpu_mhz)} MHz: snapped to each policy's nearest level)"
            else:
                text += f", every CPU policy ({', '.join(cpus)}) to {_fmt_mhz(self.requested_cpu_mhz)} MHz"
        return text

    def notice(self) -> str | None:
        """The one-line notice of a pin the power mode's cap lowered (govcore says the same)."""
        if self.clamped_from_mhz is None:
            return None
        return (f"note: {_fmt_mhz(self.clamped_from_mhz)} MHz is above the power mode's GPU cap: pinned "
                f"{_fmt_mhz(self.freq_mhz)} MHz (--above-power-mode lifts the cap)")


def domain_record(d: dict) -> dict:
    """One clock domain as ``status --json`` shows it (the keys of govcore's "domains"; MHz)."""
    st = d["state"]
    out = {"name": d["name"], "kind": d["kind"], "available": d["available"], "why": d["why"],
           "levels_mhz": [hz_to_mhz(f) for f in d["levels_hz"]]}
    if d["kind"] == "emc":
        out["cap_mhz"] = hz_to_mhz(d["cap_hz"]) if d["cap_hz"] else None
        if d.get("devfreq"):  # Thor's bwmgr: a devfreq device, pinned as min = max
            out["devfreq"] = d["devfreq"]
    else:
        out["related_cpus"] = d["related_cpus"]
    if st is None:
        out.update(cur_mhz=None, pinned=None)
    elif d["kind"] == "emc" and d.get("devfreq"):
        out.update(governor=st["governor"], cur_mhz=hz_to_mhz(st["rate_hz"]), min_mhz=hz_to_mhz(st["min_hz"]),
                   max_mhz=hz_to_mhz(st["max_hz"]), locked=st["locked"], pinned=st["locked"])
    elif d["kind"] == "emc":
        out.update(cur_mhz=hz_to_mhz(st["rate_hz"]), locked=st["locked"], pinned=st["locked"])
    else:
        out.update(governor=st["governor"], cur_mhz=hz_to_mhz(st["rate_hz"]) if st["rate_hz"] else None,
                   min_mhz=hz_to_mhz(st["min_hz"]), max_mhz=hz_to_mhz(st["max_hz"]),
                   pinned=st["min_hz"] == st["max_hz"])
    return out


def describe_domain(r: dict) -> str:
    """One line of ``pydvfs status`` for a domain record (domain_record)."""
    name = f"{r['name']:<9}"
    if r["pinned"] is None:
        return f"{name} unavailable: {r['why']}"
    levels = r["levels_mhz"]
    span = f"{len(levels)} {'rates' if r['kind'] == 'emc' else 'levels'}"
    if levels:
        span += f" {_fmt_mhz(levels[0])}..{_fmt_mhz(levels[-1])} MHz"
    tail = "" if r["available"] else f"; cannot be pinned: {r['why']}"  # shown (readable), not pinnable here
    if r["kind"] == "emc" and r.get("devfreq"):
        how = "pinned (min_freq = max_freq)" if r["locked"] else "the board's memory scaling"
        return (f"{name} {_fmt_mhz(r['cur_mhz'])} MHz, {how} (devfreq {r['devfreq']}, min {_fmt_mhz(r['min_mhz'])} "
                f"max {_fmt_mhz(r['max_mhz'])} MHz; {span}){tail}")
    if r["kind"] == "emc":
        how = "pinned (mrq_rate_locked 1)" if r["locked"] else "the board's memory scaling"
        cap = f", cap {_fmt_mhz(r['cap_mhz'])} MHz" if r["cap_mhz"] else ""
        return f"{name} {_fmt_mhz(r['cur_mhz'])} MHz, {how} ({span}{cap}){tail}"
    pinned = ", pinned" if r["pinned"] else ""
    return (f"{name} {r['governor']}, min {_fmt_mhz(r['min_mhz'])} max {_fmt_mhz(r['max_mhz'])} MHz"
            f"{pinned} (CPUs {r['related_cpus']}; {span}){tail}")


@dataclass(frozen=True)
class Rail:
    """One power rail. kind: 'hwmon' (INA3221 mV and mA files), 'ina3221x' (JetPack 4, a mW
    file) or 'power' (an hwmon powerN_input in uW, as the INA238 on Thor). The name is the
    channel's label made printable (other bytes as \\xNN); a label seen twice is kept, the
    second named LABEL#2."""

    name: str
    kind: str


class Device:
    """A Jetson board found under a sysfs root. Use :func:`open_device`.

    ``above_power_mode``: the power mode (nvpmodel) is the user's ceiling: every pin through
    this device stays at or under the GPU cap in force (govcore/powermode.h) unless this is True."""

    def __init__(self, board: _core.Board, state_dir: str | None = None, above_power_mode: bool = False):
        self._board = board
        self.state_dir = state_dir
        self.above_power_mode = bool(above_power_mode)

    # -- what was discovered ---------------------------------------------------------------
    @property
    def sysfs_root(self) -> str:
        return self._board.sysfs_root

    @property
    def model(self) -> str:
        return self._board.model

    @property
    def gpu_name(self) -> str:
        return self._board.gpu_name

    @property
    def board_id(self) -> str | None:
        """The board table's id (docs/boards.md), None where the board is not in the table."""
        return self._board.board_id or None

    @property
    def board(self):
        """The board's row of the table (``pydvfs.device.table.Board``), None where unknown."""
        from . import table as boards

        return boards.boards().get(self._board.board_id) if self._board.board_id else None

    @property
    def jetpack(self) -> int | None:
        return self._board.jetpack

    @property
    def l4t(self) -> str | None:
        return self._board.l4t

    @property
    def warning(self) -> str | None:
        """What discovery could not settle (an unknown board, a role's rail missing, a label
        seen twice), one line; None if nothing."""
        return self._board.warning or None

    @property
    def roles(self) -> dict[str, tuple[str, ...] | None]:
        """Which rails make each role (module, cpu_gpu, gpu); () where the board has no rail of
        its own for it, None where it is not known. From the table only, never guessed."""
        return self._board.roles

    @property
    def module_partial(self) -> bool:
        """True where the module's energy is summed over the rails present, an optional rail of
        the table missing (the AGX Orin without VDDQ_VDD2_1V8AO); :attr:`warning` names it."""
        return self._board.module_partial

    @property
    def skipped_rails(self) -> tuple[tuple[str, str], ...]:
        """(name, why) per power channel found and not taken as a rail: an INA3221 channel
        disabled (inN_enable 0), or one whose reading failed at discovery."""
        return self._board.skipped_rails

    @property
    def devfreq_dir(self) -> str:
        return self._board.devfreq_dir

    @property
    def available_frequencies_hz(self) -> tuple[int, ...]:
        return self._board.freqs_hz

    @property
    def available_frequencies_mhz(self) -> tuple[float, ...]:
        return tuple(hz_to_mhz(f) for f in self._board.freqs_hz)

    @property
    def rails(self) -> tuple[Rail, ...]:
        return tuple(Rail(name, kind) for name, kind, *_ in self._board.rails)

    @property
    def sensor_interval_ms(self) -> int | None:
        """INA3221 update interval (ms) where the driver exposes it."""
        return self._board.sensor_interval_ms or None

    # -- reading -----------------------------------------------------------------------------
    def state(self) -> ClockState:
        cur, lo, hi, gov = self._board.clock_state()
        return ClockState(hz_to_mhz(cur), hz_to_mhz(lo), hz_to_mhz(hi), gov)

    def range_state(self) -> tuple[int, int, str]:
        """(min_hz, max_hz, governor) without cur_freq: what a restore reports back."""
        if hasattr(self._board, "range_state"):
            return self._board.range_state()
        st = self.state()
        return mhz_to_hz(st.min_mhz), mhz_to_hz(st.max_mhz), st.governor

    def gpu_load_pct(self) -> float | None:
        permille = self._board.load_permille()
        return None if permille is None else permille / 10.0

    def snap_mhz(self, mhz: float) -> float:
        """The available level nearest to mhz."""
        return hz_to_mhz(self._board.snap_hz(mhz_to_hz(mhz)))

    def state_file(self) -> str:
        return self._board.state_path(self.state_dir)

    def saved_state(self) -> ClockState | None:
        """The state saved before the first change (cur_mhz is not saved: NaN), or None."""
        saved = self._board.saved_state(self.state_dir)
        if saved is None:
            return None
        lo, hi, gov = saved
        return ClockState(float("nan"), hz_to_mhz(lo), hz_to_mhz(hi), gov)

    def power_mode(self) -> dict:
        """The nvpmodel mode in force: ``id``, ``name``, ``gpu_max_mhz`` (None where not known)
        and ``unknown`` (why, where the mode is not known)."""
        return self._board.power_mode()

    def gpu_cap(self) -> dict | None:
        """The GPU cap a pin obeys: ``cap_mhz`` (the highest level at or under both),
        ``devfreq_max_mhz`` (max_freq before the first pin), ``from_saved``,
        ``nvpmodel_clk_cap_mhz``. None where it cannot be read (a damaged saved state)."""
        from ..errors import PydvfsError

        try:
            return self._board.gpu_cap(self.state_dir)
        except PydvfsError:
            return None

    def power_cap_mhz(self) -> float | None:
        """The level a pin or a search may go up to: the cap in force, or None where it is
        lifted (above_power_mode) or not known."""
        if self.above_power_mode:
            return None
        cap = self.gpu_cap()
        return None if cap is None else cap["cap_mhz"]

    def allowed_frequencies_mhz(self) -> tuple[float, ...]:
        """The table a search may use: the levels at or under :meth:`power_cap_mhz`."""
        levels = self.available_frequencies_mhz
        cap = self.power_cap_mhz()
        if cap is None:
            return levels
        return tuple(f for f in levels if f <= cap) or levels[:1]

    @property
    def through_daemon(self) -> bool:
        """True if the board is governed through `govcore serve` (no root here): a pin then
        lasts as long as this process."""
        return not isinstance(self._board, _core.Board)

    # -- changing the board ------------------------------------------------------------------
    # Threads of one process take turns (ownership.changing): each pin, restore or apply runs
    # whole, so no thread saves another's pin as the original.
    @contextlib.contextmanager
    def governing(self) -> Iterator[None]:
        """Hold the board for the whole block (one owner per GPU): no other process may pin or
        restore it meanwhile. BoardBusyError, naming the holder's pid, if another governs it."""
        with ownership.governing(self._board, block=True):
            yield

    @property
    def governed_outside(self) -> bool:
        """True if a governing block of this process already holds the board (a nested
        :func:`pydvfs.governed` leaves the board to the outer block)."""
        return ownership.in_block(self._board)

    def domains(self) -> list[dict]:
        """The clocks beside the GPU's, one record per domain (the EMC, each cpufreq policy), as
        ``status --json`` shows them under "domains"."""
        return [domain_record(d) for d in self._board.domains()]

    def pin(self, mhz: float | str, emc_mhz: float | None = None, cpu_mhz: float | None = None,
            above_power_mode: bool | None = None, nearest: bool = True) -> PinResult:
        """Pin the GPU clock to the level nearest ``mhz`` (a number, or text by govcore's
        grammar), at or under the power mode's cap (lowered to it,
        :attr:`PinResult.clamped_from_mhz` says so) unless ``above_power_mode`` (default: the
        device's). The original state is saved first (if that original is itself a pin, as
        jetson_clocks leaves it, ``PinResult.warning`` says so). From here until
        :meth:`restore` (or the end of the process) this process owns the board.
        ``nearest=False``: a clock more than one level outside the table is refused
        (InvalidValueError), as ``pydvfs pin`` without ``--nearest``. One conversion (MHz to Hz,
        here) and one snap (govcore's, directly or in the daemon, which says the level it set).

        ``emc_mhz`` pins the memory clock (one of its rates), ``cpu_mhz`` every cpufreq policy
        (each one's nearest level), together with the GPU as one: a clock not in a domain's
        table, or above the power mode's cap, raises InvalidValueError and nothing is written;
        a failure part way puts every clock back."""
        want_hz = mhz_to_hz(mhz)
        emc_hz = mhz_to_hz(emc_mhz) if emc_mhz is not None else 0
        cpu_hz = mhz_to_hz(cpu_mhz) if cpu_mhz is not None else 0
        above = self.above_power_mode if above_power_mode is None else bool(above_power_mode)
        levels: dict = {}
        with ownership.changing(), ownership.governing(self._board) as owner:
            if emc_hz or cpu_hz:
                level_hz, levels = self._board.pin_mode_hz(want_hz, emc_hz, cpu_hz, self.state_dir,
                                                           above_power_mode=above)
            else:
                level_hz = self._board.pin_hz(want_hz, self.state_dir, nearest, above_power_mode=above)
            owner.pinned = True
            warning = getattr(self._board, "pin_warning", "") or None
        cap_hz, clamped_hz = self._board.last_pin_cap
        return PinResult(hz_to_mhz(want_hz), hz_to_mhz(level_hz), self.state_file(), warning=warning,
                         power_cap_mhz=hz_to_mhz(cap_hz) if cap_hz else None,
                         clamped_from_mhz=hz_to_mhz(clamped_hz) if clamped_hz else None,
                         domains_mhz={k: hz_to_mhz(v) for k, v in levels.items()},
                         requested_cpu_mhz=hz_to_mhz(cpu_hz) if cpu_hz else None)

    def restore(self, force: bool = False) -> bool:
        """Put back the state saved before the first change. True if there was one.
        While another process governs the board: BoardBusyError, unless ``force``. A saved
        state that no longer matches the board is put back as far as the board allows and
        removed; StateFileError names what was left. ``force`` also drops a state that cannot
        be put back (damaged, or a write the board refused), after writing what it can."""
        with ownership.changing():
            try:
                with ownership.governing(self._board) as owner:
                    try:
                        return self._restore(force)
                    finally:
                        owner.pinned = owner.pinned and self._has_state()
            except BoardBusyError:
                if not force:
                    raise
            return self._restore(force)

    def saved_domains(self) -> list[str]:
        """The clock domains beside the GPU's that the saved state holds (["emc", "cpu0", ...]):
        what a restore puts back with the GPU; [] for none, or through the daemon."""
        names = getattr(self._board, "saved_domains", None)
        try:
            return names(self.state_dir) if names is not None else []
        except PydvfsError:
            return []

    def _has_state(self) -> bool:
        try:
            return self._board.saved_state(self.state_dir) is not None
        except PydvfsError:
            return True  # a damaged state is still there

    def _restore(self, force: bool) -> bool:
        try:
            return self._board.restore(self.state_dir)
        except (BoardBusyError, DeviceNotFoundError):
            raise
        except PydvfsError as e:
            if not force or self.through_daemon:
                raise
            dropped = self._board.drop_state(self.state_dir)
            warnings.warn(f"{e}; " + ("dropped the saved state (--force); the clock is left as it "
                                      "is now" if dropped else "no saved state is left"),
                          RestoreForcedWarning, stacklevel=3)
            return True

    def status(self) -> dict:
        """Everything ``pydvfs status --json`` prints."""
        st = self.state()
        # a user without $XDG_RUNTIME_DIR and no --state-dir has no private state folder: the
        # board is still shown, whether a state is saved there is not known
        known = self.state_dir is not None or _core.default_state_dir() is not None
        saved = self.saved_state() if known else None
        from .table import mode_notice

        mode = self.power_mode()
        note = mode_notice(self.board_id, mode)
        if note and note in (self.warning or ""):  # through the daemon, govcore said it already
            note = None
        warning = "; ".join(w for w in (self.warning, note) if w) or None
        return {
            "sysfs_root": self.sysfs_root,
            "model": self.model,
            "board": self.board_id,
            "jetpack": self.jetpack,
            "l4t": self.l4t,
            "gpu": self.gpu_name,
            "devfreq_dir": self.devfreq_dir,
            "governor": st.governor,
            "cur_mhz": st.cur_mhz,
            "min_mhz": st.min_mhz,
            "max_mhz": st.max_mhz,
            "pinned": st.pinned,
            "available_mhz": list(self.available_frequencies_mhz),
            "gpu_load_pct": self.gpu_load_pct(),
            "rails": [{"name": r.name, "kind": r.kind} for r in self.rails],
            "skipped_rails": [{"name": n, "why": why} for n, why in self.skipped_rails],
            "roles": {k: (None if v is None else list(v)) for k, v in self.roles.items()},
            "module_partial": self.module_partial,
            "warning": warning,
            "sensor_interval_ms": self.sensor_interval_ms,
            "saved_state": None if saved is None else {
                "path": self.state_file(),
                "governor": saved.governor,
                "min_mhz": saved.min_mhz,
                "max_mhz": saved.max_mhz,
            },
            "saved_state_known": known,
            "power_mode": mode,
            "gpu_cap": self.gpu_cap(),
            "domains": self.domains(),
        }

    def __repr__(self) -> str:
        return f"Device(model={self.model!r}, gpu={self.gpu_name!r}, sysfs_root={self.sysfs_root!r})"


def open_device(sysfs_root: str | os.PathLike | None = None, state_dir: str | None = None,
                above_power_mode: bool = False) -> Device:
    """Discover the board. Raises DeviceNotFoundError where there is no Jetson GPU. Without
    root, or with $PYDVFS_SOCKET set, the board may be the govcore daemon's (device/remote.py).
    ``above_power_mode``: let pins go above the power mode's GPU cap (see :class:`Device`)."""
    from . import remote

    return Device(remote.open_board(resolve_sysfs_root(sysfs_root)), state_dir, above_power_mode)


def pin(mhz: float, sysfs_root: str | os.PathLike | None = None,
        state_dir: str | None = None, emc_mhz: float | None = None,
        cpu_mhz: float | None = None, above_power_mode: bool = False) -> PinResult:
    """Pin the GPU clock of the board under ``sysfs_root``, and with ``emc_mhz``/``cpu_mhz``
    the memory and CPU clocks with it (see :meth:`Device.pin`), at or under the power mode's
    GPU cap unless ``above_power_mode``."""
    return open_device(sysfs_root, state_dir).pin(mhz, emc_mhz=emc_mhz, cpu_mhz=cpu_mhz,
                                                  above_power_mode=above_power_mode)


def restore(sysfs_root: str | os.PathLike | None = None, state_dir: str | None = None) -> bool:
    """Restore the state saved before the first change; safe to call any number of times."""
    return open_device(sysfs_root, state_dir).restore()

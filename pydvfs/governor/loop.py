"""Run a training command under a governor: pin, measure, (search), restore.

    report = run_governed(["python", "train.py"], policy="online", progress_file="steps.txt")

Static policies (mlg, ffg, rules, maxn) choose one clock with :func:`pydvfs.apply` before the
command starts. ``online`` starts at a proposed clock and lets :class:`HillClimb` move it while
the command runs, from energy per training step: the CPU+GPU energy the C sampler integrates
over a window divided by the steps the command completed in it (the integer it writes,
atomically, into the progress file). The board is restored when the command ends, on Ctrl-C,
on SIGTERM (see cli/run.py) and on any error.

Once the command runs, nothing the board does stops it: the search covers only the levels up to
the board's max_freq at the start (a power mode caps it), a level the board still refuses is
dropped from the search, and if the board refuses even the clock that held before, the loop
falls back to the board's own state and lets the command run to its end.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from .. import _core
from ..command import exit_status, start_command, stop_command
from ..device import open_device
from ..errors import ClockVerifyError, InvalidValueError, PydvfsError
from ..progress import read_progress
from ..sampler import Sampler
from .search import HillClimb, SearchParams

STATIC_POLICIES = _core.POLICY_NAMES  # govcore's list: mlg, ffg, rules, maxn
POLICIES = ("online",) + STATIC_POLICIES


@dataclass(frozen=True)
class WindowParams:
    """How the loop measures. Units are in the names."""

    min_window_s: float = 10.0  # a window lasts at least this long...
    min_steps: int = 20  # ...and holds at least this many training steps
    settle_s: float = 2.0  # after a clock change, wait this long before measuring
    progress_timeout_s: float = 120.0  # the progress file must show a count within this
    stall_s: float = 120.0  # no new step for this long: stop searching
    poll_s: float | None = None  # how often the progress file is read (default: window / 20)

    def __post_init__(self):
        if not (self.min_window_s > 0 and math.isfinite(self.min_window_s)):
            raise InvalidValueError("the window must be a finite number of seconds > 0")
        if not (isinstance(self.min_steps, int) and self.min_steps >= 1):
            raise InvalidValueError("min steps per window must be an integer >= 1")
        if not self.settle_s >= 0:
            raise InvalidValueError("settle must be >= 0 s")
        if not (self.progress_timeout_s > 0 and self.stall_s > 0):
            raise InvalidValueError("the progress timeout and the stall limit must be > 0 s")
        if self.poll_s is not None and not self.poll_s > 0:
            raise InvalidValueError("the poll interval must be > 0 s")

    @property
    def poll_interval_s(self) -> float:
        return self.poll_s if self.poll_s is not None else min(0.25, max(0.002, self.min_window_s / 20))

    def to_dict(self) -> dict:
        return asdict(self)


def _window_energy_j(m) -> float:
    return m.cpu_gpu_energy_j if m.cpu_gpu_energy_j is not None else m.total_energy_j


def choose_start(dev, workload: dict | None, model_dir=None, start_mhz: float | None = None) -> tuple[float, str]:
    """Where the online search starts: ``start_mhz``, else the learned model's clock for the
    workload, else the tree's fixed-frequency clock (FFG), else the middle of the table."""
    from ..policy.apply import decide, load_tree

    if start_mhz is not None:
        return dev.snap_mhz(start_mhz), "--start"
    note = ""
    if workload is not None:
        d = decide(workload, "mlg", model_dir, dev.sysfs_root, dev.state_dir)
        if d.freq_mhz is not None:
            return d.freq_mhz, "mlg"
        note = " (mlg keeps this workload at MAXN)"
    ffg = load_tree(model_dir).ffg_mhz
    if ffg and ffg > 0:
        return dev.snap_mhz(ffg), "ffg" + note
    levels = dev.available_frequencies_mhz
    return levels[len(levels) // 2], "middle of the table" + note


def board_cap_mhz(dev) -> float:
    """The board's own max_freq (MHz): what it was before pydvfs changed it (the saved state,
    if an earlier run left one), else what it is now. Under a power mode (nvpmodel) levels above
    it cannot take."""
    saved = dev.saved_state()
    return (saved if saved is not None else dev.state()).max_mhz


def capped_levels(levels_mhz, cap_mhz: float) -> tuple[float, ...]:
    """The levels at or below ``cap_mhz`` (half a MHz of rounding allowed); the lowest level
    alone if none is."""
    levels = sorted(levels_mhz)
    return tuple(f for f in levels if f <= cap_mhz + 0.5) or (levels[0],)


def run_governed(cmd: Sequence[str], policy: str = "online", workload: dict | None = None,
                 progress_file: str | Path | None = None, rate_hz: float | None = None,
                 model_dir=None, start_mhz: float | None = None,
                 search: SearchParams | None = None, window: WindowParams | None = None,
                 sysfs_root=None, state_dir=None, log=None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> dict:
    """Run ``cmd`` under ``policy``; returns the report (see docs/online.md)."""
    from ..policy.apply import apply

    cmd = list(cmd)
    if not cmd:
        raise InvalidValueError("no training command given (put it after --)")
    if policy not in POLICIES:
        raise InvalidValueError(f"unknown policy {policy!r}: expected {', '.join(POLICIES)}")
    online = policy == "online"
    if online and not progress_file:
        raise InvalidValueError("--policy online needs --progress-file F: the step count CMD writes")
    if not online and workload is None and policy != "maxn":
        raise InvalidValueError(f"--policy {policy} needs --workload model=...,layers=...,hidden=...,seq_len=...")
    if not online and (start_mhz is not None or search is not None):
        raise InvalidValueError("the search options (--start, --margin, ...) are for --policy online")
    search_params = search or SearchParams()
    window = window or WindowParams()
    log = log or sys.stderr
    progress = Path(progress_file) if progress_file else None
    dev = open_device(sysfs_root, state_dir)

    report: dict = {"command": cmd, "policy": policy, "progress_file": None if progress is None else str(progress)}
    if online:
        # read before anything is pinned: levels above the board's own max_freq cannot take
        cap = board_cap_mhz(dev)
        levels = capped_levels(dev.available_frequencies_mhz, cap)
        start, source = choose_start(dev, workload, model_dir, start_mhz)
        if start > levels[-1]:
            start, source = levels[-1], f"{source}, capped at the board's max_freq {cap:g} MHz"
        report.update(start_mhz=start, start_source=source, board_max_mhz=cap,
                      search_levels_mhz=list(levels))
        if len(levels) < len(dev.available_frequencies_mhz):
            print(f"pydvfs run: the board's max_freq is {cap:g} MHz (a power-mode cap?): "
                  f"searching {levels[0]:g}..{levels[-1]:g} MHz", file=log, flush=True)
    sampler = Sampler(rate_hz=rate_hz, sysfs_root=dev.sysfs_root)  # fails before any change
    if progress is not None and progress.exists():
        # a count left by an earlier run would read as steps of this one
        try:
            progress.unlink()
        except OSError as e:
            raise InvalidValueError(f"cannot remove the old progress file {progress}: {e.strerror}") from None
        print(f"pydvfs run: removed the old progress file {progress}", file=log, flush=True)
    finished = False
    try:
        if online:
            dev.pin(start)
            report["decision"] = None
        elif policy == "maxn" and workload is None:
            dev.restore()
            report["decision"] = {"freq_mhz": None, "policy": "maxn"}
        else:
            report["decision"] = apply(workload, policy, model_dir, dev.sysfs_root, dev.state_dir).to_dict()
        with sampler:
            t0 = clock()
            proc = start_command(cmd, {"PYDVFS_POLICY": policy})
            try:
                if online:
                    loop = _OnlineLoop(dev, sampler, HillClimb(levels, start, search_params, 0.0),
                                       window, progress, clock, t0, log)
                    loop.run(proc, sleep)
                    report.update(loop.report())
                else:
                    proc.wait()
            except BaseException:
                stop_command(proc)
                raise
        status = exit_status(proc.returncode)
        finished = True
    finally:
        try:
            restored, restore_error = dev.restore(), None
        except PydvfsError as e:
            if not finished:
                raise
            # the run is over and measured: its report is still given, with what is left pinned
            restored, restore_error = False, str(e)
    m = sampler.measurement
    steps = read_progress(progress) if progress is not None else None
    energy = _window_energy_j(m)
    report.update(
        exit_status=status,
        duration_s=m.duration_s,
        energy_j=dict(m.energy_j),
        cpu_gpu_energy_j=m.cpu_gpu_energy_j,
        energy_basis="cpu+gpu" if m.cpu_gpu_energy_j is not None else "all rails",
        steps=steps,
        j_per_step=energy / steps if steps else None,
        restored=restored,
        restore_error=restore_error,
        measurement=m.to_dict(),
    )
    if online:
        report["chosen_mhz"] = report["final_mhz"] if report["fallback"] else report["search"]["best_mhz"]
        # Like with like: the start clock's J/step was measured over steps, so it is compared
        # with the span of counted steps only (first count seen .. last advance seen), never
        # with the start-up before the first step or the tail after the last one.
        est = report["search"]["start_estimate_j_per_step"]
        span = report["counted_span"]
        if est is not None and span is not None and span["steps"] > 0:
            at_start_j = est * span["steps"]
            report["energy_at_start_clock_j"] = energy - span["energy_j"] + at_start_j
            report["saving_vs_start_pct"] = 100.0 * (1.0 - span["energy_j"] / at_start_j)
        else:
            report["energy_at_start_clock_j"] = None
            report["saving_vs_start_pct"] = None
    else:
        report["chosen_mhz"] = report["decision"]["freq_mhz"]
    return report


class _OnlineLoop:
    """Pins what the search proposes, measures windows, feeds them back."""

    def __init__(self, dev, sampler: Sampler, search: HillClimb, window: WindowParams,
                 progress: Path, clock, t0: float, log):
        self.dev, self.sampler, self.search, self.w = dev, sampler, search, window
        self.progress, self.clock, self.t0, self.log = progress, clock, t0, log
        self.pinned_mhz: float | None = search.target_mhz  # None: the board's own state
        self.trajectory: list[dict] = []
        self.switches = [{"t_s": 0.0, "freq_mhz": self.pinned_mhz}]
        self.dropped: list[dict] = []  # levels the board refused: t_s, freq_mhz, error
        self.fallback: str | None = None
        # the counted-step span: the "span" window opens at the first count seen; "tail"
        # reopens at every advance, so span - tail is the energy up to the last advance seen
        self.span_first: tuple[float, int] | None = None  # (t_s, count) when the first count was seen
        self.span_last: tuple[float, int] | None = None  # (t_s, count) at the last advance seen
        self.span_steps = 0  # steps counted inside the span (a count that goes back adds none)
        self.unusable = 0  # windows in a row without energy
        self.last_steps: int | None = None
        self.last_advance_s = 0.0
        self.settle_until_s = window.settle_s
        self.win: tuple[float, int] | None = None  # (start t_s, steps at start) of the open window

    def _say(self, text: str) -> None:
        print(f"pydvfs run: {text}", file=self.log, flush=True)

    def _close_window(self):
        if self.win is not None:
            self.win = None
            return self.sampler.end_window("probe")
        return None

    def _read_steps(self, t: float) -> int | None:
        steps = read_progress(self.progress)
        if steps is None:
            return self.last_steps
        if self.last_steps is None:
            self.last_steps, self.last_advance_s = steps, t
            self.sampler.begin_window("span")
            self.sampler.begin_window("tail")
            self.span_first = self.span_last = (t, steps)
        elif steps != self.last_steps:
            if steps < self.last_steps:  # the count went back (a restart): measure afresh
                self._close_window()
            else:
                self.span_steps += steps - self.last_steps
            self.sampler.end_window("tail")
            self.sampler.begin_window("tail")
            self.span_last = (t, steps)
            self.last_steps, self.last_advance_s = steps, t
        return self.last_steps

    def _counted_span(self) -> dict | None:
        if self.span_first is None:
            return None
        tail = self.sampler.end_window("tail")
        whole = self.sampler.end_window("span")
        return {"t_begin_s": self.span_first[0], "t_end_s": self.span_last[0],
                "first_count": self.span_first[1], "last_count": self.span_last[1],
                "steps": self.span_steps, "energy_j": _window_energy_j(whole) - _window_energy_j(tail)}

    def _record_pin(self, t: float, mhz: float | None) -> None:
        if mhz != self.pinned_mhz:
            self.switches.append({"t_s": t, "freq_mhz": mhz})
        self.pinned_mhz = mhz

    def _unpinned(self, t: float, why: str) -> None:
        """The board refused the clock: govcore put its own state back. Stop searching, leave
        it there and let the command run on."""
        self._close_window()
        self.fallback = why
        self._record_pin(t, None)
        self._say(f"{why}: searching stopped, the board stays at its own clock state")

    def _move_to(self, t: float, nxt: float) -> None:
        """Pin the search's next clock. A level the board refuses (ClockVerifyError; govcore has
        put the original state back) is dropped from the search, the current clock is pinned
        again, and the search's next proposal is tried. If the current clock does not take
        again either, or the board cannot be written at all, fall back to the board's state."""
        while nxt != self.pinned_mhz:
            try:
                self.dev.pin(nxt)
            except ClockVerifyError as e:
                self.dropped.append({"t_s": t, "freq_mhz": nxt, "error": str(e)})
                self._say(f"the board refused {nxt:g} MHz ({e}): dropped from the search")
                refused = nxt
                try:
                    nxt = self.search.drop(refused, t)
                except InvalidValueError as e2:  # the last level: cannot happen while one held
                    return self._unpinned(t, str(e2))
                try:
                    self.dev.pin(self.pinned_mhz)
                except PydvfsError as e2:
                    return self._unpinned(t, f"the board refused {refused:g} MHz, then {self.pinned_mhz:g} "
                                             f"MHz, which had held: {e2}")
                self.settle_until_s = t + self.w.settle_s  # it was off for a moment
            except PydvfsError as e:  # no permission, an I/O error: nothing to search on
                return self._unpinned(t, f"cannot pin {nxt:g} MHz: {e}")
            self._record_pin(t, nxt)
            self.settle_until_s = t + self.w.settle_s
        return None

    def _fall_back(self, t: float, why: str) -> None:
        self._close_window()
        start = self.search.start_mhz
        if self.pinned_mhz != start:
            try:
                self.dev.pin(start)
            except PydvfsError as e:
                return self._unpinned(t, f"{why}; the start clock {start:g} MHz did not take either ({e})")
            self._record_pin(t, start)
        self.fallback = why
        self._say(f"{why}: searching stopped, staying at the start clock {start:g} MHz")
        return None

    def run(self, proc, sleep) -> None:
        poll_s = self.w.poll_interval_s
        while proc.poll() is None:
            sleep(poll_s)
            t = self.clock() - self.t0
            steps = self._read_steps(t)
            if self.fallback is not None:
                continue
            if steps is None:
                if t > self.w.progress_timeout_s:
                    self._fall_back(t, f"the progress file {self.progress} showed no step count "
                                       f"within {self.w.progress_timeout_s:g} s")
                continue
            if t - self.last_advance_s > self.w.stall_s:
                self._fall_back(t, f"the step count in {self.progress} stopped advancing "
                                   f"({self.w.stall_s:g} s without a new step)")
                continue
            if t < self.settle_until_s:
                continue
            if self.win is None:
                self.sampler.begin_window("probe")
                self.win = (t, steps)
                continue
            t_begin, steps_begin = self.win
            done = steps - steps_begin
            if t - t_begin < self.w.min_window_s or done < self.w.min_steps:
                continue
            m = self._close_window()
            self._feed(t, m, done)

    def _feed(self, t: float, m, steps: int) -> None:
        j_per_step = _window_energy_j(m) / steps
        if not (math.isfinite(j_per_step) and j_per_step > 0):
            self.unusable += 1  # the rails read nothing (a sensor that is off, all reads failed)
            if self.unusable >= 3:
                self._fall_back(t, f"the power rails read no energy in {self.unusable} windows in a row")
            return
        self.unusable = 0
        phase, rnd = self.search.phase, self.search.round
        nxt = self.search.observe(self.pinned_mhz, j_per_step, t)
        self.trajectory.append({"t_s": t, "freq_mhz": self.pinned_mhz, "j_per_step": j_per_step,
                                "steps": steps, "duration_s": m.duration_s,
                                "energy_j": _window_energy_j(m), "phase": phase, "round": rnd})
        if self.search.converged and phase != HillClimb.HOLD:
            self._say(f"converged on {self.search.best_mhz:g} MHz after {t:.1f} s "
                      f"({len(self.search.probes)} probes)")
        if nxt != self.pinned_mhz:
            self._move_to(t, nxt)

    def report(self) -> dict:
        self._close_window()
        state = self.search.state()
        state["start_estimate_j_per_step"] = self.search.estimate(self.search.start_mhz)
        return {"trajectory": self.trajectory, "switches": self.switches, "search": state,
                "converged": self.search.converged, "fallback": self.fallback,
                "final_mhz": self.pinned_mhz, "dropped": self.dropped,
                "counted_span": self._counted_span(), "window": self.w.to_dict()}


__all__ = ["run_governed", "read_progress", "choose_start", "board_cap_mhz", "capped_levels", "WindowParams", "POLICIES", "STATIC_POLICIES"]

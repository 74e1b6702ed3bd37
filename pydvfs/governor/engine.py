"""The one online engine: measure windows of training steps, feed the search, pin what it
proposes. ``pydvfs run`` (steps from a progress file), :class:`pydvfs.OnlineGovernor` (steps
from ``gov.step()`` in a plain loop) and the Hugging Face / Lightning callbacks (steps from the
trainer's hooks) all drive this class; they differ only in where the step count comes from.

The caller opens the device and the sampler, and calls :meth:`OnlineEngine.tick` with the time
and the step count whenever it has them (the count may be ``None`` while none is known yet).
Nothing here sleeps, starts processes or restores the board: the caller owns those.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

from ..errors import ClockVerifyError, InvalidValueError, PydvfsError
from ..measure.energy import of as energy_of
from ..policy.objective import Objective
from . import status as governor_status
from .mode_search import MAXN, level_name


@dataclass(frozen=True)
class WindowParams:
    """How the engine measures. Units are in the names."""

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

    @classmethod
    def of(cls, window) -> "WindowParams":
        """The parameters a caller gave as ``window=``: WindowParams, a dict of its fields, or a
        number of seconds (the shortest window, as ``pydvfs run --window S``); None: defaults."""
        if window is None:
            return cls()
        if isinstance(window, cls):
            return window
        if isinstance(window, dict):
            unknown = sorted(set(window) - set(cls.__dataclass_fields__))
            if unknown:
                raise InvalidValueError(f"window: unknown field(s) {', '.join(map(str, unknown))} (fields: "
                                        f"{', '.join(cls.__dataclass_fields__)})")
            return cls(**window)
        if isinstance(window, numbers.Real) and not isinstance(window, bool):
            return cls(min_window_s=float(window))
        raise InvalidValueError(f"window: expected seconds, a dict or a WindowParams, got {window!r}")

    def windows_for_steps(self, steps: float, s_per_step: float) -> float:
        """How many windows ``steps`` training steps fill at ``s_per_step``: a window closes once
        it is ``min_window_s`` long *and* holds ``min_steps`` steps, so it lasts
        max(min_window_s, min_steps x s/step). (The settling after a clock change, unmeasured,
        and the poll interval are not counted: a held clock has neither.)"""
        return steps / max(float(self.min_steps), self.min_window_s / s_per_step)

    @property
    def poll_interval_s(self) -> float:
        return self.poll_s if self.poll_s is not None else min(0.25, max(0.002, self.min_window_s / 20))

    def to_dict(self) -> dict:
        return asdict(self)


def checked_total_steps(total_steps) -> int | None:
    """The run's length in steps as given (``--steps``, ``total_steps=``, a trainer's
    ``max_steps``): an integer >= 1, or None (unknown)."""
    if total_steps is None:
        return None
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise InvalidValueError(f"the run's total steps must be an integer >= 1, got {total_steps!r}")
    return total_steps


def window_energy_j(m, measure: str) -> float | None:
    """The ``measure`` energy (pydvfs.measure.energy: "module" or "cpu-gpu") of a sampler window (a
    Measurement, which the sampler summed by rail role); None where the board's roles are
    unknown (never a sum of whatever rails there are)."""
    return energy_of(m, measure)


class OnlineEngine:
    """Pins what the search proposes, measures windows, feeds them back.

    ``source`` names where the step count comes from, for messages ("the progress file F",
    "the training loop"). ``objective``: what a window's cost is; the hill climb is fed that
    cost, the model search (which fits time and energy separately) J/step and s/step; the
    energy is the objective's measure (module or CPU+GPU) of each window, as the sampler summed it.
    ``total_steps``: the step count the source will show at the end of the run, if known (it may
    be set later as :attr:`total_steps`: the Lightning callback knows it only at
    ``on_train_start``); a search with a horizon is then told the windows left in the run
    before each window is fed (:meth:`remaining_windows`).
    """

    def __init__(self, dev, sampler, search, window: WindowParams, source: str, log=None,
                 objective: Objective | None = None, say_prefix: str = "pydvfs run",
                 total_steps: int | None = None):
        self.dev, self.sampler, self.search, self.w = dev, sampler, search, window
        self.total_steps = checked_total_steps(total_steps)
        self.source, self.log, self.prefix = source, log, say_prefix
        self.objective = objective or Objective()
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
        self._probes_said = 0
        self._maxn_said = 0
        # where the run publishes its state for ``pydvfs exporter`` (pydvfs/governor/status.py)
        self.status_file = governor_status.status_path()
        self.policy_name = "online"
        self.tokens_per_step: float | None = None  # the run's so far, where its driver counts tokens

    def _say(self, text: str) -> None:
        if self.log is not None:
            print(f"{self.prefix}: {text}", file=self.log, flush=True)

    def _close_window(self):
        if self.win is not None:
            self.win = None
            return self.sampler.end_window("probe")
        return None

    def _count(self, t: float, steps: int | None) -> int | None:
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
                "steps": self.span_steps, "energy_j": self._energy(whole) - self._energy(tail)}

    def _energy(self, m) -> float:
        """The objective's energy of a window (NaN where unknown: the caller checked it is
        known before the run, so a NaN only marks a window without readings)."""
        e = window_energy_j(m, self.objective.energy)
        return math.nan if e is None else e

    def _record_pin(self, t: float, mhz: float | None) -> None:
        if mhz != self.pinned_mhz:
            self.switches.append({"t_s": t, "freq_mhz": mhz})
        self.pinned_mhz = mhz

    def _unpinned(self, t: float, why: str) -> None:
        """The board refused the clock: govcore put its own state back. Stop searching, leave
        it there and let the training run on."""
        self._close_window()
        self.fallback = why
        self._record_pin(t, None)
        self._say(f"{why}: searching stopped, the board stays at its own clock state")
        self.publish()

    def start(self, t: float = 0.0) -> None:
        """Put the board at the search's start clock, by the path every later move takes
        (:meth:`_move_to`): a start the board refuses (a power-mode cap) is dropped from the
        search and the next proposal tried, as a refused later level is. A board that cannot
        be written at all (no permission) is an error here: nothing has run yet."""
        target, self.pinned_mhz = self.search.target_mhz, MAXN  # before: the board's own state
        self._move_to(t, target, first=True)
        self.switches = [{"t_s": t, "freq_mhz": self.pinned_mhz}]
        self.publish()

    def _move_to(self, t: float, nxt: float, first: bool = False) -> None:
        """Pin the search's next clock. A level the board refuses (ClockVerifyError; govcore has
        put the original state back) is dropped from the search, the current clock is pinned
        again (none: the board's own state, which govcore put back), and the search's next
        proposal is tried. If the current clock does not take again either, or the board cannot
        be written at all, fall back to the board's state (``first``: raise the latter)."""
        while nxt != self.pinned_mhz:
            if nxt is MAXN:  # the search measures (or keeps) the board's own governor
                try:
                    self._once_more(self.dev.restore, "restoring the board's governor")
                except PydvfsError as e:
                    return self._unpinned(t, f"cannot hand the clock back to the board's governor: {e}")
                self._record_pin(t, MAXN)
                self.settle_until_s = t + self.w.settle_s
                return None
            try:
                self._once_more(lambda n=nxt: self.dev.pin(n), f"pinning {level_name(nxt)}")
            except ClockVerifyError as e:
                self.dropped.append({"t_s": t, "freq_mhz": nxt, "error": str(e)})
                self._say(f"the board refused {nxt:g} MHz ({e}): dropped from the search")
                refused = nxt
                try:
                    nxt = self.search.drop(refused, t)
                except InvalidValueError as e2:  # the last level: cannot happen while one held
                    return self._unpinned(t, str(e2))
                try:
                    if self.pinned_mhz is not MAXN:
                        self.dev.pin(self.pinned_mhz)
                except PydvfsError as e2:
                    return self._unpinned(t, f"the board refused {refused:g} MHz, then {self.pinned_mhz:g} "
                                             f"MHz, which had held: {e2}")
                self.settle_until_s = t + self.w.settle_s  # it was off for a moment
                continue  # the next proposal: not pinned yet
            except PydvfsError as e:  # no permission, an I/O error: nothing to search on
                if first:
                    raise
                return self._unpinned(t, f"cannot pin {nxt:g} MHz: {e}")
            self._record_pin(t, nxt)
            self.settle_until_s = t + self.w.settle_s
        return None

    def _once_more(self, call, what: str):
        """A board call, tried once more where it failed for a reason other than the board's
        refusal of the clock (ClockVerifyError: that level is dropped instead): one transient
        read or write error (``cannot read .../cur_freq: Invalid argument``, through the daemon
        or directly) must not end a whole search. A second failure is the caller's."""
        try:
            return call()
        except ClockVerifyError:
            raise
        except PydvfsError as e:
            self._say(f"{what} failed ({e}): trying once more")
            return call()

    def _fall_back(self, t: float, why: str) -> None:
        """Stop searching and go back to where the search started: its start clock, or MAXN
        (the board's own governor) where it started there."""
        self._close_window()
        start = MAXN if getattr(self.search, "maxn_anchor", False) else self.search.start_mhz
        if self.pinned_mhz != start:  # (pinned None: the board's own state already)
            try:
                self.dev.restore() if start is MAXN else self.dev.pin(start)
            except PydvfsError as e:
                return self._unpinned(t, f"{why}; the start, {level_name(start)}, did not take either ({e})")
            self._record_pin(t, start)
        self.fallback = why
        self._say(f"{why}: searching stopped, staying at the start, {level_name(start)}")
        self.publish()
        return None

    def tick(self, t: float, steps: int | None) -> None:
        """Time ``t`` (s since the start) and the step count now (None: not known yet)."""
        steps = self._count(t, steps)
        if self.fallback is not None:
            return
        if steps is None:
            if t > self.w.progress_timeout_s:
                self._fall_back(t, f"{self.source} showed no step count within {self.w.progress_timeout_s:g} s")
            return
        if t - self.last_advance_s > self.w.stall_s:
            self._fall_back(t, f"the step count in {self.source} stopped advancing "
                               f"({self.w.stall_s:g} s without a new step)")
            return
        if t < self.settle_until_s:
            return
        if self.win is None:
            self.sampler.begin_window("probe")
            self.win = (t, steps)
            return
        t_begin, steps_begin = self.win
        done = steps - steps_begin
        if t - t_begin < self.w.min_window_s or done < self.w.min_steps:
            return
        m = self._close_window()
        self._feed(t, m, done)

    def _feed(self, t: float, m, steps: int) -> None:
        energy = self._energy(m)
        j_per_step = energy / steps
        if not (math.isfinite(j_per_step) and j_per_step > 0):
            self.unusable += 1  # the rails read nothing (a sensor that is off, all reads failed)
            if self.unusable >= 3:
                self._fall_back(t, f"the power rails read no energy in {self.unusable} windows in a row")
            return
        self.unusable = 0
        s_per_step = m.duration_s / steps
        phase, rnd = self.search.phase, self.search.round
        fed = j_per_step if getattr(self.search, "fits_time", False) else self.objective.cost(j_per_step, s_per_step)
        if hasattr(self.search, "remaining_windows"):  # a search with a horizon (not the hill climb)
            self.search.remaining_windows = self.remaining_windows(s_per_step)
        nxt = self.search.observe(self.pinned_mhz, fed, t, s_per_step)
        self.trajectory.append({"t_s": t, "freq_mhz": self.pinned_mhz, "j_per_step": j_per_step,
                                "s_per_step": s_per_step, "steps": steps, "duration_s": m.duration_s,
                                "energy_j": energy, "phase": phase, "round": rnd})
        self._say_probes(t, nxt, phase)
        if nxt != self.pinned_mhz:
            self._move_to(t, nxt)
        self.publish()

    def saved_estimate(self) -> tuple[float | None, str]:
        """(J, reference): what the measured windows saved against the reference's J/step (MAXN
        where the search measured it, else its start clock), the estimate the run reports."""
        ref, name = None, "start_clock"
        if hasattr(self.search, "maxn_probes") and self.search.estimate(MAXN) is not None:
            ref, name = self.search.estimate(MAXN), "maxn"
        elif getattr(self.search, "probes", None):
            ref = self._start_j_per_step()
        if ref is None or not self.trajectory:
            return None, name
        return sum(ref * w["steps"] - w["energy_j"] for w in self.trajectory), name

    def publish(self) -> None:
        """Write the run's state to the status file (``$PYDVFS_GOVERNOR_STATUS``), if asked: the
        exporter's view of this governor. A file that cannot be written is said once, then left."""
        if not self.status_file:
            return
        mhz = self.pinned_mhz
        domains = {}
        if isinstance(mhz, (tuple, list)):  # a joint mode: (gpu, emc, cpu)
            domains = {k: v for k, v in zip(("emc", "cpu"), mhz[1:]) if v is not None}
            mhz = mhz[0]
        last = self.trajectory[-1] if self.trajectory else {}
        saved, reference = self.saved_estimate()
        phase = "fallback" if self.fallback is not None else getattr(self.search, "phase", "search")
        try:
            governor_status.write_status(self.status_file, {
                "sysfs_root": getattr(self.dev, "sysfs_root", None), "board": getattr(self.dev, "board_id", None),
                "policy": self.policy_name, "objective": self.objective.kind, "phase": phase,
                "freq_mhz": mhz, "domains_mhz": domains, "steps": self.last_steps,
                "j_per_step": last.get("j_per_step"), "s_per_step": last.get("s_per_step"),
                "j_per_token": last["j_per_step"] / self.tokens_per_step if last and self.tokens_per_step else None,
                "saved_estimate_j": saved, "saved_reference": reference,
                "fallback": self.fallback})
        except OSError as e:
            self._say(f"cannot write the status file {self.status_file}: {e.strerror or e}; not publishing")
            self.status_file = None

    def remaining_windows(self, s_per_step: float) -> int | None:
        """Windows left in the run: the steps left (``total_steps`` less the count now) at the
        step time of the level the search holds or favours (the median of its windows; the run
        will mostly go on there), else ``s_per_step`` (the window just measured). None when the
        length is unknown, or the count has passed the total given (then it was wrong)."""
        if self.total_steps is None or self.last_steps is None or self.last_steps > self.total_steps:
            return None
        best = self.search.best_mhz
        times = sorted(w["s_per_step"] for w in self.trajectory if w["freq_mhz"] == best)
        s = times[len(times) // 2] if times else s_per_step
        return math.floor(self.w.windows_for_steps(self.total_steps - self.last_steps, s))

    def _say_probes(self, t: float, nxt: float, phase_before: str) -> None:
        """Live feedback: one line per finished probe (clock, J/step +- spread, decision)."""
        maxn = getattr(self.search, "maxn_probes", [])
        if len(maxn) > self._maxn_said:
            p = maxn[-1]
            self._maxn_said = len(maxn)
            decision = f"converged on {level_name(self.search.best_mhz)}" if self.search.converged \
                else f"next {level_name(nxt)}"
            self._say(f"MAXN (the board's own governor) at {t:.1f} s: {p['j_per_step']:.5g} J/step "
                      f"({p['windows']} windows) -> {decision}")
        probes = self.search.probes
        for i in range(self._probes_said, len(probes)):
            p = probes[i]
            spread = "" if p.spread_pct is None else f" +- {p.spread_pct / 2:.1f} %"
            if i < len(probes) - 1:
                decision = "superseded"
            elif self.search.converged:
                decision = f"converged on {level_name(self.search.best_mhz)}"
            elif nxt != p.freq_mhz:
                decision = f"next {level_name(nxt)}"
            else:
                decision = "measuring it again"
            unit = "J/step" if getattr(self.search, "fits_time", False) or self.objective.kind == "energy" \
                else self.objective.kind
            per_token = f" ({p.j_per_step / self.tokens_per_step:.4g} J/token)" \
                if unit == "J/step" and self.tokens_per_step else ""
            self._say(f"probe {i + 1} at {t:.1f} s: {p.freq_mhz:g} MHz {p.j_per_step:.5g} {unit}{spread}{per_token} "
                      f"({p.windows} windows) -> {decision}")
        if len(probes) == self._probes_said and self.search.phase != phase_before and not self.search.converged:
            why = self.search.reprobe_reasons[-1][1] if self.search.reprobe_reasons else "timer"
            self._say(f"searching again at {t:.1f} s ({why}) from {level_name(self.search.best_mhz)}")
        self._probes_said = len(probes)

    def say_outcome(self) -> None:
        """The last status line, once the report is complete: a run that ended before any
        probe finished says so (it has no best clock to report)."""
        if not self.search.probes and self.fallback is None:
            self._say("the run ended before the first probe finished: no clock was measured, "
                      "so there is no best clock to report")

    def _start_j_per_step(self) -> float | None:
        """The start clock's J/step: its probe (in J/step unless the hill climb was fed another
        cost), else None."""
        if getattr(self.search, "maxn_anchor", False):  # it started under the board's own governor
            return self.search.estimate(MAXN)
        if getattr(self.search, "fits_time", False) or self.objective.kind == "energy":
            return self.search.estimate(self.search.start_mhz)
        first = [w["j_per_step"] for w in self.trajectory
                 if w["freq_mhz"] == self.search.start_mhz and w["round"] == 0]
        return sorted(first)[len(first) // 2] if first and self.search.probes else None

    def report(self) -> dict:
        """The engine's part of the report (close it once, at the end)."""
        self._close_window()
        if self.status_file:
            governor_status.remove_status(self.status_file)
        state = self.search.state()
        state["start_estimate_j_per_step"] = self._start_j_per_step()
        measured = bool(self.search.probes)
        return {"trajectory": self.trajectory, "switches": self.switches, "search": state,
                "converged": self.search.converged, "fallback": self.fallback,
                "probed": measured, "final_mhz": self.pinned_mhz, "dropped": self.dropped,
                "objective": self.objective.to_dict(), "total_steps": self.total_steps,
                "counted_span": self._counted_span(), "window": self.w.to_dict()}


__all__ = ["OnlineEngine", "WindowParams", "checked_total_steps", "window_energy_j"]

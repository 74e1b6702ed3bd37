"""The online clock search: pure logic, fed measurements, proposing the next clock.

It knows nothing of boards, files or time sources: the loop in :mod:`pydvfs.governor.loop`
pins the clock it proposes, measures energy per training step (J/step) in windows, and feeds
each window back with :meth:`HillClimb.observe`. That split keeps it testable with synthetic
curves (see tests/pydvfs/test_online.py) and is the same split as a devfreq governor: it only
proposes a level of the table it was given; it never writes anything.

The search (docs/online.md):

* ``search``: measure the current level, then its neighbours, the one in the direction of the
  last move first (the lower one at the start). Move to a measured level only if its J/step is
  lower than the current level's by more than ``margin_pct`` (hysteresis); after a move only the
  level further on is new, so each step down the U costs one probe. If a neighbour is better
  but not by the margin (or, in the direction of travel, not worse by the margin), also
  measure the level beyond it (up to ``lookahead`` levels away).
  Nothing within reach better by the margin: converged.
* A probe is ``samples`` windows; its J/step is their median, so one window hit by a spike
  (CPU interference, an evaluation pass) does not decide a move. If the windows disagree by
  more than ``spread_pct`` it takes more, up to ``max_samples``, and the median of the lowest
  ``samples`` counts (spikes only ever add energy per step).
* ``hold``: stay on the chosen level; keep measuring it. After ``reprobe_s``, or at once if its
  J/step (over the last ``max_samples`` windows, judged like a probe) drifts more than
  ``drift_pct`` above what it was at convergence (the workload changed), start a new search
  round from it, with fresh estimates (its own level measured again first).

Within a round the current level only moves to a level measured strictly better by the margin,
so a round cannot oscillate: it ends after at most ``len(levels)`` moves.

A level the board refuses (a power-mode cap the table does not show) is removed with
:meth:`HillClimb.drop`: from then on the search runs on the table without it and never
proposes it again.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from ..device.levels import nearest_index
from ..errors import InvalidValueError


@dataclass(frozen=True)
class SearchParams:
    """Tunables of the search. Units are in the names; counts are windows."""

    margin_pct: float = 2.0  # move only if the neighbour is better by more than this
    samples: int = 3  # windows per probe (their median is the probe's J/step)
    max_samples: int = 5  # windows per probe at most, when they disagree
    spread_pct: float | None = None  # "disagree": (max - min) / median above this (default 2 x margin)
    reprobe_s: float = 600.0  # in hold, search again after this long (inf: never)
    drift_pct: float = 5.0  # in hold, search again at once if J/step rose this much
    lookahead: int = 2  # levels to look past a neighbour that is better, but not by the margin

    def __post_init__(self):
        checks = [
            (self.margin_pct >= 0 and math.isfinite(self.margin_pct), "margin must be a finite % >= 0"),
            (isinstance(self.samples, int) and self.samples >= 1, "samples must be an integer >= 1"),
            (isinstance(self.max_samples, int) and self.max_samples >= self.samples,
             "max_samples must be an integer >= samples"),
            (self.spread_pct is None or self.spread_pct > 0, "spread must be > 0 %"),
            (self.reprobe_s > 0, "reprobe interval must be > 0 s"),
            (self.drift_pct > 0, "drift must be > 0 %"),
            (isinstance(self.lookahead, int) and self.lookahead >= 1, "lookahead must be an integer >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidValueError(message)

    @property
    def spread_limit_pct(self) -> float:
        return 2.0 * self.margin_pct if self.spread_pct is None else self.spread_pct

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Probe:
    """One finished probe: a level's J/step (median of its windows) in a search round."""

    freq_mhz: float
    j_per_step: float
    windows: int
    round: int
    t_s: float  # when it finished (the clock of observe())
    spread_pct: float | None = None  # (max - min) / median of its windows, %
    s_per_step: float | None = None  # the step time there (median of its windows), if fed

    def to_dict(self) -> dict:
        return asdict(self)


def spread_pct(values) -> float:
    """How far a probe's windows disagree: (max - min) / median, % (both searches)."""
    return 100.0 * (max(values) - min(values)) / statistics.median(values)


def probe_done(values, need: int, most: int, limit_pct: float, worse=None) -> bool:
    """When a probe is done (both searches): never before ``need`` windows, always at ``most``;
    in between once its windows agree (:func:`spread_pct` within ``limit_pct``), or once
    ``worse()`` (where given) says more windows cannot make the mode the best."""
    n = len(values)
    if n < need:
        return False
    if n >= most:
        return True
    if worse is not None and worse():
        return True
    return spread_pct(values) <= limit_pct


def latest_estimate(probes, level_mhz: float) -> float | None:
    """The latest J/step measured at ``level_mhz``, or None (both searches)."""
    for p in reversed(probes):
        if p.freq_mhz == level_mhz:
            return p.j_per_step
    return None


def latest_estimates(probes) -> dict[float, float]:
    """Level MHz -> the latest J/step measured there, for every level probed (both searches)."""
    return dict(sorted({p.freq_mhz: p.j_per_step for p in probes}.items()))


class SearchBase:
    """What both online searches share: the phase names, the clock table's check, and what is
    read from the probes (each search keeps ``phase``, ``_round`` and ``probes``)."""

    SEARCH = "search"
    HOLD = "hold"

    @staticmethod
    def _table(levels_mhz) -> tuple[float, ...]:
        levels = sorted(float(f) for f in levels_mhz)
        if not levels:
            raise InvalidValueError("the clock table is empty")
        return tuple(levels)

    @property
    def converged(self) -> bool:
        return self.phase == self.HOLD

    @property
    def round(self) -> int:
        return self._round

    def estimates(self) -> dict[float, float]:
        return latest_estimates(self.probes)


class HillClimb(SearchBase):
    """Search a discrete clock table for the lowest energy per step.

    ``levels_mhz``: the board's table; ``start_mhz``: where to start (snapped to the table).
    Feed every window measured at :attr:`target_mhz` to :meth:`observe`; run the clock it
    returns. Windows measured at another clock are ignored (returns the target unchanged).
    """

    def __init__(self, levels_mhz, start_mhz: float, params: SearchParams | None = None,
                 now_s: float = 0.0):
        self.levels_mhz = self._table(levels_mhz)
        self.params = params or SearchParams()
        self.start_mhz = self.levels_mhz[self._index(start_mhz)]
        self._cur = self._index(start_mhz)  # the accepted level
        self._probing = self._cur  # the level being measured now
        self._dir = 0  # the last move: -1 down, +1 up, 0 none yet
        self._round = 0
        self._est: dict[int, float] = {}  # this round's estimates
        self._samples: list[float] = []  # windows of the probe in progress
        self._hold_ref = math.nan
        self._hold_samples: list[float] = []
        self._next_reprobe_s = math.inf
        self.phase = self.SEARCH
        self.probes: list[Probe] = []  # every finished probe, all rounds
        self.moves: list[tuple[float, float, float]] = []  # (t_s, from_mhz, to_mhz) of accepted moves
        self.reprobe_reasons: list[tuple[float, str]] = []
        self.dropped_mhz: list[float] = []  # levels the board refused, removed from the table
        self._last_t = now_s

    # -- what it proposes ------------------------------------------------------------------
    @property
    def target_mhz(self) -> float:
        """The clock to run now."""
        return self.levels_mhz[self._probing]

    @property
    def best_mhz(self) -> float:
        """The accepted level: the best found so far (where it holds once converged)."""
        return self.levels_mhz[self._cur]

    def estimate(self, freq_mhz: float) -> float | None:
        """The latest J/step measured at the level nearest ``freq_mhz`` (any round), or None."""
        return latest_estimate(self.probes, self.levels_mhz[self._index(freq_mhz)])

    # -- what it is fed --------------------------------------------------------------------
    def observe(self, freq_mhz: float, j_per_step: float, now_s: float,
                s_per_step: float | None = None) -> float:
        """One window measured at ``freq_mhz``: energy per step ``j_per_step`` (J), finished at
        ``now_s`` (s, any monotonic origin). Returns the clock to run next. (The hill climb
        compares one number per window: for an EDP objective the loop feeds J/step x s/step
        as ``j_per_step``; ``s_per_step`` is accepted for the common interface and unused.)"""
        if not (isinstance(j_per_step, (int, float)) and math.isfinite(j_per_step) and j_per_step > 0):
            raise InvalidValueError(f"J/step must be a positive number, got {j_per_step!r}")
        self._last_t = now_s
        if self._index(freq_mhz) != self._probing:
            return self.target_mhz
        if self.phase == self.HOLD:
            self._hold(j_per_step, now_s)
            return self.target_mhz
        self._samples.append(float(j_per_step))
        if not self._probe_done():
            return self.target_mhz
        value = self._probe_value(self._samples)
        self.probes.append(Probe(self.levels_mhz[self._probing], value, len(self._samples),
                                 self._round, now_s, spread_pct(self._samples)))
        self._est[self._probing] = value
        self._samples = []
        self._decide(now_s)
        return self.target_mhz

    def drop(self, freq_mhz: float, now_s: float) -> float:
        """The board refused the level nearest ``freq_mhz`` (a clock it cannot take): remove it
        from the table, for good. Its earlier probes stay in :attr:`probes`; the search goes on
        as if the table never had it (a neighbour's neighbour becomes its neighbour). Returns
        the clock to run next. Raises InvalidValueError if it is the last level left."""
        i = self._index(freq_mhz)
        if len(self.levels_mhz) == 1:
            raise InvalidValueError(f"{self.levels_mhz[0]:g} MHz is the only level left: cannot drop it")
        self._last_t = now_s
        self.dropped_mhz.append(self.levels_mhz[i])

        def shift(k: int) -> int:
            return k if k < i else k - 1

        self.levels_mhz = self.levels_mhz[:i] + self.levels_mhz[i + 1:]
        self._est = {shift(k): v for k, v in self._est.items() if k != i}
        if self._cur == i:  # the accepted level itself: the best measured level left, else a neighbour
            self._cur = min(self._est, key=self._est.get) if self._est else max(i - 1, 0)
        else:
            self._cur = shift(self._cur)
        if self._probing != i:
            self._probing = shift(self._probing)
            return self.target_mhz
        # the level being measured (or held) is gone: its windows with it; decide afresh
        self._samples, self._hold_samples = [], []
        self.phase = self.SEARCH
        self._decide(now_s)
        return self.target_mhz

    # -- internals -------------------------------------------------------------------------
    def _index(self, freq_mhz: float) -> int:
        return nearest_index(self.levels_mhz, float(freq_mhz))

    def _probe_done(self) -> bool:
        p = self.params
        return probe_done(self._samples, p.samples, p.max_samples, p.spread_limit_pct)

    def _probe_value(self, samples: list[float]) -> float:
        """The median of the probe's windows; when extra windows were taken because they
        disagreed, the median of the lowest ``samples`` of them: a window only errs upward
        (interference, an evaluation pass: energy spent without steps), never much downward."""
        return statistics.median(sorted(samples)[:self.params.samples])

    def _better(self, j: int) -> bool:
        return self._est[j] < self._est[self._cur] * (1.0 - self.params.margin_pct / 100.0)

    def _decide(self, now_s: float) -> None:
        if self._cur not in self._est:  # a round began with the current level unmeasured
            self._probing = self._cur
            return
        n, reach = len(self.levels_mhz), self.params.lookahead
        inside = range(n)
        order = (self._dir, -self._dir) if self._dir else (-1, 1)
        # 1. a measured level within reach that is better by the margin: move (nearest first)
        for k in range(1, reach + 1):
            for d in order:
                j = self._cur + k * d
                if j in inside and j in self._est and self._better(j):
                    self.moves.append((now_s, self.levels_mhz[self._cur], self.levels_mhz[j]))
                    self._cur, self._dir = j, d
                    return self._decide(now_s)
        # 2. a neighbour not yet measured this round
        for d in order:
            j = self._cur + d
            if j in inside and j not in self._est:
                self._probing = j
                return
        # 3. no neighbour better by the margin, but one better at all (or, in the direction
        #    we have been moving, not worse by the margin): look one level further that way.
        #    Adjacent levels can differ by less than the noise; two apart they do not.
        for d in order:
            slack = self.params.margin_pct / 100.0 if d == self._dir else 0.0
            for k in range(2, reach + 1):
                j, prev = self._cur + k * d, self._cur + (k - 1) * d
                if j not in inside or self._est[prev] >= self._est[self._cur] * (1.0 + slack):
                    break
                if j not in self._est:
                    self._probing = j
                    return
        # 4. nothing better within reach: converged
        self.phase = self.HOLD
        self._probing = self._cur
        self._hold_ref = self._est[self._cur]
        self._hold_samples = []
        self._next_reprobe_s = now_s + self.params.reprobe_s

    def _hold(self, j_per_step: float, now_s: float) -> None:
        # the last max_samples windows, judged like a probe's: a lone spike is not a drift
        self._hold_samples = (self._hold_samples + [float(j_per_step)])[-self.params.max_samples:]
        drifted = len(self._hold_samples) >= self.params.max_samples and self._probe_value(self._hold_samples) > \
            self._hold_ref * (1.0 + self.params.drift_pct / 100.0)
        if drifted or now_s >= self._next_reprobe_s:
            self.reprobe_reasons.append((now_s, "drift" if drifted else "timer"))
            self._start_round()

    def _start_round(self) -> None:
        # the current level is measured afresh too: the hold windows only raised the alarm
        # (a burst of spikes must not pose as the level's J/step in the new round)
        self._round += 1
        self.phase = self.SEARCH
        self._est = {}
        self._dir = 0
        self._samples = []
        self._hold_samples = []
        self._probing = self._cur

    def state(self) -> dict:
        """A JSON-ready summary."""
        return {"phase": self.phase, "round": self._round, "start_mhz": self.start_mhz,
                "best_mhz": self.best_mhz, "target_mhz": self.target_mhz,
                "estimates": [{"freq_mhz": f, "j_per_step": j} for f, j in self.estimates().items()],
                "probes": [p.to_dict() for p in self.probes],
                "moves": [{"t_s": t, "from_mhz": a, "to_mhz": b} for t, a, b in self.moves],
                "reprobes": [{"t_s": t, "reason": r} for t, r in self.reprobe_reasons],
                "levels_mhz": list(self.levels_mhz), "dropped_mhz": list(self.dropped_mhz),
                "params": self.params.to_dict()}


__all__ = ["HillClimb", "Probe", "SearchParams", "probe_done", "spread_pct"]

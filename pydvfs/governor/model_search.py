"""The model-based online search: fit the U-curve to every window measured, probe where the
best level is still uncertain, stop when another probe is expected to cost more than it gains.

Pure logic with the interface of :class:`~pydvfs.governor.search.HillClimb` (``observe`` /
``drop`` / ``target_mhz`` / ``best_mhz`` / ``state``): the engine feeds it windows and pins what
it proposes. Unlike the hill climb it is fed both J/step and s/step of each window and fits the
physical curve of :mod:`pydvfs.curve_model` (t = a/f + b, P = p0 + c f V(f)^2) to all of them.

One round (docs/online.md):

1. **Probe** a level: ``samples`` windows (more, up to ``max_samples``, when they disagree by
   more than ``spread_pct``); a level's cost is the mean of its windows this round, spikes left
   out (:meth:`CurveSearch._kept`).
2. **Initial design**: the start level and two more, so the curve has three clocks: from an end
   of the table (knowing nothing) ``jump_levels`` levels at a time toward the middle, else its
   two neighbours (a model's start is near the bottom already; re-searches are local too).
3. **Fit** t(f) and P(f) to the windows (:func:`pydvfs.curve_model.fit_time_power`) and predict
   every level's cost with its standard deviation: the fit's own, plus the scatter of the
   measured levels around the smooth curve (a real table is not exactly smooth).
4. **Expected gain vs cost** of one more probe at each level: a probe of level L at predicted
   cost N(mu, sigma) gains, in expectation, EI = E[max(0, best - cost_L)] per window for the
   windows the choice will then be held (``remaining_windows``, the windows left in the run,
   when the engine knows its length; else what is left of ``horizon_windows``), and costs
   ``samples x max(0, mu - best)`` (its windows run at a worse level). A measured level is
   re-measured the same way, with sigma its estimate's standard error (where two levels are
   within noise). The level with the largest positive net gain is probed; none: settle.
5. **Settle** on the measured level of lowest cost, with a guard: it leaves the start level
   only for a level measured better by more than ``z_guard`` standard errors of the difference
   (and by more than ``margin_pct``): a spiky curve keeps the start (the model's clock, or the
   top clock) unless a probe proves a gain. It never settles on a level it did not measure.

Hold, drift and re-probe as the hill climb: after ``reprobe_s``, or when the held level's cost
over its last ``max_samples`` windows rises more than ``drift_pct`` (a new phase: longer
sequences, evaluation), a new round starts *locally* (the held level and its neighbours).

Objectives (:class:`~pydvfs.objective.Objective`): the cost is J/step x (s/step)^k; a
slowdown bound removes the levels whose (measured, else predicted) step time exceeds the
fastest level's by more than the bound.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from ..errors import InvalidValueError
from ..objective import Objective
from .search import Probe, SearchBase, latest_estimate


@dataclass(frozen=True)
class CurveParams:
    """Tunables of the model search. Counts are windows."""

    samples: int = 3  # windows per probe
    max_samples: int = 5  # windows per probe at most, when they disagree
    spread_pct: float = 2.5  # "disagree": (max - min) / median above this
    max_windows: int = 20  # windows per level at most in a round (re-measuring included)
    horizon_windows: int = 60  # windows a round's choice is expected to serve (its probes included)
    z_guard: float = 2.5  # leave the start level only for a gain this many std errors sure
    margin_pct: float = 0.0  # ...and larger than this
    resolution_pct: float = 0.5  # gains smaller than this are not worth a probe
    noise_floor_pct: float = 0.3  # a window's relative noise is never taken below this
    noise_prior_pct: float = 1.5  # a window's relative noise before many are measured (a real Orin's 10-s windows: 1-2 %)
    noise_prior_windows: int = 4  # ... and how many windows that prior is worth
    misfit_floor_pct: float = 1.5  # a level's deviation from the smooth curve, at least
    spiky_misfit_pct: float = 4.0  # ... where the model keeps the workload at MAXN (it judged its curve spiky)
    misfit_corr_pct: float = 1.0  # levels closer than this (% of the clock) deviate alike
    jump_frac: float = 0.3
    bracket_frac: float = 0.08  # initial design step around a start inside the table  # initial design step from an end of the table, a share of its levels
    design_samples: int = 2  # windows per initial-design probe (the fit pools them; re-measuring adds)
    reprobe_s: float = 600.0
    drift_pct: float = 5.0

    def __post_init__(self):
        checks = [
            (isinstance(self.samples, int) and self.samples >= 1, "samples must be an integer >= 1"),
            (isinstance(self.max_samples, int) and self.max_samples >= self.samples,
             "max_samples must be an integer >= samples"),
            (isinstance(self.max_windows, int) and self.max_windows >= self.max_samples,
             "max_windows must be an integer >= max_samples"),
            (self.spread_pct > 0, "spread must be > 0 %"),
            (isinstance(self.horizon_windows, int) and self.horizon_windows >= 1,
             "the horizon must be an integer >= 1 window"),
            (self.z_guard >= 0 and math.isfinite(self.z_guard), "z_guard must be a finite number >= 0"),
            (self.margin_pct >= 0 and math.isfinite(self.margin_pct), "margin must be a finite % >= 0"),
            (self.noise_floor_pct > 0 and self.misfit_floor_pct >= 0 and self.spiky_misfit_pct >= 0,
             "noise floors must be > 0 %"),
            (0 <= self.resolution_pct < 100, "resolution must be within 0..100 %"),
            (0 < self.jump_frac <= 1 and 0 < self.bracket_frac <= 1, "jump_frac and bracket_frac must be within (0, 1]"),
            (isinstance(self.design_samples, int) and 1 <= self.design_samples <= self.samples,
             "design_samples must be an integer within 1..samples"),
            (self.reprobe_s > 0, "reprobe interval must be > 0 s"),
            (self.drift_pct > 0, "drift must be > 0 %"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidValueError(message)

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_VF_SOURCE = "default Orin table"  # what state() says when no V/f curve is passed in


def vf_for_levels(levels_mhz):
    """The V/f curve to fit with: the curve model's default (an Orin's) when the table ends
    near its top clock; else that shape stretched to the table's top clock (a board whose V/f
    was not characterised: the voltage floor and the rise keep their share of the range)."""
    from ..curve_model import DEFAULT_VF, VFCurve

    top = max(levels_mhz)
    vf_top = max(DEFAULT_VF.freqs_mhz)
    if abs(top / vf_top - 1.0) <= 0.05:
        return DEFAULT_VF
    k = top / vf_top
    return VFCurve(tuple(f * k for f in DEFAULT_VF.freqs_mhz), DEFAULT_VF.volts_v)


MAXN = None  # the target that leaves the clock to the board's own governor (not a level)


def level_name(mhz: float | None) -> str:
    """A search target in words: "714 MHz", or "MAXN" (the board's own governor)."""
    return "MAXN" if mhz is MAXN else f"{mhz:g} MHz"


def expected_improvement(best: float, mu: float, sigma: float) -> float:
    """E[max(0, best - X)] for X ~ N(mu, sigma)."""
    if sigma <= 0:
        return max(0.0, best - mu)
    z = (best - mu) / sigma
    phi = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return (best - mu) * cdf + sigma * phi


class CurveSearch(SearchBase):
    """See the module docstring. ``levels_mhz``: the table; ``start_mhz``: snapped to it."""

    fits_time = True  # the engine feeds J/step and s/step, not a combined cost

    def __init__(self, levels_mhz, start_mhz: float, params: CurveParams | None = None,
                 now_s: float = 0.0, objective: Objective | None = None, vf=None,
                 vf_source: str | None = None, maxn_anchor: bool = False):
        self.levels_mhz = self._table(levels_mhz)
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run (seconds)

        self.params = params or CurveParams()
        self.objective = objective or Objective()
        self.vf = vf  # the V/f curve to fit with (None: vf_for_levels, the default Orin table)
        self.vf_source = vf_source or ("given" if vf is not None else DEFAULT_VF_SOURCE)
        # windows left in the run, set by the engine before each window when the run's length is
        # known; None: unknown, the horizon is what is left of params.horizon_windows
        self.remaining_windows: int | None = None
        self.start_mhz = self.levels_mhz[self._index(start_mhz)]
        # maxn_anchor: the learned model keeps this workload at MAXN (a small, spiky one): the
        # board's own governor is measured first and is what the guard protects
        self.maxn_anchor = bool(maxn_anchor)
        first = MAXN if self.maxn_anchor else self.start_mhz
        self._anchor = first  # what the guard protects (the start, then the held one; MAXN: None)
        self._center = self.start_mhz  # the level the initial design brackets
        self._cur = first  # the accepted level
        self._probing = first
        self._maxn_win: list[tuple[float, float]] = []  # this round's windows under MAXN
        self.maxn_probes: list[dict] = []  # finished probes of MAXN: t_s, j_per_step, s_per_step, windows
        self._round = 0
        self._win: dict[float, list[tuple[float, float]]] = {}  # this round: level -> [(J/step, s/step)]
        self._pending: list[tuple[float, float]] = []  # windows of the probe in progress
        self._hold_costs: list[float] = []
        self._hold_ref = math.nan
        self._next_reprobe_s = math.inf
        self.phase = self.SEARCH
        self.probes: list[Probe] = []
        self.moves: list[tuple[float, float, float]] = []
        self.reprobe_reasons: list[tuple[float, str]] = []
        self.dropped_mhz: list[float] = []
        self.fit_summary: dict | None = None  # the last fit: coefficients, predictions
        self.decisions: list[dict] = []  # why each probe was chosen
        self._in_design = True  # the probe in progress belongs to the initial design

    # -- what it proposes ------------------------------------------------------------------
    @property
    def target_mhz(self) -> float:
        return self._probing

    @property
    def best_mhz(self) -> float:
        """The settled level; while searching, the best measured so far this round."""
        if self.phase == self.HOLD or not self._win:
            return self._cur
        admissible = self._admissible({f: self._level_time(f) for f in self._win})
        return self._best_measured(admissible) or min(self._win, key=self._level_time)

    def estimate(self, freq_mhz: float) -> float | None:
        """The latest J/step measured at the level nearest ``freq_mhz`` (any round), or None."""
        if freq_mhz is MAXN:
            return self.maxn_probes[-1]["j_per_step"] if self.maxn_probes else None
        level = self.levels_mhz[self._index(freq_mhz)] if freq_mhz not in self.dropped_mhz else freq_mhz
        return latest_estimate(self.probes, level)

    # -- what it is fed --------------------------------------------------------------------
    def observe(self, freq_mhz: float, j_per_step: float, now_s: float,
                s_per_step: float | None = None) -> float:
        for v, what in ((j_per_step, "J/step"), (s_per_step, "s/step")):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidValueError(f"{what} must be a positive number, got {v!r}")
        f = MAXN if freq_mhz is MAXN else self.levels_mhz[self._index(freq_mhz)]
        if f != self._probing:
            return self.target_mhz
        w = (float(j_per_step), float(s_per_step))
        if self.phase == self.HOLD:
            self._hold(w, now_s)
            return self.target_mhz
        self._pending.append(w)
        if not self._probe_done():
            return self.target_mhz
        costs = [self._cost(*x) for x in self._pending]
        jps = [x[0] for x in self._pending]
        if f is MAXN:
            self._maxn_win.extend(self._pending)
            self.maxn_probes.append({"t_s": now_s, "j_per_step": statistics.median(jps), "windows": len(jps),
                                     "s_per_step": statistics.median(x[1] for x in self._pending)})
            self._pending = []
            self._decide(now_s)
            return self.target_mhz
        self._win.setdefault(f, []).extend(self._pending)
        self.probes.append(Probe(f, statistics.median(jps), len(self._pending), self._round, now_s,
                                 100.0 * (max(costs) - min(costs)) / statistics.median(costs),
                                 statistics.median(x[1] for x in self._pending)))
        self._pending = []
        self._decide(now_s)
        return self.target_mhz

    def drop(self, freq_mhz: float, now_s: float) -> float:
        """The board refused a level: remove it for good; returns the clock to run next."""
        f = self.levels_mhz[self._index(freq_mhz)]
        if len(self.levels_mhz) == 1:
            raise InvalidValueError(f"{f:g} MHz is the only level left: cannot drop it")
        self.dropped_mhz.append(f)
        self.levels_mhz = tuple(x for x in self.levels_mhz if x != f)
        self._win.pop(f, None)
        if self._cur == f:
            self._cur = self._best_measured() or self.levels_mhz[self._index(f)]
        if self._anchor == f:
            self._anchor = self._cur
        if self._center == f:
            self._center = self.levels_mhz[self._index(f)]
        if self._probing != f:
            return self.target_mhz
        self._pending, self._hold_costs = [], []
        self.phase = self.SEARCH
        self._decide(now_s)
        return self.target_mhz

    # -- internals -------------------------------------------------------------------------
    def _index(self, freq_mhz: float) -> int:
        f = float(freq_mhz)
        return min(range(len(self.levels_mhz)), key=lambda i: (abs(self.levels_mhz[i] - f), i))

    def _cost(self, j: float, s: float) -> float:
        return self.objective.cost(j, s)

    def _probe_done(self) -> bool:
        n = len(self._pending)
        if n < self._required_windows():
            return False
        if n >= self.params.max_samples:
            return True
        costs = [self._cost(*w) for w in self._pending]
        med = statistics.median(costs)
        return 100.0 * (max(costs) - min(costs)) / med <= self.params.spread_pct

    def _required_windows(self) -> int:
        """Windows a probe takes at least: ``samples``; in the initial design
        ``design_samples``; one for a start at an end of the table (the top clock, knowing
        nothing: rarely the answer, and re-measured when it comes close), ``samples`` for a
        start inside it."""
        if not self._in_design:
            return self.params.samples
        n = len(self.levels_mhz)
        if self._round == 0 and not self._win:  # the start
            # at an end of the table: a scout; inside it (the model's clock): a full probe, it
            # is what the guard protects and what the saving is measured against
            return 1 if n > 3 and self._index(self._center) in (0, n - 1) else self.params.samples
        return self.params.design_samples

    def _windows(self, f: float | None) -> list[tuple[float, float]]:
        """A level's windows this round (MAXN's: the board's own governor)."""
        return self._maxn_win if f is MAXN else self._win[f]

    def _measured(self, f: float | None) -> bool:
        return bool(self._maxn_win) if f is MAXN else f in self._win

    def _median_cost(self, f: float | None) -> float:
        return statistics.median(self._cost(*w) for w in self._windows(f))

    def _kept(self, f: float) -> list[float]:
        """The level's window costs without its spikes (beyond 3 window-noise sigmas of its
        median: interference stretches a window, it never shortens one by as much)."""
        costs = [self._cost(*w) for w in self._windows(f)]
        if len(costs) < 3:
            return costs
        med = statistics.median(costs)
        band = 3 * self._window_noise() * med
        return [c for c in costs if abs(c - med) <= band] or costs

    def _level_cost(self, f: float) -> float:
        """The level's cost: the mean of its windows, spikes left out (a mean of the clean
        windows wastes less of them than a median: its standard error is 1/1.25 of the
        median's)."""
        return statistics.fmean(self._kept(f))

    def _level_time(self, f: float | None) -> float:
        return statistics.median(w[1] for w in self._windows(f))

    def _window_noise(self) -> float:
        """Relative std of one window's cost, pooled over the levels measured this round:
        1.48 x the median absolute deviation from each level's median (robust to the spikes),
        pooled with a prior, never below the floor."""
        devs = []
        for f, ws in list(self._win.items()) + [(MAXN, self._maxn_win)]:
            if len(ws) < 2:
                continue
            med = self._median_cost(f)
            d = sorted(abs(self._cost(*w) - med) / med for w in ws)
            devs += d[1:] if len(ws) % 2 else d  # an odd count's median deviates by 0 from itself
        rel = 1.4826 * statistics.median(devs) if devs else 0.0
        # a handful of windows says little about their spread: the estimate is pooled with a
        # prior (noise_prior_pct, worth noise_prior_windows windows) that the data outweighs
        p = self.params
        k0, s0 = p.noise_prior_windows, p.noise_prior_pct / 100.0
        rel = math.sqrt((k0 * s0 * s0 + len(devs) * rel * rel) / (k0 + len(devs))) if k0 + len(devs) else rel
        return max(rel, p.noise_floor_pct / 100.0)

    def _stderr(self, f: float, noise: float) -> float:
        n = len(self._kept(f))
        # a median (fewer than 3 windows: no spike test) has ~1.25 x the mean's standard error
        return (1.25 if len(self._windows(f)) < 3 else 1.0) * noise * self._level_cost(f) / math.sqrt(n)

    def _admissible(self, times: dict[float, float]) -> list[float]:
        """The levels within the slowdown bound of the fastest *measured* step time (a
        prediction never sets the bar; it only places the levels not measured yet)."""
        measured = [times[f] for f in self._win if f in times]
        if self._maxn_win:  # MAXN's step time sets the bar too (it is the fastest there is)
            measured.append(self._level_time(MAXN))
        fastest = min(measured) if measured else min(times.values())
        return [f for f in self.levels_mhz if f in times and self.objective.admissible(times[f], fastest)]

    def _best_measured(self, admissible=None) -> float | None:
        measured = [f for f in self._win if admissible is None or f in admissible]
        return min(measured, key=self._level_cost) if measured else None

    def _design_next(self) -> float | None:
        """The next level of the initial design, or None once three clocks are measured."""
        measured = sorted(self._win)
        n = len(self.levels_mhz)
        if len(measured) >= min(3, n):
            return None
        if self._center not in self._win:  # after MAXN: the level the design brackets first
            return self._center
        i = self._index(self._center)
        at_end = self._round == 0 and i in (0, n - 1) and n > 3
        step = max(1, round((n - 1) * self.params.jump_frac)) if at_end else 1
        inward = 1 if i == 0 else -1
        if not at_end:  # bracket the start (about 10 % of the table either side on a fine one)
            d = max(1, round(n * self.params.bracket_frac))
            candidates = [i - d, i + d, i - 1, i + 1]
        elif len(measured) == 1:
            candidates = [i + inward * step]
        else:
            second = self._index(measured[0] if measured[0] != self._center else measured[-1])
            better = self._level_cost(self.levels_mhz[second]) < self._level_cost(self._center)
            candidates = [second + inward * step] if better else [(i + second) // 2]
        candidates += list(range(n))  # any unmeasured level, as a last resort
        for k in candidates:
            if 0 <= k < n and self.levels_mhz[k] not in self._win:
                return self.levels_mhz[k]
        return None

    def _predict(self) -> dict[float, tuple[float, float, float]] | None:
        """Level -> (predicted cost, its std, predicted s/step) from the curve fitted to this
        round's windows; None when it cannot be fitted."""
        import numpy as np

        from ..curve_model import fit_time_power

        vf = self.vf or vf_for_levels(self.levels_mhz)
        noise = self._window_noise()
        fs, ts, ps = [], [], []
        for f, ws in self._win.items():
            med = self._level_cost(f)
            for j, s in ws:  # spikes (beyond 3 sigma above the level's median) stay out of the fit
                if self._cost(j, s) <= med * (1 + 3 * noise):
                    fs.append(f)
                    ts.append(s)
                    ps.append(j / s)
        try:
            fit = fit_time_power(fs, ts, ps, vf)
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        lv = np.asarray(self.levels_mhz)
        t = fit.time_s(lv)
        p = fit.power_w(lv)
        if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(np.isfinite(p)) and np.all(p > 0)):
            return None
        k = {"energy": 0, "edp": 1, "ed2p": 2}[self.objective.kind]
        e = p * t
        cost = e * t ** k
        e_sd = fit.curve.energy_std_j(lv)
        f_ghz = lv / 1000.0
        ct = np.asarray(fit.time_cov, float)
        xt = np.column_stack([1.0 / f_ghz, np.ones_like(f_ghz)])
        t_sd = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", xt, ct, xt), 0.0))
        rel_sd = np.sqrt((e_sd / e) ** 2 + (k * t_sd / t) ** 2)
        # how far the measured levels sit from the smooth curve: what it cannot predict
        resid = [self._level_cost(f) / cost[self.levels_mhz.index(f)] - 1.0 for f in self._win]
        floor = self.params.spiky_misfit_pct if self.maxn_anchor else self.params.misfit_floor_pct
        misfit = max(floor / 100.0,
                     math.sqrt(sum(r * r for r in resid) / len(resid)) if resid else 0.0)
        # a level next to a measured one (closer than misfit_corr_pct of its clock) cannot
        # deviate from the curve much more than its neighbour does: its misfit share shrinks
        measured = np.asarray(sorted(self._win))
        near = np.min(np.abs(lv[:, None] - measured[None, :]), axis=1)
        corr = np.minimum(1.0, near / (self.params.misfit_corr_pct / 100.0 * lv))
        sd = cost * np.sqrt(rel_sd ** 2 + (misfit * corr) ** 2)
        self.fit_summary = {"a": fit.a, "b": fit.b, "p0": fit.p0, "c": fit.c, "misfit_pct": 100 * misfit,
                            "window_noise_pct": 100 * noise,
                            "predicted": {f"{f:g}": float(c) for f, c in zip(self.levels_mhz, cost)}}
        return {f: (float(cost[i]), float(sd[i]), float(t[i])) for i, f in enumerate(self.levels_mhz)}

    def _decide(self, now_s: float) -> None:
        nxt = self._design_next()
        self._in_design = nxt is not None
        if nxt is not None:
            self._probing = nxt
            self.decisions.append({"t_s": now_s, "probe_mhz": nxt, "why": "initial design"})
            return
        pred = self._predict()
        noise = self._window_noise()
        times = {f: self._level_time(f) if f in self._win else (pred[f][2] if pred else math.inf)
                 for f in self.levels_mhz}
        if pred is None:  # cannot fit: only measured levels count
            times = {f: self._level_time(f) for f in self._win}
        admissible = self._admissible(times) if times else list(self._win)
        # none measured within the bound yet: the fastest measured level stands in
        best_f = self._best_measured(admissible) or min(self._win, key=self._level_time)
        best = self._level_cost(best_f)
        if self._maxn_win:  # a level must beat MAXN too to be worth a probe
            best = min(best, self._level_cost(MAXN))
        p = self.params
        # the gain's horizon: the windows left in the run if its length is known, else what is
        # left of horizon_windows after the windows this round has spent
        left = self.remaining_windows
        horizon = max(1, left if left is not None else p.horizon_windows - sum(len(ws) for ws in self._win.values()))
        choice, choice_net, why = None, 0.0, ""
        for f in admissible:
            if f in self._win:
                n = len(self._win[f])
                if f == best_f or n + p.samples > p.max_windows:
                    continue
                mu, sigma = self._level_cost(f), self._stderr(f, noise)
                label = "re-measure"
            elif pred is not None:
                mu, sigma, _ = pred[f]
                label = "model"
            else:
                continue
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sigma) * horizon
            cost = p.samples * max(0.0, mu - best)
            if gain - cost > choice_net:
                choice, choice_net = f, gain - cost
                why = f"{label}: {mu:.5g} +- {sigma:.2g} vs best {best:.5g}; gain {gain:.3g} > cost {cost:.3g}"
        # the checks beyond the model's expected gain are tuned for the default horizon: with
        # fewer than a sixth of it (10 windows) left in a run of known length a neighbour's probe
        # cannot pay back its windows (the guard settles)
        checks = left is None or left >= p.horizon_windows / 6
        if not why and checks:  # the curve is smooth only roughly: check the neighbours of
            # the best measured level and of every level within noise of it
            choice, why = self._neighbour_check(best_f, noise, admissible)
        if not why and checks:
            choice, why = self._resolve_guard(best_f, noise)
        if why:  # (a choice of None is MAXN)
            self._probing = choice
            self.decisions.append({"t_s": now_s, "probe_mhz": choice, "why": why})
            return
        self._settle(best_f, noise, now_s)

    def _neighbour_check(self, best_f: float, noise: float, admissible) -> tuple[float | None, str]:
        best = self._level_cost(best_f)
        close = sorted((f for f in self._win if f in admissible and (
            f == best_f or self._level_cost(f) - best <= self.params.z_guard * math.hypot(
                self._stderr(f, noise), self._stderr(best_f, noise)))), key=self._level_cost)
        for f in close:
            i = self.levels_mhz.index(f)
            for k in (i - 1, i + 1):
                if 0 <= k < len(self.levels_mhz) and self.levels_mhz[k] not in self._win \
                        and self.levels_mhz[k] in admissible \
                        and abs(self.levels_mhz[k] - f) >= self.params.misfit_corr_pct / 100.0 * f:
                    # (a neighbour closer than the misfit's correlation the model predicts well)
                    what = "the best measured level" if f == best_f else "a level within noise of the best"
                    return self.levels_mhz[k], f"neighbour of {what}, {f:g} MHz"
        return None, ""

    def _proven(self, best_f: float, noise: float) -> tuple[bool, float, float]:
        """Is ``best_f`` measured better than the anchor beyond the guard? (proven, gain, sd)"""
        anchor = self._anchor
        gain = self._level_cost(anchor) - self._level_cost(best_f)
        sd = math.hypot(self._stderr(anchor, noise), self._stderr(best_f, noise))
        # the best of k measured levels is measured low by chance more often than one level:
        # the bar rises with k (0.5 ln k: +1.2 sd at 11 levels); and a gain below the
        # resolution is not worth leaving the start for
        z = self.params.z_guard + 0.5 * math.log(max(1, len(self._win) + bool(self._maxn_win)))
        floor = max(self.params.margin_pct, self.params.resolution_pct) / 100
        ok = gain > z * sd and gain > self._level_cost(anchor) * floor
        return ok, gain, sd

    def _resolve_guard(self, best_f: float, noise: float) -> tuple[float | None, str]:
        """The best level beats the anchor, but not yet beyond the guard: measure both more
        (the best first: it costs nothing over settling there) while windows are left."""
        anchor = self._anchor
        if best_f == anchor or not self._measured(anchor):
            return None, ""
        ok, gain, sd = self._proven(best_f, noise)
        if ok or gain <= self._level_cost(anchor) * max(self.params.margin_pct, self.params.resolution_pct) / 100:
            return None, ""
        for f in sorted((best_f, anchor), key=lambda x: len(self._windows(x))):
            if len(self._windows(f)) + self.params.samples <= self.params.max_windows:
                return f, f"guard: {best_f:g} MHz beats {level_name(anchor)} by {gain:.3g} +- {sd:.2g}: measure more"
        return None, ""

    def _settle(self, best_f: float, noise: float, now_s: float) -> None:
        chosen = best_f
        anchor = self._anchor
        if best_f != anchor and self._measured(anchor):
            proven, gain, sd = self._proven(best_f, noise)
            if not proven:
                chosen = anchor
                self.decisions.append({"t_s": now_s, "settle": level_name(anchor),
                                       "why": f"guard: {best_f:g} MHz not proven better than {level_name(anchor)} "
                                              f"({gain:.3g} < {self.params.z_guard:g} x {sd:.2g})"})
        if chosen != self._cur:
            self.moves.append((now_s, self._cur, chosen))
        self._cur = chosen
        self._probing = chosen
        self.phase = self.HOLD
        self._hold_ref = self._level_cost(chosen)
        self._hold_costs = []
        self._next_reprobe_s = now_s + self.params.reprobe_s

    def _hold(self, w: tuple[float, float], now_s: float) -> None:
        cur = self._cur
        self._hold_costs = (self._hold_costs + [self._cost(*w)])[-self.params.max_samples:]
        # a new phase moves the held level's cost either way (longer sequences, shorter ones)
        drifted = len(self._hold_costs) >= self.params.max_samples and \
            abs(statistics.median(self._hold_costs) / self._hold_ref - 1.0) > self.params.drift_pct / 100.0
        if drifted or now_s >= self._next_reprobe_s:
            self.reprobe_reasons.append((now_s, "drift" if drifted else "timer"))
            self._round += 1
            self.phase = self.SEARCH
            self._win = {}
            self._maxn_win = []
            self._pending = []
            self._hold_costs = []
            self._anchor = cur  # a local re-search around the held level
            self._center = self.start_mhz if cur is MAXN else cur
            self._probing = cur
            return
        # Verify for free: the held level's first windows join its estimate (the winner of a
        # few noisy probes tends to have been measured low); if it loses its place to another
        # measured level, the search resumes from there.
        if self._measured(cur) and len(self._windows(cur)) < self.params.max_windows:
            self._windows(cur).append(w)
            rival = self._best_measured(self._admissible({f: self._level_time(f) for f in self._win}))
            res = 1.0 - self.params.resolution_pct / 100.0
            if rival is not None and rival != cur and self._level_cost(rival) < self._level_cost(cur) * res:
                # (under MAXN: a level overtook it; the guard judges it again)
                self.reprobe_reasons.append((now_s, f"verify: {rival:g} MHz measured better"))
                self.phase = self.SEARCH
                self._hold_costs = []
                self._decide(now_s)

    def state(self) -> dict:
        return {"kind": "model", "phase": self.phase, "round": self._round, "start_mhz": self.start_mhz,
                "best_mhz": self.best_mhz, "target_mhz": self.target_mhz,
                "estimates": [{"freq_mhz": f, "j_per_step": j} for f, j in self.estimates().items()],
                "probes": [p.to_dict() for p in self.probes],
                "moves": [{"t_s": t, "from_mhz": a, "to_mhz": b} for t, a, b in self.moves],
                "reprobes": [{"t_s": t, "reason": r} for t, r in self.reprobe_reasons],
                "decisions": self.decisions, "fit": self.fit_summary, "vf_source": self.vf_source,
                "remaining_windows": self.remaining_windows,
                "maxn_anchor": self.maxn_anchor, "maxn_probes": self.maxn_probes,
                "objective": self.objective.to_dict(),
                "levels_mhz": list(self.levels_mhz), "dropped_mhz": list(self.dropped_mhz),
                "params": self.params.to_dict()}


__all__ = ["DEFAULT_VF_SOURCE", "MAXN", "CurveParams", "CurveSearch", "expected_improvement", "level_name",
           "vf_for_levels"]

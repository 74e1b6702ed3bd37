"""The guard, the settling and the drift alarm of an online search over modes
(:mod:`pydvfs.governor.mode_search`).

The search settles on the measured mode of least cost; never on a mode measured worse than the
best GPU-only mode measured (the EMC and CPU at the start's), and away from the anchor (the
start, or the held mode in a re-search) only for a gain beyond ``z_guard`` standard errors
(raised by 0.5 ln k for the k modes measured). With noisy windows a gain the rest of the run
cannot prove, or one whose proof costs more anchor windows than the chance that the anchor is
better risks, is a tie: the better estimate is held. While holding, a move of the held mode's
cost beyond ``drift_pct`` (with noisy windows also beyond ``drift_z`` standard errors, for
``max_samples`` windows in a row) starts a local round around it."""
from __future__ import annotations

import math
import statistics

from .fit import expected_improvement
from .modes import MAXN, level_name


class Guard:
    """What protects the anchor of a :class:`ModeSearch` (``search``: its state)."""

    def __init__(self, search):
        self.s = search

    def z(self) -> float:
        """The guard's bar in standard errors: ``z_guard``, raised by 0.5 ln k for the k modes
        measured (the best of k is measured low by chance more often than one mode)."""
        w = self.s.windows
        return self.s.params.z_guard + 0.5 * math.log(max(1, len(w.win) + bool(w.maxn)))

    def proven(self, best_m, noise: float) -> tuple:
        """Is ``best_m`` measured better than the anchor beyond the guard? (proven, gain, sd)"""
        w = self.s.windows
        a = self.s._anchor
        ca, sa = w.posterior(a)  # (with noisy windows, weighed with the fit: the anchor is
        # often the stock mode or the top clock, measured once at the start, where proving a
        # 10-20 % gain over one noisy window took about four more windows, the costliest)
        gain = ca - w.weighed_cost(best_m)
        sd = math.hypot(sa, w.posterior(best_m)[1])
        # (a gain below the resolution is not worth leaving for)
        z = self.z()
        floor = max(self.s.params.margin_pct, self.s.params.resolution_pct) / 100
        return gain > z * sd and gain > w.weighed_cost(a) * floor, gain, sd

    def settle_choice(self, best_m, admissible):
        """The best measured mode, unless it is measured worse than the best GPU-only mode
        measured (then that one): the search never ends worse than a GPU-only search would."""
        s, w = self.s, self.s.windows
        gpu = [m for m in w.win if s.space.gpu_only(m, s.start_mode) and m in admissible]
        if w.maxn:
            gpu.append(MAXN)
        gpu_best = min(gpu, key=w.weighed_cost, default=None)
        if gpu_best is not None and w.weighed_cost(gpu_best) < w.weighed_cost(best_m):
            return gpu_best
        return best_m

    def resolve(self, best_m, noise: float) -> tuple:
        """The best beats the anchor, but not yet beyond the guard: measure both more (the best
        first: it costs nothing over settling there) while windows are left."""
        w = self.s.windows
        a = self.s._anchor
        if best_m == a or not w.measured(a):
            return None, ""
        ok, gain, sd = self.proven(best_m, noise)
        p = self.s.params
        if ok or gain <= w.mode_cost(a) * max(p.margin_pct, p.resolution_pct) / 100:
            return None, ""
        noisy = w.noisy(noise)
        if noisy and self.unresolvable(best_m, a, gain, noise):
            return None, ""
        # (the best's windows cost nothing over holding it; the anchor's must pay)
        skip_anchor = noisy and not self.anchor_pays(best_m, gain, sd)
        for m in sorted((best_m, a), key=lambda x: len(w.windows(x))):
            if m == a and skip_anchor:
                continue
            if len(w.windows(m)) + p.samples <= p.max_windows:
                return m, f"guard: {level_name(best_m)} beats {level_name(a)} by {gain:.3g} +- {sd:.2g}: measure more"
        return None, ""

    def unresolvable(self, best_m, a, gain: float, noise: float) -> bool:
        """Can the rest of the run not tell ``best_m`` from the anchor ``a`` at the guard's bar?
        Proving ``gain`` takes about 2 (z noise cost / gain)^2 windows at each; so when the windows
        still missing (at both) exceed the horizon (:meth:`Design.check_horizon`): measuring them
        would take the rest of the run, and the gain could not be collected in it."""
        w = self.s.windows
        z = self.z()
        need = 2.0 * (z * noise * w.mode_cost(a) / max(gain, 1e-12)) ** 2
        missing = sum(max(0.0, need - len(w.kept(m))) for m in (best_m, a))
        return missing > self.s.design.check_horizon()

    def anchor_pays(self, best_m, gain: float, sd: float) -> bool:
        """Is the anchor, ``gain`` +- ``sd`` worse than ``best_m``, worth ``samples`` more windows?
        Only while what holding ``best_m`` risks over the horizon (the chance that the anchor is
        the better, times by how much: its expected improvement) exceeds what they cost. The
        guard's bar grows with the modes measured: with 5-7 % windows a level measured 13 % below
        the top clock, 2.2 standard errors, sent 7 windows of a 45-window run back to the top
        clock and its neighbour, 17 % above the best (16 points of the oracle's saving)."""
        cb = self.s.windows.weighed_cost(best_m)
        return expected_improvement(cb, cb + gain, sd) * self.s.design.check_horizon() > self.s.params.samples * gain

    def tie(self, best_m, a, gain: float, sd: float, noise: float) -> bool:
        """Is telling ``best_m`` from the anchor ``a`` not worth the run's windows: the run cannot
        resolve it, or the anchor's windows would not pay?"""
        return self.unresolvable(best_m, a, gain, noise) or not self.anchor_pays(best_m, gain, sd)

    def settle_on(self, best_m, noise: float, now_s: float, admissible):
        """The mode to hold, the round's best ``best_m`` measured: :meth:`settle_choice`, unless the
        guard keeps the anchor; each departure from ``best_m`` is told in the search's decisions."""
        s = self.s
        chosen = self.settle_choice(best_m, admissible)
        if chosen != best_m:
            s.decisions.append({"t_s": now_s, "settle": level_name(chosen),
                                "why": f"{level_name(best_m)} is measured worse than the GPU-only {level_name(chosen)}"})
        a = s._anchor
        if chosen != a and s.windows.measured(a):
            proven, gain, sd = self.proven(chosen, noise)
            if not proven and gain > 0 and s.windows.noisy(noise) and self.tie(chosen, a, gain, sd, noise):
                s.decisions.append({"t_s": now_s, "settle": level_name(chosen),
                                    "why": f"tie: telling {level_name(chosen)} from {level_name(a)} would not pay "
                                           f"in the run ({gain:.3g} +- {sd:.2g}): the better estimate is held"})
            elif not proven:
                s.decisions.append({"t_s": now_s, "settle": level_name(a),
                                    "why": f"guard: {level_name(chosen)} not proven better than {level_name(a)} "
                                           f"({gain:.3g} < {s.params.z_guard:g} x {sd:.2g})"})
                chosen = a
        return chosen


class Drift:
    """The drift alarm over the held mode's windows: ``ref``, its cost at settling; ``costs``,
    the last ``max_samples`` windows' costs held; ``moved_for``, windows in a row the held mode's
    cost has been off its estimate."""

    def __init__(self, search):
        self.s = search
        self.ref = math.nan
        self.costs: list = []
        self.moved_for = 0

    def drifted(self, w: tuple) -> bool:
        """One window ``w`` held at the search's held mode: has its cost drifted?"""
        s, win = self.s, self.s.windows
        cur = s._cur
        p = s.params
        self.costs = (self.costs + [win.cost(*w)])[-p.max_samples:]
        # a new phase moves the held mode's cost either way (longer sequences, shorter ones): the
        # median of the last max_samples windows by drift_pct from its cost at settling; with noisy
        # windows also beyond ``drift_z`` standard errors of what the noise alone moves it (~1.25 x
        # a mean's), against the held mode's median, for max_samples windows in a row. With quiet
        # windows (1-2 %) the check is as it was; with 3-5 % windows a 5 % move is noise, and a
        # false alarm threw the round's windows away and searched again
        noise = win.noise()
        ref, band, n_ref = self.ref, p.drift_pct / 100.0, 1
        cs = [win.cost(*x) for x in win.windows(cur)] if win.measured(cur) else []
        med = statistics.median(cs) if cs else math.nan
        if len(cs) >= 2 * p.noise_prior_windows:
            # the held mode's own spread, once it has the windows: the pooled estimate rests on
            # modes of two or three windows, whose deviations from their median read 3 % as 2 %
            noise = max(noise, 1.4826 * statistics.median(abs(c / med - 1.0) for c in cs))
        noisy = win.noisy(noise)
        if noisy:
            # noisy windows: against the median of the held mode's windows, its held ones included
            # (a level settled on a few windows measured low is corrected by verifying, not searched
            # again). A median against a median: interference stretches some windows of both
            # alike, where against the mean of the clean windows it read as a move up
            if cs:
                ref, n_ref = med, len(cs)
            band = max(band, p.drift_z * noise * 1.25 * math.hypot(1.0 / math.sqrt(p.max_samples), 1.0 / math.sqrt(max(1, n_ref))))
        moved = len(self.costs) >= p.max_samples and \
            abs(statistics.median(self.costs) / ref - 1.0) > band
        # noisy windows: the move must hold for max_samples windows in a row (a new phase stays;
        # a cluster of interference passes). Checked after every window of a long hold, a single
        # median of five crossed the band 192 times in 288 120-window runs at 5 % that never moved
        self.moved_for = self.moved_for + 1 if moved else 0
        return self.moved_for >= (p.max_samples if noisy else 1)


__all__ = ["Drift", "Guard"]

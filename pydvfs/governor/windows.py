"""What a round of an online search over modes (:mod:`pydvfs.governor.mode_search`) measured,
and what its windows say: a mode's cost (the mean of its clean windows), its standard error,
the windows' noise pooled over the modes, and the rules for noisy windows.

Windows noisier than ``noisy_pct`` (2 %; issue 39: 3-5 % windows in short runs) are judged
against the noise: a measured mode is then weighed with the fit's word there
(:meth:`RoundWindows.posterior`), and a probe's windows may disagree by as much more as the noise
is above the prior's, or end early where even the cleanest is clearly worse than the best."""
from __future__ import annotations

import math
import statistics

from .modes import MAXN


class RoundWindows:
    """This round's windows, (J/step, s/step) per mode (``win``) and under MAXN (``maxn``), under
    the search's ``objective`` and ``params``. ``at_fit``: the last fit's word at the measured
    modes, mode -> (cost, its spread with the whole misfit), set by :class:`ModeFit`."""

    def __init__(self, params, objective):
        self.params = params
        self.objective = objective
        self.win: dict = {}  # this round: mode -> [(J/step, s/step)]
        self.maxn: list = []  # this round's windows under MAXN
        self.at_fit: dict = {}
        self.noise_n = 0  # the windows' deviations behind the last noise estimate

    def clear(self) -> None:
        """A new round: nothing measured yet (the noise's count stays until the next estimate)."""
        self.win, self.maxn, self.at_fit = {}, [], {}

    def cost(self, j: float, s: float) -> float:
        return self.objective.cost(j, s)

    def windows(self, m) -> list:
        return self.maxn if m is MAXN else self.win[m]

    def measured(self, m) -> bool:
        return bool(self.maxn) if m is MAXN else m in self.win

    def kept(self, m) -> list:
        """The mode's window costs without its spikes (beyond 3 window-noise sigmas of its
        median: interference stretches a window, it never shortens one by as much)."""
        costs = [self.cost(*w) for w in self.windows(m)]
        if len(costs) < 3:
            return costs
        med = statistics.median(costs)
        band = 3 * self.noise() * med
        return [c for c in costs if abs(c - med) <= band] or costs

    def mode_cost(self, m) -> float:
        """The mean of the mode's clean windows; of one or two, the least (a spike only adds)."""
        kept = self.kept(m)
        return statistics.fmean(kept) if len(self.windows(m)) >= 3 else min(kept)

    def mode_time(self, m) -> float:
        return statistics.median(w[1] for w in self.windows(m))

    def noise(self) -> float:
        """Relative std of one window's cost, pooled over the modes measured this round (1.48 x
        the median absolute deviation from each mode's median, robust to spikes), pooled with a
        prior (noise_prior_pct, worth noise_prior_windows windows), never below the floor."""
        devs = []
        for ws in list(self.win.values()) + [self.maxn]:
            if len(ws) < 2:
                continue
            cs = [self.cost(*w) for w in ws]
            med = statistics.median(cs)
            d = sorted(abs(c - med) / med for c in cs)
            devs += d[1:] if len(ws) % 2 else d  # an odd count's median deviates by 0 from itself
        rel = 1.4826 * statistics.median(devs) if devs else 0.0
        self.noise_n = len(devs)
        p = self.params
        k0, s0 = p.noise_prior_windows, p.noise_prior_pct / 100.0
        rel = math.sqrt((k0 * s0 * s0 + len(devs) * rel * rel) / (k0 + len(devs))) if k0 + len(devs) else rel
        return max(rel, p.noise_floor_pct / 100.0)

    def noisy(self, noise: float) -> bool:
        """Are the windows noisier (``noisy_pct``) than those the search's rules were tuned for
        (the prior's 1.5 %; 1-2 % on a real board's 10-s windows)? Only then do the rules for
        noisy windows apply (disagreeing windows, a probe that is clearly worse, a neighbour check
        that must pay back in the horizon, a guard that cannot be resolved in it, the drift
        alarm's reference): with quiet windows the search is what it was."""
        # (on at least twice the prior's windows: a handful with one spike among them is no evidence)
        return noise > self.params.noisy_pct / 100.0 and self.noise_n >= 2 * self.params.noise_prior_windows

    def stderr(self, m, noise: float) -> float:
        n = len(self.kept(m))
        # fewer than 3 windows (no spike test): ~1.25 x a mean's standard error
        return (1.25 if len(self.windows(m)) < 3 else 1.0) * noise * self.mode_cost(m) / math.sqrt(n)

    def spread_limit_pct(self, noise: float) -> float:
        """How far a probe's windows may disagree: ``spread_pct``, tuned for windows as noisy as
        the prior; windows measured noisy disagree by as much more by chance alone (a spike still
        stands out). On the noise alone, not :meth:`noisy`'s 8 windows: they come after the
        design, whose probes would each run to max_samples."""
        p = self.params
        noisy = noise > p.noisy_pct / 100.0
        return p.spread_pct * (noise / (p.noise_prior_pct / 100.0) if noisy else 1.0)

    def clearly_worse(self, costs: list, noise: float) -> bool:
        """Noisy windows of a probe that disagree, but even the cleanest clearly worse than the
        best measured: more windows cannot make it the best."""
        return bool(self.noisy(noise) and self.win and
                    min(costs) > min(self.mode_cost(b) for b in self.win) * (1 + 2 * noise))

    def admissible(self, times: dict, modes) -> list:
        """The ``modes`` within the slowdown bound of the fastest *measured* step time (a
        prediction never sets the bar; it only places the modes not measured yet)."""
        measured = [times[m] for m in self.win if m in times]
        if self.maxn:
            measured.append(self.mode_time(MAXN))
        known = [t for t in times.values() if t is not None]
        fastest = min(measured) if measured else min(known, default=math.inf)
        return [m for m in modes if m in times and (times[m] is None or self.objective.admissible(times[m], fastest))]

    def best_measured(self, admissible=None):
        ms = [m for m in self.win if admissible is None or m in admissible]
        return min(ms, key=self.weighed_cost) if ms else None

    def posterior(self, m) -> tuple:
        """(cost, standard error) of a measured mode as the decisions weigh it: its windows'
        (:meth:`mode_cost`, :meth:`stderr`). With noisy windows, those weighed with what the last
        fit over every measured mode puts there, by their spreads (the fit's: its own and its
        misfit): with 5-7 % windows, a level of 9 windows read 4 % low and one of 10 read 3 % high
        (2.5 standard errors apart), and the search held the worse one, where the fit over all 53
        windows ordered them right (816 MHz lowest, 714 MHz 0.2 % above it, 1020 MHz 6.7 %; truly
        0.3 and 4.6 %). With quiet windows a mode is what its windows say."""
        noise = self.noise()
        c, se = self.mode_cost(m), self.stderr(m, noise)
        fit = self.at_fit.get(m)
        if fit is None or not self.noisy(noise):
            return c, se
        wm, wf = se ** -2, fit[1] ** -2
        return (c * wm + fit[0] * wf) / (wm + wf), (wm + wf) ** -0.5

    def weighed_cost(self, m) -> float:
        return self.posterior(m)[0]


__all__ = ["RoundWindows"]

"""What an online search over modes (:mod:`pydvfs.governor.mode_search`) probes once the design
is measured: the mode whose expected improvement over the best measured (x the windows left)
most exceeds its cost (:meth:`Checks.gain`); then the checks beyond the expected gain: re-measure
the best and the modes within noise of it (:meth:`Checks.close`), and probe the unmeasured
neighbours of the best, of the modes within noise of it and of the best GPU-only mode, those
that continue a measured descent first (:meth:`Checks.neighbour`)."""
from __future__ import annotations

import math

from .fit import expected_improvement
from .modes import coords, level_name


class Checks:
    """The probes of a :class:`ModeSearch` after its design (``search``: its state)."""

    def __init__(self, search):
        self.s = search

    def gain(self, admissible, best_m, best: float, pred, new_ok: bool, horizon: int) -> tuple:
        """(mode, why) of the probe expected to gain more over the ``horizon`` than its windows
        cost, the most: a measured rival re-measured (its spread its standard error) or a new
        mode the model places (``new_ok``); (None, "") when none."""
        s, w = self.s, self.s.windows
        p = s.params
        choice, net, why = None, 0.0, ""
        for m in admissible:  # a mode where a probe is expected to gain more than its windows cost
            if m in w.win:  # re-measure a measured rival (within noise of the best)
                if m == best_m or len(w.win[m]) + p.samples > p.max_windows:
                    continue
                mu, sigma = w.posterior(m)
                label = "re-measure"
            elif pred is not None and new_ok and m in pred:  # a new mode, placed by the model
                mu, sigma, _ = pred[m]
                label = "model"
                wall = self.wall(m, best_m)
                if wall is not None:
                    post = w.posterior(wall)
                    if expected_improvement(best, mu, sigma) > expected_improvement(best, *post):
                        (mu, sigma), label = post, f"model (no better than {level_name(wall)})"
            else:
                continue
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sigma) * horizon
            cost = p.samples * max(0.0, mu - best)
            if gain - cost > net:
                choice, net = m, gain - cost
                why = f"{label}: {mu:.5g} +- {sigma:.2g} vs best {best:.5g}; gain {gain:.3g} > cost {cost:.3g}"
        return choice, why

    def wall(self, m, best_m):
        """One axis: the measured level between ``m`` and the best, where ``m`` lies between two
        measured levels and the best beyond them (None otherwise, or while the best has fewer
        than ``samples`` windows: their least may be a few % low by chance). On a U-shaped curve
        ``m`` is then no better than that wall, whatever the fit's spread there: a probe of ``m``
        can gain no more than a re-measure of the wall would. On a flat-bottomed curve from the
        top, the fit's misfit made a level between the design's first point and the top look
        worth a probe, 50-90 % worse than the best."""
        w = self.s.windows
        if self.s.axes > 1 or len(w.kept(best_m)) < self.s.params.samples:
            return None
        below = [x for x in w.win if x < m]
        above = [x for x in w.win if x > m]
        if not below or not above:
            return None
        return max(below) if best_m < m else min(above)

    def _near_best(self, m, best_m, best: float) -> bool:
        """Is the measured ``m`` within noise of the best (``z_guard`` of their standard errors)?"""
        w = self.s.windows
        return w.weighed_cost(m) - best <= self.s.params.z_guard * math.hypot(w.posterior(m)[1], w.posterior(best_m)[1])

    def close(self, best_m, noise: float, admissible) -> tuple:
        """Re-measure the best and the modes within noise of it to ``confirm_samples`` windows each;
        with noisy windows, the best alone: "within noise" then reaches modes several % worse, and
        a second window of each cannot tell them apart (the expected gain still re-measures a rival
        worth it). On the family's joint grid at 5 %, the rivals' windows were a fifth of what the
        search spent in a 60-window run."""
        w = self.s.windows
        best = w.weighed_cost(best_m)
        rivals = not w.noisy(noise)
        for m in sorted(w.win, key=w.weighed_cost):
            close = m == best_m or rivals and self._near_best(m, best_m, best)
            if m in admissible and close and len(w.win[m]) < self.s.params.confirm_samples:
                return m, f"re-measure {level_name(m)}: within noise of the best"
        return None, ""

    def neighbour(self, best_m, noise: float, admissible, pred, horizon: int) -> tuple:
        """The unmeasured neighbours of the best, of the modes within noise of it and of the
        best GPU-only mode, that the model does not place clearly worse (a smooth model is only
        roughly right: one step along an axis is checked, not predicted). With noisy windows, once
        the best has ``samples`` windows, a mode within noise but measured worse than it has its
        neighbours checked only where one as good as it, give or take the model's misfit, could
        pay back their windows in the ``horizon``: "within noise" then reaches modes several %
        worse, whose neighbours cost more than the rest of the run can win back. On one axis a
        level is then checked only where the model's expected gain there pays its windows, the
        best's neighbours too (before the best has its windows, only a level beyond such a mode,
        away from the best): 60-window runs at 5 % checked the table's ends, 15-30 % above the
        best, next to levels measured a few % low by chance; and from the best, 612 MHz, pythia-70m
        checked 510 MHz, read it low, went on to 408 MHz and settled on 510, 2.4 % above the best."""
        s, w = self.s, self.s.windows
        best = w.weighed_cost(best_m)
        p = s.params
        misfit = max(p.misfit_floor_pct, (s.fit_summary or {}).get("misfit_pct", 0.0)) / 100.0

        # (until the best has its ``samples`` windows, its estimate may be a few % low by chance:
        # every mode within noise of it is checked as before)
        unsure = len(w.kept(best_m)) < p.samples
        noisy = w.noisy(noise)

        def worth(mu: float, sd: float) -> bool:  # a check of a mode ~ N(mu, sd) pays its windows
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sd) * horizon
            return gain > s.design.windows() * max(0.0, mu - best)

        def pays(m) -> bool:
            c = w.weighed_cost(m)
            return worth(c, misfit * c)

        def fit_pays(nb) -> bool:
            # one axis: a level next to a measured one is weighed as a model probe is, on the
            # fit's word there (its slope), not on the measured one's
            return pred is not None and nb in pred and worth(*pred[nb][:2])

        close = sorted((m for m in w.win if m in admissible and (
            m == best_m or (self._near_best(m, best_m, best) and (not noisy or unsure or pays(m))))),
            key=w.weighed_cost)
        gpu_best = min((m for m in w.win if s.space.gpu_only(m, s.start_mode) and m in admissible),
                       key=w.weighed_cost, default=None)
        if gpu_best is not None and gpu_best not in close:
            close.append(gpu_best)
        for m in close:
            for nb in self.by_trend(m, pred):
                if nb in w.win or nb not in admissible:
                    continue
                if s.axes == 1 and abs(nb - m) < p.misfit_corr_pct / 100.0 * m:
                    continue  # closer than the misfit's correlation: the model predicts it well
                if s.axes == 1 and noisy and (not unsure or (nb - m) * (m - best_m) > 0) and not fit_pays(nb):
                    continue
                if s.axes > 1 and pred is not None and nb in pred and \
                        pred[nb][0] - best > p.z_guard * pred[nb][1]:
                    continue  # the model places it clearly worse
                what = "the best measured" if m == best_m else \
                    "the best GPU-only mode" if m == gpu_best and m not in close[:-1] else "a mode within noise of the best"
                return nb, f"neighbour of {what}, {level_name(m)}"
        return None, ""

    def by_trend(self, m, pred) -> list:
        """The neighbours of ``m``, those that continue a measured descent first (the nearest
        mode measured the other way along the same axis is worse than ``m``: go on that way),
        then by the model's prediction (unplaced ones after the placed)."""
        s, w = self.s, self.s.windows
        here = coords(m)

        def key(nb):
            c = coords(nb)
            d = next(i for i in range(len(c)) if c[i] != here[i])
            side = 1 if c[d] > here[d] else -1
            if s.axes == 1:  # a fine table: the level one step the other way
                back = [x for x in s.space.neighbours(m) if x != nb and x in w.win]
            else:  # a coarse axis the scout may have stepped over: the nearest measured the other way
                back = [x for x in w.win if all(coords(x)[o] == here[o] for o in range(len(c)) if o != d)
                        and (here[d] - coords(x)[d]) * side > 0]
            near = min(back, key=lambda x: abs(coords(x)[d] - here[d]), default=None)
            trend = near is not None and w.weighed_cost(near) > w.weighed_cost(m)
            placed = pred is not None and nb in pred
            return (not trend, not placed, pred[nb][0] if placed else 0.0)

        return sorted(s.space.neighbours(m), key=key)


__all__ = ["Checks"]

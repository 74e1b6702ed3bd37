"""The fit of an online search over modes (:mod:`pydvfs.governor.mode_search`): the models that
predict a mode's step time and power from the windows measured (:class:`CurveModel` over GPU
levels, :class:`JointModel` over whole modes), and :class:`ModeFit`, what the search makes of
their prediction: every mode's cost with a spread that holds on a board the model does not
describe (the model's own, plus the misfit beyond window noise), no extrapolation along an axis
whose misfit has a structure, and over whole modes no further than one measured span beyond what
was measured (a trust region)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..errors import InvalidValueError
from .modes import KNOBS, coords, within

DEFAULT_VF_SOURCE = "default Orin table"  # what state() says when no V/f curve is passed in


def expected_improvement(best: float, mu: float, sigma: float) -> float:
    """E[max(0, best - X)] for X ~ N(mu, sigma)."""
    if sigma <= 0:
        return max(0.0, best - mu)
    z = (best - mu) / sigma
    phi = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return (best - mu) * cdf + sigma * phi


@dataclass
class Prediction:
    """A fitted model's prediction over the space: per mode (in the search's order) the step
    time (s), the power (W) and the model's own relative standard deviation of the energy and
    of the time (0 where the model gives none); ``summary``: the fit's coefficients for state()."""

    time_s: list
    power_w: list
    energy_rel_sd: list
    time_rel_sd: list
    summary: dict = field(default_factory=dict)


def vf_for_levels(levels_mhz):
    """The V/f curve to fit with: the curve model's default (an Orin's) when the table ends
    near its top clock; else that shape stretched to the table's top clock (a board whose V/f
    was not characterised: the voltage floor and the rise keep their share of the range)."""
    from ..model.curve import DEFAULT_VF, VFCurve

    top = max(levels_mhz)
    vf_top = max(DEFAULT_VF.freqs_mhz)
    if abs(top / vf_top - 1.0) <= 0.05:
        return DEFAULT_VF
    k = top / vf_top
    return VFCurve(tuple(f * k for f in DEFAULT_VF.freqs_mhz), DEFAULT_VF.volts_v)


class CurveModel:
    """The GPU clock's curve (:func:`pydvfs.model.curve.fit_time_power`): t = a/f + b,
    P = p0 + c f V(f)^2, over a one-axis space. ``vf``: the board's V/f (None: the default Orin
    table, stretched to the table's top clock)."""

    kind = "model"
    axes = 1

    def __init__(self, vf=None, vf_source: str | None = None):
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run (seconds)

        self.vf = vf
        self.vf_source = vf_source or ("given" if vf is not None else DEFAULT_VF_SOURCE)

    def fit(self, coords, time_s, power_w, space) -> Prediction | None:
        import numpy as np

        from ..model.curve import fit_time_power

        vf = self.vf or vf_for_levels([c[0] for c in space])
        try:
            fit = fit_time_power([c[0] for c in coords], time_s, power_w, vf)
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        lv = np.asarray([c[0] for c in space], float)
        t, p = fit.time_s(lv), fit.power_w(lv)
        e_sd = fit.curve.energy_std_j(lv)
        f_ghz = lv / 1000.0
        xt = np.column_stack([1.0 / f_ghz, np.ones_like(f_ghz)])
        t_sd = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", xt, np.asarray(fit.time_cov, float), xt), 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            return Prediction(list(t), list(p), list(e_sd / (p * t)), list(t_sd / t),
                              {"a": fit.a, "b": fit.b, "p0": fit.p0, "c": fit.c})


class JointModel:
    """The joint model of :mod:`pydvfs.model.joint` over (gpu, emc, cpu) modes."""

    kind = "joint"
    axes = 3

    def __init__(self, vf=None):
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run

        self.vf = vf
        self.vf_source = "given" if vf is not None else "the joint model's defaults"

    def fit(self, coords, time_s, power_w, space) -> Prediction | None:
        import numpy as np

        from ..model.joint import VFSet, fit_joint

        if len({c[1:] for c in coords}) == 1:
            return self._line_fit(coords, time_s, power_w, space)
        try:
            g, e, c = (list(x) for x in zip(*coords))
            fit = fit_joint(g, e, c, time_s, power_w, self.vf or VFSet())
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        arr = np.asarray(space, float)
        t = fit.time_s(arr[:, 0], arr[:, 1], arr[:, 2])
        p = fit.power_w(arr[:, 0], arr[:, 1], arr[:, 2])
        zero = [0.0] * len(space)
        return Prediction(list(t), list(p), zero, zero, {"fit": fit.to_dict()})

    def _line_fit(self, coords, time_s, power_w, space) -> Prediction | None:
        """Every window at one EMC rate and CPU clock: the GPU curve along that line (the joint
        model's other coefficients rest on nothing yet); the modes off the line are not placed."""
        rest = coords[0][1:]
        line = [c for c in space if c[1:] == rest]
        pred = CurveModel(self.vf.gpu if self.vf is not None else None).fit(coords, time_s, power_w, line)
        if pred is None:
            return None
        at = {c: i for i, c in enumerate(line)}
        nan = math.nan

        def col(xs):
            return [xs[at[c]] if c in at else nan for c in space]

        return Prediction(col(pred.time_s), col(pred.power_w), col(pred.energy_rel_sd), col(pred.time_rel_sd),
                          dict(pred.summary, line=list(rest)))


class ModeFit:
    """The model fitted to a search's windows (:class:`ModeSearch`'s ``fit``): every clean window
    of the round and the prior's observations (rescaled to this run) in, each mode's predicted
    cost with its spread out. ``summary``: the last fit's coefficients and misfit (state()'s
    "fit"); the measured modes' word from the fit is left with the round's windows
    (:attr:`RoundWindows.at_fit`), which weigh it with noisy windows."""

    def __init__(self, search):
        self.s = search
        self.summary: dict | None = None

    def prior_rows(self) -> list:
        """The prior's observations, rescaled to this run: time and power each by the median
        ratio of this round's to the prior's over the modes both measured (1 where none)."""
        s, w = self.s, self.s.windows
        if not s._prior_obs:
            return []
        rt, rp = [], []
        for m, j, sec in s._prior_obs:
            if m in w.win:
                t = w.mode_time(m)
                pw = statistics.median(jj / ss for jj, ss in w.win[m])
                rt.append(t / sec)
                rp.append(pw / (j / sec))
        kt = statistics.median(rt) if rt else 1.0
        kp = statistics.median(rp) if rp else 1.0
        return [(m, sec * kt, j / sec * kp) for m, j, sec in s._prior_obs]

    def _rows(self, noise: float) -> tuple:
        """The fit's input: (coords, s/step, W) of every clean window and prior observation."""
        w = self.s.windows
        cs, ts, ps = [], [], []
        for m, ws in w.win.items():
            med = statistics.median(w.cost(*x) for x in ws)
            for j, sec in ws:  # spikes (beyond 3 sigma above the mode's median) stay out of the fit
                if w.cost(j, sec) <= med * (1 + 3 * noise):
                    cs.append(coords(m))
                    ts.append(sec)
                    ps.append(j / sec)
        for m, sec, pw in self.prior_rows():
            cs.append(coords(m))
            ts.append(sec)
            ps.append(pw)
        return cs, ts, ps

    def predict(self) -> dict | None:
        """mode -> (predicted cost, its spread, predicted s/step); None when it cannot be fitted.
        Modes beyond the measured range of an axis whose misfit has a structure are left out."""
        s, w = self.s, self.s.windows
        noise = w.noise()
        cs, ts, ps = self._rows(noise)
        pred = s.model.fit(cs, ts, ps, [coords(m) for m in s.modes])
        if pred is None:
            return None
        k = {"energy": 0, "edp": 1, "ed2p": 2}[s.objective.kind]
        t, pw = pred.time_s, pred.power_w
        placed = [math.isfinite(t[i]) and t[i] > 0 and math.isfinite(pw[i]) and pw[i] > 0 for i in range(len(t))]
        index = {m: i for i, m in enumerate(s.modes) if placed[i]}  # the modes the model places
        if any(m not in index for m in w.win):
            return None
        cost = [float(pw[i] * t[i] * t[i] ** k) if placed[i] else math.nan for i in range(len(s.modes))]
        measured = list(w.win)
        # what the model leaves unexplained on the measured modes, beyond their window noise
        resid = {m: w.mode_cost(m) / cost[index[m]] - 1.0 for m in measured}
        se = {m: w.stderr(m, noise) / w.mode_cost(m) for m in measured}
        excess = statistics.fmean(resid[m] ** 2 - se[m] ** 2 for m in measured) if measured else 0.0
        p = s.params
        floor = (p.spiky_misfit_pct if s.maxn_anchor else p.misfit_floor_pct) / 100.0
        misfit = max(floor, math.sqrt(max(0.0, excess)))
        structured = self.structured_axes(resid, se, floor)
        seen = measured + [m for m, _, _ in s._prior_obs]
        ranges = [(min(coords(m)[d] for m in seen), max(coords(m)[d] for m in seen)) for d in range(s.axes)]
        # no extrapolation along an axis the model misfits with a structure, nor along one not
        # varied yet (its coefficients rest on nothing measured): those modes are reached by steps
        fenced = [d for d in range(s.axes) if d in structured or ranges[d][0] == ranges[d][1]]
        # over whole modes the fit has no spread of its own and 13 coefficients on 7-10 modes: it
        # interpolates them, and its misfit reads as the floor however far it extrapolates (it
        # sent short runs to the corner of the grid, EMC 204-665 MHz, on the word of a fit
        # measured down to 2133). It is trusted one measured span beyond what was measured
        # along each axis (a ratio of clocks): the search reaches further a step at a time
        reach = [(lo, hi) if d in fenced else (lo * lo / hi, hi * hi / lo) if s.axes > 1 else (0.0, math.inf)
                 for d, (lo, hi) in enumerate(ranges)]
        out, at_fit = {}, {}
        for m, i in index.items():
            c = coords(m)
            if m not in w.win and not all(within(c[d], *reach[d]) for d in range(s.axes)):
                continue
            corr = 1.0
            if s.axes == 1 and measured:  # a level next to a measured one deviates alike
                near = min(abs(m - x) for x in measured)
                corr = min(1.0, near / (p.misfit_corr_pct / 100.0 * m))
            bias = max((abs(self.axis_residual(resid, d, c[d])) for d in structured), default=0.0)
            own = pred.energy_rel_sd[i] ** 2 + (k * pred.time_rel_sd[i]) ** 2 + bias ** 2
            rel = math.sqrt(own + (misfit * corr) ** 2)
            out[m] = (cost[i], cost[i] * rel if math.isfinite(rel) else math.inf, float(t[i]))
            # a measured mode's windows are weighed with the fit's word there and its whole misfit
            whole = math.sqrt(own + misfit ** 2)
            if m in w.win and math.isfinite(whole) and whole > 0:
                at_fit[m] = (cost[i], cost[i] * whole)
        w.at_fit = at_fit
        best = min(out, key=lambda m: out[m][0]) if out else None
        self.summary = dict(pred.summary, misfit_pct=100 * misfit, window_noise_pct=100 * noise,
                            structured_axes=[KNOBS[d] for d in structured],
                            fenced_axes=[KNOBS[d] for d in fenced],
                            predicted_best=best if best is None or s.axes == 1 else list(best),
                            prior_observations=len(s._prior_obs))
        if s.axes == 1:
            self.summary["predicted"] = {f"{m:g}": cost[i] for m, i in index.items()}
        return out

    def structured_axes(self, resid: dict, se: dict, floor: float) -> list:
        """The axes along which the residuals have a structure: their means at two of the
        axis's measured values differ by more than ``z_guard`` times what the window noise and
        the misfit floor allow."""
        out = []
        for d in range(self.s.axes):
            groups: dict = {}
            for m in resid:
                groups.setdefault(coords(m)[d], []).append(m)
            if len(groups) < 2:
                continue
            stats = [(statistics.fmean(resid[m] for m in ms),
                      math.sqrt(statistics.fmean(se[m] ** 2 + floor ** 2 for m in ms) / len(ms)))
                     for ms in groups.values()]
            hi = max(stats, key=lambda x: x[0])
            lo = min(stats, key=lambda x: x[0])
            if hi[0] - lo[0] > self.s.params.z_guard * math.hypot(hi[1], lo[1]):
                out.append(d)
        return out

    @staticmethod
    def axis_residual(resid: dict, d: int, x: float) -> float:
        """The mean residual along axis ``d`` at ``x``, interpolated between its measured values."""
        groups: dict = {}
        for m, r in resid.items():
            groups.setdefault(coords(m)[d], []).append(r)
        xs = sorted(groups)
        ys = [statistics.fmean(groups[v]) for v in xs]
        if x <= xs[0]:
            return ys[0]
        for a, b, ya, yb in zip(xs, xs[1:], ys, ys[1:]):
            if x <= b:
                return ya + (yb - ya) * (x - a) / (b - a)
        return ys[-1]


__all__ = ["CurveModel", "DEFAULT_VF_SOURCE", "JointModel", "ModeFit", "Prediction", "expected_improvement",
           "vf_for_levels"]

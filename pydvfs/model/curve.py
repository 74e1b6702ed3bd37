"""The physical model of a workload's energy-vs-clock U-curve: the one curve model of pydvfs.

Training labels (:mod:`pydvfs.policy`), the roofline policy and the online search's prior all
use this module. Pure numpy/scipy.

The shape (per unit of work: a training step, or a whole run; f in GHz inside, MHz outside)::

    t(f) = a / f + b                    time: clock-scaled compute + clock-independent rest
    P(f) = p0 + c * f * V(f)^2          power: static/idle part + dynamic C V^2 f
    E(f) = P(f) * t(f)
         = k0 / f + k1 + k2 * V(f)^2 + k3 * f * V(f)^2

so every curve is a non-negative combination of the four *energy basis* terms
``phi(f) = [1/f, 1, V(f)^2, f V(f)^2]`` (f in GHz, V in volts; k in J per unit of work):

- ``k0 = p0 a``: static power while the clock-scaled work runs (cheaper at high clocks);
- ``k1 = p0 b``: static power over the clock-independent time (memory, host);
- ``k2 = c a``: the switching energy of the clock-scaled work (V^2 per cycle);
- ``k3 = c b``: the clock tree running while the GPU waits (dearer at high clocks).

The frequency-aware roofline model (:mod:`pydvfs.policy.roofline_curve`) lands in the same basis, so
one :class:`EnergyCurve` carries a fitted curve, a predicted one, or an online estimate, with
the covariance of its coefficients (the noise of what it was fitted on).

Public API (stable; later changes keep it compatible):

- :class:`VFCurve` - the GPU rail's voltage vs clock (a table, interpolated); ``DEFAULT_VF``
  an Orin-like table for boards without a characterised one.
- :func:`energy_basis` - ``phi(f)`` as an (n, 4) array.
- :class:`EnergyCurve` - coefficients + covariance: :meth:`~EnergyCurve.energy_j`,
  :meth:`~EnergyCurve.energy_std_j`, :meth:`~EnergyCurve.argmin_mhz`,
  :meth:`~EnergyCurve.within_noise_mhz`, :meth:`~EnergyCurve.regret`,
  :meth:`~EnergyCurve.p_best`, :meth:`~EnergyCurve.to_dict` / :meth:`~EnergyCurve.from_dict`.
- :func:`fit_time_power` -> :class:`TimePowerFit` (from (clock, time, power) points, e.g. a
  characterisation sweep with repeats); ``.curve`` is its :class:`EnergyCurve`.
- :func:`fit_energy` -> :class:`EnergyCurve` from (clock, energy) points only (what an online
  search observes), optionally with a prior curve (the roofline prediction, or the board's
  characterisation) for the few-points regime.
- :func:`point_cv` - coefficient of variation of repeats per clock.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidValueError

# ---- the V/f shape ------------------------------------------------------------------------------
# An Orin-like GPU rail V/f table (MHz, V): a flat floor at the low OPPs, then a rise to the top
# level. Public Orin DVFS tables have this shape (floor ~0.6 V, ~0.95 V at 1.3 GHz); the exact
# numbers of a given board come from its characterisation when it has one (VFCurve(...)).
DEFAULT_VF_TABLE = (
    (0.0, 0.610), (560.0, 0.610), (612.0, 0.626), (714.0, 0.668), (816.0, 0.716),
    (918.0, 0.767), (1020.0, 0.821), (1122.0, 0.877), (1224.0, 0.935), (1300.5, 0.960),
)
BASIS_TERMS = ("static_per_cycle_work", "static_fixed", "dynamic_per_cycle", "dynamic_clock_tree")
N_BASIS = 4
Z_NOISE = 2.0  # default: a level is "within noise" of the best within 2 standard deviations


@dataclass(frozen=True)
class VFCurve:
    """GPU rail voltage (V) vs clock (MHz): a table, linearly interpolated, flat outside it."""

    freqs_mhz: tuple
    volts_v: tuple

    def __post_init__(self):
        f = np.asarray(self.freqs_mhz, float)
        v = np.asarray(self.volts_v, float)
        if f.ndim != 1 or f.shape != v.shape or len(f) < 1:
            raise InvalidValueError("a V/f table needs as many voltages as clocks (at least one)")
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(v)) and np.all(v > 0) and np.all(np.diff(f) > 0)):
            raise InvalidValueError("a V/f table needs increasing finite clocks and positive voltages")

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[float, float]]) -> VFCurve:
        """From (MHz, V) pairs in any order."""
        pairs = sorted((float(f), float(v)) for f, v in pairs)
        return cls(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))

    def voltage_v(self, freq_mhz) -> np.ndarray:
        return np.interp(np.asarray(freq_mhz, float), self.freqs_mhz, self.volts_v)

    def to_dict(self) -> dict:
        return {"freqs_mhz": list(self.freqs_mhz), "volts_v": list(self.volts_v)}

    @classmethod
    def from_dict(cls, d: Mapping) -> VFCurve:
        return cls(tuple(float(x) for x in d["freqs_mhz"]), tuple(float(x) for x in d["volts_v"]))


DEFAULT_VF = VFCurve.from_pairs(DEFAULT_VF_TABLE)


def energy_basis(freqs_mhz, vf: VFCurve = DEFAULT_VF) -> np.ndarray:
    """phi(f) = [1/f, 1, V^2, f V^2] (f in GHz, V in volts), one row per clock."""
    f_ghz = np.atleast_1d(np.asarray(freqs_mhz, float)) / 1000.0
    if np.any(~np.isfinite(f_ghz)) or np.any(f_ghz <= 0):
        raise InvalidValueError("clocks must be finite and > 0 MHz")
    v2 = vf.voltage_v(f_ghz * 1000.0) ** 2
    return np.column_stack([1.0 / f_ghz, np.ones_like(f_ghz), v2, f_ghz * v2])


# ---- a curve with its uncertainty ---------------------------------------------------------------
@dataclass(frozen=True)
class EnergyCurve:
    """E(f) = coef . phi(f), J per unit of work; ``cov`` the 4x4 covariance of ``coef``.

    ``dof``: residual degrees of freedom of the fit (0: exact interpolation, the noise is not
    known from the data and ``cov`` comes from a prior or a given sigma; without either it is
    NaN, and :meth:`within_noise_mhz` falls back to ``rel_tol``). ``n_points``: the
    measurements it was fitted on (0 for a prediction)."""

    coef: tuple
    cov: tuple  # 4x4, as nested tuples (hashable, JSON-able)
    vf: VFCurve = DEFAULT_VF
    dof: int = 0
    n_points: int = 0
    source: str = ""

    @property
    def coef_array(self) -> np.ndarray:
        return np.asarray(self.coef, float)

    @property
    def cov_array(self) -> np.ndarray:
        return np.asarray(self.cov, float).reshape(N_BASIS, N_BASIS)

    def energy_j(self, freqs_mhz) -> np.ndarray:
        """Expected energy per unit of work at each clock."""
        return energy_basis(freqs_mhz, self.vf) @ self.coef_array

    def energy_std_j(self, freqs_mhz) -> np.ndarray:
        """Standard deviation of :meth:`energy_j` from the coefficients' covariance."""
        X = energy_basis(freqs_mhz, self.vf)
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov_array, X), 0.0))

    def argmin_mhz(self, levels_mhz) -> float:
        """The level (of the given table) with the lowest expected energy; ties: the lower."""
        levels = np.asarray(sorted(float(x) for x in levels_mhz))
        if levels.size == 0:
            raise InvalidValueError("no levels to choose from")
        return float(levels[int(np.argmin(self.energy_j(levels)))])

    def diff_std_j(self, levels_mhz, ref_mhz: float) -> np.ndarray:
        """Std of E(level) - E(ref) for each level (exact for the linear basis)."""
        X = energy_basis(levels_mhz, self.vf) - energy_basis([ref_mhz], self.vf)
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov_array, X), 0.0))

    def within_noise_mhz(self, levels_mhz, z: float = Z_NOISE, rel_tol: float = 0.0) -> tuple:
        """The levels whose expected energy is not above the best level's by more than ``z``
        standard deviations of the difference (or by more than ``rel_tol`` of the best): any of
        them is as good a choice as the data can tell. Always contains the best level."""
        levels = np.asarray(sorted(float(x) for x in levels_mhz))
        best = self.argmin_mhz(levels)
        e = self.energy_j(levels)
        e_best = float(e[levels == best][0])
        sd = self.diff_std_j(levels, best)
        ok = (e - e_best <= z * sd) | (e - e_best <= rel_tol * e_best) | (levels == best)
        return tuple(float(x) for x in levels[ok])

    def regret(self, choice_mhz: float, levels_mhz) -> float:
        """E(choice) / min over levels of E - 1, on this curve (choice snapped to the table)."""
        levels = np.asarray(sorted(float(x) for x in levels_mhz))
        e = self.energy_j(levels)
        return float(e[int(np.argmin(np.abs(levels - float(choice_mhz))))] / e.min() - 1.0)

    def p_best(self, levels_mhz, n: int = 400, seed: int = 0) -> dict:
        """Probability that each level is the true best: the share of coefficient draws (from
        N(coef, cov), negative coefficients clipped at 0) whose argmin it is."""
        levels = np.asarray(sorted(float(x) for x in levels_mhz))
        rng = np.random.default_rng(seed)
        cov = self.cov_array
        if np.all(np.isfinite(cov)) and np.any(cov):
            draws = rng.multivariate_normal(self.coef_array, cov, size=n, method="eigh")
        else:  # no known noise: the point estimate decides
            draws = np.tile(self.coef_array, (n, 1))
        e = np.clip(draws, 0.0, None) @ energy_basis(levels, self.vf).T
        wins = np.bincount(np.argmin(e, axis=1), minlength=len(levels)) / n
        return {float(f): float(p) for f, p in zip(levels, wins)}

    def scaled(self, factor: float) -> EnergyCurve:
        """The same shape with energies (and their std) times ``factor``."""
        return EnergyCurve(tuple(float(c) * factor for c in self.coef),
                           _nested(self.cov_array * factor * factor), self.vf, self.dof,
                           self.n_points, self.source)

    def to_dict(self) -> dict:
        return {"coef": list(self.coef), "cov": [list(r) for r in self.cov], "vf": self.vf.to_dict(),
                "dof": self.dof, "n_points": self.n_points, "source": self.source,
                "basis": list(BASIS_TERMS)}

    @classmethod
    def from_dict(cls, d: Mapping) -> EnergyCurve:
        coef = tuple(float(x) for x in d["coef"])
        cov = np.asarray(d["cov"], float)
        if len(coef) != N_BASIS or cov.shape != (N_BASIS, N_BASIS):
            raise InvalidValueError("an energy curve has 4 coefficients and a 4x4 covariance")
        return cls(coef, _nested(cov), VFCurve.from_dict(d["vf"]) if "vf" in d else DEFAULT_VF,
                   int(d.get("dof", 0)), int(d.get("n_points", 0)), str(d.get("source", "")))


def _nested(a: np.ndarray) -> tuple:
    return tuple(tuple(float(x) for x in row) for row in np.asarray(a, float))


# ---- fitting --------------------------------------------------------------------------------------
def _nonneg_wls(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Weighted least squares with coefficients >= 0: (coef, covariance, residual dof).

    The covariance is the unconstrained one at the solution, s^2 (X'WX)^-1, with s^2 the
    weighted residual variance; a coefficient held at its bound keeps that variance (it could be
    a little above 0 as well)."""
    from scipy.optimize import lsq_linear

    sw = np.sqrt(w)
    A, b = X * sw[:, None], y * sw
    coef = lsq_linear(A, b, bounds=(0.0, np.inf), method="bvls").x
    dof = len(y) - X.shape[1]
    resid = b - A @ coef
    s2 = float(resid @ resid) / dof if dof > 0 else float("nan")
    cov = s2 * np.linalg.pinv(A.T @ A) if dof > 0 else np.full((X.shape[1], X.shape[1]), np.nan)
    return coef, cov, dof


def _clean(freqs_mhz, *cols) -> list[np.ndarray]:
    arrs = [np.asarray(freqs_mhz, float)] + [np.asarray(c, float) for c in cols]
    n = len(arrs[0])
    if any(a.shape != (n,) for a in arrs):
        raise InvalidValueError("clock and measurement lists must have the same length")
    ok = np.all([np.isfinite(a) & (a > 0) for a in arrs], axis=0)
    return [a[ok] for a in arrs]


@dataclass(frozen=True)
class TimePowerFit:
    """t(f) = a/f + b (s per unit of work), P(f) = p0 + c f V(f)^2 (W); f in GHz, V in volts.

    ``time_cov`` / ``power_cov``: 2x2 covariances of (a, b) and (p0, c). ``curve``: the energy
    curve they imply, with the covariance carried through (delta method)."""

    a: float
    b: float
    p0: float
    c: float
    time_cov: tuple
    power_cov: tuple
    vf: VFCurve
    n_points: int
    time_cv: float  # residual CV of the time fit (noise of one point)
    power_cv: float
    curve: EnergyCurve = field(compare=False, default=None)

    def time_s(self, freqs_mhz) -> np.ndarray:
        f = np.asarray(freqs_mhz, float) / 1000.0
        return self.a / f + self.b

    def power_w(self, freqs_mhz) -> np.ndarray:
        f = np.asarray(freqs_mhz, float) / 1000.0
        return self.p0 + self.c * f * self.vf.voltage_v(f * 1000.0) ** 2

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "p0": self.p0, "c": self.c,
                "time_cov": [list(r) for r in self.time_cov], "power_cov": [list(r) for r in self.power_cov],
                "n_points": self.n_points, "time_cv": self.time_cv, "power_cv": self.power_cv,
                "curve": self.curve.to_dict() if self.curve else None}


def fit_time_power(freqs_mhz, time_s, power_w, vf: VFCurve = DEFAULT_VF, source: str = "") -> TimePowerFit:
    """Fit one workload's time and power from its measured points (all repeats: the scatter
    between repeats is what the covariance measures). Needs at least 3 distinct clocks.

    Both fits are on relative residuals (run-to-run noise is multiplicative) with non-negative
    coefficients. Time per unit of work and power may be per step or per run, as long as all
    points agree; the energy curve is then in J per that unit."""
    f, t, p = _clean(freqs_mhz, time_s, power_w)
    if len(np.unique(f)) < 3:
        raise InvalidValueError(f"a curve fit needs at least 3 distinct clocks, got {len(np.unique(f))}")
    f_ghz = f / 1000.0
    v2 = vf.voltage_v(f) ** 2
    Xt = np.column_stack([1.0 / f_ghz, np.ones_like(f_ghz)])
    Xp = np.column_stack([np.ones_like(f_ghz), f_ghz * v2])
    (a, b), ct, _ = _nonneg_wls(Xt, t, 1.0 / t**2)
    (p0, c), cp, _ = _nonneg_wls(Xp, p, 1.0 / p**2)
    ct, cp = np.nan_to_num(ct), np.nan_to_num(cp)
    # E coefficients: [p0 a, p0 b, c a, c b]; Jacobian wrt (a, b, p0, c).
    J = np.array([[p0, 0, a, 0], [0, p0, b, 0], [c, 0, 0, a], [0, c, 0, b]], float)
    S = np.zeros((4, 4))
    S[:2, :2], S[2:, 2:] = ct, cp
    coef = (p0 * a, p0 * b, c * a, c * b)
    dof = len(f) - 2
    curve = EnergyCurve(tuple(float(x) for x in coef), _nested(J @ S @ J.T), vf, dof, len(f), source)

    def rel_cv(y, X, k):
        r = (y - X @ k) / y
        return float(math.sqrt(r @ r / dof)) if dof > 0 else float("nan")

    return TimePowerFit(float(a), float(b), float(p0), float(c), _nested(ct), _nested(cp), vf, len(f),
                        rel_cv(t, Xt, np.array([a, b])), rel_cv(p, Xp, np.array([p0, c])), curve)


def fit_energy(freqs_mhz, energy_j, vf: VFCurve = DEFAULT_VF, sigma_j=None,
               prior: EnergyCurve | None = None, prior_rel_sd: float = 0.5,
               source: str = "") -> EnergyCurve:
    """Fit an energy curve from (clock, energy per unit of work) points only, as an online
    search sees them. Repeated clocks are fine (and tell the noise).

    ``sigma_j``: the std of each point if known (a scalar, or one per point, e.g. the spread of
    its measurement windows); else the noise comes from the residuals.

    Without ``prior``: non-negative least squares on the 4-term basis; needs 3 distinct clocks
    (with fewer points than terms the fit interpolates and the noise must come from sigma_j).

    With ``prior`` (e.g. the roofline model's prediction for this workload, or the board's
    characterisation of a similar one): the prior's *shape*, scaled to the points, is a
    Gaussian prior on the coefficients, each with a relative std ``prior_rel_sd``; the points
    move it (Bayesian linear regression), so 1-2 measured clocks already give a usable curve
    and many points override the prior."""
    f, e = _clean(freqs_mhz, energy_j)
    if sigma_j is not None:
        s = np.broadcast_to(np.asarray(sigma_j, float), np.asarray(freqs_mhz, float).shape)
        s = s[np.isfinite(np.asarray(freqs_mhz, float)) & np.isfinite(np.asarray(energy_j, float))
              & (np.asarray(freqs_mhz, float) > 0) & (np.asarray(energy_j, float) > 0)]
        if np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise InvalidValueError("sigma_j must be finite and > 0")
    else:
        s = None
    if len(f) == 0:
        raise InvalidValueError("no valid (clock, energy) point to fit")
    X = energy_basis(f, vf)
    if prior is None:
        n_distinct = len(np.unique(f))
        if n_distinct < 3:
            raise InvalidValueError(f"an energy fit without a prior needs 3 distinct clocks, got {n_distinct}")
        w = 1.0 / (s**2 if s is not None else e**2)
        coef, cov, dof = _nonneg_wls(X, e, w)
        if s is not None:  # known noise: no residual dof needed, but never below the residuals'
            scale = 1.0
            if dof > 0:
                r = (e - X @ coef) * np.sqrt(w)
                scale = max(1.0, float(r @ r) / dof)
            cov = np.linalg.pinv((X * w[:, None]).T @ X) * scale
        return EnergyCurve(tuple(float(x) for x in coef), _nested(cov), vf, max(dof, 0), len(f),
                           source or "fit_energy")
    # Bayesian regression around the scaled prior shape.
    k_shape = prior.coef_array
    pred = X @ k_shape
    scale = float(np.sum(e * pred) / np.sum(pred * pred)) if np.any(pred > 0) else 1.0
    k0 = k_shape * scale
    if s is None:
        rel = e / (X @ k0) - 1.0
        # noise of a point: the scatter around the scaled prior, never below 1 % (one window)
        rel_sd = max(0.01, float(np.sqrt(np.mean(rel**2)))) if len(e) > 1 else 0.02
        s = rel_sd * e
    W = 1.0 / s**2
    tau = np.maximum(prior_rel_sd * np.abs(k0), 1e-6 * max(float(np.max(np.abs(k0))), 1e-12))
    P0 = np.diag(1.0 / tau**2)
    A = (X * W[:, None]).T @ X + P0
    cov = np.linalg.inv(A)
    coef = cov @ ((X * W[:, None]).T @ e + P0 @ k0)
    coef = np.clip(coef, 0.0, None)
    return EnergyCurve(tuple(float(x) for x in coef), _nested(cov), vf, max(len(f) - N_BASIS, 0), len(f),
                       source or f"fit_energy (prior: {prior.source or 'given'})")


def point_cv(freqs_mhz, values) -> dict:
    """Coefficient of variation (std / mean, sample std) of the repeats at each clock; NaN
    where a clock was measured once."""
    f, v = _clean(freqs_mhz, values)
    out = {}
    for x in np.unique(f):
        r = v[f == x]
        out[float(x)] = float(np.std(r, ddof=1) / np.mean(r)) if len(r) > 1 else float("nan")
    return out

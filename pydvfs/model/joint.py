"""A joint model of step time and power over the whole power mode: GPU x EMC x CPU clocks.

The GPU-only curve model (:mod:`pydvfs.model.curve`) has time ``a/f + b`` and power
``p0 + c f V(f)^2``. Over a power mode the clock-independent part ``b`` splits into the memory
traffic, paced by the EMC rate, and the host's work, paced by the CPU clock. Per step (clocks in
GHz inside: g = GPU, e = EMC, c = CPU)::

    t_gpu(g, e) = a/g + m/e + k                     GPU busy: compute + memory traffic (+ fixed)
    t(g, e, c)  = smax_p(t_gpu, l/c) + s/c          the CPU's dispatch (l/c) overlaps the GPU,
                                                    the host's serial work (s/c) does not

``smax_p(x, y) = (x^p + y^p)^(1/p)`` is a soft maximum: p -> infinity is the plain max (full
overlap), p = 1 the sum (none). Why this form: the dispatch thread and the GPU run concurrently,
so a step is as long as the slower of the two plus what cannot overlap; a plain max has a kink
that a few noisy probes place badly, a sum double-counts the overlap of launch-bound steps (their
time then stops falling with the GPU clock, which measurements show it does, smoothly). ``p`` is
fitted (1..30).

Power (W) per domain, each following its V/f (a :class:`~pydvfs.model.curve.VFCurve` per
domain), linear in its coefficients once the time model gives the GPU's busy share
``u = t_gpu / t``::

    P = p0                                   static: SoC, DRAM and system bases, leakage floor
      + k_busy  * u     * g V_g(g)^2         GPU switching while busy
      + k_wait  * (1-u) * g V_g(g)^2         GPU clock tree while it waits for the host
      + k_emc   * e V_e(e)^2                 memory controller and DRAM interface at rate e
      + k_bytes / t                          DRAM traffic (a step's bytes are fixed: rate ~ 1/t)
      + k_host  * (1-u) * c V_c(c)^2         the CPU working while the GPU waits
      + k_sync  * u     * c V_c(c)^2         the CPU dispatching / spinning in CUDA's sync

Fitted on relative residuals: time first (nonlinear, bounded, from several starts, with a
soft-L1 loss so that a probe stretched by a CPU-interference spike does not drag the fit), then
power by non-negative least squares with the fitted time's busy share.

Public API: :func:`fit_joint` -> :class:`JointFit` (``time_s``, ``power_w``, ``energy_j``,
``to_dict``); :func:`design_probes` (a 3-level orthogonal array over the three domains plus the
top mode: 10 probes); :func:`mape`. Pure numpy/scipy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import InvalidValueError
from .curve import DEFAULT_VF, VFCurve

# A Cortex-A78AE-like CPU rail V/f (MHz, V): a floor at the low clocks, rising to the top. An
# assumption of shape (no published Orin CPU DVFS table); a board's characterisation replaces it.
DEFAULT_CPU_VF = VFCurve.from_pairs(((0.0, 0.60), (1000.0, 0.60), (1500.0, 0.72), (2201.6, 0.95)))
# EMC/SoC voltage vs rate (MHz, V), the same kind of assumption: low rates at a lower voltage.
DEFAULT_EMC_VF = VFCurve.from_pairs(((0.0, 0.60), (665.6, 0.65), (2133.0, 0.75), (3199.0, 0.80)))

TIME_PARAMS = ("a", "m", "k", "l", "s", "p")
POWER_TERMS = ("p0", "k_busy", "k_wait", "k_emc", "k_bytes", "k_host", "k_sync")
P_BOUNDS = (1.0, 30.0)
ROBUST_SCALE = 0.02


def _smax(x: np.ndarray, y: np.ndarray, p: float) -> np.ndarray:
    m = np.maximum(np.maximum(x, y), 1e-300)
    return m * ((x / m) ** p + (y / m) ** p) ** (1.0 / p)


def _ghz(*cols) -> list:
    out = []
    for c in cols:
        a = np.atleast_1d(np.asarray(c, float)) / 1000.0
        if np.any(~np.isfinite(a)) or np.any(a <= 0):
            raise InvalidValueError("clocks must be finite and > 0 MHz")
        out.append(a)
    return out


def time_parts(theta: Sequence[float], gpu_mhz, emc_mhz, cpu_mhz) -> tuple:
    """(t_gpu, t) of the time model with parameters ``theta`` = (a, m, k, l, s, p)."""
    a, m, k, lc, s, p = (float(x) for x in theta)
    g, e, c = _ghz(gpu_mhz, emc_mhz, cpu_mhz)
    t_gpu = a / g + m / e + k
    return t_gpu, _smax(t_gpu, lc / c, p) + s / c


@dataclass(frozen=True)
class VFSet:
    """The V/f of each domain the power model uses."""

    gpu: VFCurve = DEFAULT_VF
    emc: VFCurve = DEFAULT_EMC_VF
    cpu: VFCurve = DEFAULT_CPU_VF


def power_features(gpu_mhz, emc_mhz, cpu_mhz, t_gpu, t, vf: VFSet = VFSet()) -> np.ndarray:
    """The power model's design matrix (one row per mode, columns as :data:`POWER_TERMS`)."""
    g, e, c = _ghz(gpu_mhz, emc_mhz, cpu_mhz)
    t_gpu, t = np.asarray(t_gpu, float), np.asarray(t, float)
    u = np.clip(t_gpu / t, 0.0, 1.0)
    gv = g * vf.gpu.voltage_v(g * 1000.0) ** 2
    ev = e * vf.emc.voltage_v(e * 1000.0) ** 2
    cv = c * vf.cpu.voltage_v(c * 1000.0) ** 2
    return np.column_stack([np.ones_like(g), u * gv, (1 - u) * gv, ev, 1.0 / t, (1 - u) * cv, u * cv])


@dataclass(frozen=True)
class JointFit:
    """A fitted joint model of one workload (time per step or per run, power of one measure)."""

    theta: tuple  # (a, m, k, l, s, p): time in the unit the points had, clocks in GHz
    power_coef: tuple  # as POWER_TERMS
    vf: VFSet
    n_points: int
    time_rms_rel: float  # residual RMS (relative) on the points it was fitted on
    power_rms_rel: float

    def time_s(self, gpu_mhz, emc_mhz, cpu_mhz) -> np.ndarray:
        return time_parts(self.theta, gpu_mhz, emc_mhz, cpu_mhz)[1]

    def power_w(self, gpu_mhz, emc_mhz, cpu_mhz) -> np.ndarray:
        t_gpu, t = time_parts(self.theta, gpu_mhz, emc_mhz, cpu_mhz)
        return power_features(gpu_mhz, emc_mhz, cpu_mhz, t_gpu, t, self.vf) @ np.asarray(self.power_coef)

    def energy_j(self, gpu_mhz, emc_mhz, cpu_mhz) -> np.ndarray:
        return self.power_w(gpu_mhz, emc_mhz, cpu_mhz) * self.time_s(gpu_mhz, emc_mhz, cpu_mhz)

    def best_mode(self, modes: Sequence[tuple]) -> tuple:
        """The (gpu, emc, cpu) of ``modes`` with the least predicted energy."""
        arr = np.asarray(modes, float)
        return tuple(float(x) for x in arr[int(np.argmin(self.energy_j(arr[:, 0], arr[:, 1], arr[:, 2])))])

    def to_dict(self) -> dict:
        return {"time": dict(zip(TIME_PARAMS, self.theta)), "power": dict(zip(POWER_TERMS, self.power_coef)),
                "n_points": self.n_points, "time_rms_rel": self.time_rms_rel,
                "power_rms_rel": self.power_rms_rel}


def fit_time(gpu_mhz, emc_mhz, cpu_mhz, time_s, robust_scale: float | None = None) -> tuple:
    """Fit (a, m, k, l, s, p) on relative residuals; returns (theta, relative RMS).

    ``robust_scale``: residuals beyond about this relative size count less (soft-L1 loss): a
    probe stretched by a CPU-interference spike does not drag the fit. None: plain least squares."""
    from scipy.optimize import least_squares

    t = np.asarray(time_s, float)
    g, e, c = _ghz(gpu_mhz, emc_mhz, cpu_mhz)
    # a linear start: the sum form t = a/g + m/e + k + s/c (no overlap), non-negative
    from scipy.optimize import nnls

    X = np.column_stack([1 / g, 1 / e, np.ones_like(g), 1 / c]) / t[:, None]
    lin, _ = nnls(X, np.ones_like(t))
    scale = float(np.median(t))

    def resid(th):
        return time_parts(th, gpu_mhz, emc_mhz, cpu_mhz)[1] / t - 1.0

    lo = [0.0] * 5 + [P_BOUNDS[0]]
    hi = [np.inf] * 5 + [P_BOUNDS[1]]
    best = None
    for p0 in (2.0, 6.0, 15.0):
        for launch_share in (0.05, 0.5):
            x0 = [max(lin[0], 1e-9 * scale), max(lin[1], 1e-9 * scale), max(lin[2], 1e-9 * scale),
                  launch_share * scale * float(np.median(c)), max(lin[3], 1e-9 * scale), p0]
            kw = {"loss": "soft_l1", "f_scale": robust_scale} if robust_scale else {}
            r = least_squares(resid, x0, bounds=(lo, hi), x_scale="jac", xtol=1e-12, ftol=1e-12,
                              gtol=1e-12, max_nfev=4000, **kw)
            if best is None or r.cost < best.cost:
                best = r
    res = resid(best.x)
    return tuple(float(x) for x in best.x), float(np.sqrt(np.mean(res ** 2)))


def fit_joint(gpu_mhz, emc_mhz, cpu_mhz, time_s, power_w, vf: VFSet = VFSet(),
              robust_scale: float | None = ROBUST_SCALE) -> JointFit:
    """Fit the joint model from probed modes (one row each: clocks in MHz, time, mean power).

    Needs at least 7 distinct modes that vary every domain (the power model has 7 terms).
    ``robust_scale``: see :func:`fit_time` (default 2 %: a probe's run-to-run noise is ~1 %, a
    CPU-interference spike stretches it by 5-60 %; None for plain least squares)."""
    cols = [np.atleast_1d(np.asarray(x, float)) for x in (gpu_mhz, emc_mhz, cpu_mhz, time_s, power_w)]
    n = len(cols[0])
    if any(c.shape != (n,) for c in cols):
        raise InvalidValueError("clock, time and power lists must have the same length")
    if not all(np.all(np.isfinite(c)) and np.all(c > 0) for c in cols):
        raise InvalidValueError("clocks, times and powers must be finite and > 0")
    g, e, c, t, pw = cols
    if len({(a, b, d) for a, b, d in zip(g, e, c)}) < len(POWER_TERMS):
        raise InvalidValueError(f"a joint fit needs at least {len(POWER_TERMS)} distinct modes")
    for name, x in (("GPU", g), ("EMC", e), ("CPU", c)):
        if len(np.unique(x)) < 2:
            raise InvalidValueError(f"a joint fit needs the {name} clock at two values at least")
    theta, t_rms = fit_time(g, e, c, t, robust_scale)
    t_gpu_fit, t_fit = time_parts(theta, g, e, c)
    # the busy share from the model, the traffic term from the measured time
    X = power_features(g, e, c, t_gpu_fit, t_fit, vf)
    X[:, 4] = 1.0 / t
    from scipy.optimize import nnls

    coef, _ = nnls(X / pw[:, None], np.ones_like(pw))
    p_res = X @ coef / pw - 1.0
    return JointFit(theta, tuple(float(x) for x in coef), vf, n, t_rms, float(np.sqrt(np.mean(p_res ** 2))))


def design_probes(gpu_levels: Sequence[float], emc_rates: Sequence[float], cpu_clocks: Sequence[float]) -> list:
    """10 modes to probe: the 3-level orthogonal array L9 over (GPU, EMC, CPU) at each domain's
    lowest, middle and top value, plus the top mode. Every pair of domains meets at every pair
    of levels once, so each domain's effect is seen at every level of the others."""
    def three(xs):
        xs = sorted(float(x) for x in xs)
        if len(xs) < 3:
            return [xs[0], xs[-1], xs[-1]] if xs else []
        return [xs[0], xs[len(xs) // 2], xs[-1]]

    G, E, C = three(gpu_levels), three(emc_rates), three(cpu_clocks)
    if not (G and E and C):
        raise InvalidValueError("every domain needs at least one clock")
    l9 = ((0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 1), (1, 1, 2), (1, 2, 0), (2, 0, 2), (2, 1, 0), (2, 2, 1))
    out = []
    for i, j, k in l9 + ((2, 2, 2),):
        m = (G[i], E[j], C[k])
        if m not in out:
            out.append(m)
    return out


def mape(pred, true) -> float:
    """Mean absolute percentage error (%) of ``pred`` against ``true``."""
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    return float(100.0 * np.mean(np.abs(pred / true - 1.0)))


def sweep_modes(gpu_levels: Sequence[float], emc_rates: Sequence[float], cpu_clocks: Sequence[float],
                extra: int = 16, seed: int = 0) -> list:
    """A designed subset of the GPU x EMC x CPU product for a characterisation sweep (not all of
    it): every GPU level at the top EMC rate and CPU clock (the GPU-only curve), the probes of
    :func:`design_probes`, and a Latin hypercube of ``extra`` modes (each domain's sorted values
    cut into ``extra`` strata, one value per stratum, the strata shuffled per domain), without
    repeats, in that order. A domain given one value stays there."""
    import random

    G, E, C = (sorted({float(x) for x in xs}) for xs in (gpu_levels, emc_rates, cpu_clocks))
    if not (G and E and C):
        raise InvalidValueError("every domain needs at least one clock")
    if not (isinstance(extra, int) and extra >= 0):
        raise InvalidValueError("extra must be an integer >= 0")
    out = [(g, E[-1], C[-1]) for g in G]
    if len(E) > 1 or len(C) > 1:
        out += design_probes(G, E, C)
    rng = random.Random(seed)

    def strata(xs):
        idx = [min(len(xs) - 1, int((i + rng.random()) * len(xs) / extra)) for i in range(extra)]
        rng.shuffle(idx)
        return [xs[i] for i in idx]

    if extra:
        out += list(zip(strata(G), strata(E), strata(C)))
    seen, uniq = set(), []
    for m in out:
        if m not in seen:
            seen.add(m)
            uniq.append(m)
    return uniq

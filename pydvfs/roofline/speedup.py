"""Speedup laws S(N) fitted to measured times, and the hardware efficiency eta_h = S(N) / N.

- TP: a saturating exponential, S(N) = 1 + (s_max - 1) (1 - exp(-(N - 1) / n_half)): every
  added device helps less (collectives per layer, smaller kernels).
- FSDP/DP: a generalised Amdahl law, S(N) = 1 / ((1 - p) + p / N + c (N - 1)^g): a serial part
  plus a synchronisation cost that grows non-linearly with N.
- For comparison, Gunther's Universal Scalability Law, S(N) = N / (1 + s (N - 1) + k N (N - 1)).

All three give S(1) = 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def tp_saturating(n, s_max, n_half):
    import numpy as np

    return 1.0 + (s_max - 1.0) * (1.0 - np.exp(-(np.asarray(n, float) - 1.0) / n_half))


def amdahl_generalised(n, p, c, g):
    n = _arr(n)
    return 1.0 / ((1.0 - p) + p / n + c * (n - 1.0) ** g)


def usl(n, s, k):
    n = _arr(n)
    return n / (1.0 + s * (n - 1.0) + k * n * (n - 1.0))


LAWS = {
    # name: (function, parameter names, initial guess, lower bounds, upper bounds)
    "saturating_exp": (tp_saturating, ("s_max", "n_half"), (2.0, 2.0), (1e-3, 1e-3), (1e3, 1e3)),
    "amdahl_gen": (amdahl_generalised, ("p", "c", "g"), (0.9, 0.01, 1.0), (0.0, 0.0, 0.1), (1.0, 10.0, 4.0)),
    "usl": (usl, ("sigma", "kappa"), (0.05, 0.001), (0.0, 0.0), (10.0, 10.0)),
}
# The law the paper uses for each strategy.
PAPER_LAW = {"tp": "saturating_exp", "fsdp": "amdahl_gen"}


@dataclass
class SpeedupFit:
    strategy: str
    law: str
    params: dict
    rmse: float           # of S(N) against the measured speedups
    n_points: int
    aic: float
    curve: dict = field(default_factory=dict)   # N -> fitted S(N), for N in 1..max
    per_config: dict = field(default_factory=dict)

    def to_dict(self):
        return {"strategy": self.strategy, "law": self.law, "params": self.params,
                "rmse": self.rmse, "n_points": self.n_points, "aic": self.aic,
                "curve": {str(k): v for k, v in self.curve.items()},
                "per_config": self.per_config}

    def predict(self, n):
        fn = LAWS[self.law][0]
        return fn(n, *self.params.values())


def fit_law(n, speedup, law: str, strategy: str = "") -> SpeedupFit:
    """Least-squares fit of one law to (N, measured speedup) points, N = 1 points included."""
    import warnings

    import numpy as np
    from scipy.optimize import OptimizeWarning, curve_fit

    fn, names, p0, lo, hi = LAWS[law]
    n = np.asarray(n, float)
    y = np.asarray(speedup, float)
    with warnings.catch_warnings():   # we report no parameter covariance, only the fit
        warnings.simplefilter("ignore", OptimizeWarning)
        popt, _ = curve_fit(fn, n, y, p0=p0, bounds=(lo, hi), maxfev=20000)
    resid = y - fn(n, *popt)
    sse = float(np.sum(resid**2))
    k = len(popt)
    aic = float(len(y) * np.log(max(sse, 1e-300) / len(y)) + 2 * k)
    curve = {int(m): float(fn(m, *popt)) for m in range(1, int(n.max()) + 1)}
    return SpeedupFit(strategy, law, dict(zip(names, map(float, popt))),
                      float(np.sqrt(sse / len(y))), len(y), aic, curve)


def fit_strategies(df) -> list:
    """For each parallel strategy in ``df``: the paper's law and the USL.

    Pooled: each parallel run contributes (N, S(N)) and (1, 1); this is the strategy's typical
    curve (its RMSE includes the spread between configurations). Per configuration: the same law
    fitted to each configuration measured on at least three device counts; ``per_config`` gives
    how many, their median RMSE and median parameters.
    """
    import numpy as np

    fits = []
    for strategy in ("tp", "fsdp"):
        sub = df[df["strategy"] == strategy]
        if len(sub) == 0:
            continue
        n = np.concatenate([sub["n_devices"].to_numpy(float), np.ones(len(sub))])
        s = np.concatenate([(sub["eta"] * sub["n_devices"]).to_numpy(float), np.ones(len(sub))])
        for law in (PAPER_LAW[strategy], "usl"):
            try:
                pooled = fit_law(n, s, law, strategy)
            except RuntimeError:  # no convergence: say nothing rather than a bad curve
                continue
            pooled.per_config = _per_config(sub, law, strategy)
            fits.append(pooled)
    return fits


def _per_config(sub, law, strategy) -> dict:
    import numpy as np

    keys = ["arch", "seq_len", "batch", "steps", "hardware", "campaign"]
    rmses, params = [], []
    for _, g in sub.groupby(keys):
        if g["n_devices"].nunique() < 2:   # with N = 1 that makes three device counts
            continue
        n = np.concatenate([[1.0], g["n_devices"].to_numpy(float)])
        s = np.concatenate([[1.0], (g["eta"] * g["n_devices"]).to_numpy(float)])
        try:
            f = fit_law(n, s, law, strategy)
        except RuntimeError:
            continue
        rmses.append(f.rmse)
        params.append(list(f.params.values()))
    if not rmses:
        return {"n_configs": 0}
    names = LAWS[law][1]
    med = np.median(np.array(params), axis=0)
    return {"n_configs": len(rmses), "median_rmse": float(np.median(rmses)),
            "median_params": dict(zip(names, map(float, med)))}


def _arr(n):
    import numpy as np

    return np.asarray(n, float)

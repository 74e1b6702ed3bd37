"""The reduced scaling law, fitted by OLS in log space, with grouped cross-validation.

    log E = log kappa + sum_k a_k log X_k + Psi_strategy (+ Psi_campaign)

Three laws, each a list of log-proxy terms; a term or factor that does not vary in the data is
dropped (a single-GPU file has eta = 1 everywhere, so no a_eta):

- ``baseline``  the plain power law: C, M (+ Psi_strategy)                  (paper: R^2 0.777)
- ``eta``       the paper's law: C, M, eta_h (+ Psi_strategy)               (paper: R^2 0.853)
- ``improved``  ours: tile-padded C and M, attention traffic A = B S^2 L, eta_h,
                Psi_strategy and Psi_campaign (a constant per measurement campaign)

Coefficients and 95 % confidence intervals come from statsmodels (standard errors clustered by
architecture when there are at least 10 architectures); cross-validation holds out
whole architectures (GroupKFold over ``arch``), so a law is scored on models it never saw.
"""
from __future__ import annotations

from dataclasses import dataclass

# term name -> data column whose log enters the law
TERM_COLUMNS = {
    "log_C": "compute", "log_M": "memory", "log_eta": "eta",
    "log_C_tiled": "compute_tiled", "log_M_tiled": "memory_tiled", "log_A": "attention",
}


@dataclass(frozen=True)
class LawSpec:
    name: str
    terms: tuple            # keys of TERM_COLUMNS
    factors: tuple          # categorical columns with one constant per level (Psi)
    meaning: str


LAWS = {
    "baseline": LawSpec("baseline", ("log_C", "log_M"), ("strategy",),
                        "plain power law in compute and memory traffic (no efficiency term)"),
    "eta": LawSpec("eta", ("log_C", "log_M", "log_eta"), ("strategy",),
                   "the paper's reduced law: compute, memory traffic, hardware efficiency"),
    "improved": LawSpec("improved", ("log_C_tiled", "log_M_tiled", "log_A", "log_eta"),
                        ("strategy", "campaign"),
                        "tile-padded compute and traffic, attention-map traffic, efficiency, "
                        "one constant per strategy and per measurement campaign"),
}
REFERENCE_LEVEL = {"strategy": "single"}


def design(df, spec: LawSpec, layout=None):
    """Design matrix (a DataFrame with named columns, incl. 'const') and its layout.

    ``layout`` (from a previous call) fixes which terms and dummy levels exist, so a saved fit can
    be applied to new rows. Without it, constant terms and single-level factors are dropped.
    """
    import numpy as np
    import pandas as pd

    if layout is None:
        terms = [t for t in spec.terms if np.ptp(np.log(df[TERM_COLUMNS[t]].to_numpy(float))) > 1e-9]
        levels = {}
        for f in spec.factors:
            lv = sorted(df[f].astype(str).unique())
            if len(lv) > 1:
                ref = REFERENCE_LEVEL.get(f) if REFERENCE_LEVEL.get(f) in lv else df[f].astype(str).mode()[0]
                levels[f] = [ref] + [x for x in lv if x != ref]
        layout = {"terms": terms, "levels": levels}
    X = pd.DataFrame({"const": np.ones(len(df))}, index=df.index)
    for t in layout["terms"]:
        X[t] = np.log(df[TERM_COLUMNS[t]].to_numpy(float))
    for f, lv in layout["levels"].items():
        vals = df[f].astype(str)
        for level in lv[1:]:
            X[f"psi_{f}[{level}]"] = (vals == level).astype(float).to_numpy()
    return X, layout


@dataclass
class LawFit:
    spec: LawSpec
    layout: dict
    coef: dict              # column -> {estimate, se, ci_low, ci_high}
    n: int
    n_groups: int
    r2: float
    adj_r2: float
    rmse_log: float         # RMSE of log E (natural log)
    rmse_j: float           # RMSE of E in J, predicting exp(fitted log E)
    cv_r2: float            # grouped CV, log space
    cv_rmse_log: float
    cv_folds: int

    def to_dict(self):
        return {"law": self.spec.name, "meaning": self.spec.meaning, "layout": self.layout,
                "coefficients": self.coef, "n": self.n, "n_architectures": self.n_groups,
                "r2": self.r2, "adj_r2": self.adj_r2, "rmse_log": self.rmse_log,
                "rmse_j": self.rmse_j, "cv_r2": self.cv_r2, "cv_rmse_log": self.cv_rmse_log,
                "cv_folds": self.cv_folds}


def fit(df, spec: LawSpec, alpha: float = 0.05, cv_folds: int = 10, cov: str = "auto") -> LawFit:
    """OLS fit of ``spec`` to the rows of ``df`` that have energy.

    ``cov``: "cluster" (standard errors clustered by architecture), "nonrobust" (iid errors), or
    "auto" = cluster when there are at least 10 architectures.
    """
    import numpy as np
    import statsmodels.api as sm

    X, layout = design(df, spec)
    y = np.log(df["energy_j"].to_numpy(float))
    if len(y) <= X.shape[1] + 1:
        from ..errors import InvalidValueError
        raise InvalidValueError(f"law {spec.name}: {len(y)} rows for {X.shape[1]} coefficients")
    groups = df["arch"].to_numpy()
    # Rows of one architecture share whatever the proxies miss about it: cluster the errors.
    if cov == "cluster" or (cov == "auto" and len(set(groups)) >= 10):
        codes = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        res = sm.OLS(y, X).fit(cov_type="cluster", use_t=True,
                                  cov_kwds={"groups": [codes[g] for g in groups]})
    else:
        res = sm.OLS(y, X).fit()
    ci = res.conf_int(alpha)
    coef = {c: {"estimate": float(res.params[c]), "se": float(res.bse[c]),
                "ci_low": float(ci.loc[c, 0]), "ci_high": float(ci.loc[c, 1])} for c in X.columns}
    pred_j = np.exp(res.fittedvalues.to_numpy())
    e = df["energy_j"].to_numpy(float)
    cv_r2, cv_rmse, folds = grouped_cv(X.to_numpy(float), y, df["arch"].to_numpy(), cv_folds)
    return LawFit(spec, layout, coef, len(y), int(df["arch"].nunique()), float(res.rsquared),
                  float(res.rsquared_adj), float(np.sqrt(np.mean(res.resid**2))),
                  float(np.sqrt(np.mean((e - pred_j) ** 2))), cv_r2, cv_rmse, folds)


def grouped_cv(X, y, groups, n_folds: int = 10):
    """R^2 and RMSE of out-of-fold predictions of y, whole groups held out at a time.

    Returns NaNs when there are fewer than 3 groups (nothing honest to report).
    """
    import numpy as np
    from sklearn.model_selection import GroupKFold

    k = min(n_folds, len(set(groups)))
    if k < 3:
        return float("nan"), float("nan"), 0
    pred = np.empty_like(y)
    for train, test in GroupKFold(n_splits=k).split(X, y, groups):
        beta, *_ = np.linalg.lstsq(X[train], y[train], rcond=None)
        pred[test] = X[test] @ beta
    sse = float(np.sum((y - pred) ** 2))
    return 1.0 - sse / float(np.sum((y - y.mean()) ** 2)), float(np.sqrt(sse / len(y))), k


def predict(fit_dict: dict, df):
    """Energy (J) of the rows of ``df`` (with proxies) under a saved ``LawFit.to_dict()``."""
    import numpy as np

    spec = LAWS[fit_dict["law"]]
    layout = fit_dict["layout"]
    for f, lv in layout["levels"].items():
        unknown = sorted(set(df[f].astype(str)) - set(lv))
        if unknown:
            from ..errors import InvalidValueError
            raise InvalidValueError(f"{f} {unknown[0]!r} was not in the fitted data (known: {', '.join(lv)})")
    X, _ = design(df, spec, layout)
    beta = np.array([fit_dict["coefficients"][c]["estimate"] for c in X.columns])
    return np.exp(X.to_numpy(float) @ beta)

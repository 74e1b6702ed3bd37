"""Everything ``pydvfs roofline fit`` reports for one data set, as one JSON-able dict.

Rows are split into groups by (family, hardware); each group gets the additive decomposition,
the speedup laws (where it has parallel runs) and the three log-linear laws with grouped CV.
"""
from __future__ import annotations

from ..errors import InvalidValueError
from ..eta import track
from . import decomposition, law, multigpu_sim, scale_check, speedup


def groups(df):
    return [(f"{fam}/{hw}", g) for (fam, hw), g in df.groupby(["family", "hardware"], sort=True)]


def analyse(df, fmt: str = "pydvfs") -> dict:
    measured = df[df["energy_j"].notna()]
    if len(measured) == 0:
        raise InvalidValueError(
            "no energy measurements in the data (runs without an energy sensor, e.g. on CPU, "
            "carry time and speedup only)")
    out = {"format": fmt, "rows": int(len(df)), "rows_with_energy": int(len(measured)),
           "groups": {}}
    for name, g in track(groups(measured), "roofline fit: groups"):
        if len(g) < 8:
            continue
        out["groups"][name] = analyse_group(g)
    if not out["groups"]:
        raise InvalidValueError("every (family, hardware) group has fewer than 8 rows with energy")
    out["scale_checks"] = scale_check.run(out["groups"])
    return out


def analyse_group(g) -> dict:
    fits = {name: law.fit(g, spec) for name, spec in law.LAWS.items()}
    res = {
        "rows": int(len(g)),
        "architectures": int(g["arch"].nunique()),
        "strategies": sorted(g["strategy"].unique()),
        "decomposition": decomposition.fit(g).to_dict(),
        "decomposition_tiled": decomposition.fit(g, "compute_tiled", "memory_tiled").to_dict(),
        "j_per_compute": scale_check.compute_floor_j(g),
        "speedup_laws": [f.to_dict() for f in speedup.fit_strategies(g)],
        "laws": {name: f.to_dict() for name, f in fits.items()},
        "summary": {
            **{f"{name}_adj_r2": f.adj_r2 for name, f in fits.items()},
            **{f"{name}_cv_r2": f.cv_r2 for name, f in fits.items()},
            **{f"{name}_rmse_log": f.rmse_log for name, f in fits.items()},
        },
    }
    if (g["hardware"] == "rtx2080ti-sim").all():
        res["known_exponents"] = known_check(fits["eta"])
    return res


def known_check(fit) -> dict:
    """The simulator's known values against the eta law's estimates and 95 % CIs."""
    out = {}
    for term, key in multigpu_sim.KNOWN_BY_TERM.items():
        c = fit.coef.get(term)
        if c is None:
            continue
        truth = multigpu_sim.KNOWN[key]
        out[key] = {"known": truth, **c, "within_ci": bool(c["ci_low"] <= truth <= c["ci_high"])}
    return out

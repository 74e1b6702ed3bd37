"""U-curve analysis of a clock sweep: per workload, where energy is lowest and what it costs.

Input: a pandas DataFrame with one row per run and at least the columns
``workload``, the knob (``freq_mhz`` by default; NaN on MAXN rows), ``duration_s`` and
``energy_j`` (the caller renames the energy column it wants analysed to ``energy_j``, or passes
``energy_column``). Optional: ``setting`` ("fixed" | "maxn" | a power mode such as "30w";
inferred from the knob when absent: NaN = maxn), ``repeat``, ``exit_status`` (rows != 0 are dropped), ``layers``, ``seq_len``.
Power is always ``energy / duration`` of the analysed energy column, so energy, time and power
refer to the same rails. Every definition used here is written down in docs/analysis.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..errors import InvalidValueError
from ..eta import track

# Defaults of the shape tests (docs/analysis.md, "Flags").
NOISE_SIGMAS = 2.0  # a wiggle counts when it exceeds this many pooled repeat std devs ...
NOISE_FLOOR_REL = 0.01  # ... and at least this fraction of the lowest mean energy
SPIKY_RATIO = 1.0  # spiky when median repeat std > this x median |neighbour difference|

FLAG_TOO_FEW = "too_few_clocks"
FLAG_MIN_LOW = "min_at_low_end"
FLAG_MIN_HIGH = "min_at_high_end"
FLAG_MULTI = "multiple_minima"
FLAG_FLAT = "flat"
FLAG_SPIKY = "spiky"
SHAPE_FLAGS = (FLAG_TOO_FEW, FLAG_MIN_LOW, FLAG_MIN_HIGH, FLAG_MULTI, FLAG_FLAT)


@dataclass(frozen=True)
class Fit:
    """y = slope * x + intercept fitted by least squares on the per-clock means."""

    slope: float
    intercept: float
    r2: Optional[float]  # None when y is constant (R^2 undefined)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class WorkloadResult:
    workload: str
    knob: str  # column swept: "freq_mhz" or e.g. "power_limit_w"
    n_clocks: int
    n_runs: int
    knob_values: list
    sweet_spot: float  # knob value with the lowest mean energy
    sweet_energy_j: float
    sweet_time_s: float
    sweet_power_w: float
    top: float  # highest knob value swept
    top_energy_j: float
    top_time_s: float
    savings_vs_top_pct: float
    time_penalty_vs_top_pct: float
    maxn_energy_j: Optional[float] = None
    maxn_time_s: Optional[float] = None
    maxn_power_w: Optional[float] = None
    savings_vs_maxn_pct: Optional[float] = None
    time_penalty_vs_maxn_pct: Optional[float] = None
    # every non-fixed setting (maxn, 15w, 30w, ...): {energy_j, time_s, power_w, n, savings_pct,
    # time_penalty_pct}, savings and penalty of the sweet spot against that setting
    baselines: dict = field(default_factory=dict)
    time_fit: Optional[dict] = None  # time_s = a / knob + b: {"a", "b", "r2"}
    power_fit: Optional[dict] = None  # power_w = slope * knob + intercept: {"slope", "intercept", "r2"}
    noise_j: float = 0.0  # tolerance used by the shape tests
    pooled_std_j: Optional[float] = None  # pooled repeat std of energy (None: no repeats)
    minima: list = field(default_factory=list)  # knob values of local minima beyond noise
    spikiness: Optional[float] = None  # median repeat std / median |neighbour difference|
    u_shaped: bool = False
    spiky: bool = False
    flags: list = field(default_factory=list)
    layers: Optional[float] = None
    seq_len: Optional[float] = None

    def to_dict(self) -> dict:
        return _clean(asdict(self))


def _clean(obj: Any) -> Any:
    """JSON-safe: numpy scalars -> Python, NaN -> None."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return None if math.isnan(v) else v
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def prepare(df: pd.DataFrame, knob: str = "freq_mhz", energy_column: str = "energy_j") -> pd.DataFrame:
    """Check the columns and return the rows to analyse with canonical columns.

    Output columns: workload, knob, setting, repeat, duration_s, energy_j, power_w (+ layers,
    seq_len when present). Rows with a non-zero exit_status or a missing/non-positive energy or
    duration are dropped.
    """
    need = ["workload", knob, "duration_s", energy_column]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise InvalidValueError(
            f"data lacks column(s) {', '.join(missing)} (have: {', '.join(map(str, df.columns))})"
        )
    d = df.copy()
    if "exit_status" in d.columns:
        status = pd.to_numeric(d["exit_status"], errors="coerce").fillna(0)
        d = d[status == 0]
    d["knob"] = pd.to_numeric(d[knob], errors="coerce")
    d["energy_j"] = pd.to_numeric(d[energy_column], errors="coerce")
    d["duration_s"] = pd.to_numeric(d["duration_s"], errors="coerce")
    if "setting" in d.columns:
        d["setting"] = d["setting"].astype(str).str.lower()
    else:
        d["setting"] = np.where(d["knob"].isna(), "maxn", "fixed")
    if "repeat" not in d.columns:
        d["repeat"] = 0
    d = d[(d["energy_j"] > 0) & (d["duration_s"] > 0)]
    d = d[(d["setting"] != "fixed") | d["knob"].notna()]
    d["power_w"] = d["energy_j"] / d["duration_s"]
    d["workload"] = d["workload"].astype(str)
    keep = ["workload", "knob", "setting", "repeat", "duration_s", "energy_j", "power_w"]
    keep += [c for c in ("layers", "seq_len") if c in d.columns]
    return d[keep].reset_index(drop=True)


def curve_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per knob value: n, mean/std/min/max of energy, mean/std of time and power (fixed runs)."""
    fixed = rows[rows["setting"] == "fixed"]
    g = fixed.groupby("knob", sort=True)
    t = pd.DataFrame(
        {
            "n": g.size(),
            "energy_j_mean": g["energy_j"].mean(),
            "energy_j_std": g["energy_j"].std(ddof=1),
            "energy_j_min": g["energy_j"].min(),
            "energy_j_max": g["energy_j"].max(),
            "time_s_mean": g["duration_s"].mean(),
            "time_s_std": g["duration_s"].std(ddof=1),
            "power_w_mean": g["power_w"].mean(),
            "power_w_std": g["power_w"].std(ddof=1),
        }
    )
    return t.reset_index()


def linear_fit(x: np.ndarray, y: np.ndarray) -> Optional[Fit]:
    """Least-squares line with R^2 = 1 - SS_res / SS_tot; None with fewer than 2 distinct x."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(np.unique(x)) < 2:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = None if ss_tot == 0 else 1.0 - float(np.sum(resid**2)) / ss_tot
    return Fit(float(slope), float(intercept), r2)


def significant_minima(energy: np.ndarray, tol: float) -> list[int]:
    """Indices of local minima whose prominence exceeds ``tol`` (the global minimum always counts).

    A local minimum is a point no higher than its neighbours (an end point has one neighbour).
    Its prominence is how far the curve must rise, on the lower of its two sides, before it can
    reach a point lower than it (or the end of the curve). A side that does not exist (beyond an
    end) does not limit the prominence. Of a run of equal values only the first point counts.
    """
    e = np.asarray(energy, dtype=float)
    n = len(e)
    out = []
    for i in range(n):
        left_ok = i == 0 or e[i] < e[i - 1]
        right_ok = i == n - 1 or e[i] <= e[i + 1]
        if not (left_ok and right_ok):
            continue
        rises = []
        if i > 0:
            j, peak = i - 1, e[i - 1]
            while j >= 0 and e[j] >= e[i]:
                peak = max(peak, e[j])
                j -= 1
            rises.append(peak - e[i])
        if i < n - 1:
            j, peak = i + 1, e[i + 1]
            while j < n and e[j] >= e[i]:
                peak = max(peak, e[j])
                j += 1
            rises.append(peak - e[i])
        prominence = min(rises) if rises else 0.0
        if prominence > tol:
            out.append(i)
    g = int(np.argmin(e))
    if g not in out:
        out.append(g)
    return sorted(out)


def analyse_workload(
    rows: pd.DataFrame,
    knob: str = "freq_mhz",
    noise_sigmas: float = NOISE_SIGMAS,
    noise_floor_rel: float = NOISE_FLOOR_REL,
    spiky_ratio: float = SPIKY_RATIO,
) -> tuple[WorkloadResult, pd.DataFrame]:
    """Analyse one workload's prepared rows (see :func:`prepare`); returns (result, curve table)."""
    name = str(rows["workload"].iloc[0])
    table = curve_table(rows)
    if table.empty:
        raise InvalidValueError(f"workload {name!r} has no fixed-clock runs")
    k = table["knob"].to_numpy(float)
    e = table["energy_j_mean"].to_numpy(float)
    t = table["time_s_mean"].to_numpy(float)
    p = table["power_w_mean"].to_numpy(float)

    i_best = int(np.argmin(e))  # first (lowest) knob value among exact ties
    i_top = len(k) - 1
    res = WorkloadResult(
        workload=name,
        knob=knob,
        n_clocks=len(k),
        n_runs=int(len(rows)),
        knob_values=k.tolist(),
        sweet_spot=float(k[i_best]),
        sweet_energy_j=float(e[i_best]),
        sweet_time_s=float(t[i_best]),
        sweet_power_w=float(p[i_best]),
        top=float(k[i_top]),
        top_energy_j=float(e[i_top]),
        top_time_s=float(t[i_top]),
        savings_vs_top_pct=100.0 * (1.0 - e[i_best] / e[i_top]),
        time_penalty_vs_top_pct=100.0 * (t[i_best] / t[i_top] - 1.0),
    )
    for setting, base in rows[rows["setting"] != "fixed"].groupby("setting", sort=True):
        be, bt = float(base["energy_j"].mean()), float(base["duration_s"].mean())
        res.baselines[str(setting)] = {
            "energy_j": be,
            "time_s": bt,
            "power_w": float(base["power_w"].mean()),
            "n": int(len(base)),
            "savings_pct": 100.0 * (1.0 - e[i_best] / be),
            "time_penalty_pct": 100.0 * (t[i_best] / bt - 1.0),
        }
    if "maxn" in res.baselines:
        b = res.baselines["maxn"]
        res.maxn_energy_j, res.maxn_time_s, res.maxn_power_w = b["energy_j"], b["time_s"], b["power_w"]
        res.savings_vs_maxn_pct = b["savings_pct"]
        res.time_penalty_vs_maxn_pct = b["time_penalty_pct"]

    tf = linear_fit(1.0 / k, t)
    if tf is not None:
        res.time_fit = {"a": tf.slope, "b": tf.intercept, "r2": tf.r2}
    pf = linear_fit(k, p)
    if pf is not None:
        res.power_fit = pf.to_dict()

    # Noise: pooled repeat std (clocks with >= 2 runs), with a relative floor.
    stds = table.loc[table["n"] >= 2, "energy_j_std"].to_numpy(float)
    pooled = float(np.sqrt(np.mean(stds**2))) if len(stds) else None
    res.pooled_std_j = pooled
    res.noise_j = max(noise_sigmas * (pooled or 0.0), noise_floor_rel * float(e.min()))

    flags = []
    if len(k) < 3:
        flags.append(FLAG_TOO_FEW)
    minima = significant_minima(e, res.noise_j)
    res.minima = [float(k[i]) for i in minima]
    if len(k) >= 2:
        if float(e.max() - e.min()) <= res.noise_j:
            flags.append(FLAG_FLAT)
        elif i_best == 0:
            flags.append(FLAG_MIN_LOW)
        elif i_best == i_top:
            flags.append(FLAG_MIN_HIGH)
        if len(minima) > 1:
            flags.append(FLAG_MULTI)
    if len(stds) and len(k) >= 2:
        steps = np.abs(np.diff(e))
        med_step = float(np.median(steps))
        med_std = float(np.median(table["energy_j_std"].fillna(0.0).to_numpy(float)))
        res.spikiness = math.inf if med_step == 0 else med_std / med_step
        if res.spikiness > spiky_ratio:
            flags.append(FLAG_SPIKY)
    res.flags = flags
    res.u_shaped = not any(f in SHAPE_FLAGS for f in flags)
    res.spiky = FLAG_SPIKY in flags
    for col in ("layers", "seq_len"):
        if col in rows.columns:
            v = pd.to_numeric(rows[col], errors="coerce").dropna()
            if len(v):
                setattr(res, col, float(v.iloc[0]))
    return res, table


def analyse(
    df: pd.DataFrame,
    knob: str = "freq_mhz",
    energy_column: str = "energy_j",
    **kw: Any,
) -> tuple[list[WorkloadResult], pd.DataFrame]:
    """Analyse every workload in ``df``; returns (results, all curve tables with a workload column)."""
    rows = prepare(df, knob=knob, energy_column=energy_column)
    if rows.empty:
        raise InvalidValueError("no usable rows (need energy > 0, duration > 0, exit_status 0)")
    results, tables = [], []
    groups = rows.groupby("workload", sort=True)
    for name, grp in track(groups, "analyse: workloads", total=groups.ngroups):
        if not (grp["setting"] == "fixed").any():
            continue  # only MAXN / power-mode runs: nothing to sweep
        res, table = analyse_workload(grp, knob=knob, **kw)
        results.append(res)
        tables.append(table.assign(workload=name))
    if not results:
        raise InvalidValueError("no workload has fixed-clock runs")
    curves = pd.concat(tables, ignore_index=True)
    curves = curves[["workload"] + [c for c in curves.columns if c != "workload"]]
    return results, curves.rename(columns={"knob": knob})

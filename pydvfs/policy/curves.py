"""Per-workload energy curves from a characterisation dataset: the ground truth that training
labels come from and that every policy is scored against."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..characterise.dataset import METHOD_COLUMNS, check_frame, check_row_lengths
from ..device.levels import nearest_level
from ..errors import InvalidValueError
from ..model.curve import EnergyCurve, fit_energy, fit_time_power, point_cv
from ..workload import Workload

# The library's default: paper A's CPU+GPU energy (VDD_CPU_CV + VDD_GPU_SOC), which the built-in
# policy and the replication ledger are trained and scored on. `pydvfs train`/`evaluate` label by
# the module's energy unless told --energy cpu-gpu (pydvfs/measure/energy.py).
ENERGY_COLUMN = "energy_cpu_gpu_j"
REQUIRED = ("workload", "model", "layers", "hidden", "seq_len", "freq_mhz", "setting")
# A label promises a saving over MAXN; under this share (or within the noise) it is MAXN.
MIN_SAVING = 0.01
# Too noisy to label: the fitted curve cannot tell the best level from a level this many table
# steps away (the within-noise set reaches that far).
NOISY_REACH_LEVELS = 2


@dataclass(frozen=True)
class Curve:
    """One workload's energy vs clock: the measured means, and the physical curve fitted to every
    measured run (:mod:`pydvfs.model.curve`), which labels and scores come from. Units: MHz, J
    (energy of one run of the workload)."""

    workload: Workload
    task: str
    params: float
    freqs_mhz: tuple[float, ...]  # the measured clocks: the board's levels
    energy_j: tuple[float, ...]  # measured mean energy per clock
    maxn_energy_j: float
    fit: EnergyCurve | None = None  # None: the raw means are the curve (fewer than 3 clocks)
    maxn_std_j: float = 0.0  # std of the MAXN mean (0 with one run)
    repeats: int = 1  # fewest runs at any clock
    noise_cv: float = float("nan")  # noise of one run (CV) from repeats, or the fit's residuals
    noise_source: str = ""  # "repeats" | "fit residuals" | ""
    time_s: tuple[float, ...] | None = None  # measured mean run time per clock (None: not in the data)

    @property
    def name(self) -> str:
        return self.workload.name or ""

    @cached_property
    def fitted_energy_j(self) -> tuple[float, ...]:
        """Energy of the fitted curve at each measured level (the raw means without a fit)."""
        if self.fit is None:
            return self.energy_j
        return tuple(float(e) for e in self.fit.energy_j(self.freqs_mhz))

    @property
    def raw_best_mhz(self) -> float:
        """The clock of the lowest measured mean (what a label was before the fit)."""
        return self.freqs_mhz[min(range(len(self.energy_j)), key=self.energy_j.__getitem__)]

    # best_mhz, best_energy_j, saving_noise and label_mhz are cached: a curve is immutable, and
    # leave-one-out CV asks each curve for its label once per fold (N^2 fits of the curve's noise).
    @cached_property
    def best_mhz(self) -> float:
        """The energy-optimal level: the argmin of the fitted curve over the measured levels."""
        e = self.fitted_energy_j
        return self.freqs_mhz[min(range(len(e)), key=e.__getitem__)]

    @cached_property
    def best_energy_j(self) -> float:
        return min(self.fitted_energy_j)

    @property
    def oracle_mhz(self) -> float | None:
        """The oracle: the best of what a policy can choose, every level and MAXN (None) alike.
        The best level, or MAXN where it uses no more energy (a policy that keeps MAXN there
        would otherwise score above the oracle)."""
        return None if self.maxn_energy_j <= self.best_energy_j else self.best_mhz

    @cached_property
    def within_mhz(self) -> tuple[float, ...]:
        """The levels within noise of the best (any is as good as the data can tell)."""
        if self.fit is None:
            return (self.best_mhz,)
        return self.fit.within_noise_mhz(self.freqs_mhz)

    @cached_property
    def saving_noise(self) -> float:
        """Std of the saving of the best level over MAXN (fit and MAXN mean), relative."""
        fit_sd = 0.0 if self.fit is None else float(self.fit.energy_std_j([self.best_mhz])[0])
        fit_sd = 0.0 if math.isnan(fit_sd) else fit_sd
        return (fit_sd**2 + self.maxn_std_j**2) ** 0.5 / self.maxn_energy_j

    @cached_property
    def label_mhz(self) -> float | None:
        """The training label: the best level, or None (MAXN) where the saving it promises over
        MAXN is not beyond the noise (2 standard deviations) or under 1 %: pinning such a
        workload is a gamble, MAXN is not."""
        return self.best_mhz if self.clearly_saves(self.best_mhz) else None

    def clearly_saves(self, mhz: float | None) -> bool:
        """Does a clock save against MAXN beyond the noise (2 standard deviations of the best
        level's saving) and by at least 1 %? The rule of the labels, and of the gate of a fixed
        clock (:func:`pydvfs.policy.train.gate_fixed_clock`)."""
        return mhz is not None and self.saving_vs_maxn(mhz) >= max(MIN_SAVING, 2.0 * self.saving_noise)

    def is_hit(self, mhz: float | None) -> bool:
        """Is a choice right, as far as the noise can tell: MAXN where the label is MAXN, else
        any level within noise of the best."""
        if self.label_mhz is None or mhz is None:
            return self.label_mhz is None and mhz is None
        return self.nearest_mhz(mhz) in self.within_mhz

    @property
    def too_noisy(self) -> bool:
        """The fit cannot tell the best level from one NOISY_REACH_LEVELS table steps away."""
        i = self.freqs_mhz.index(self.best_mhz)
        return any(abs(self.freqs_mhz.index(f) - i) >= NOISY_REACH_LEVELS for f in self.within_mhz)

    def repeats_needed(self, z: float = 2.0) -> int:
        """Repeats per clock that would separate every level NOISY_REACH_LEVELS or more steps
        from the best by z standard deviations (the std falls as 1/sqrt(repeats))."""
        if self.fit is None:
            return self.repeats
        e = self.fitted_energy_j
        i_best = self.freqs_mhz.index(self.best_mhz)
        sd = self.fit.diff_std_j(self.freqs_mhz, self.best_mhz)
        factor = 1.0
        for i in range(len(self.freqs_mhz)):
            gap = e[i] - e[i_best]
            if abs(i - i_best) >= NOISY_REACH_LEVELS and gap > 0 and not math.isnan(sd[i]):
                factor = max(factor, (z * sd[i] / gap) ** 2)
        return math.ceil(self.repeats * factor)

    def diff_noise(self, a_mhz: float | None, b_mhz: float | None) -> float:
        """Std of energy(a) - energy(b) on this curve, relative to the best energy (None: MAXN)."""
        def sd_at(f):
            if f is None:
                return self.maxn_std_j
            if self.fit is None:
                return 0.0
            v = float(self.fit.energy_std_j([self.nearest_mhz(f)])[0])
            return 0.0 if math.isnan(v) else v
        if a_mhz is not None and b_mhz is not None and self.fit is not None:
            v = float(self.fit.diff_std_j([self.nearest_mhz(a_mhz)], self.nearest_mhz(b_mhz))[0])
            v = 0.0 if math.isnan(v) else v
        else:
            v = math.hypot(sd_at(a_mhz), sd_at(b_mhz)) if a_mhz != b_mhz else 0.0
        return v / self.best_energy_j

    def nearest_mhz(self, mhz: float) -> float:
        """The measured clock nearest to mhz (ties: the lower)."""
        return nearest_level(self.freqs_mhz, mhz)

    def energy_at(self, mhz: float | None) -> float:
        """Energy on the fitted curve at the level nearest to mhz; MAXN's (measured) for None."""
        if mhz is None:
            return self.maxn_energy_j
        return self.fitted_energy_j[self.freqs_mhz.index(self.nearest_mhz(mhz))]

    def regret(self, mhz: float | None) -> float:
        """energy at the choice / energy at the best level - 1, on the fitted curve."""
        return self.energy_at(mhz) / self.best_energy_j - 1.0

    def saving_vs_maxn(self, mhz: float | None) -> float:
        return 1.0 - self.energy_at(mhz) / self.maxn_energy_j


@dataclass(frozen=True)
class NoiseSummary:
    """Is a sweep quiet enough to label? Per-run CV, and what to do if not."""

    median_cv: float
    noise_source: str
    n_workloads: int
    too_noisy: tuple[str, ...]  # workloads whose best level the fit cannot pin down
    repeats: int  # fewest repeats per clock in the sweep
    repeats_needed: int  # repeats that would pin them down (max over the noisy workloads)

    @property
    def ok(self) -> bool:
        return not self.too_noisy

    def advice(self) -> str:
        cv = "unknown" if math.isnan(self.median_cv) else f"{100 * self.median_cv:.2f} %"
        head = f"sweep noise: median CV of one run {cv} (from {self.noise_source or 'nothing'})"
        if self.ok:
            return head + f"; every workload's best level is resolved ({self.n_workloads} workloads)"
        return (head + f"; {len(self.too_noisy)} of {self.n_workloads} workloads are too noisy to "
                f"label (the fit cannot tell their best level from one {NOISY_REACH_LEVELS} levels "
                f"away): sweep with --repeats {self.repeats_needed} (now {self.repeats}) or longer "
                f"runs (the CV of a run falls about as 1/sqrt(its length))")

    def to_dict(self) -> dict:
        return {"median_cv": None if math.isnan(self.median_cv) else self.median_cv,
                "noise_source": self.noise_source, "n_workloads": self.n_workloads,
                "too_noisy": list(self.too_noisy), "repeats": self.repeats,
                "repeats_needed": self.repeats_needed, "ok": self.ok, "advice": self.advice()}


def noise_summary(curves) -> NoiseSummary:
    cvs = [c.noise_cv for c in curves if not math.isnan(c.noise_cv)]
    sources = sorted({c.noise_source for c in curves if c.noise_source})
    noisy = [c for c in curves if c.too_noisy]
    return NoiseSummary(
        median_cv=statistics.median(cvs) if cvs else float("nan"),
        noise_source=" / ".join(sources), n_workloads=len(curves),
        too_noisy=tuple(c.name for c in noisy),
        repeats=min((c.repeats for c in curves), default=1),
        repeats_needed=max((c.repeats_needed() for c in noisy), default=0))


def dataset_noise(path: str | Path) -> dict | None:
    """The noise verdict of a sweep file (``NoiseSummary.to_dict``), or None while it cannot be
    labelled yet (no workload with a clock sweep and a MAXN run)."""
    try:
        return noise_summary(curves_from_frame(read_dataset(path))).to_dict()
    except InvalidValueError:
        return None


def read_dataset(path: str | Path):
    """The dataset as a pandas DataFrame, with a clear error for a file that is not one."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InvalidValueError(f"no such dataset: {path}")
    check_row_lengths(path)
    try:
        df = pd.read_csv(path)
    except Exception as e:  # pandas raises many types for a file that is not CSV
        raise InvalidValueError(f"{path} is not a readable CSV: {e}") from None
    return check_frame(df, path)


def _numeric(df, column: str):
    import pandas as pd

    return pd.to_numeric(df[column], errors="coerce")


def _util(g, maxn) -> float | None:
    """The workload's utilisation feature: the dataset's `gpu_util_pct` (simulated sweeps fill it),
    else the mean GPU load of its MAXN runs (what a board sweep measures), else unknown."""
    for frame, column in ((g, "gpu_util_pct"), (maxn, "avg_gpu_load_pct")):
        if column in frame.columns:
            u = _numeric(frame, column).mean()
            if u == u:  # not NaN
                return min(max(float(u), 0.0), 100.0)
    return None


def _fit(fixed, name: str) -> tuple[EnergyCurve | None, float, str]:
    """The physical curve of one workload's fixed-clock runs (all repeats), and the noise of one
    run: the CV between repeats where there are repeats, else the fit's residual CV."""
    f = fixed["_freq"].to_numpy(float)
    e = fixed["_energy"].to_numpy(float)
    if len(set(f)) < 3:
        return None, float("nan"), ""
    cvs = [v for v in point_cv(f, e).values() if not math.isnan(v)]
    if "duration_s" in fixed.columns and (_numeric(fixed, "duration_s") > 0).all():
        t = _numeric(fixed, "duration_s").to_numpy(float)
        tp = fit_time_power(f, t, e / t, source=name)
        curve, resid_cv = tp.curve, math.hypot(tp.time_cv, tp.power_cv)
    else:
        curve = fit_energy(f, e, source=name)
        pred = curve.energy_j(f)
        dof = max(len(e) - 4, 1)
        resid_cv = math.sqrt(float((((e - pred) / pred) ** 2).sum()) / dof)
    if cvs:
        return curve, statistics.median(cvs), "repeats"
    return curve, resid_cv, "fit residuals"


def curves_from_frame(df, energy_column: str = ENERGY_COLUMN, tasks=None, exclude_tasks=None) -> list[Curve]:
    """Group a dataset into per-workload curves (mean over repeats). Failed runs, and runs
    without a finite positive energy (or, swept, without a clock), are left out."""
    missing = [c for c in (*REQUIRED, energy_column) if c not in df.columns]
    if missing:
        raise InvalidValueError(f"dataset lacks column(s) {', '.join(missing)} (see docs/dataset.md)")
    df = df.assign(_energy=_numeric(df, energy_column), _freq=_numeric(df, "freq_mhz"))
    df = df[(df["_energy"] > 0) & (df["_energy"] < float("inf"))]
    if "exit_status" in df.columns:
        df = df[_numeric(df, "exit_status").fillna(0) == 0]
    if tasks and "task" in df.columns:
        df = df[df["task"].isin(tasks)]
    if exclude_tasks and "task" in df.columns:
        df = df[~df["task"].isin(exclude_tasks)]
    curves = []
    for name, g in df.groupby("workload", sort=True):
        fixed = g[(g["setting"] == "fixed") & (g["_freq"] > 0) & (g["_freq"] < float("inf"))]
        maxn = g[g["setting"] == "maxn"]
        if fixed.empty or maxn.empty:
            continue  # a workload needs its clock sweep and its MAXN baseline
        per_f = fixed.groupby("_freq")["_energy"].mean().sort_index()
        first = g.iloc[0]
        try:
            method = {k: first.get(k) for k in METHOD_COLUMNS + ("batch_size",)
                      if k in g.columns and first.get(k) == first.get(k) and first.get(k) not in (None, "")}
            wl = Workload.from_any({"model": first["model"], "layers": first["layers"], "hidden": first["hidden"],
                                    "seq_len": first["seq_len"], "util_pct": _util(g, maxn), "name": str(name),
                                    **method})
        except InvalidValueError as e:
            raise InvalidValueError(f"workload {name!r} in the dataset: {e}") from None
        params = _numeric(g, "params").iloc[0] if "params" in g.columns else float("nan")
        fit, noise_cv, noise_source = _fit(fixed, str(name))
        time_s = None
        if "duration_s" in fixed.columns:
            t = fixed.assign(_t=_numeric(fixed, "duration_s")).groupby("_freq")["_t"].mean().sort_index()
            if (t > 0).all():
                time_s = tuple(float(x) for x in t.values)
        maxn_e = maxn["_energy"]
        curves.append(Curve(
            workload=wl,
            task="" if first.get("task") != first.get("task") else str(first.get("task", "")),  # NaN: none
            params=float(params),
            freqs_mhz=tuple(float(f) for f in per_f.index),
            energy_j=tuple(float(e) for e in per_f.values),
            maxn_energy_j=float(maxn_e.mean()),
            fit=fit,
            maxn_std_j=float(maxn_e.std(ddof=1) / math.sqrt(len(maxn_e))) if len(maxn_e) > 1 else 0.0,
            repeats=int(fixed.groupby("_freq").size().min()),
            noise_cv=noise_cv, noise_source=noise_source, time_s=time_s,
        ))
    if not curves:
        raise InvalidValueError("no workload in the dataset has both a clock sweep and a MAXN run "
                                "with measured energy (after the task filters)")
    return curves

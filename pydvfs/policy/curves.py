"""Per-workload energy curves from a characterisation dataset: the ground truth that training
labels come from and that every policy is scored against."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..dataset import check_frame, check_row_lengths
from ..errors import InvalidValueError
from ..levels import nearest_level
from .workload import Workload

ENERGY_COLUMN = "energy_cpu_gpu_j"  # the paper's CPU + GPU energy (VDD_CPU_CV + VDD_GPU_SOC)
REQUIRED = ("workload", "model", "layers", "hidden", "seq_len", "freq_mhz", "setting")


@dataclass(frozen=True)
class Curve:
    """One workload's mean energy at every measured clock, and under MAXN. Units: MHz, J."""

    workload: Workload
    task: str
    params: float
    freqs_mhz: tuple[float, ...]
    energy_j: tuple[float, ...]
    maxn_energy_j: float

    @property
    def name(self) -> str:
        return self.workload.name or ""

    @property
    def best_mhz(self) -> float:
        return self.freqs_mhz[min(range(len(self.energy_j)), key=self.energy_j.__getitem__)]

    @property
    def best_energy_j(self) -> float:
        return min(self.energy_j)

    @property
    def roughness(self) -> float:
        """How spiky the curve is: the median, over inner clocks, of the energy's distance from
        the mean of its two neighbours, relative to it. A smooth U has a small value."""
        e = self.energy_j
        d = sorted(abs(e[i] - (e[i - 1] + e[i + 1]) / 2) / e[i] for i in range(1, len(e) - 1))
        return d[len(d) // 2] if d else 0.0

    @property
    def label_mhz(self) -> float | None:
        """The training label: the best clock, or None (MAXN) where the curve is too spiky for
        its best clock to be trusted: the saving it promises is under twice the curve's
        roughness (or under 1 %). Pinning such a workload is a gamble, MAXN is not."""
        if self.saving_vs_maxn(self.best_mhz) < max(0.01, 2 * self.roughness):
            return None
        return self.best_mhz

    def nearest_mhz(self, mhz: float) -> float:
        """The measured clock nearest to mhz (ties: the lower)."""
        return nearest_level(self.freqs_mhz, mhz)

    def energy_at(self, mhz: float | None) -> float:
        """Mean energy at the measured clock nearest to mhz; MAXN's for None."""
        if mhz is None:
            return self.maxn_energy_j
        return self.energy_j[self.freqs_mhz.index(self.nearest_mhz(mhz))]

    def regret(self, mhz: float | None) -> float:
        """energy at the choice / energy at the best clock - 1."""
        return self.energy_at(mhz) / self.best_energy_j - 1.0

    def saving_vs_maxn(self, mhz: float | None) -> float:
        return 1.0 - self.energy_at(mhz) / self.maxn_energy_j


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
            wl = Workload.from_any({"model": first["model"], "layers": first["layers"], "hidden": first["hidden"],
                                    "seq_len": first["seq_len"], "util_pct": _util(g, maxn), "name": str(name)})
        except InvalidValueError as e:
            raise InvalidValueError(f"workload {name!r} in the dataset: {e}") from None
        params = _numeric(g, "params").iloc[0] if "params" in g.columns else float("nan")
        curves.append(Curve(
            workload=wl,
            task="" if first.get("task") != first.get("task") else str(first.get("task", "")),  # NaN: none
            params=float(params),
            freqs_mhz=tuple(float(f) for f in per_f.index),
            energy_j=tuple(float(e) for e in per_f.values),
            maxn_energy_j=float(maxn["_energy"].mean()),
        ))
    if not curves:
        raise InvalidValueError("no workload in the dataset has both a clock sweep and a MAXN run "
                                "with measured energy (after the task filters)")
    return curves

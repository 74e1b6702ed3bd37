"""Plots of the U-curve analysis (matplotlib, Agg backend, PNG + SVG)."""
from __future__ import annotations

import os
import re
from typing import Optional

import numpy as np

from ..measure.energy import figure_label
from ..progress import check_replaceable
from .ucurve import WorkloadResult

FORMATS = ("png", "svg")
KNOB_LABELS = {"freq_mhz": "GPU clock (MHz)", "power_limit_w": "GPU power limit (W)"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # never a display; safe to call more than once
    import matplotlib.pyplot as plt

    return plt


def slug(name: str) -> str:
    """A file-name-safe form of a workload name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "workload"


def _save(fig, out_dir: str, stem: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in FORMATS:
        path = os.path.join(out_dir, f"{stem}.{ext}")
        check_replaceable(path)  # a plot is replaced, never written through a link
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def plot_workload(result: WorkloadResult, table, out_dir: str, energy_column: str | None = None) -> list[str]:
    """Energy, power and time vs the knob for one workload: mean with repeat std as error bars,
    MAXN as a dashed horizontal line, the sweet spot starred, and the fitted time/power models.
    ``energy_column``: the data's column the energy is, named on the axes (module, CPU+GPU)."""
    plt = _pyplot()
    k = table["knob" if "knob" in table.columns else result.knob].to_numpy(float)
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 8.0), sharex=True)
    panels = [("energy_j", f"{figure_label(energy_column)} (J)"),
              ("power_w", f"avg {figure_label(energy_column, 'power')} (W)"), ("time_s", "time (s)")]
    others = [s for s in result.baselines if s != "maxn"]
    for ax, (col, label) in zip(axes, panels):
        mean = table[f"{col}_mean"].to_numpy(float)
        std = np.nan_to_num(table[f"{col}_std"].to_numpy(float))
        ax.errorbar(k, mean, yerr=std, marker="o", ms=3.5, capsize=2.5, lw=1.2, label="fixed clock")
        if "maxn" in result.baselines:
            ax.axhline(result.baselines["maxn"][col], ls="--", color="tab:red", lw=1.0, label="MAXN")
        for i, setting in enumerate(others):  # nvpmodel power modes, if measured
            ax.axhline(result.baselines[setting][col], ls=":", lw=0.9, color=f"C{(i + 3) % 10}",
                       label=setting)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    kk = np.linspace(k.min(), k.max(), 200)
    if result.power_fit:
        f = result.power_fit
        axes[1].plot(kk, f["slope"] * kk + f["intercept"], color="grey", lw=0.9,
                     label=f"linear fit, R²={_r2(f['r2'])}")
    if result.time_fit and k.min() > 0:
        f = result.time_fit
        axes[2].plot(kk, f["a"] / kk + f["b"], color="grey", lw=0.9,
                     label=f"a/x + b fit, R²={_r2(f['r2'])}")
    axes[0].plot([result.sweet_spot], [result.sweet_energy_j], marker="*", ms=14, color="tab:green",
                 ls="none", label=f"sweet spot {result.sweet_spot:g}")
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    axes[-1].set_xlabel(KNOB_LABELS.get(result.knob, result.knob))
    title = result.workload
    subtitle = f"saves {result.savings_vs_top_pct:.1f}% vs top"
    if result.savings_vs_maxn_pct is not None:
        subtitle += f", {result.savings_vs_maxn_pct:.1f}% vs MAXN"
    if result.flags:
        subtitle += "  [" + ", ".join(result.flags) + "]"
    fig.suptitle(f"{title}\n{subtitle}", fontsize=9)
    paths = _save(fig, out_dir, slug(result.workload))
    plt.close(fig)
    return paths


def _r2(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def plot_optimal_map(results: list[WorkloadResult], out_dir: str) -> list[str]:
    """Sweet-spot clock over (sequence length, layers); [] when no workload has both columns."""
    pts = [r for r in results if r.layers is not None and r.seq_len is not None]
    if not pts:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    x = np.array([r.seq_len for r in pts], float)
    y = np.array([r.layers for r in pts], float)
    c = np.array([r.sweet_spot for r in pts], float)
    sc = ax.scatter(x, y, c=c, s=140, cmap="viridis", edgecolors="k", linewidths=0.5)
    # One label per point, level with its marker: workloads that share a point get their settings
    # joined ("612/714"); a point with a close neighbour on its right is labelled on its left, so
    # labels of neighbouring points never meet (rows of different layer counts are apart).
    at: dict = {}
    for r in pts:
        at.setdefault((r.seq_len, r.layers), []).append(r.sweet_spot)
    span = (x.max() - x.min()) or 1.0
    for (sx, ly), spots in at.items():
        crowded = any(k[1] == ly and 0 < k[0] - sx < 0.15 * span for k in at)
        text = "/".join(f"{v:g}" for v in sorted(set(spots)))
        ax.annotate(text, (sx, ly), xytext=(-9 if crowded else 9, 0), textcoords="offset points",
                    fontsize=6.5, ha="right" if crowded else "left", va="center")
    ax.set_xlim(x.min() - 0.08 * span, x.max() + 0.16 * span)  # room for the labels on the right
    fig.colorbar(sc, ax=ax, label=KNOB_LABELS.get(pts[0].knob, pts[0].knob) + " at min energy")
    ax.set_xlabel("average sequence length (tokens)")
    ax.set_ylabel("layers")
    ax.set_title("Energy-optimal setting per workload")
    ax.grid(alpha=0.3)
    paths = _save(fig, out_dir, "optimal_map")
    plt.close(fig)
    return paths


def plot_mode_heatmap(rows, out_dir: str, energy_col: str = "energy_module_j") -> list[str]:
    """Per workload, energy per run over GPU clock x EMC rate (dataset rows of a ``--knobs``
    sweep: fixed runs with ``emc_mhz``): each cell the mean energy of its least-energy CPU clock
    (written in the cell, in MHz), relative to the least cell; a cell the sweep did not run is
    left blank (a designed sweep covers a subset of the product). Returns the files written."""
    plt = _pyplot()
    by_wl: dict = {}
    for r in rows:
        if r.get("setting") == "fixed" and r.get("emc_mhz") is not None and r.get(energy_col) is not None:
            cell = by_wl.setdefault(r["workload"], {}).setdefault((r["freq_mhz"], r["emc_mhz"]), {})
            cell.setdefault(r.get("cpu_mhz"), []).append(float(r[energy_col]))
    written: list[str] = []
    for wl, cells in by_wl.items():
        gs = sorted({g for g, _ in cells})
        es = sorted({e for _, e in cells})
        best = {k: min(((sum(v) / len(v), c) for c, v in d.items()), key=lambda x: x[0]) for k, d in cells.items()}
        low = min(v[0] for v in best.values())
        z = np.full((len(es), len(gs)), np.nan)
        fig, ax = plt.subplots(figsize=(1.0 + 0.62 * len(gs), 1.2 + 0.55 * len(es)))
        for (g, e), (val, _c) in best.items():
            z[es.index(e), gs.index(g)] = val / low
        im = ax.imshow(np.log2(z), origin="lower", aspect="auto", cmap="viridis_r")
        for (g, e), (val, c) in best.items():
            ax.text(gs.index(g), es.index(e), f"{val / low:.2f}" + ("" if c is None else f"\n{c:g}"),
                    ha="center", va="center", fontsize=6, color="w" if val / low > 1.5 else "k")
        ax.set_xticks(range(len(gs)))
        ax.set_xticklabels([f"{g:g}" for g in gs], rotation=45, fontsize=7)
        ax.set_yticks(range(len(es)))
        ax.set_yticklabels([f"{e:g}" for e in es], fontsize=7)
        ax.set_xlabel("GPU clock (MHz)")
        ax.set_ylabel("EMC rate (MHz)")
        cb = fig.colorbar(im, ax=ax)
        energy = figure_label(energy_col)
        cb.set_label(f"log2 {energy} / least (best CPU clock)")
        ax.set_title(f"{wl}: {energy} per run over GPU x EMC (cell: x least; CPU MHz)", fontsize=8)
        written += _save(fig, out_dir, f"{slug(wl)}_modes")
        plt.close(fig)
    return written

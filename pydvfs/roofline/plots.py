"""Figures of a fit, PNG + SVG each (matplotlib, Agg backend)."""
from __future__ import annotations

import os


def _save(fig, out_dir, name):
    from matplotlib.ticker import NullFormatter

    for ax in fig.axes:   # log axes: label decades only, minor labels overlap
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(out_dir, f"{name}.{ext}")
        fig.savefig(p, dpi=120, bbox_inches="tight")
        paths.append(p)
    return paths


def write_all(df, result: dict, out_dir: str) -> list:
    """All figures for every group in ``result`` (from ``pipeline.analyse``). Returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from . import law, speedup

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    measured = df[df["energy_j"].notna()]
    for gname, gres in result["groups"].items():
        fam, hw = gname.split("/", 1)
        g = measured[(measured["family"] == fam) & (measured["hardware"] == hw)]
        tag = gname.replace("/", "_")
        e = g["energy_j"].to_numpy(float)

        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
        for name, marker in (("baseline", "x"), ("improved", "o")):
            pred = law.predict(gres["laws"][name], g)
            axes[0].loglog(e, pred, marker, ms=3, alpha=0.6,
                           label=f"{name} (adj R² {gres['laws'][name]['adj_r2']:.3f})")
            axes[1].semilogx(e, np.log(e) - np.log(pred), marker, ms=3, alpha=0.6, label=name)
        lim = [e.min() * 0.8, e.max() * 1.25]
        axes[0].plot(lim, lim, "k-", lw=0.8)
        axes[0].set(xlabel="measured energy (J)", ylabel="predicted energy (J)", title=gname)
        axes[1].axhline(0, color="k", lw=0.8)
        axes[1].set(xlabel="measured energy (J)", ylabel="log residual", title="residuals")
        axes[0].legend(fontsize=8)
        paths += _save(fig, out_dir, f"pred_vs_measured_{tag}")
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(5.5, 4.2))
        dec = gres["decomposition"]
        x = g["intensity"].to_numpy(float)
        ax.loglog(x, e / g["memory"].to_numpy(float), ".", ms=3, alpha=0.5, label="measured E / M")
        xs = np.logspace(np.log10(x.min()), np.log10(x.max()), 100)
        ax.loglog(xs, np.maximum(dec["eps_comp_j"] * xs, dec["eps_mem_j"]), "r-",
                  label="max(eps_comp·C/M, eps_mem)")
        ridge = dec["ridge_intensity"]
        if dec["eps_comp_j"] > 0 and dec["eps_mem_j"] > 0:
            ax.axvline(ridge, color="grey", ls=":", lw=1)
            ax.annotate(f"knee C/M = {ridge:.3g}" + ("" if x.min() <= ridge <= x.max() else " (outside the data)"),
                        (ridge, dec["eps_mem_j"]), xytext=(5, 10), textcoords="offset points", fontsize=8)
        else:
            why = ("no knee: eps_mem = 0, every run compute-bound (no memory term in the data)"
                   if dec["eps_mem_j"] <= 0 else "no knee: eps_comp = 0, every run memory-bound")
            ax.text(0.02, 0.02, why, transform=ax.transAxes, fontsize=8, color="grey")
        ax.set(xlabel="arithmetic intensity C/M", ylabel="energy per unit traffic (J)",
               title=f"energy roofline, {gname}")
        ax.legend(fontsize=8)
        paths += _save(fig, out_dir, f"roofline_{tag}")
        plt.close(fig)

        if gres["speedup_laws"]:
            fig, ax = plt.subplots(figsize=(5.5, 4.2))
            for s, color in (("tp", "C0"), ("fsdp", "C1")):
                sub = g[g["strategy"] == s]
                if len(sub) == 0:
                    continue
                ax.plot(sub["n_devices"], sub["eta"] * sub["n_devices"], ".", color=color,
                        alpha=0.3, label=f"{s} measured")
                for f in gres["speedup_laws"]:
                    if f["strategy"] != s:
                        continue
                    ns = np.linspace(1, max(int(k) for k in f["curve"]), 50)
                    fn = speedup.LAWS[f["law"]][0]
                    ax.plot(ns, fn(ns, *f["params"].values()), color=color,
                            ls="-" if f["law"] != "usl" else "--", label=f"{s} {f['law']}")
            ax.plot([1, 8], [1, 8], "k:", lw=0.8, label="ideal")
            ax.set(xlabel="devices N", ylabel="speedup S(N)", title=f"speedup, {gname}")
            ax.legend(fontsize=7)
            paths += _save(fig, out_dir, f"speedup_{tag}")
            plt.close(fig)
    return paths

"""The analyses that put our numbers beside the two papers' (docs/replication.md).

Each function takes data files or frames a pipeline run produced and returns a JSON-able dict;
the demo's ``replication`` stage stores them in ``results.json`` and :mod:`pydvfs.studies.ledger` turns
the results into the ledger. Nothing here has a number of its own except the papers' published
values (``PAPER_A``, ``PAPER_B``).
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..measure.energy import COLUMN

# Paper A (SPEC section 2; seed 000): what it reports.
PAPER_A = {
    "configurations": 27,
    "loocv_accuracy": 0.62,
    "mlg_mean_saving_pct": 13.11,
    "mlg_max_saving_pct": 26.73,
    "big_mean_saving_pct": 22.0,  # "> 22 %" for models above 70M parameters
    "ffg_behind_mlg_pct": 0.9,
    "sweet_spot_mhz": (510.0, 816.0),
    "util_branch_pct": 22.0,
    "util_branch_mhz": 1020.0,
}
# The paper encodes its labels as classes 1-6 for 510..1122 MHz: six classes for the seven OPPs
# in that range. Its rules name 510, 612, 714, 816 and 1020 MHz; with 1122 as the top class that
# makes six, so 918 MHz has no class of its own (an inference: the paper does not list them).
PAPER_CLASSES_MHZ = (510.0, 612.0, 714.0, 816.0, 1020.0, 1122.0)
# Paper A measures CPU+GPU energy (VDD_CPU_CV + VDD_GPU_SOC), not the module's that pydvfs
# minimises by default: its replication labels and scores by that column.
PAPER_ENERGY_COLUMN = COLUMN["cpu-gpu"]

# Paper B (SPEC section 3; seed 004).
PAPER_B = {"adj_r2_eta": 0.853, "adj_r2_baseline": 0.777, "rmse_cut_pct": 19.0, "a_C": 0.20,
           "a_eta": -1.06, "configurations": 410}


def paper_class(mhz: float | None) -> str:
    """A clock in the paper's label encoding: "3" for 714 MHz, "MAXN", or "none" outside 1-6."""
    if mhz is None:
        return "MAXN"
    for i, f in enumerate(PAPER_CLASSES_MHZ, 1):
        if abs(f - mhz) < 1.0:
            return str(i)
    return "none"


def model_of(workload: str) -> str:
    """The model of a workload name ``model/task[+variant]``."""
    return workload.split("/", 1)[0]


# ------------------------------------------------------------------ paper A's protocol
def protocol_dataset(src: str | Path, dst: str | Path, models) -> int:
    """Rows of ``src`` whose workload is one of ``models`` on a plain (not host-bound) run."""
    import pandas as pd

    df = pd.read_csv(src)
    keep = df["workload"].map(lambda w: model_of(w) in set(models) and "+" not in w)
    df[keep].to_csv(dst, index=False)
    return int(df.loc[keep, "workload"].nunique())


def labels_table(metrics: dict) -> list[dict]:
    """Each training workload's label in MHz and in the paper's class encoding, and the tree's
    held-out choice (from ``pydvfs train``'s metrics)."""
    out = []
    for name, c in metrics["loocv_choices"].items():
        out.append({"workload": name, "best_mhz": c["best_mhz"], "label_mhz": c["label_mhz"],
                    "paper_class": paper_class(c["label_mhz"]), "tree_mhz": c["tree_mhz"],
                    "tree_paper_class": paper_class(c["tree_mhz"])})
    return out


def sweet_spot_range(data: str | Path, column: str = PAPER_ENERGY_COLUMN) -> list[float]:
    """[lowest, highest] of the workloads' sweet spots (the clock of least mean measured energy,
    ``column``, as ``pydvfs analyse`` finds it) in a dataset."""
    from ..policy.curves import curves_from_frame, read_dataset

    best = [c.raw_best_mhz for c in curves_from_frame(read_dataset(data), column)]
    return [min(best), max(best)]


def leave_one_model_out(data: str | Path, tree_params: dict) -> dict:
    """The selected tree (hyper-parameters as chosen by LOOCV) scored by leave-one-*model*-out:
    every task of a model is held out together, so no task of the held-out model is in training.
    Uses the training code's own chooser and scorer; only the grouping is new."""
    from ..policy.curves import curves_from_frame, read_dataset
    from ..policy.train import FEATURE_SETS, Classifier, score, tree_maker

    curves = curves_from_frame(read_dataset(data), PAPER_ENERGY_COLUMN)
    params = {k: v for k, v in tree_params.items() if k != "features"}
    feats = FEATURE_SETS[tree_params.get("features", "paper")]
    choices = [None] * len(curves)
    groups = sorted({model_of(c.name) for c in curves})
    for g in groups:
        train = [c for c in curves if model_of(c.name) != g]
        chooser = Classifier("tree", tree_maker(**params), feats).fit(train)
        for i, c in enumerate(curves):
            if model_of(c.name) == g:
                choices[i] = chooser.choose(c)
    s = score("tree, leave-one-model-out", curves, choices, params)
    return {"groups": len(groups), "accuracy": s.accuracy, "mean_regret_pct": s.mean_regret_pct,
            "mean_saving_vs_maxn_pct": s.mean_saving_pct}


def host_bound_branch(data: str | Path, tree_params: dict) -> dict:
    """Does a tree with the selected hyper-parameters, fitted on plain and host-bound workloads
    (``sweep --sim --host-bound``), send utilisation <= 22 % to 1020 MHz as the paper's does?"""
    from ..policy.curves import curves_from_frame, read_dataset
    from ..policy.train import FEATURE_SETS, Classifier, rules_text, tree_maker

    curves = curves_from_frame(read_dataset(data), PAPER_ENERGY_COLUMN)
    params = {k: v for k, v in tree_params.items() if k != "features"}
    feats = FEATURE_SETS[tree_params.get("features", "paper")]
    tree = Classifier("tree", tree_maker(**params), feats).fit(curves)
    low = [c for c in curves if c.workload.util_pct is not None
           and c.workload.util_pct <= PAPER_A["util_branch_pct"]]
    return {
        "workloads": len(curves), "low_util": len(low), "util_threshold_pct": PAPER_A["util_branch_pct"],
        "rules": rules_text(tree.model, feats),
        "low_util_workloads": [{"workload": c.name, "util_pct": c.workload.util_pct, "best_mhz": c.best_mhz,
                                "label_mhz": c.label_mhz, "tree_mhz": tree.choose(c)} for c in low],
        "meets_1020_branch": any(tree.choose(c) == PAPER_A["util_branch_mhz"] for c in low),
        "low_util_best_mhz": sorted({c.best_mhz for c in low})}


# ------------------------------------------------------------------ evaluation splits and time
def _durations(csv: str | Path) -> dict:
    """workload -> {MHz or "maxn": mean duration (s)} from a characterisation dataset."""
    import pandas as pd

    df = pd.read_csv(csv)
    out: dict = {}
    for (wl, setting, f), g in df.groupby(["workload", "setting", df["freq_mhz"].fillna(-1)]):
        key = "maxn" if setting == "maxn" else (float(f) if setting == "fixed" else None)
        if key is not None:
            out.setdefault(wl, {})[key] = float(g["duration_s"].mean())
    return out


def time_penalty_pct(durations: dict, workload: str, mhz: float | None) -> float | None:
    """Run time at ``mhz`` against MAXN's, in %, from mean durations (None if not measured)."""
    d = durations.get(workload, {})
    if "maxn" not in d:
        return None
    t = d["maxn"] if mhz is None else d.get(float(mhz))
    return None if t is None else 100.0 * (t / d["maxn"] - 1.0)


def evaluation_breakdown(evaluation: dict, csv: str | Path) -> dict:
    """Savings of MLG and FFG split by model size (> 70M vs <= 70M), on RTE, and each policy's
    time penalty against MAXN, from ``pydvfs evaluate``'s output and the dataset it ran on."""
    from ..sim.catalogue import SMALL_MODEL_MAX_PARAMS

    dur = _durations(csv)
    rows = evaluation["workloads"]

    def mean(sel, pol, key="saving_pct"):
        v = [r["policies"][pol][key] for r in sel if r["policies"][pol].get(key) is not None]
        return statistics.fmean(v) if v else None

    for r in rows:
        for p in r["policies"].values():
            p["time_penalty_pct"] = time_penalty_pct(dur, r["workload"], p["freq_mhz"])
    big = [r for r in rows if r["params"] > SMALL_MODEL_MAX_PARAMS]
    small = [r for r in rows if r["params"] <= SMALL_MODEL_MAX_PARAMS]
    rte = [r for r in rows if r["task"] == "RTE"]
    out = {"n": len(rows)}
    for name, sel in (("all", rows), ("big", big), ("small", small), ("rte", rte)):
        out[name] = {"n": len(sel)}
        for pol in ("mlg", "ffg", "rules"):
            out[name][pol] = {
                "mean_saving_pct": mean(sel, pol), "mean_time_penalty_pct": mean(sel, pol, "time_penalty_pct"),
                "negative": sum(1 for r in sel if r["policies"][pol]["saving_pct"] < 0)}
    for name in ("all", "big", "small", "rte"):
        b = out[name]
        b["mlg_minus_ffg_pct"] = (None if b["mlg"]["mean_saving_pct"] is None
                                  else b["mlg"]["mean_saving_pct"] - b["ffg"]["mean_saving_pct"])
    top = max(rows, key=lambda r: r["policies"]["mlg"]["saving_pct"])
    out["max_workload"] = top["workload"]
    out["rte_workloads"] = [{
        "workload": r["workload"], "oracle_mhz": r["oracle_mhz"],
        **{f"{pol}_mhz": r["policies"][pol]["freq_mhz"] for pol in ("mlg", "ffg")},
        **{f"{pol}_saving_pct": r["policies"][pol]["saving_pct"] for pol in ("mlg", "ffg")}} for r in rte]
    out["per_workload"] = [{
        "workload": r["workload"], "params": r["params"],
        **{pol: {"mhz": r["policies"][pol]["freq_mhz"], "saving_pct": r["policies"][pol]["saving_pct"],
                 "time_penalty_pct": r["policies"][pol]["time_penalty_pct"]} for pol in ("mlg", "ffg")}}
        for r in rows]
    return out


# ------------------------------------------------------------------ latency vs clock
def _fit_forms(f, t) -> dict:
    """R^2 (of t, linear space) of t = a exp(-b f) and of t = a / f + b, both two-parameter,
    both least squares on t (the exponential by Gauss-Newton from its log-linear start)."""
    import numpy as np
    from scipy.optimize import curve_fit

    f, t = np.asarray(f, float), np.asarray(t, float)
    ss = float(np.sum((t - t.mean()) ** 2)) or 1e-30
    X = np.column_stack([1.0 / f, np.ones_like(f)])
    coef, *_ = np.linalg.lstsq(X, t, rcond=None)
    r2_inv = 1.0 - float(np.sum((t - X @ coef) ** 2)) / ss
    b0, la0 = np.polyfit(f, np.log(t), 1)
    try:
        (a, b), _ = curve_fit(lambda x, a, b: a * np.exp(-b * x), f, t, p0=(math.exp(la0), -b0), maxfev=5000)
        r2_exp = 1.0 - float(np.sum((t - a * np.exp(-b * f)) ** 2)) / ss
    except RuntimeError:
        r2_exp = float("nan")
    return {"r2_exp": r2_exp, "r2_inv": r2_inv}


def latency_fits_sim(csv: str | Path) -> dict:
    """Both forms on every simulated workload's time-vs-clock curve (pinned clocks)."""
    import pandas as pd

    df = pd.read_csv(csv)
    df = df[df["setting"] == "fixed"]
    fits = []
    for wl, g in df.groupby("workload"):
        m = g.groupby("freq_mhz")["duration_s"].mean()
        fits.append({"curve": wl, **_fit_forms(m.index.to_numpy(), m.to_numpy())})
    return _latency_summary(fits)


def latency_fits_perseus(paths) -> dict:
    """Both forms on real A100/A40 curves (Perseus: time of each pipeline stage's forward and
    backward vs SM clock)."""
    import pandas as pd

    fits = []
    for p in paths:
        df = pd.read_csv(p)
        for (stage, ins), g in df.groupby(["stage", "instruction"]):
            m = g.groupby("frequency")["time"].mean()
            fits.append({"curve": f"{Path(p).stem}/{stage}/{ins}",
                         **_fit_forms(m.index.to_numpy(), m.to_numpy())})
    return _latency_summary(fits)


def _latency_summary(fits: list) -> dict:
    ok = [x for x in fits if not math.isnan(x["r2_exp"])]
    return {"curves": len(fits),
            "median_r2_exp": statistics.median(x["r2_exp"] for x in ok) if ok else None,
            "median_r2_inv": statistics.median(x["r2_inv"] for x in fits),
            "inv_better": sum(1 for x in ok if x["r2_inv"] > x["r2_exp"]),
            "exp_better": sum(1 for x in ok if x["r2_exp"] >= x["r2_inv"])}


# ------------------------------------------------------------------ paper B
def fsdp_vs_tp(sim_csv: str | Path) -> dict:
    """Energy of FSDP against TP for the same configuration and device count, by model size
    (terciles of the parameter proxy N), on the simulated multi-GPU sweep; with the share of
    each strategy's time spent in communication, which is what drives the size trend."""
    import numpy as np
    import pandas as pd

    from ..roofline import proxies

    df = pd.read_csv(sim_csv)
    df = df[df["strategy"].isin(["tp", "fsdp"])]
    keys = ["arch", "seq_len", "batch", "n_devices"]
    piv = df.pivot_table(index=keys, columns="strategy", values=["energy_j", "comm_s", "time_s"], aggfunc="mean")
    piv = piv.dropna()
    arch = piv.index.get_level_values("arch")
    layers = np.array([int(a.split("-L")[1].split("-")[0]) for a in arch])
    hidden = np.array([int(a.split("-d")[1].split("-")[0]) for a in arch])
    ff = np.array([int(a.split("-ff")[1]) for a in arch])
    n = proxies.params_n(layers, hidden, ff)
    edges = np.quantile(n, [0, 1 / 3, 2 / 3, 1])
    out = []
    for i in range(3):
        sel = (n >= edges[i]) & ((n <= edges[i + 1]) if i == 2 else (n < edges[i + 1]))
        if not sel.any():
            continue
        e_f = piv[("energy_j", "fsdp")].to_numpy()[sel]
        e_t = piv[("energy_j", "tp")].to_numpy()[sel]
        ratio = e_f / e_t
        out.append({
            "size": ("small", "medium", "large")[i], "params_m": [float(edges[i] / 1e6), float(edges[i + 1] / 1e6)],
            "pairs": int(sel.sum()),
            "median_fsdp_over_tp": float(np.median(ratio)),
            "fsdp_less_pct": 100.0 * float(np.mean(ratio < 1.0)),
            "fsdp_comm_pct": 100.0 * float(np.median(piv[("comm_s", "fsdp")].to_numpy()[sel] / piv[("time_s", "fsdp")].to_numpy()[sel])),
            "tp_comm_pct": 100.0 * float(np.median(piv[("comm_s", "tp")].to_numpy()[sel] / piv[("time_s", "tp")].to_numpy()[sel])),
        })
    med = [b["median_fsdp_over_tp"] for b in out]
    less = all(m < 1.0 for m in med)
    larger_better = all(a >= b for a, b in zip(med, med[1:]))
    return {"bins": out, "fsdp_less_everywhere": less, "fsdp_gains_with_size": larger_better}


def rmse_cut_pct(fit_result: dict) -> dict:
    """Per group of a ``pydvfs roofline fit`` result: % by which adding eta_h cuts the RMSE in J."""
    out = {}
    for group, g in fit_result["groups"].items():
        laws = g["laws"]
        if "eta" in laws and "log_eta" in laws["eta"]["coefficients"]:
            out[group] = 100.0 * (1.0 - laws["eta"]["rmse_j"] / laws["baseline"]["rmse_j"])
    return out


def calibration_check() -> dict:
    """The stored calibration against the real Orin runs (SPEC 5): MAXN error and pinned RMS, %."""
    from ..sim import paper_fit as cal
    from ..sim.model import default_params
    from ..sim.paper_fit_params import CALIBRATION_RUNS

    p = default_params()
    out = {}
    for run in cal.REAL_RUNS:
        fit = cal.fit_run(run, p, CALIBRATION_RUNS[run.name]["host_ms_per_step"])
        out[run.name] = {"maxn_rel_err_pct": 100.0 * fit.maxn_rel_err, "rms_pct": 100.0 * fit.rms,
                         "maxn_clock_mhz": fit.sim_maxn_clock_mhz}
    return out


def other_form_check(seed: int = 0) -> dict:
    """The reduced law fitted to energies made by a generator of another functional form.

    The simulated multi-GPU sweep makes E = P * t1 / eta_h with t1 a power law in C and M: the
    very form the law fits, so its R^2 there says little. Here the same configurations get an
    additive roofline energy instead, E = eps_comp * C + eps_mem * M + E0 per run, plus the
    energy of the communication time on every GPU (N * P_comm * t_comm), with the same 12 %
    log-normal noise. If the law still fits, its fit is not only an echo of the generator."""
    import numpy as np

    from ..roofline import law, multigpu_sim
    from ..roofline.sweep_csv import add_proxies, validate

    df = multigpu_sim.sweep(seed=seed)
    df = add_proxies(validate(df, "simulated"))
    rng = np.random.default_rng(seed + 1)
    c, m = df["compute"].to_numpy(float), df["memory"].to_numpy(float)
    # scale the two terms so each carries half the median run's energy on one GPU
    e_med = float(np.median(df.loc[df["n_devices"] == 1, "energy_j"]))
    eps_c, eps_m = 0.4 * e_med / np.median(c), 0.4 * e_med / np.median(m)
    e0 = 0.2 * e_med
    p_comm_w = multigpu_sim.power_w("tp") - multigpu_sim.P_IDLE_W
    e = eps_c * c + eps_m * m + e0 + df["n_devices"].to_numpy(float) * p_comm_w * df["comm_s"].to_numpy(float)
    df["energy_j"] = e * np.exp(rng.normal(0, 0.12, len(df)))
    fits = {name: law.fit(df, law.LAWS[name]) for name in ("baseline", "eta")}
    coef = fits["eta"].coef
    return {"generator": "E = eps_comp*C + eps_mem*M + E0 + N*P_comm*t_comm, 12 % noise",
            "rows": len(df),
            "adj_r2_eta": fits["eta"].adj_r2, "adj_r2_baseline": fits["baseline"].adj_r2,
            "cv_r2_eta": fits["eta"].cv_r2,
            "a_C": coef.get("log_C", {}).get("estimate"), "a_eta": coef.get("log_eta", {}).get("estimate")}

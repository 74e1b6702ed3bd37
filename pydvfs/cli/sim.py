"""``pydvfs sweep --sim``: the paper's characterisation sweep on the simulated board.

:func:`add_sim_arguments` adds the simulator's own options to the ``sweep`` verb
(pydvfs/cli/sweep.py) and :func:`sim_sweep` runs them.
"""
from __future__ import annotations

import argparse
import time

from ..errors import InvalidValueError
from ..measure.energy import COLUMN, LABEL, MEASURES


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    from ..sim.catalogue import CHARACTERISATION_TASKS, METHODS, PAPER_MODELS, SFT_MODELS
    from ..sim.model import POWER_MODES
    from .common import add_energy_option

    g = parser.add_argument_group("simulated board (--sim)")
    g.add_argument("--models", nargs="+", default=list(PAPER_MODELS), metavar="M",
                   help="catalogue models, a,b or a b (default: all BERT and Pythia; the decoders "
                        f"fine-tuned with an LM head: {', '.join(SFT_MODELS)})")
    g.add_argument("--methods", nargs="+", default=["full-fp32"], metavar="TAG",
                   help=f"how each model-task pair trains, a,b or a b: {', '.join(METHODS)} "
                        "(default: full-fp32; LoRA rank 16 on the query and value projections, QLoRA 4-bit NF4)")
    g.add_argument("--tasks", nargs="+", default=list(CHARACTERISATION_TASKS), metavar="T",
                   help="GLUE tasks, a,b or a b (default: SST-2 QNLI MRPC)")
    g.add_argument("--batch-size", type=int, default=16)
    g.add_argument("--epochs", type=float, default=1.0)
    g.add_argument("--host-bound", action="store_true",
                   help="also run every model-task pair host-bound (batch 4, ~110 ms of exposed host "
                        "time per step: on-the-fly tokenisation, logging, frequent evaluation)")
    add_energy_option(g, "pick each workload's best clock by")
    g.add_argument("--power-modes", nargs="*", default=[], choices=[m for m in POWER_MODES if m != "maxn"],
                   help="also run these nvpmodel modes (15w 30w 50w)")


def _pct(v) -> str:
    if v is None:
        return "no MAXN run"
    return f"saves {v:.1f} % vs MAXN" if v >= 0 else f"costs {-v:.1f} % more than MAXN"


def best_clocks(rows: list[dict]) -> dict:
    """Per workload and energy measure (pydvfs.measure.energy.MEASURES): the fixed clock of least mean
    energy, and its saving against the workload's mean MAXN energy (%; None without a MAXN
    run or where the measure is unknown)."""
    out: dict = {}
    for m in MEASURES:
        col = COLUMN[m]
        fixed: dict = {}
        maxn: dict = {}
        for r in rows:
            if r.get(col) is None:
                continue
            if r["setting"] == "fixed":
                fixed.setdefault(r["workload"], {}).setdefault(r["freq_mhz"], []).append(r[col])
            elif r["setting"] == "maxn":
                maxn.setdefault(r["workload"], []).append(r[col])
        for wl, d in fixed.items():
            mean = {f: sum(v) / len(v) for f, v in d.items()}
            f = min(mean, key=mean.get)
            ref = sum(maxn[wl]) / len(maxn[wl]) if maxn.get(wl) else None
            out.setdefault(wl, {})[m] = {"freq_mhz": f, "energy_j": mean[f],
                                         "saving_vs_maxn_pct": None if not ref else 100.0 * (1.0 - mean[f] / ref)}
    return out


def _at_top(r: dict) -> bool:
    from ..sim.profiles import profile

    prof = profile("agx-orin")
    return r["emc_mhz"] in (None, prof.emc_max_mhz) and r["cpu_mhz"] in (None, prof.cpu_max_mhz)


def best_modes(rows: list[dict], measure: str) -> dict:
    """Per workload: the swept mode of least mean energy (by ``measure``) and its saving
    against the workload's MAXN runs."""
    col = COLUMN[measure]
    cells: dict = {}
    maxn: dict = {}
    for r in rows:
        if r.get(col) is None:
            continue
        if r["setting"] == "fixed":
            cells.setdefault(r["workload"], {}).setdefault((r["freq_mhz"], r["emc_mhz"], r["cpu_mhz"]), []).append(r[col])
        elif r["setting"] == "maxn":
            maxn.setdefault(r["workload"], []).append(r[col])
    out = {}
    for wl, d in cells.items():
        mean = {m: sum(v) / len(v) for m, v in d.items()}
        m = min(mean, key=mean.get)
        ref = sum(maxn[wl]) / len(maxn[wl]) if maxn.get(wl) else None
        out[wl] = {"mode": "/".join("" if x is None else f"{x:g}" for x in m), "gpu_mhz": m[0], "emc_mhz": m[1],
                   "cpu_mhz": m[2], "energy_j": mean[m],
                   "saving_vs_maxn_pct": None if not ref else 100.0 * (1.0 - mean[m] / ref)}
    return out


def sim_sweep(args: argparse.Namespace) -> int:
    from ..characterise.dataset import DatasetWriter, iter_rows
    from ..characterise.sweep import run_key
    from ..governor.joint_search import parse_knobs
    from ..sim.sweep import plot_curves, sweep_rows
    from .common import emit, name_list

    if not args.out and not args.plot:
        raise InvalidValueError("give --out CSV and/or --plot DIR")
    if args.repeats < 1:
        raise InvalidValueError(f"--repeats must be >= 1, got {args.repeats}")
    t0 = time.monotonic()
    knobs = parse_knobs(args.knobs)
    rows = list(sweep_rows(models=name_list(args.models, "--models"), tasks=name_list(args.tasks, "--tasks"), repeats=args.repeats,
                           seed=args.seed, power_modes=args.power_modes,
                           batch_size=args.batch_size, epochs=args.epochs,
                           host_bound=args.host_bound, knobs=knobs,
                           methods=name_list(args.methods, "--methods")))
    modes_swept = knobs != ("gpu",)
    written = skipped = 0
    if args.out:
        # like the board sweep: a rerun appends only the runs the dataset does not hold yet
        with DatasetWriter(args.out) as wr:
            done = {run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"], r["emc_mhz"], r["cpu_mhz"])
                    for r in iter_rows(args.out)}
            for r in rows:
                if run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"], r["emc_mhz"], r["cpu_mhz"]) in done:
                    skipped += 1
                else:
                    wr.write(r)
                    written += 1
    # the U-curves: the GPU clock at the stock EMC and CPU (a --knobs sweep pins them at the top)
    stock = [r for r in rows if not modes_swept or r["setting"] != "fixed" or _at_top(r)]
    plots = plot_curves(stock, args.plot) if args.plot else []
    if args.plot and modes_swept:
        from ..characterise.plots import plot_mode_heatmap
        plots += plot_mode_heatmap(rows, args.plot, COLUMN[args.energy])
    best = best_clocks(stock)
    measure = args.energy
    summary = {
        "knobs": list(knobs), "modes": len({(r["freq_mhz"], r["emc_mhz"], r["cpu_mhz"]) for r in rows
                                            if r["setting"] == "fixed"}),
        "best_mode": best_modes(rows, args.energy) if modes_swept else None,
        "rows": len(rows), "written": written, "skipped": skipped, "out": args.out, "plots": [str(p) for p in plots],
        "seconds": round(time.monotonic() - t0, 2), "energy_measure": measure,
        "best_mhz": {wl: b[measure]["freq_mhz"] for wl, b in best.items()},
        "best": best,
    }

    def text():
        lines = [f"simulated sweep: {summary['rows']} runs in {summary['seconds']} s"
                 + (f" ({summary['modes']} modes of GPU x {' x '.join(k.upper() for k in knobs[1:])})"
                    if modes_swept else "")]
        if args.out:
            lines.append(f"dataset: {args.out} ({written} rows written, {skipped} already there)")
        if plots:
            lines.append(f"plots: {len(plots)} files in {args.plot}")
        other = [m for m in MEASURES if m != measure][0]
        lines.append(f"best clock per workload by {LABEL[measure]} energy (by {LABEL[other]} beside it); "
                     f"saving against MAXN")
        for wl, b in best.items():
            a, o = b[measure], b[other]
            lines.append(f"  {wl:24s} best {a['freq_mhz']:.0f} MHz ({_pct(a['saving_vs_maxn_pct'])}); "
                         f"{LABEL[other]}: {o['freq_mhz']:.0f} MHz ({_pct(o['saving_vs_maxn_pct'])})")
        if modes_swept:
            lines.append(f"best mode per workload by {LABEL[args.energy]} energy (GPU/EMC/CPU MHz; empty: stock)")
            lines += [f"  {wl:24s} {b['mode']} ({_pct(b['saving_vs_maxn_pct'])})" for wl, b in summary["best_mode"].items()]
        return "\n".join(lines)

    emit(args, summary, text)
    return 0

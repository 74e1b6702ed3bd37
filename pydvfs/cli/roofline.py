"""``pydvfs roofline fit|predict|simulate|collect``: the energy scaling law of paper B."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from ..errors import InvalidValueError
from ..package_data import package_file
from ..progress import check_replaceable, replace_atomically
from .common import int_range, seed

# Bounds of the numbers these verbs take (stated in --help): beyond them a run takes hours or a
# size is no transformer, and is refused rather than started.
MIN_SIM_RUNS, MAX_SIM_RUNS = 20, 2000
MAX_SIZE = 10**7
MAX_ENERGY_NOISE = 2.0  # a log-normal sigma: one sigma is a factor e^2 = 7.4 (measured runs: 0.01-0.2)

BUNDLED_A100 = package_file("roofline", "data", "mlenergy_a100.csv")


def register(subparsers, common) -> None:
    p = subparsers.add_parser(
        "roofline", parents=[common], help="roofline energy scaling law (fit, predict, simulate, collect)",
        description="Fit and use the roofline-inspired energy scaling law "
                    "log E = log kappa + aC log C + aM log M + a_eta log eta_h + Psi.")
    sub = p.add_subparsers(dest="roofline_verb", metavar="ACTION", parser_class=type(p))
    sub.required = True

    f = sub.add_parser("fit", parents=[common], help="fit the laws to a CSV and report them",
                       description="Fit baseline, eta and improved laws with CIs, adj R^2, RMSE "
                                   "and grouped CV (whole architectures held out).")
    f.add_argument("--data", required=True, metavar="CSV",
                   help=f"a pydvfs sweep or the ML-energy A100 file (bundled: {BUNDLED_A100})")
    f.add_argument("--plot", metavar="DIR", help="write figures (PNG + SVG) into DIR")
    f.add_argument("--save", metavar="JSON", help="write the full fit to JSON (for predict --fit)")
    f.set_defaults(func=cmd_fit)

    pr = sub.add_parser("predict", parents=[common], help="energy of a new configuration",
                        description="Predict the energy (J) of one configuration and strategy, "
                                    "from a saved fit (--fit) or by fitting --data first.")
    src = pr.add_mutually_exclusive_group(required=True)
    src.add_argument("--fit", metavar="JSON", help="a fit saved by 'roofline fit --save'")
    src.add_argument("--data", metavar="CSV", help="fit this data first")
    pr.add_argument("--group", help="family/hardware group of the fit (default: the first)")
    pr.add_argument("--law", default="improved", choices=("baseline", "eta", "improved"))
    for name in ("layers", "hidden", "seq-len", "batch"):
        pr.add_argument(f"--{name}", type=int_range(1, MAX_SIZE), required=True, help=f"1..{MAX_SIZE}")
    pr.add_argument("--heads", type=int_range(1, MAX_SIZE), help=f"1..{MAX_SIZE}; default hidden/64")
    pr.add_argument("--ff", type=int_range(1, MAX_SIZE), help=f"1..{MAX_SIZE}; default 4*hidden")
    pr.add_argument("--steps", type=int_range(1, MAX_SIZE), default=1, help=f"1..{MAX_SIZE}")
    pr.add_argument("--strategy", default="single", choices=("single", "tp", "fsdp"))
    pr.add_argument("--devices", type=int, default=1)
    pr.add_argument("--speedup", type=float,
                    help="measured S(N); default: the fitted speedup law of the strategy")
    pr.add_argument("--campaign", default=None, help="measurement campaign (default: reference)")
    pr.set_defaults(func=cmd_predict)

    s = sub.add_parser("simulate", parents=[common], help="write the simulated multi-GPU sweep",
                       description="Simulated RTX 2080 Ti-like 8-GPU node: single, TP and FSDP "
                                   "runs on 1-8 GPUs, with known exponents.")
    s.add_argument("--out", required=True, metavar="CSV")
    s.add_argument("--seed", type=seed, default=0)
    s.add_argument("--n", type=int_range(MIN_SIM_RUNS, MAX_SIM_RUNS), default=410,
                   help=f"number of runs, {MIN_SIM_RUNS}..{MAX_SIM_RUNS} (default 410)")
    s.add_argument("--energy-noise", type=float, default=0.12, help=f"log-normal sigma of the energies, 0..{MAX_ENERGY_NOISE:g} (default 0.12)")
    s.set_defaults(func=cmd_simulate)

    c = sub.add_parser("collect", parents=[common], help="measure real runs with torchrun",
                       description="Launch real fine-tuning steps of tiny BERTs under torchrun "
                                   "(FSDP2 / tensor parallel; gloo on CPU, NCCL + NVML on GPUs).")
    c.add_argument("--out", required=True, metavar="CSV")
    c.add_argument("--configs", default=None,
                   help="'L=2,d=64,h=4,ff=128,S=32,B=8;...' (default: two tiny BERTs)")
    c.add_argument("--strategies", default="tp,fsdp")
    c.add_argument("--devices", default="2", help="comma list of process counts")
    c.add_argument("--steps", type=int, default=3)
    c.add_argument("--warmup", type=int, default=3)
    c.add_argument("--slurm", action="store_true",
                   help="inside a Slurm allocation (salloc/sbatch -N K): every run a job step, its processes "
                        "spread over the nodes through torchrun's rendezvous (docs/slurm.md)")
    c.set_defaults(func=cmd_collect)


def _load(path):
    from ..roofline import sweep_csv as dataset

    return dataset.load(path)


def cmd_fit(args) -> int:
    from ..roofline import pipeline
    from .common import emit

    df, fmt = _load(args.data)
    result = pipeline.analyse(df, fmt)
    if args.plot:
        from ..roofline import plots
        result["plots"] = plots.write_all(df, result, args.plot)
    if args.save:
        _write_json(args.save, result)
    emit(args, result, lambda: format_fit(result))
    return 0


def cmd_predict(args) -> int:
    import pandas as pd

    from ..roofline import law, speedup
    from ..roofline import sweep_csv as dataset
    from .common import emit

    if args.fit:
        try:
            with open(args.fit) as fh:
                result = json.load(fh)
            result["groups"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InvalidValueError(f"{args.fit}: not a saved roofline fit ({e.__class__.__name__})") from None
    else:
        from ..roofline import pipeline
        df, fmt = _load(args.data)
        result = pipeline.analyse(df, fmt)
    groups = result["groups"]
    gname = args.group or next(iter(groups))
    if gname not in groups:
        raise InvalidValueError(f"no group {gname!r} in the fit (have: {', '.join(groups)})")
    g = groups[gname]
    if args.strategy == "single" and args.devices != 1:
        raise InvalidValueError("strategy single runs on one device")
    if args.devices < 1:
        raise InvalidValueError("--devices must be at least 1")
    sp, sp_source = 1.0, "single device"
    if args.devices > 1:
        if args.speedup is not None:
            sp, sp_source = args.speedup, "given"
        else:
            fits = [f for f in g["speedup_laws"] if f["strategy"] == args.strategy
                    and f["law"] == speedup.PAPER_LAW[args.strategy]]
            if not fits:
                raise InvalidValueError(
                    f"the fit has no {args.strategy} speedup law; pass --speedup")
            f = fits[0]
            sp = float(speedup.LAWS[f["law"]][0](args.devices, *f["params"].values()))
            sp_source = f"fitted {f['law']}"
    if not (sp > 0 and math.isfinite(sp)):
        raise InvalidValueError(f"speedup must be positive, got {sp}")
    fam, hw = gname.split("/", 1)
    lawfit = g["laws"][args.law]
    campaigns = lawfit["layout"]["levels"].get("campaign", ["main"])
    campaign = args.campaign or campaigns[0]
    if campaign not in campaigns:
        raise InvalidValueError(f"--campaign: the fit knows no campaign {campaign!r} "
                                f"(known: {', '.join(map(str, campaigns))})")
    row = pd.DataFrame([{
        "family": fam, "strategy": args.strategy, "n_devices": args.devices,
        "layers": args.layers, "hidden": args.hidden,
        "heads": args.heads or max(1, args.hidden // 64), "ff": args.ff or 4 * args.hidden,
        "seq_len": args.seq_len, "batch": args.batch, "steps": args.steps, "time_s": 1.0,
        "speedup": sp, "energy_j": float("nan"), "hardware": hw, "campaign": campaign}])
    row = dataset.add_proxies(dataset.validate(row, "configuration"))
    energy = float(law.predict(lawfit, row)[0])
    data = {"group": gname, "law": args.law, "energy_j": energy, "eta": float(row["eta"][0]),
            "speedup": sp, "speedup_source": sp_source, "compute": float(row["compute"][0]),
            "memory": float(row["memory"][0]), "attention": float(row["attention"][0])}
    emit(args, data, f"{energy:.4g} J  ({args.law} law of {gname}; {args.strategy} x{args.devices}, "
                     f"eta_h {data['eta']:.3f} from {sp_source})")
    return 0


def cmd_simulate(args) -> int:
    from ..roofline import multigpu_sim
    from .common import emit

    if not 0 <= args.energy_noise <= MAX_ENERGY_NOISE:
        raise InvalidValueError(f"--energy-noise must be a log-normal sigma from 0 to {MAX_ENERGY_NOISE:g}: "
                                f"{args.energy_noise:g}")
    df = multigpu_sim.sweep(seed=args.seed, n_configs=args.n, energy_noise=args.energy_noise)
    _write_csv(df, args.out)
    emit(args, {"out": args.out, "rows": len(df), "known": multigpu_sim.KNOWN},
         f"wrote {len(df)} simulated runs to {args.out}; known: " +
         ", ".join(f"{k}={v:.3f}" for k, v in multigpu_sim.KNOWN.items()))
    return 0


def cmd_collect(args) -> int:
    from ..roofline import collect
    from .common import emit

    configs = collect.parse_configs(args.configs or collect.DEFAULT_CONFIGS)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in strategies if s not in ("tp", "fsdp")]
    if bad or not strategies:
        raise InvalidValueError(f"--strategies: use tp and/or fsdp, got {args.strategies!r}")
    try:
        devices = [int(x) for x in args.devices.split(",")]
    except ValueError:
        raise InvalidValueError(f"--devices: comma list of integers, got {args.devices!r}") from None
    if any(n < 2 for n in devices):
        raise InvalidValueError("--devices: parallel runs need at least 2 processes")
    if args.steps < 1 or args.warmup < 1:
        raise InvalidValueError("--steps and --warmup must be at least 1")
    log = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    slurm = None
    if args.slurm:
        from ..integrations.slurm import allocation

        shared = os.path.dirname(os.path.abspath(args.out))  # the runs' results come back through it
        try:
            os.makedirs(shared, exist_ok=True)
        except OSError as e:
            raise InvalidValueError(f"cannot make {shared}: {e.strerror}") from None
        slurm = allocation(shared)
    df = collect.collect(configs, strategies, devices, args.steps, args.warmup, log=log, slurm=slurm)
    _write_csv(df, args.out)
    no_energy = bool(df["energy_j"].isna().all())
    emit(args, {"out": args.out, "rows": len(df), "energy_measured": not no_energy,
                "runs": df.to_dict(orient="records")},
         f"wrote {len(df)} runs to {args.out}" +
         ("; no energy sensor here (energy_j left empty)" if no_energy else ""))
    return 0


def _write_csv(df, path):
    """Write ``df`` to ``path``, atomically and never through a link: a new file, or one this
    command wrote before (a regular file whose first line is the same header); anything else
    there is not ours to replace."""
    text = df.to_csv(index=False)
    try:
        if os.path.lexists(path):
            check_replaceable(path)
            with open(path, "rb") as fh:
                ours = fh.readline(len(text)).decode("utf-8", "replace") == text.partition("\n")[0] + "\n"
            if not ours:
                raise InvalidValueError(f"--out {path}: the file exists and is not a CSV this command wrote "
                                        "(its first line is not the same header); give a new file name")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        replace_atomically(path, text)
    except OSError as e:
        raise InvalidValueError(f"--out {path}: cannot write it: {e.strerror or e}") from None


def _write_json(path, data):
    from .common import _json_default

    try:
        with open(path, "w") as fh:
            json.dump(data, fh, indent=1, default=_json_default)
    except OSError as e:
        raise InvalidValueError(f"cannot write {path}: {e.strerror}") from None


def format_fit(result: dict) -> str:
    lines = [f"format {result['format']}, {result['rows']} rows ({result['rows_with_energy']} with energy)"]
    for gname, g in result["groups"].items():
        lines.append("")
        lines.append(f"== {gname}: {g['rows']} runs, {g['architectures']} architectures, "
                     f"strategies {', '.join(g['strategies'])}")
        lines.append(f"{'law':10s} {'adj R2':>7s} {'RMSE(log)':>9s} {'CV R2':>7s}")
        for name, lf in g["laws"].items():
            lines.append(f"{name:10s} {lf['adj_r2']:7.3f} {lf['rmse_log']:9.3f} {lf['cv_r2']:7.3f}")
        for name, lf in g["laws"].items():
            lines.append(f"  {name}: " + "; ".join(
                f"{t} {c['estimate']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]"
                for t, c in lf["coefficients"].items()))
        d = g["decomposition"]
        lines.append(f"  decomposition: eps_comp {d['eps_comp_j']:.3g} J, eps_mem {d['eps_mem_j']:.3g} J, "
                     f"E0 {d['e0_j']:.3g} J (R2 {d['r2']:.3f}); {d['n_compute_bound']} compute-bound, "
                     f"{d['n_memory_bound']} memory-bound")
        for f in g["speedup_laws"]:
            lines.append(f"  speedup {f['strategy']} {f['law']}: " +
                         ", ".join(f"{k}={v:.3g}" for k, v in f["params"].items()) +
                         f" (RMSE {f['rmse']:.3f})")
        for k, v in g.get("known_exponents", {}).items():
            lines.append(f"  known {k} = {v['known']:.3f}: fitted {v['estimate']:.3f} "
                         f"[{v['ci_low']:.3f}, {v['ci_high']:.3f}] {'ok' if v['within_ci'] else 'OUTSIDE CI'}")
    for c in result.get("scale_checks", []):
        lines.append(f"{c['model']} ({c['label']}, {c['fit_group']}): {c['estimate_mwh']:.3g} MWh "
                     f"vs published {c['published_mwh']:.4g} MWh (x{c['ratio']:.2g}; NNLS split: "
                     f"{c['estimate_decomposition_mwh']:.3g} MWh)")
    for p in result.get("plots", []):
        lines.append(f"plot: {p}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    argparse.ArgumentParser().error("use: pydvfs roofline ...")

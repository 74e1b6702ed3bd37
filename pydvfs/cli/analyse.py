"""``pydvfs analyse``: U-curve analysis of sweep data (ours, Perseus or Zeus) with plots.

Writes into --out: summary.json, summary.csv (one row per workload), curves.csv (per workload
and knob value: mean/std of energy, time, power) and plots/ (PNG + SVG per workload, plus
optimal_map when layers and seq_len are known). Definitions: docs/analysis.md.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os

from ..errors import InvalidValueError
from ..measure.energy import COLUMN, LABEL, column_label
from ..progress import check_replaceable, replace_atomically
from .common import add_energy_option, examples


def register(subparsers, common) -> None:
    p = subparsers.add_parser(
        "analyse",
        aliases=["analyze"],
        parents=[common],
        help="U-curve analysis of sweep data: sweet spot, savings, fits, shape flags, plots",
        description=(
            "Analyse energy/time/power against the GPU clock (or power limit) per workload: sweet "
            "spot (lowest mean energy), savings vs MAXN and vs the top setting, time penalty, fits "
            "of time ~ a/f + b and power ~ f, and flags for curves that are not U-shaped or are "
            "spiky. Reads our sweep CSV, Perseus stage profiles or Zeus power traces."
        ),
        epilog=examples("pydvfs analyse --data sweep.csv --out analysis",
                        "pydvfs analyse sweep.csv --out analysis --workloads 'bert-base/*'"),
    )
    p.add_argument("--data", nargs="+", action="extend", default=[], metavar="FILE",
                   help="data file(s), all of one format")
    p.add_argument("files", nargs="*", metavar="FILE", help="the same, as a shorthand: `pydvfs analyse FILE`")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for plots and summaries")
    p.add_argument("--format", default="auto", choices=["auto", "native", "perseus", "zeus"],
                   help="input layout (auto: detected from the columns)")
    add_energy_option(p, "find each workload's sweet spot by (our sweep CSV: the energy_module_j or "
                         "energy_cpu_gpu_j column)")
    p.add_argument("--energy-column", default=None, metavar="COL",
                   help="analyse this column instead (any data; Perseus and Zeus data have energy_j only)")
    p.add_argument("--perseus-by", default="stage", choices=["stage", "instruction", "total"],
                   help="Perseus workloads: per stage (fwd+bwd summed), per stage and "
                        "instruction, or the whole pipeline")
    p.add_argument("--workloads", default=None, metavar="GLOB",
                   help="analyse only workloads whose name matches this shell pattern")
    p.add_argument("--noise-floor-pct", type=float, default=None, metavar="PCT",
                   help="smallest energy wiggle (%% of the minimum) that counts (default 1)")
    p.add_argument("--noise-sigmas", type=float, default=None, metavar="K",
                   help="wiggles must also exceed K pooled repeat std devs (default 2)")
    p.add_argument("--spiky-ratio", type=float, default=None, metavar="R",
                   help="spiky when median repeat std > R x median neighbour step (default 1)")
    p.add_argument("--no-plots", action="store_true", help="write the summaries only")
    p.set_defaults(func=_handle)


def _pick_energy_column(df, wanted, fmt: str = "native", measure: str = "module"):
    """--energy-column if given; our sweep data: the --energy measure's column (an empty one, as
    in a dataset from before pydvfs recorded module energy, is refused in one line); Perseus and
    Zeus data: their energy_j."""
    have = [c for c in df.columns if str(c).startswith("energy")]
    if wanted is not None:
        if wanted not in df.columns:
            raise InvalidValueError(
                f"no column {wanted!r} (energy columns here: {', '.join(have) or 'none'})"
            )
        return wanted
    if fmt != "native" or "energy_j" in df.columns:
        if "energy_j" in df.columns:
            return "energy_j"
        raise InvalidValueError(f"no energy_j column; pick one with --energy-column "
                                f"(energy columns here: {', '.join(have) or 'none'})")
    col = COLUMN[measure]
    if col not in df.columns or df[col].isna().all():
        other = [m for m in COLUMN if m != measure and COLUMN[m] in df.columns and df[COLUMN[m]].notna().any()]
        if not other:
            raise InvalidValueError(f"no {' or '.join(COLUMN.values())} column; pick one with --energy-column "
                                    f"(energy columns here: {', '.join(have) or 'none'})")
        raise InvalidValueError(f"this data has no {LABEL[measure]} energy ({col} is missing or empty: a "
                                f"dataset from before pydvfs recorded it?); analyse {LABEL[other[0]]} energy "
                                f"with --energy {other[0]}")
    return col


def _flat_row(d: dict) -> dict:
    row = {}
    for key, val in d.items():
        if key == "knob_values":
            continue
        if key == "baselines":
            for setting, b in val.items():
                if setting != "maxn":  # maxn has its own columns
                    row[f"savings_vs_{setting}_pct"] = b["savings_pct"]
        elif isinstance(val, dict):
            for sub, v in val.items():
                row[f"{key}_{sub}"] = v
        elif isinstance(val, list):
            row[key] = ";".join(str(v) for v in val)
        else:
            row[key] = val
    return row


def _handle(args: argparse.Namespace) -> int:
    from ..characterise import adapters, ucurve
    from . import common as cli

    args.files = list(args.data) + list(args.files)
    if not args.files:
        raise InvalidValueError("give the data to analyse: --data FILE (or `pydvfs analyse FILE`)")
    for name in ("noise_floor_pct", "noise_sigmas", "spiky_ratio"):
        v = getattr(args, name)
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise InvalidValueError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {v:g}")
    df, fmt = adapters.load(args.files, fmt=args.format, perseus_by=args.perseus_by)
    knob = adapters.KNOB[fmt]
    energy_column = _pick_energy_column(df, args.energy_column, fmt, args.energy)
    if args.workloads is not None and "workload" in df.columns:
        df = df[[fnmatch.fnmatchcase(str(w), args.workloads) for w in df["workload"]]]
        if df.empty:
            raise InvalidValueError(f"no workload matches {args.workloads!r}")
    kw = {}
    if args.noise_floor_pct is not None:
        kw["noise_floor_rel"] = args.noise_floor_pct / 100.0
    if args.noise_sigmas is not None:
        kw["noise_sigmas"] = args.noise_sigmas
    if args.spiky_ratio is not None:
        kw["spiky_ratio"] = args.spiky_ratio
    _check_ours(args.out)  # before the analysis: a refusal costs nothing
    results, curves = ucurve.analyse(df, knob=knob, energy_column=energy_column, **kw)

    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise InvalidValueError(f"cannot create --out {args.out}: {e.strerror}") from e
    import pandas as pd

    dicts = [r.to_dict() for r in results]
    files = []
    summary = {
        "format": fmt,
        "knob": knob,
        "energy_column": energy_column,
        "inputs": [os.path.abspath(f) for f in args.files],
        "n_workloads": len(results),
        "n_u_shaped": sum(r.u_shaped for r in results),
        "workloads": dicts,
    }
    for name, text in (("summary.json", json.dumps(summary, indent=2)),
                       ("summary.csv", pd.DataFrame([_flat_row(d) for d in dicts]).to_csv(index=False)),
                       ("curves.csv", curves.to_csv(index=False))):
        files.append(os.path.join(args.out, name))
        replace_atomically(files[-1], text)

    if not args.no_plots:
        from ..characterise import plots

        plot_dir = os.path.join(args.out, "plots")
        for r in results:
            files += plots.plot_workload(r, curves[curves["workload"] == r.workload], plot_dir, energy_column)
        files += plots.plot_optimal_map(results, plot_dir)

    data = {k: v for k, v in summary.items() if k != "workloads"}
    data.update(out_dir=os.path.abspath(args.out), files=files, workloads=dicts)
    cli.emit(args, data, lambda: _text(summary, args.out, len(files)))
    return 0


def _pct(v) -> str:
    return "    -" if v is None else f"{v:5.1f}"


def _check_ours(out: str) -> None:
    """Refuse (before anything is written) a --out folder whose summary.json is not an analysis
    (a user's file) or whose outputs are links, folders or FIFOs: they are replaced, not written
    through."""
    summary = os.path.join(out, "summary.json")
    for name in ("summary.json", "summary.csv", "curves.csv"):
        check_replaceable(os.path.join(out, name))
    if os.path.lexists(summary):
        try:
            with open(summary, encoding="utf-8") as fh:
                old = json.load(fh)
        except (OSError, ValueError):
            old = None
        if not (isinstance(old, dict) and "knob" in old and isinstance(old.get("workloads"), list)):
            raise InvalidValueError(f"{summary} is not a summary `pydvfs analyse` wrote: not replaced "
                                    "(give another --out folder)")


def _text(summary: dict, out: str, n_files: int) -> str:
    unit = "MHz" if summary["knob"] == "freq_mhz" else "W"
    ws = summary["workloads"]
    width = max([len("workload")] + [len(w["workload"]) for w in ws])
    lines = [
        f"{summary['n_workloads']} workloads ({summary['format']}), energy: "
        f"{column_label(summary['energy_column']).replace('`', '')}, {summary['n_u_shaped']} U-shaped; "
        f"{n_files} files in {out}",
        f"{'workload':<{width}}  {'sweet':>7} {'save%top':>8} {'save%maxn':>9} {'time+%':>6} "
        f"{'R2 t':>5} {'R2 P':>5}  flags",
    ]
    for w in ws:
        r2t = (w["time_fit"] or {}).get("r2")
        r2p = (w["power_fit"] or {}).get("r2")
        lines.append(
            f"{w['workload']:<{width}}  {w['sweet_spot']:>5g}{unit:>2} {_pct(w['savings_vs_top_pct']):>8}"
            f" {_pct(w['savings_vs_maxn_pct']):>9} {_pct(w['time_penalty_vs_top_pct']):>6}"
            f" {'  -' if r2t is None else f'{r2t:.2f}':>5} {'  -' if r2p is None else f'{r2p:.2f}':>5}"
            f"  {','.join(w['flags']) or '-'}"
        )
    return "\n".join(lines)

"""``pydvfs demo``: the whole pipeline on a simulated Orin (stages in pydvfs/studies/demo.py)."""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ..studies.demo import STAGES, DemoContext
from .common import emit, seed


def cmd_demo(args: argparse.Namespace) -> int:
    from ..report.results import write_report
    from . import main  # the stages run the verbs a user runs, through this same command line

    ctx = DemoContext(out_dir=Path(args.out).resolve(), seed=args.seed, quick=args.quick, cli=main)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    # the simulated board's own store of runs lives in the demo's folder (docs/store.md): the demo
    # writes nothing outside it, and no earlier run of this machine changes its decisions; so do
    # the locks of its fake boards (as root the default is the host's /run/pydvfs/locks)
    os.environ["PYDVFS_DATA_DIR"] = str(ctx.path("board-runs"))
    os.environ["PYDVFS_LOCK_DIR"] = str(ctx.path("locks"))
    t0 = time.monotonic()
    for name, stage in STAGES:
        ctx.say(f"--- {name} ---")
        t = time.monotonic()
        ctx.results[name] = stage(ctx)
        ctx.results[name]["seconds"] = round(time.monotonic() - t, 1)
    (ctx.out_dir / "results.json").write_text(json.dumps(ctx.results, indent=2, default=str))
    report = write_report(ctx.out_dir, force=True)  # the demo's own folder: its report is its output
    summary = {"report": str(report), "stages": list(ctx.results), "seconds": round(time.monotonic() - t0, 1)}
    emit(args, summary, f"[demo] done in {summary['seconds']} s; report: {report} (and report.html)")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="run the whole pipeline on a simulated Orin (module energy)",
                       description="Run the whole pipeline on a simulated AGX Orin (no board "
                                   "needed): characterise, analyse, train, evaluate against MAXN, a "
                                   "governed run measured by the C sampler, real-data checks and "
                                   "the roofline law; write a report with plots. Every figure is "
                                   "the module's energy (what the board draws), named; paper A's "
                                   "CPU+GPU figures are in the replication ledger (replication.md).")
    p.add_argument("--out", default="demo-out", help="output folder (default: demo-out)")
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument("--quick", action="store_true", help="one repeat per setting, shorter runs")
    p.set_defaults(func=cmd_demo)

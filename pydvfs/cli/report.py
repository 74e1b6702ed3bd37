"""``pydvfs report``: write the report of a run."""
from __future__ import annotations

import argparse

from ..report.results import write_report
from .common import emit


def cmd_report(args: argparse.Namespace) -> int:
    path = write_report(args.dir, force=args.force)
    emit(args, {"report": str(path), "html": str(path.with_suffix(".html"))}, f"report: {path} (and report.html)")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("report", parents=[common], help="write the report of a run",
                       description="Write DIR/report.md and DIR/report.html (one self-contained file, "
                                   "plots embedded) from a `pydvfs demo --out DIR` run (DIR/results.json; "
                                   "also DIR/replication.md) or from your own sweep CSVs, `analyse` and "
                                   "`train` folders and `evaluate --json` files under DIR. An existing "
                                   "report is kept unless --force.")
    p.add_argument("dir", nargs="?", default="demo-out", help="the output folder (default demo-out)")
    p.add_argument("--force", action="store_true", help="rewrite an existing report")
    p.set_defaults(func=cmd_report)

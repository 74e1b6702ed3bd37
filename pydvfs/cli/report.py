"""``pydvfs report``: write the report of a run."""
from __future__ import annotations

import argparse

from ..report import write_report
from .common import emit


def cmd_report(args: argparse.Namespace) -> int:
    path = write_report(args.dir)
    emit(args, {"report": str(path), "html": str(path.with_suffix(".html"))}, f"report: {path} (and report.html)")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("report", parents=[common], help="write the report of a demo run",
                       description="Write DIR/report.md and DIR/report.html (with plots) from the "
                                   "results a `pydvfs demo --out DIR` run left in DIR/results.json.")
    p.add_argument("dir", nargs="?", default="demo-out", help="the demo's output folder (default demo-out)")
    p.set_defaults(func=cmd_report)

"""``pydvfs demo``: the whole pipeline on a simulated AGX Orin, ending in a report.

Each stage is a function ``stage(ctx) -> dict`` that prints what it does and returns what the
report shows. Stages run in order; the board is always restored, whatever happens.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .cli import emit


@dataclass
class DemoContext:
    out_dir: Path
    seed: int
    quick: bool
    results: dict = field(default_factory=dict)

    def say(self, text: str) -> None:
        print(f"[demo] {text}", flush=True)


def stage_board(ctx: DemoContext) -> dict:
    """A fake AGX Orin (JetPack 6 tree): discover it, pin a clock, restore."""
    from .device import open_device
    from .device.fake import build_fake_board

    root = ctx.out_dir / "board"
    shutil.rmtree(root, ignore_errors=True)
    fb = build_fake_board(root, "jp6")
    dev = open_device(root, state_dir=str(ctx.out_dir / "state"))
    ctx.say(f"board: {dev.model}, GPU {dev.gpu_name}, {len(dev.available_frequencies_mhz)} levels, "
            f"rails {', '.join(r.name for r in dev.rails)}")
    before = dev.state()
    try:
        pinned = dev.pin(700)
        ctx.say(pinned.describe())
        during = dev.state()
    finally:
        dev.restore()
    after = dev.state()
    ctx.say(f"restored: min {after.min_mhz:g} MHz, max {after.max_mhz:g} MHz, governor {after.governor}")
    ok = (after.min_mhz, after.max_mhz) == (before.min_mhz, before.max_mhz)
    if not ok:
        raise RuntimeError("the board was not restored")
    return {
        "sysfs_root": str(fb.root),
        "model": dev.model,
        "levels_mhz": list(dev.available_frequencies_mhz),
        "rails": [r.name for r in dev.rails],
        "pinned_mhz": pinned.freq_mhz,
        "state_while_pinned": during.to_dict(),
        "restored": after.to_dict(),
    }


# (name, function): later stages build on the earlier ones' results.
STAGES: list[tuple[str, Callable[[DemoContext], dict]]] = [
    ("board", stage_board),
]


def write_report(ctx: DemoContext) -> Path:
    lines = ["# pydvfs demo report", "", f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}, seed {ctx.seed}.", ""]
    for name, result in ctx.results.items():
        lines += [f"## {name}", "", "```json", json.dumps(result, indent=2, default=str), "```", ""]
    path = ctx.out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def cmd_demo(args: argparse.Namespace) -> int:
    ctx = DemoContext(out_dir=Path(args.out), seed=args.seed, quick=args.quick)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for name, stage in STAGES:
        ctx.say(f"--- {name} ---")
        ctx.results[name] = stage(ctx)
    report = write_report(ctx)
    summary = {"report": str(report), "stages": list(ctx.results), "seconds": round(time.monotonic() - t0, 1)}
    emit(args, summary, f"[demo] done in {summary['seconds']} s; report: {report}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="run the whole pipeline on a simulated Orin",
                       description="Run the whole pipeline on a simulated AGX Orin (no board "
                                   "needed) and write a report with plots.")
    p.add_argument("--out", default="demo-out", help="output folder (default: demo-out)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--quick", action="store_true", help="fewer repeats, for a fast look")
    p.set_defaults(func=cmd_demo)

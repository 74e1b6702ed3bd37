#!/usr/bin/env python3
"""Fold published calibration records of one board (`pydvfs calibrate`'s
calibration-<board>.record.json, docs/boards.md "Publishing a calibration") into the knob values
its simulator profile's family would centre on: per knob of pydvfs/sim/uncertainty.py, the median
of the records' fitted values and their range (how far real boards disagree).

    python tools/fold_calibrations.py RECORD.json [RECORD.json ...] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def fold(records: list[dict]) -> dict:
    from pydvfs.policy.calibrated import FORMAT, check_calibration

    boards = {r.get("board") for r in records}
    if len(boards) != 1:
        raise ValueError(f"records of one board are folded together, got {sorted(map(str, boards))}")
    cals = []
    for r in records:
        if r.get("format") != FORMAT + "-record":
            raise ValueError(f"not a {FORMAT}-record file")
        cals.append(check_calibration(r["calibration"]))
    knobs = {k: [c.knobs[k] for c in cals] for k in cals[0].knobs}
    return {"board": boards.pop(), "records": len(cals),
            "knobs": {k: {"median": statistics.median(v), "low": min(v), "high": max(v)} for k, v in knobs.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        out = fold([json.loads(p.read_text()) for p in args.records])
    except (OSError, ValueError) as e:
        print(f"fold_calibrations: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{out['board']}: {out['records']} record(s)")
    for k, v in out["knobs"].items():
        print(f"  {k:8s} median {v['median']:g} (records {v['low']:g}..{v['high']:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

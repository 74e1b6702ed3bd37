#!/usr/bin/env python3
"""Fold published calibration records of one board (`pydvfs calibrate`'s
calibration-<board>.record.json, docs/boards.md "Publishing a calibration") into the knob values
its simulator profile's family would centre on: per knob of pydvfs/sim/uncertainty.py, the median
of the records' fitted values and their range (how far real boards disagree). Each distinct record
is one vote; a record whose calibration is of another board, or that is not a record, is refused
in one line (exit 2).

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
    """The knobs' median and range over the distinct records (one vote each: a record given N
    times is one record); ValueError, one line, for a record that is not a calibration record of
    one board, its calibration of the same board."""
    from pydvfs.errors import PydvfsError
    from pydvfs.policy.board_calibration import FORMAT, FORMAT_V1, check_calibration

    cals, seen = [], set()
    for r in records:
        if not isinstance(r, dict) or r.get("format") not in (FORMAT + "-record", FORMAT_V1 + "-record"):
            raise ValueError(f"not a {FORMAT}-record file")
        if not isinstance(r.get("board"), str):
            raise ValueError("a record names no board")
        try:
            cal = check_calibration(r.get("calibration"))
        except (ValueError, KeyError, TypeError, PydvfsError) as e:
            raise ValueError(f"a record's calibration is malformed ({e})") from None
        if cal.board != r["board"]:
            raise ValueError(f"a record of board {r['board']!r} holds a calibration of {cal.board!r}")
        key = json.dumps(r["calibration"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            cals.append(cal)
    boards = {c.board for c in cals}
    if len(boards) != 1:
        raise ValueError(f"records of one board are folded together, got {sorted(boards)}")
    knobs = {k: [c.knobs[k] for c in cals] for k in cals[0].knobs}
    return {"board": boards.pop(), "records": len(cals), "given": len(records),
            "knobs": {k: {"median": statistics.median(v), "low": min(v), "high": max(v)} for k, v in knobs.items()}}


def _load(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__})") from None
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        out = fold([_load(p) for p in args.records])
    except (OSError, ValueError) as e:
        print(f"fold_calibrations: error: {e.strerror if isinstance(e, OSError) and e.strerror else e}",
              file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    dup = f" ({out['given'] - out['records']} given again, counted once)" if out["given"] > out["records"] else ""
    print(f"{out['board']}: {out['records']} record(s){dup}")
    for k, v in out["knobs"].items():
        print(f"  {k:8s} median {v['median']:g} (records {v['low']:g}..{v['high']:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

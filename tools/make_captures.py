#!/usr/bin/env python3
"""Regenerate tests/data/captures/<board>.json: one board capture per board of the table
(pydvfs/data/boards.json), built from a fake board of that board until a user sends a real one.

Each capture says so in its metadata ("source": built from the table's facts, not a real board).
The fake tree is pydvfs.device.fake's, nvpmodel's status and table and the release line
included (the power mode whose cap is the board's top level in force, its cap on max_freq).

    python tools/make_captures.py                 # every board of the table
    python tools/make_captures.py --out DIR
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.device.capture import capture_board, write_capture  # noqa: E402
from pydvfs.device.fake import build_fake_board, mode_in_force, rewrite_int  # noqa: E402
from pydvfs.device.table import Board, boards  # noqa: E402

SOURCE = "built from the table's facts (pydvfs.device.fake, pydvfs/data/boards.json), not a real board"


def fake_of(root: Path, b: Board):
    """A fake tree of board b (pydvfs.device.fake lays out every board of the table)."""
    return build_fake_board(root, board=b.id)


def add_table_facts(fb, b: Board) -> None:
    """The GPU's max_freq and cur_freq at the cap of the power mode in force (the fake layer lays
    out nvpmodel's status and table and the release line from the board table; a mode without a
    known cap leaves the top level)."""
    mode = mode_in_force(b)
    cap = round(mode.gpu_cap_mhz * 1e6) if mode.gpu_cap_mhz is not None else max(fb.levels_hz)
    cap_hz = max(f for f in fb.levels_hz if f <= cap)
    rewrite_int(Path(fb.devfreq_dir) / "max_freq", cap_hz)
    rewrite_int(Path(fb.devfreq_dir) / "cur_freq", cap_hz)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests" / "data" / "captures"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for b in boards().values():
        with tempfile.TemporaryDirectory() as tmp:
            fb = fake_of(Path(tmp) / "board", b)
            add_table_facts(fb, b)
            cap = capture_board(fb.root, source=SOURCE, board_id=b.id)
            cap["meta"]["captured_utc"] = None  # not a capture in time: regenerated, not taken
        path = out / f"{b.id}.json"
        if path.exists():
            os.unlink(path)  # ours: this script wrote it
        write_capture(cap, path)
        print(f"{path}: {len(cap['entries'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())

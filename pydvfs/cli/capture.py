"""``pydvfs capture-board OUT``: what pydvfs reads from this board, in one file (pydvfs/device/capture.py)."""
from __future__ import annotations

import argparse

from .common import add_board_options, emit, examples


def cmd_capture_board(args: argparse.Namespace) -> int:
    from ..device import resolve_sysfs_root
    from ..device.capture import capture_board, write_capture

    cap = capture_board(resolve_sysfs_root(args.sysfs_root))
    out = write_capture(cap, args.out)
    files = sum(1 for e in cap["entries"].values() if "text" in e)
    links = len(cap["entries"]) - files
    data = {"out": str(out), "model": cap["meta"]["model"], "board": cap["meta"]["board"], "files": files,
            "links": links, "readings": len(cap["readings"]), "skipped": cap["skipped"]}

    def text() -> str:
        lines = [f"wrote {out}: {files} files, {links} links, {len(cap['readings'])} sensor inputs read "
                 f"{len(next(iter(cap['readings'].values()), []))} times",
                 f"board     {data['model'] or '(unknown model)'}"
                 + (f" (the table's {data['board']})" if data["board"] else " (not in pydvfs's board table)"),
                 f"left out  {len(cap['skipped'])} files (see \"skipped\" in the file)",
                 "kept only what pydvfs reads (\"meta\".\"kept\" lists it); no serial number, host name, MAC "
                 "address or user name. Attach the file to a board report (docs/boards.md, \"Capture your board\")."]
        return "\n".join(lines)

    emit(args, data, text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "capture-board", parents=[common], help="save what pydvfs reads from this board into one file",
        description="Save the devfreq and cpufreq folders, the power sensors' names, labels and a few "
                    "readings, the EMC debugfs files, nvpmodel's caps, status and table, and the model "
                    "and release strings into one JSON file, with nothing personal in it (only the "
                    "files pydvfs reads; FIFOs and other special files are skipped). `pydvfs fake-board "
                    "DIR --from OUT` rebuilds the layout anywhere. Run as root to include the EMC "
                    "debugfs files.",
        epilog=examples("pydvfs capture-board my-board.json",
                        "pydvfs fake-board /tmp/my-board --from my-board.json"))
    p.add_argument("out", metavar="OUT", help="the file to write (a new one)")
    add_board_options(p, state=False)
    p.set_defaults(func=cmd_capture_board)

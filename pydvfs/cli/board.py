"""Verbs that look at and change the board: ``status``, ``pin``, ``restore``."""
from __future__ import annotations

import argparse
import sys

from .common import emit
from ..device import open_device


def _fmt(mhz: float) -> str:
    return f"{mhz:g}"


def _status_text(st: dict) -> str:
    rails = ", ".join(r["name"] for r in st["rails"]) or "none found (no INA3221 sensor)"
    lines = [
        f"board     {st['model'] or '(unknown model)'}",
        f"sysfs     {st['sysfs_root']}",
        f"gpu       {st['gpu']} ({st['devfreq_dir']})",
        f"governor  {st['governor']}",
        f"clock     {_fmt(st['cur_mhz'])} MHz (min {_fmt(st['min_mhz'])}, max "
        f"{_fmt(st['max_mhz'])} MHz){', pinned' if st['pinned'] else ''}",
        f"levels    {' '.join(_fmt(f) for f in st['available_mhz'])} MHz ({len(st['available_mhz'])})",
    ]
    if st["gpu_load_pct"] is not None:
        lines.append(f"gpu load  {st['gpu_load_pct']:.1f} %")
    lines.append(f"rails     {rails}")
    saved = st["saved_state"]
    if saved:
        lines.append(
            f"saved     {saved['path']} (governor {saved['governor']}, min {_fmt(saved['min_mhz'])}, "
            f"max {_fmt(saved['max_mhz'])} MHz); `pydvfs restore` puts it back"
        )
    else:
        lines.append("saved     nothing (the board is as it was)")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    st = open_device(args.sysfs_root, args.state_dir).status()
    emit(args, st, lambda: _status_text(st))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    dev = open_device(args.sysfs_root, args.state_dir)
    result = dev.pin(args.mhz)
    emit(args, result.to_dict(), result.describe)
    if dev.through_daemon:
        print("pydvfs: note: a pin through the govcore daemon lasts while this process does: the "
              "board is restored now (govern a run with `pydvfs run` or the Python API)", file=sys.stderr)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    dev = open_device(args.sysfs_root, args.state_dir)
    restored = dev.restore(force=args.force)
    st = dev.state()
    data = {"restored": restored, "governor": st.governor, "min_mhz": st.min_mhz, "max_mhz": st.max_mhz}
    text = (f"restored governor {st.governor}, min {_fmt(st.min_mhz)} MHz, max {_fmt(st.max_mhz)} MHz"
            if restored else "nothing to restore (no saved state for this board)")
    emit(args, data, text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common], help="show the board, GPU clock and power rails",
                       description="Discover the Jetson GPU and INA3221 rails; show the clock state, "
                                   "the available levels and any saved state.")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("pin", parents=[common], help="pin the GPU clock to one level",
                       description="Pin the GPU clock (min = max) to the available level nearest "
                                   "MHZ. The original governor/min/max are saved first; "
                                   "`pydvfs restore` puts them back.")
    p.add_argument("mhz", metavar="MHZ", help="clock in MHz; snapped to the board's table")
    p.set_defaults(func=cmd_pin)

    p = sub.add_parser("restore", parents=[common], help="put back the saved clock state",
                       description="Put back the governor/min/max saved before the first change. "
                                   "Safe to run any number of times, and from a new process after "
                                   "a crash. While another process governs the GPU (holds its "
                                   "lock) it is refused, naming that process, unless --force.")
    p.add_argument("--force", action="store_true",
                   help="restore even while another process governs the GPU")
    p.set_defaults(func=cmd_restore)

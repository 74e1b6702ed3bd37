"""``pydvfs measure [--rate HZ] [--json] -- CMD...``: run a command and report its energy.

The command is started directly (a list, no shell) while the C sampler thread integrates the
board's power rails; it keeps our stdout and stderr (``measure -- python gen.py > out.txt``
keeps gen.py's output), and the report goes to stderr, or to ``-o FILE`` (as ``time`` and
``perf stat`` do). pydvfs exits with the command's status (128+N if signal N ended it), or 2 with
one line if the command cannot be started: the same contract as ``govcore measure``, and the
same JSON keys.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading

from .._core import MAX_INTERPOLATED_PCT
from ..command import command_after_dashes, exit_status, start_command
from ..errors import InvalidValueError
from . import common as cli_common
from .board import ROLE_LABELS
from .common import add_board_options, examples

EXIT_BAD_READINGS = 3  # --strict and bad readings (govcore measure --strict: the same)


def register(subparsers, common) -> None:
    p = subparsers.add_parser(
        "measure",
        parents=[common],
        help="run a command and report its energy per rail",
        description=(
            "Run CMD (no shell) while a C thread samples the board's power rails; print its "
            "time, energy per rail, the module's energy and the CPU+GPU energy (with the rails "
            "that make each: docs/boards.md), average power, GPU load and sample count "
            "on stderr, or to -o FILE (CMD's own output stays on stdout and stderr). "
            "Exits with CMD's exit status (128+N if signal N ended it); 2 if CMD cannot be "
            "started; 3 with --strict if the readings were bad."
        ),
        epilog=examples("pydvfs measure --sysfs-root /tmp/orin -- sleep 2",
                        "pydvfs measure --rate 1000 --json -o energy.json -- python train.py"),
    )
    p.add_argument("--rate", metavar="HZ", type=float, default=None,
                   help="samples per second (default: the sensor's update interval)")
    cli_common.add_report_output(p)
    add_board_options(p, state=False)
    p.add_argument("--strict", action="store_true",
                   help=f"exit {EXIT_BAD_READINGS} (after the report) if a rail had more than "
                        f"{MAX_INTERPOLATED_PCT:g} %% of the time interpolated over failed reads, "
                        "or a negative reading (without it: a warning on stderr)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="the command and its arguments, after --")
    p.set_defaults(func=run)


def _wait(proc: subprocess.Popen) -> int:
    """Wait for proc. Like time(1), Ctrl-C goes to the command (same process group) and we
    still report what it used: while waiting, SIGINT/SIGQUIT get a no-op handler (a handler,
    not SIG_IGN, so the command does not inherit "ignored")."""
    if threading.current_thread() is not threading.main_thread():
        return proc.wait()
    old = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        return proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


MIN_READINGS = 2  # govcore GC_MIN_READINGS: an energy needs two readings of the rails


def no_energy_reason(samples: int, duration_s: float) -> str | None:
    """Why a window reports no energy (fewer than MIN_READINGS readings: `measure -- true`),
    in govcore's words (gc_window_no_energy), or None."""
    if samples >= MIN_READINGS:
        return None
    return (f"{samples} reading{'' if samples == 1 else 's'} of the rails in {duration_s:.3f} s: an energy "
            f"needs at least {MIN_READINGS} (the command ended before the sensor's next update); measure "
            "something longer")


def measure_record(cmd: list, status: int, m) -> dict:
    """``measure --json``'s record (govcore measure's keys): the window, with the energies and
    powers null and ``no_energy_reason`` set where there were too few readings."""
    data = {"command": cmd, "exit_status": status, **m.to_dict()}
    why = no_energy_reason(m.samples, m.duration_s)
    if why:
        data.update(energy_j=dict.fromkeys(data["energy_j"]), avg_power_w=dict.fromkeys(data["avg_power_w"]),
                    module_energy_j=None, cpu_gpu_energy_j=None, gpu_energy_j=None)
    data["no_energy_reason"] = why
    return data


def text_report(data: dict) -> str:
    """The human-readable report (the same layout as ``govcore measure``)."""
    dur = data["duration_s"]
    lines = [f"command   {data['command'][0]} exited with status {data['exit_status']}",
             f"time      {dur:.3f} s"]
    if data.get("no_energy_reason"):
        lines.append(f"energy    none: {data['no_energy_reason']}")
    else:
        for i, (name, e) in enumerate(data["energy_j"].items()):
            lines.append(f"{'energy' if i == 0 else '':<9} {name:<16} {e:12.3f} J  "
                         f"{data['avg_power_w'][name]:8.3f} W avg")
        for role, label in ROLE_LABELS.items():
            rails, e = data["roles"][role], data[f"{role}_energy_j"]
            if rails == []:
                continue  # the board has no rail of its own for it
            if rails is None or e is None:
                why = "a rail of the table is missing" if data["board"] else "board not in the table"
                lines.append(f"{label:<9} not known ({why})")
                continue
            partial = " partial: a rail of the table is missing" if role == "module" and data.get("module_partial") else ""
            lines.append(f"{label:<9} {e:12.3f} J  {e / dur if dur > 0 else 0.0:8.3f} W avg  "
                         f"({' + '.join(rails)}){partial}")
    if data["gpu_util_pct"] is not None:
        lines.append(f"gpu load  {data['gpu_util_pct']:.1f} %")
    lines.append(f"samples   {data['samples']} at {data['rate_hz']:.1f} Hz, "
                 f"{data['read_errors']} read errors")
    return "\n".join(lines)


def run(args) -> int:
    from ..measure.sampler import Sampler
    from . import common as cli

    cmd = command_after_dashes(args.cmd)
    if not cmd:
        raise InvalidValueError("measure needs a command after `--`, e.g. `pydvfs measure -- sleep 1`")
    cli.check_report_out(args)
    sampler = Sampler(rate_hz=args.rate, sysfs_root=args.sysfs_root)
    if sampler.warning:
        print(f"pydvfs measure: warning: {sampler.warning}", file=sys.stderr, flush=True)
    with sampler:
        proc = start_command(cmd)
        status = exit_status(_wait(proc))
    m = sampler.measurement
    from .board import zero_rails_warning

    warning = zero_rails_warning(m.energy_j) if m.samples >= MIN_READINGS else None
    if warning:
        print(f"pydvfs measure: {warning}", file=sys.stderr, flush=True)
    data = measure_record(cmd, status, m)
    cli.emit(args, data, lambda: text_report(data), wrapped=True)
    for line in m.quality_warnings():
        print(f"pydvfs: {'error' if args.strict else 'warning'}: {line}", file=sys.stderr, flush=True)
    if args.strict and not m.readings_ok:
        return EXIT_BAD_READINGS
    return status

"""``pydvfs calibrate --workload W --progress-file F [--keep-running] -- CMD``: calibrate the
board's simulator from one training job (docs/boards.md, "Calibrating a board").

Exits with 0 once the board is calibrated (CMD stopped; with --keep-running, CMD's own status);
2 with one line on bad input, where CMD ends before enough was measured, writes no step within
--progress-timeout, or where the fit is rejected (its steps do not follow the clock: nothing stored); 130/143 on
Ctrl-C/SIGTERM. The board is restored on every path.
"""
from __future__ import annotations

import argparse

from ..command import command_after_dashes
from ..errors import InvalidValueError
from ..signals import terminate_as_exception
from .common import (
    add_board_options,
    add_energy_option,
    add_report_output,
    add_store_options,
    add_workload_argument,
    check_report_out,
    count,
    examples,
    seconds,
    seconds_or_zero,
)


def text_report(r: dict) -> str:
    cal = r["calibration"]
    lines = [f"board     {r['board']}: calibrated on this board from {cal['measurements']} measurements "
             f"(rms error {100 * cal['rms_log_error']:.1f} %), in {r['measured_minutes']:.1f} min of the job",
             f"stored    {r['path']}",
             f"record    {' and '.join(r['record'])}: to publish (docs/boards.md)",
             "knobs     " + ", ".join(f"{k} {v:g}" for k, v in cal["knobs"].items())]
    for p in cal["points"]:
        name = "MAXN" if p["freq_mhz"] is None else f"{p['freq_mhz']:g} MHz"
        lines.append(f"measured  {name}: {p['j_per_step']:.5g} J/step, {p['s_per_step']:.5g} s/step")
    lines.append(f"chosen    {r['chosen_mhz']:g} MHz for this job"
                 + (" (it ran on there)" if not r["stopped"] else " (the job was stopped: --keep-running lets it finish)"))
    lines.append(f"command   {r['command'][0]} exited with status {r['exit_status']}; board "
                 f"{'restored' if r['restored'] else 'NOT restored'}")
    return "\n".join(lines)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..governor.calibrate import calibrate
    from ..governor.engine import WindowParams
    from .common import emit, workload_from_args

    cmd = command_after_dashes(args.cmd)
    if not cmd:
        raise InvalidValueError("no training command: put it after --, e.g. -- python train.py")
    check_report_out(args)
    workload = workload_from_args(args)
    window = WindowParams(**{k: v for k, v in (("min_window_s", args.min_window_s), ("min_steps", args.min_steps),
                                               ("settle_s", args.settle_s),
                                               ("progress_timeout_s", args.progress_timeout_s)) if v is not None})
    with terminate_as_exception():
        report = calibrate(cmd, workload, args.progress_file, keep_running=args.keep_running, window=window,
                           rate_hz=args.rate, sysfs_root=args.sysfs_root, state_dir=args.state_dir,
                           data_dir=args.data_dir, energy=args.energy)
    emit(args, report, lambda: text_report(report), wrapped=True)
    return report["exit_status"] if args.keep_running else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "calibrate", parents=[common], help="calibrate the board's simulator from one training job",
        description="While CMD trains (its step count in --progress-file), pin the few GPU clocks (and MAXN) "
                    "that tell apart the boards this one may be, measure J/step and s/step at each, fit the "
                    "board's simulator to them and store it in the board's data folder: from then on "
                    "`apply` decides from it, for every workload. CMD is stopped once measured "
                    "(--keep-running: it finishes at the clock chosen for it); the board is restored on "
                    "every path. See docs/boards.md.",
        epilog=examples("pydvfs calibrate --workload model=bert,layers=12,hidden=768,seq_len=13.3 "
                        "--progress-file /tmp/steps -- python train.py --progress-file /tmp/steps"))
    add_workload_argument(p, required=True)
    p.add_argument("--progress-file", metavar="F", required=True, help="where CMD writes its completed step count")
    p.add_argument("--keep-running", action="store_true", help="let CMD finish at the chosen clock")
    p.add_argument("--rate", type=float, default=None, metavar="HZ", help="sampler rate (default: the sensor's)")
    p.add_argument("--window", dest="min_window_s", type=seconds, metavar="S",
                   help="shortest measuring window per clock (default 10 s)")
    p.add_argument("--min-steps", type=count, metavar="N", help="fewest steps per window (default 20)")
    p.add_argument("--settle", dest="settle_s", type=seconds_or_zero, metavar="S",
                   help="wait after each clock change before measuring (default 2 s)")
    p.add_argument("--progress-timeout", dest="progress_timeout_s", type=seconds, metavar="S",
                   help="how long to wait for CMD's first step before giving up and restoring the board "
                        "(default 120 s)")
    add_energy_option(p)
    add_report_output(p)
    add_board_options(p)
    add_store_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the training command")
    p.set_defaults(func=cmd_calibrate)

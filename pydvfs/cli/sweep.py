"""``pydvfs sweep``: characterise a workload over every GPU clock, on a board or simulated."""
from __future__ import annotations

import argparse
import sys

from ..command import check_command, command_after_dashes
from ..errors import InvalidValueError
from ..sweep import MAX_REPEATS
from .common import add_board_options, add_workload_argument, examples, int_range, seed


def cmd_sweep(args: argparse.Namespace) -> int:
    cmd = command_after_dashes(args.cmd)
    from ..governor.joint_search import parse_knobs

    if parse_knobs(args.knobs) != ("gpu",) and not args.sim:
        raise InvalidValueError("sweep --knobs with emc/cpu runs on the simulator only (--sim) for now: pinning "
                                "the EMC and CPU clocks of a board is not in this version")
    if args.sim:
        if cmd or args.workload:
            raise InvalidValueError("--sim simulates the catalogue's workloads: give no --workload and no command")
        from .sim import sim_sweep
        return sim_sweep(args)
    if not args.out:
        raise InvalidValueError("give --out CSV (the dataset to append to)")
    if not args.workload:
        raise InvalidValueError("give --workload model=..,layers=..,hidden=..,seq_len=..[,name=..,task=..]")
    if not cmd:
        raise InvalidValueError("no training command: put it after --, e.g. -- python train.py")
    check_command(cmd)  # before the first pin, as every verb that wraps a command
    if args.plot:
        raise InvalidValueError("--plot is for --sim; for a board's sweep run `pydvfs analyse CSV --out DIR`")
    from ..sweep import run_sweep
    from .common import check_report_out, emit, workload_from_args

    check_report_out(args)

    workload = workload_from_args(args)
    # The noise check at the end needs the 'train' extra; the sweep itself does not. Known before
    # the first run: without it the sweep runs and its summary says what was left out.
    dataset_noise, noise_missing = _noise_check()
    if noise_missing:
        print(f"pydvfs sweep: note: the noise check after the sweep is left out: {noise_missing}",
              file=sys.stderr, flush=True)
    summary = run_sweep(cmd, workload, args.out, freqs=args.freqs, repeats=args.repeats,
                        settle_s=args.settle, idle_s=args.idle, rate_hz=args.rate, seed=args.seed,
                        sysfs_root=args.sysfs_root, state_dir=args.state_dir)
    summary["noise"] = dataset_noise(args.out) if dataset_noise else None  # too noisy to label? (docs/policy.md)
    summary["noise_left_out"] = noise_missing

    def text() -> str:
        lines = [f"{summary['workload']}: {summary['runs']} runs measured, {summary['skipped']} already in "
                 f"{summary['out']}"]
        if summary["repaired_bytes"]:
            lines.append(f"cut off a half-written last line ({summary['repaired_bytes']} bytes) left by an earlier crash")
        for f in summary["failed"]:
            what = "MAXN" if f["freq_mhz"] is None else f"{f['freq_mhz']:g} MHz"
            lines.append(f"FAILED: {what} repeat {f['repeat']} exited {f['exit_status']} (recorded in the dataset)")
        if summary["noise"]:
            lines.append(summary["noise"]["advice"])
        elif noise_missing:
            lines.append(f"noise check left out: {noise_missing}")
        return "\n".join(lines)

    emit(args, summary, text, wrapped=True)
    return 1 if summary["failed"] else 0


def _noise_check():
    """(dataset_noise, None), or (None, the one line saying which extra it needs)."""
    from .common import missing_extra_message

    try:
        import pandas  # noqa: F401 - read_dataset's, imported there

        from ..policy.curves import dataset_noise
    except ImportError as e:
        message = missing_extra_message(e)
        if message is None:
            raise
        return None, message
    return dataset_noise, None


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from .sim import add_sim_arguments

    p = sub.add_parser(
        "sweep", parents=[common], help="measure a workload at every GPU clock and under MAXN",
        description="Run a training command at every GPU clock level and under MAXN, in a "
                    "random order per repeat, measuring each run with the C sampler; append one "
                    "row per run to a dataset (docs/dataset.md). Rerunning resumes. With --sim, "
                    "sweep the paper's workloads on the simulated AGX Orin instead (seconds).",
        epilog=examples(
            "pydvfs sweep --out data.csv --workload name=bert-base/sst2,model=bert,layers=12,hidden=768,"
            "seq_len=13.3,task=sst2 --repeats 3 -- python -m pydvfs.workloads.finetune --model bert-base "
            "--task sst2 --max-steps 200",
            "pydvfs sweep --sim --out sweep.csv --tasks SST-2,QNLI --plot plots",
            "pydvfs sweep --sim --knobs gpu,emc,cpu --models bert-base --tasks SST-2 --out modes.csv --plot plots"))
    p.add_argument("--sim", action="store_true", help="use the simulated AGX Orin (virtual time)")
    p.add_argument("--out", metavar="CSV", help="dataset to append to (created if missing)")
    p.add_argument("--plot", metavar="DIR", help="(--sim) write the U-curve plots here")
    p.add_argument("--knobs", default="gpu", metavar="LIST",
                   help="clock domains to sweep: gpu (default) or gpu,emc,cpu (--sim: every GPU level at the top "
                        "EMC/CPU plus a designed subset of the modes; rows carry emc_mhz/cpu_mhz; --plot adds "
                        "an energy heat map over GPU x EMC)")
    p.add_argument("--repeats", type=int_range(1, MAX_REPEATS), default=1,
                   help=f"runs per setting, 1..{MAX_REPEATS} (default 1)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the run order / the simulator")
    g = p.add_argument_group("board sweep")
    add_workload_argument(g, required=False, help_extra="; and name, task, heads, params, batch_size")
    g.add_argument("--freqs", default="all", help="'all' (default) or MHz list, snapped to the board's table (one more than a level "
                        "outside it is refused, as by pin)")
    g.add_argument("--settle", type=float, default=2.0, metavar="S", help="seconds between pinning and the run")
    g.add_argument("--idle", type=float, default=5.0, metavar="S", help="seconds of idle-power baseline first")
    g.add_argument("--rate", type=float, default=None, metavar="HZ", help="sampler rate (default: the sensor's)")
    from .common import add_report_output

    add_report_output(p)
    add_board_options(p)
    add_sim_arguments(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the training command")
    p.set_defaults(func=cmd_sweep)

"""``pydvfs sweep``: characterise a workload over every GPU clock, on a board or simulated."""
from __future__ import annotations

import argparse
import sys

from ..characterise.sweep import MAX_REPEATS
from ..command import check_command, command_after_dashes
from ..errors import InvalidValueError
from .common import add_board_options, add_workload_argument, examples, int_range, seed


def cmd_sweep(args: argparse.Namespace) -> int:
    cmd = command_after_dashes(args.cmd)
    if args.slurm or args.merge or args.slurm_task:
        return _slurm(args, cmd)
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
    from ..characterise.sweep import run_sweep
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
            lines.append(f"FAILED: {what} repeat {f['repeat']} exited {f['exit_status']} "
                         + ("(recorded in the dataset)" if f["recorded"] else
                            "(ended by a signal: not recorded, a resumed sweep runs it again)"))
        if summary["noise"]:
            lines.append(summary["noise"]["advice"])
        elif noise_missing:
            lines.append(f"noise check left out: {noise_missing}")
        return "\n".join(lines)

    emit(args, summary, text, wrapped=True)
    return 1 if summary["failed"] else 0


def _slurm(args: argparse.Namespace, cmd: list[str]) -> int:
    """--slurm (submit), --merge DIR and the array task's --slurm-task DIR (docs/slurm.md)."""
    import os

    from ..integrations import slurm
    from .common import emit

    if args.plan_sha256 is not None and not (args.slurm_task or args.merge):
        raise InvalidValueError("--plan-sha256 goes with --slurm-task or --merge")
    if args.slurm_task:
        summary = slurm.run_task(args.slurm_task, plan_sha256=args.plan_sha256)
        emit(args, summary, lambda: f"{summary['workload']}: {summary['runs']} runs measured, "
                                    f"{summary['skipped']} already in the part", wrapped=True)
        return 1 if summary["failed"] else 0
    if args.merge:
        summary = slurm.merge(args.merge, plan_sha256=args.plan_sha256)
        emit(args, summary, lambda: _merge_text(summary))
        return 0
    if args.sim:
        raise InvalidValueError("--slurm sweeps boards: no --sim")
    if not args.out:
        raise InvalidValueError("give --out DIR (the sweep's folder: plan, parts, merged sweep.csv)")
    workloads = [args.workload] if args.workload else []
    if args.workloads:
        try:
            lines = open(args.workloads, encoding="utf-8").read().splitlines()
        except OSError as e:
            raise InvalidValueError(f"--workloads: cannot read {args.workloads}: {e.strerror}") from None
        workloads += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not workloads:
        raise InvalidValueError("give --workload SPEC or --workloads FILE (one spec a line)")
    if not cmd:
        raise InvalidValueError("no training command: put it after --, e.g. -- python train.py")
    # made absolute for the nodes; a %n in them stays: each node's own board and state
    options = {"freqs": args.freqs, "repeats": args.repeats, "settle": args.settle, "idle": args.idle,
               "rate": args.rate, "seed": args.seed,
               **{k: None if v is None else os.path.abspath(v)
                  for k, v in (("sysfs_root", args.sysfs_root), ("state_dir", args.state_dir))}}
    summary = slurm.submit(os.path.abspath(args.out), workloads, cmd, options, partition=args.partition,
                           constraint=args.constraint, max_parallel=args.max_parallel,
                           exclusive=not args.share_node)
    running = (f"; {len(summary['running'])} still pending or running, not submitted again"
               if summary["running"] else "")
    emit(args, summary, lambda: (
        f"{summary['folder']}: nothing to submit{running or ' (complete)'}" if summary["array_job"] is None else
        f"array job {summary['array_job']} ({len(summary['submitted'])} of {summary['workloads']} workloads{running}), "
        f"merge job {summary['merge_job']} after it -> {summary['folder']}/{slurm.MERGED}"))
    return 0


def _merge_text(summary: dict) -> str:
    lines = [f"{summary['out']}: {summary['rows']} runs"]
    if summary["incomplete"]:
        lines.append(f"not complete: {', '.join(summary['incomplete'])} (submit the sweep again to fill them)")
    for f in summary["failed"]:
        what = "MAXN" if f["freq_mhz"] is None else f"{f['freq_mhz']:g} MHz"
        lines.append(f"FAILED: {f['workload']} {what} repeat {f['repeat']} exited {f['exit_status']} "
                     "(submit the sweep again to rerun it)")
    lines += [f"skipped, damaged: {d}" for d in summary["damaged"]]
    return "\n".join(lines)


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
    g = p.add_argument_group("on a Slurm cluster (docs/slurm.md)")
    g.add_argument("--slurm", action="store_true",
                   help="submit the sweep as an array job, one task per workload, each on its node's board; "
                        "--out is then the sweep's folder (merged into DIR/sweep.csv by a job after it); "
                        "submitting again runs only the missing or failed cells; %%n in --sysfs-root/--state-dir: "
                        "the node; the command may hold {model}, {task}, {name}, ... (the workload's fields), and "
                        "each cell gets $PYDVFS_WORKLOAD")
    g.add_argument("--workloads", metavar="FILE", help="(--slurm) more workloads, one --workload spec a line")
    g.add_argument("--partition", metavar="P", help="(--slurm) the partition to run in")
    g.add_argument("--constraint", metavar="FEATURE", help="(--slurm) the nodes' feature, as sbatch's")
    g.add_argument("--max-parallel", type=int_range(1, 100000), metavar="N", help="(--slurm) tasks at once")
    g.add_argument("--merge", metavar="DIR", help="merge a --slurm sweep's folder into DIR/sweep.csv")
    g.add_argument("--share-node", action="store_true",
                   help="(--slurm) let a task share its node with other jobs (default: each task asks for its node "
                        "whole, --exclusive, as a measurement must; with this, it asks for the GPU's GRES where the "
                        "nodes declare one)")
    g.add_argument("--slurm-task", metavar="DIR", help=argparse.SUPPRESS)  # what each array task runs
    g.add_argument("--plan-sha256", metavar="HEX", help=argparse.SUPPRESS)  # the plan a task or merge trusts
    from .common import add_report_output

    add_report_output(p)
    add_board_options(p)
    add_sim_arguments(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="the training command: {model}, {task}, {name}, ... in it are filled from the workload's "
                        "fields ({{ and }} for braces), and each run gets $PYDVFS_WORKLOAD (the spec), "
                        "$PYDVFS_WORKLOAD_<KEY>, $PYDVFS_SETTING and $PYDVFS_FREQ_MHZ")
    p.set_defaults(func=cmd_sweep)

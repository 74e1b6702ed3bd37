"""Verbs ``train``, ``evaluate`` and ``apply``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import _core
from ..device.table import boards
from .common import (
    add_above_power_mode,
    add_board_options,
    add_energy_option,
    add_objective_options,
    add_report_output,
    add_store_options,
    add_workload_argument,
    emit,
    examples,
    name_list,
    objective_from_args,
    policy_help,
    workload_from_args,
)
from .hold import add_command_argument


def energy_column(args: argparse.Namespace, df) -> str:
    """The column whose minimum labels each workload: --energy-column if given, else the --energy
    measure's (an empty one, as in a dataset from before pydvfs recorded module energy, is
    refused in one line)."""
    from ..errors import InvalidValueError
    from ..measure.energy import COLUMN, LABEL

    if args.energy_column is not None:
        return args.energy_column
    col = COLUMN[args.energy]
    other = [c for c in COLUMN.values() if c != col and c in df.columns and df[c].notna().any()]
    if other and (col not in df.columns or df[col].isna().all()):  # no energy column at all: "lacks column"
        raise InvalidValueError(f"{args.data} has no {LABEL[args.energy]} energy ({col} is missing or empty: a "
                                f"dataset from before pydvfs recorded it?); use --energy "
                                f"{'cpu-gpu' if args.energy == 'module' else 'module'}, or sweep again")
    return col


def cmd_train_from_runs(args: argparse.Namespace) -> int:
    """``train --from-runs``: refit the board-learned policy from the board's store (docs/store.md)
    and show it; damaged records are dropped from the store."""
    from ..errors import InvalidValueError
    from ..policy.learned import describe_shape, learned_table
    from ..policy.objective import Objective
    from ..policy.store import RunStore

    if args.data is not None or args.out is not None or args.tasks or args.exclude_tasks:
        raise InvalidValueError("--from-runs refits from the board's own run records: it takes no --data, --out, "
                                "--tasks or --exclude-tasks")
    board_id = args.board
    if board_id is None:
        from ..device import open_device

        board_id = open_device(None).board_id  # train touches no board: PYDVFS_SYSFS_ROOT or / names it
        if board_id is None:
            raise InvalidValueError("the board is not in the board table: name it with --board ID")
    store = RunStore(args.data_dir)
    loaded = store.compact(board_id)
    if loaded.warning():
        print(f"pydvfs train: {loaded.warning()} (dropped from the store)", file=sys.stderr, flush=True)
    goal = Objective(energy=args.energy)
    table = learned_table(loaded.records, goal)
    runs = sum(s["runs"] for s in table)
    data = {"board": board_id, "data_dir": store.path, "measure": args.energy, "records": len(loaded.records),
            "runs": runs, "dropped": len(loaded.skipped), "shapes": table}

    def text() -> str:
        if not table:
            return (f"no {args.energy} runs of a known workload recorded for {board_id} in {store.path}: "
                    "`pydvfs run --policy online --workload ...` records one")
        lines = [f"learned on this board ({board_id}) from {runs} run{'s' * (runs != 1)} of {len(table)} workload "
                 f"shape{'s' * (len(table) != 1)}, {args.energy} energy ({store.path}):"]
        for sh in table:
            clocks = ", ".join("MAXN" if c["freq_mhz"] is None else f"{c['freq_mhz']:g}" for c in sh["clocks"])
            best = "no best (one clock measured)" if sh["best_mhz"] is None else f"{sh['best_mhz']:g} MHz"
            aside = ", ".join("MAXN" if f is None else f"{f:g}" for f in sh["set_aside_mhz"])
            aside = f"; {aside} measured by too few runs, not compared" if aside else ""
            lines.append(f"  {describe_shape(sh['workload'])}: {best} ({sh['runs']} run{'s' * (sh['runs'] != 1)}; "
                         f"measured {clocks}{aside})")
        lines.append("apply (default policy) and run --policy online use it for workloads of a similar shape")
        return "\n".join(lines)

    emit(args, data, text)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from ..errors import InvalidValueError
    from ..policy.curves import curves_from_frame, read_dataset
    from ..policy.train import format_table, train

    if args.from_runs:
        return cmd_train_from_runs(args)
    if args.data is None or args.out is None:
        raise InvalidValueError("train needs --data FILE and --out DIR (or --from-runs: refit from this "
                                "board's own runs)")
    df = read_dataset(args.data)
    curves = curves_from_frame(df, energy_column(args, df), tasks=name_list(args.tasks, "--tasks"),
                               exclude_tasks=name_list(args.exclude_tasks, "--exclude-tasks"))
    if not args.json:
        print(f"training on {len(curves)} workloads from {args.data} (leave-one-out CV) ...", flush=True)
    metrics = train(curves, args.out, source=Path(args.data).name, data_path=args.data, board_id=args.board,
                    measure=None if args.energy_column is not None else args.energy)
    metrics["energy_column"] = energy_column(args, df)  # what the labels minimise
    sel = metrics["selected"]

    def text() -> str:
        from ..policy.roofline_curve import describe_dict
        return "\n".join([
            f"labels: each workload's clock of least {metrics['energy_column']}",
            metrics["noise"]["advice"], "",
            format_table(metrics["table"]), "",
            "regret: energy at the choice / at the best level - 1, on each workload's fitted curve;",
            "accuracy counts a level within noise of the best as a hit; LOMO: every task of the",
            "held-out model's architecture left out of training.", "",
            f"best tree: {sel['name']} {sel['params']} - LOOCV regret {sel['mean_regret_pct']:.2f} %",
            f"shipped: {metrics['shipped']} - {metrics['ship_reason']}", "",
            "rules:", metrics["rules"].rstrip(), "",
            describe_dict(metrics["roofline"]), "",
            f"model written to {args.out} (policy.so, roofline.txt, manifest.txt, rules.txt, tree.png, metrics.json)"])

    emit(args, {"model_dir": str(args.out), **metrics}, text)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..measure.energy import DEFAULT_MEASURE
    from ..policy.apply import load_tree
    from ..policy.curves import curves_from_frame, read_dataset
    from ..policy.evaluate import evaluate, format_report
    from ..policy.tree_data import read_tree

    df = read_dataset(args.data)
    curves = curves_from_frame(df, energy_column(args, df), tasks=name_list(args.tasks, "--tasks"))
    roofline, left_out = None, {}
    if args.model_dir is not None and (Path(args.model_dir) / "roofline.txt").is_file():
        from ..errors import BoardPermissionError, PolicyLoadError
        from ..policy.apply import load_roofline

        try:
            roofline = load_roofline(args.model_dir)
        except (PolicyLoadError, BoardPermissionError) as e:
            # as root, the folder's files get the loader's checks (a user's link must not make root
            # read a file of its choosing); the tree is still scored, as data, without the curve
            left_out["roofline"] = str(e)  # said in the result (and so in a report), not only here
            print(f"pydvfs evaluate: the roofline policy is left out: {e}", file=sys.stderr, flush=True)
    # a trained tree is read as data (its policy_tree.c), never loaded as code: evaluate touches no
    # board, so it runs as root anywhere (the loader's as-root check guards the verbs that pin).
    # Without --model-dir: the built-in policy of the dataset's board (one board named in its board
    # column; else the fallback board's) for the measure scored, compiled into govcore.
    named = sorted({str(b) for b in df["board"].dropna()}) if "board" in df.columns else []
    known = named[0] if len(named) == 1 and named[0] in boards() else None
    measure = args.energy if args.energy_column is None else DEFAULT_MEASURE
    tree = load_tree(None, known, measure) if args.model_dir is None else read_tree(args.model_dir)
    result = evaluate(curves, tree, roofline)
    result["energy_column"] = energy_column(args, df)  # what the savings are of
    result["left_out"] = left_out  # policy -> why it is not scored
    emit(args, result, lambda: format_report(result))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from ..device import open_device
    from ..errors import InvalidValueError
    from ..policy.apply import apply, decide
    from .common import check_report_out
    from .hold import command_of, hold_while, until_exit_note

    cmd = command_of(args)
    check_report_out(args)
    workload = workload_from_args(args)
    goal = objective_from_args(args)
    run = decide if args.dry_run else apply
    extra = {} if args.dry_run else {"above_power_mode": args.above_power_mode}
    extra.update(energy=goal.energy, data_dir=args.data_dir, use_runs=args.use_runs)

    def change():
        d = run(workload, policy=args.policy, model_dir=args.model_dir, sysfs_root=args.sysfs_root,
                state_dir=args.state_dir, objective=goal.kind, max_slowdown_pct=goal.max_slowdown_pct, **extra)
        if d.learned_notice():
            print(f"pydvfs apply: {d.learned_notice()}", file=sys.stderr, flush=True)
        if d.kept_reason:  # the policy did not expect a clear saving: the board's own governor
            print(f"pydvfs apply: {d.kept_reason}", file=sys.stderr, flush=True)
        if d.outside_training:  # valid, but the policy extrapolates
            print(f"pydvfs apply: note: {d.outside_training}", file=sys.stderr, flush=True)
        if d.mapped_from_mhz is not None:
            print(f"pydvfs apply: {d.mapping_notice(open_device(args.sysfs_root).model)}", file=sys.stderr,
                  flush=True)
        if d.clamped_from_mhz is not None:
            from ..governor.loop import clamp_notice

            print(f"pydvfs apply: {clamp_notice(d.to_dict())}", file=sys.stderr, flush=True)
        return d, {**d.to_dict(), "dry_run": args.dry_run}

    if cmd:
        if args.dry_run:
            raise InvalidValueError("--dry-run writes nothing: there is no clock to hold while a command runs")
        dev = open_device(args.sysfs_root, args.state_dir)

        def held():
            d, data = change()
            if d.warning:
                print(f"pydvfs: warning: {d.warning}", file=sys.stderr, flush=True)
            return data, d.describe()

        return hold_while(args, dev, "apply", cmd, held)
    d, data = change()
    if d.warning:
        print(f"pydvfs: warning: {d.warning}", file=sys.stderr, flush=True)
    emit(args, data, lambda: d.describe(" (dry run: nothing written)" if args.dry_run else ""))
    if not args.dry_run and d.freq_mhz is not None and open_device(args.sysfs_root, args.state_dir).through_daemon:
        print(until_exit_note("apply", f"pinned {d.freq_mhz:g} MHz", "pydvfs apply ..."), file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("train", parents=[common], help="learn the energy-optimal clock per workload",
                       description="Label each workload of a characterisation dataset with its "
                                   "energy-optimal clock, select a decision tree by leave-one-out CV "
                                   "(by energy regret), compare it with the alternatives, and write "
                                   "a model folder: the tree, its rules, a picture, and the tree "
                                   "compiled to C for `apply --model-dir`.",
                       epilog=examples("pydvfs sweep --sim --out sweep.csv",
                                       "pydvfs train --data sweep.csv --out model --exclude-tasks MRPC",
                                       "pydvfs train --from-runs --board orin-nano-super"))
    p.add_argument("--data", metavar="FILE", help="characterisation dataset (CSV, docs/dataset.md)")
    p.add_argument("--out", metavar="DIR", help="model folder to write")
    p.add_argument("--from-runs", action="store_true",
                   help="instead: refit the board-learned policy from this board's recorded online runs "
                        "(--data-dir) and show it; damaged records are dropped (docs/store.md)")
    p.add_argument("--tasks", nargs="+", metavar="T", help="train only on these tasks (a,b or a b)")
    p.add_argument("--exclude-tasks", nargs="+", metavar="T", help="leave these tasks out, e.g. for evaluation")
    add_energy_option(p, "label each workload's best clock by (the built-in policies exist for both measures, "
                         "the paper's measure)")
    p.add_argument("--energy-column", default=None, metavar="COL", help="minimise this column instead")
    p.add_argument("--board", default=None, choices=list(boards()), metavar="ID",
                   help="the board the data was measured on (an id of pydvfs/data/boards.json), "
                        "recorded with the data's clock table: on a board with another table "
                        "apply maps the tree's clock onto it (docs/policy.md); with --from-runs: the "
                        "board whose runs to refit (default: this board, found under PYDVFS_SYSFS_ROOT or /)")
    add_store_options(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", parents=[common], help="score the policies against MAXN",
                       description="For each workload of a dataset: the clock each policy picks "
                                   "(mlg, ffg, rules, maxn), the energy measured there, and the "
                                   "saving against MAXN; plus the oracle.",
                       epilog=examples("pydvfs evaluate --data sweep.csv --model-dir model --tasks MRPC"))
    p.add_argument("--data", required=True, metavar="FILE", help="dataset with the workloads to evaluate on")
    p.add_argument("--model-dir", default=None, metavar="DIR",
                   help="model folder from `pydvfs train` (default: the built-in policy of the dataset's "
                        "board for --energy)")
    p.add_argument("--tasks", nargs="+", metavar="T", help="evaluate only these tasks (a,b or a b)")
    add_energy_option(p, "score the policies by")
    p.add_argument("--energy-column", default=None, metavar="COL", help="score by this column instead")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("apply", parents=[common], help="pin the energy-optimal clock for a workload",
                       description="Choose the GPU clock for a workload with a policy and pin it "
                                   "(the original state is saved first; `pydvfs restore` puts it back). "
                                   "With -- CMD the clock is held while CMD runs, then restored (also "
                                   "when CMD fails, on Ctrl-C and SIGTERM), and the exit status is "
                                   "CMD's; through the govcore daemon a clock applied without CMD "
                                   "ends as this command exits.",
                       epilog=examples(
                           "pydvfs apply --sysfs-root /tmp/orin --workload model=bert,layers=12,hidden=768,seq_len=128",
                           "pydvfs apply --workload model=bert,layers=12,hidden=768,seq_len=128 -- python train.py",
                           "pydvfs apply --workload model=pythia,layers=12,hidden=768,seq_len=64 --policy ffg --dry-run"))
    add_command_argument(p, None)
    add_workload_argument(p, required=True, aliases=True)
    p.add_argument("--policy", default="mlg", choices=_core.POLICY_NAMES, help=policy_help())
    p.add_argument("--model-dir", default=None, metavar="DIR",
                   help="model folder from `pydvfs train` (default: the built-in policy of this board for --energy)")
    add_energy_option(p, "minimise: the built-in policy of this board for that measure decides")
    add_objective_options(p)
    p.add_argument("--dry-run", action="store_true", help="decide only; write nothing")
    add_above_power_mode(p)
    add_report_output(p)
    add_board_options(p)
    add_store_options(p, use=True)
    p.set_defaults(func=cmd_apply)

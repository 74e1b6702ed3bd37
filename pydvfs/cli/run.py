"""``pydvfs run [--policy online|mlg|ffg|rules|maxn] ... -- CMD...``: govern a whole training run.

See docs/online.md. Exits with CMD's status (128+N if signal N ended it); 130 on Ctrl-C and 143
on SIGTERM, with the board restored either way; 2 with one line on bad input.
"""
from __future__ import annotations

import argparse
import sys

from ..command import check_command, command_after_dashes
from ..errors import InvalidValueError
from ..signals import Terminated, terminate_as_exception
from .common import (
    add_above_power_mode,
    add_board_options,
    add_energy_option,
    add_objective_options,
    add_report_output,
    add_store_options,
    add_workload_argument,
    check_report_out,
    clock_mhz,
    count,
    examples,
    objective_from_args,
    policy_help,
    seconds,
    seconds_or_zero,
)


def _clock(mhz) -> str:
    """One clock ("714"), or one mode of the joint search (GPU/EMC/CPU: "714/2133/1036.8")."""
    if isinstance(mhz, (list, tuple)):
        return "/".join(format(x, "g") for x in mhz)
    return format(mhz, "g")


def _fmt_mhz(mhz) -> str:
    if mhz is None:
        return "MAXN (the board's own governor)"
    if isinstance(mhz, (list, tuple)):
        return f"GPU/EMC/CPU {_clock(mhz)} MHz"
    return f"{mhz:g} MHz"


def _trajectory_rows(trajectory: list[dict]) -> list[tuple]:
    """Consecutive windows at the same clock and phase, folded into one row each."""
    rows: list[list] = []
    for w in trajectory:
        key = (w["freq_mhz"], w["phase"], w["round"])
        if rows and rows[-1][0] == key:
            rows[-1][1].append(w)
        else:
            rows.append([key, [w]])
    out = []
    for (mhz, phase, rnd), ws in rows:
        jps = sorted(w["j_per_step"] for w in ws)
        out.append((ws[0]["t_s"] - ws[0]["duration_s"], mhz, jps[len(jps) // 2], len(ws),
                    sum(w["steps"] for w in ws), phase, rnd))
    return out


def per_work_text(r: dict) -> str:
    """"  J/step, J/token (tokens/J)" of a report, each where it is known, in the report's measure."""
    from ..measure.energy import LABEL

    out = "" if r.get("j_per_step") is None else f"  {r['j_per_step']:.5g} J/step"
    if r.get("j_per_token") is not None:
        out += f", {r['j_per_token']:.4g} J/token ({r['tokens_per_j']:.4g} tokens/J) over {r['tokens']} tokens"
    return out + (f" ({LABEL.get(r.get('energy_measure'), 'module')} energy)" if out else "")


def text_report(r: dict) -> str:
    lines = [f"command   {r['command'][0]} exited with status {r['exit_status']}"]
    if r.get("partial"):
        lines.append(f"PARTIAL   the run was stopped ({r['stopped_by']}) after {r['duration_s']:.2f} s: "
                     "what follows is what was measured until then")
    if r["policy"] == "online":
        lines.append(f"policy    online ({r['search_kind']} search, {r['objective_text']}): started at "
                     f"{_fmt_mhz(r['start_mhz'])} ({r['start_source']}), "
                     + (f"fell back: {r['fallback']}" if r["fallback"] else
                        "ended before the first probe finished: no clock was measured, no best to report"
                        if not r["probed"] else
                        f"{'converged on' if r['converged'] else 'best so far'} {_fmt_mhz(r['chosen_mhz'])}"))
    else:
        from ..policy.apply import describe_trade

        lines.append(f"policy    {r['policy']}: {_fmt_mhz(r['chosen_mhz'])}"
                     + (f" (fell back: {r['fallback']})" if r.get("fallback") else ""))
        if r["decision"].get("freq_mhz") is not None and not r.get("fallback"):
            lines.extend(describe_trade(r["decision"]))
    levels = r.get("search_levels_mhz") or []
    if r["policy"] == "online" and levels:
        refused = ", ".join(f"{d['freq_mhz']:g}" for d in r.get("dropped") or []) or "none"
        lines.append(f"levels    searched {min(levels):g}..{max(levels):g} MHz (the board's max_freq was "
                     f"{r['board_max_mhz']:g} MHz); refused by the board: {refused}")
    if r["policy"] == "online" and r["search"].get("vf_source"):  # the model search
        planned = r["search"].get("horizon") or {}
        if r.get("total_steps"):
            horizon = f"the run's {r['total_steps']} steps (--steps)"
        else:
            horizon = f"{r['search']['params']['horizon_windows']} windows (the run's length unknown)"
        if planned.get("windows") is not None:  # what the last decision planned for (issue 37 item 25)
            horizon += (f"; planned at the last decision: {planned['windows']} windows for a probe's gain, "
                        f"{planned['check_windows']} for a check, after {planned['run_windows']} windows")
        lines.append(f"model     V/f curve: {r['search']['vf_source']}; horizon: {horizon}")
    lines.append(f"time      {r['duration_s']:.2f} s")
    from ..measure.energy import LABEL, describe

    rails = ", ".join(f"{k} {v:.3f} J" for k, v in r["energy_j"].items())
    lines.append(f"energy    {describe(r)}")
    lines.append(f"rails     {rails}; board {r['board'] or 'unknown (not in the board table)'}")
    if r["steps"] is not None:
        lines.append(f"steps     {r['steps']}{per_work_text(r)}")
    if r["policy"] == "online":
        if r.get("energy_at_start_clock_j") is not None:
            lines.append(f"at start  {r['energy_at_start_clock_j']:.3f} J "
                         f"({LABEL.get(r.get('energy_measure'), 'module')} energy) estimated at "
                         f"{_fmt_mhz(r['start_mhz'])} from its probes: "
                         f"{r['saving_vs_start_pct']:+.1f} % saved")
        trade = r.get("trade")
        if trade and trade["vs_mhz"] != r["chosen_mhz"]:
            lines.append(f"trade     {_fmt_mhz(r['chosen_mhz'])} against {_fmt_mhz(trade['vs_mhz'])} (the fastest measured): "
                         f"J/step {trade['j_per_step_pct']:+.1f} %, s/step {trade['s_per_step_pct']:+.1f} %")
        if r["trajectory"]:
            lines.append("trajectory (windows at one clock folded; J/step is their median)")
            joint = any(isinstance(w["freq_mhz"], (list, tuple)) for w in r["trajectory"])
            width = 18 if joint else 7
            lines.append(f"  {'t_s':>8} {'GPU/EMC/CPU' if joint else 'MHz':>{width}} {'J/step':>10} {'windows':>7} "
                         f"{'steps':>7}  phase")
            for t, mhz, jps, n, steps, phase, rnd in _trajectory_rows(r["trajectory"]):
                lines.append(f"  {t:8.2f} {'MAXN' if mhz is None else _clock(mhz):>{width}} {jps:10.5g} {n:7d} "
                             f"{steps:7d}  {phase} {rnd}")
        est = r["search"].get("estimates")  # the joint search keeps its fit instead ("fit")
        if est:
            lines.append("estimates " + ", ".join(f"{_clock(e['freq_mhz'])}: {e['j_per_step']:.5g}" for e in est)
                         + " J/step")
    if r.get("recorded_to"):
        lines.append(f"recorded  for this board in {r['recorded_to']} (apply and the next run learn from it; "
                     "--no-record opts out)")
    for warning in r.get("warnings") or []:
        lines.append(f"warning   {warning}")
    if r.get("restore_error"):
        lines.append(f"board     NOT restored: {r['restore_error']}")
    else:
        lines.append("board     restored" if r["restored"] else "board     was not changed")
    return "\n".join(lines)


def _search_params(args):
    from ..governor.loop import default_search, search_params

    given = {k: getattr(args, k) for k in ("margin_pct", "samples", "reprobe_s") if getattr(args, k) is not None}
    if args.start is None and not given and args.search is None:
        return None
    if args.policy != "online":
        raise InvalidValueError("--start, --search, --margin, --samples and --reprobe are for --policy online")
    return search_params(args.search or default_search(), **given)


def _window_params(args):
    from ..governor.loop import WindowParams

    given = {k: getattr(args, k) for k in ("min_window_s", "min_steps", "settle_s", "stall_s")
             if getattr(args, k) is not None}
    if "stall_s" in given:
        given["progress_timeout_s"] = given["stall_s"]
    return WindowParams(**given)


def cmd_run(args: argparse.Namespace) -> int:
    from ..governor.loop import default_search, run_governed
    from .common import emit, workload_from_args

    cmd = command_after_dashes(args.cmd)
    if not cmd:
        raise InvalidValueError("no training command: put it after --, e.g. -- python train.py")
    check_command(cmd)  # before the board changes, as pin and apply -- CMD
    check_report_out(args)
    from ..governor.joint_search import parse_knobs

    knobs = parse_knobs(args.knobs)
    if knobs != ("gpu",) and (args.policy != "online" or args.search is not None or args.start is not None):
        raise InvalidValueError("--knobs gpu,emc,cpu is the joint online search: for --policy online, without "
                                "--search or --start (it starts at the top mode)")
    workload = workload_from_args(args)
    search = _search_params(args)
    objective = objective_from_args(args)
    window = _window_params(args)
    if args.policy != "online" and window != type(window)():
        raise InvalidValueError("--window, --min-steps, --settle and --stall are for --policy online")
    try:
        # SIGTERM/SIGHUP/SIGQUIT unwind like Ctrl-C: the command is stopped and the board restored
        with terminate_as_exception():
            report = run_governed(cmd, args.policy, workload, args.progress_file, args.rate, args.model_dir,
                                  args.start, search if args.policy == "online" else None, window,
                                  args.sysfs_root, args.state_dir, objective=objective,
                                  search_kind=args.search or default_search(), total_steps=args.steps,
                                  knobs=knobs, above_power_mode=args.above_power_mode,
                                  data_dir=args.data_dir, record=args.record, use_runs=args.use_runs)
    except (KeyboardInterrupt, Terminated) as e:
        report = getattr(e, "partial_report", None)  # what was measured until then (partial: true)
        if report is not None:
            emit(args, report, lambda: text_report(report), wrapped=True)
        restored = "NOT restored" if report is not None and report.get("restore_error") else "restored"
        print(f"pydvfs run: stopped; the GPU clock was {restored}"
              + ("; the report above is partial" if report is not None else ""), file=sys.stderr, flush=True)
        raise
    emit(args, report, lambda: text_report(report), wrapped=True)
    if report.get("restore_error"):
        print(f"pydvfs run: error: {report['restore_error']}", file=sys.stderr, flush=True)
        return report["exit_status"] or 1
    return report["exit_status"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from ..governor.loop import POLICIES, SEARCHES

    p = sub.add_parser(
        "run", parents=[common], help="run a training command under a clock policy (online: search while it runs)",
        description="Run CMD (no shell; its output stays on stdout and stderr, the report goes to stderr "
                    "or -o FILE) under a GPU clock policy and "
                    "the C sampler, restore the board at the end, on Ctrl-C and on errors, and "
                    "report time, module and CPU+GPU energy and energy per step (of the module, or "
                    "of CPU+GPU with --energy cpu-gpu). Static policies (mlg, ffg, "
                    "rules, maxn) pin one clock chosen from --workload. 'online' starts at the "
                    "learned model's clock (or FFG) and moves it toward lower energy per training "
                    "step while CMD runs, from the step count CMD writes into --progress-file "
                    "(an integer, written atomically). See docs/online.md.",
        epilog=examples(
            "pydvfs run --progress-file /tmp/steps --workload model=bert,layers=12,hidden=768,seq_len=13.3 "
            "-- python train.py --progress-file /tmp/steps",
            "pydvfs run --policy maxn --progress-file /tmp/steps -- python train.py --progress-file /tmp/steps"))
    p.add_argument("--policy", default="online", choices=POLICIES,
                   help="online (default): search while CMD runs; " + policy_help(default=None))
    add_workload_argument(p, required=False, help_extra=" (and task, name, ... as for sweep)")
    p.add_argument("--progress-file", metavar="F", help="where CMD writes its completed step count")
    p.add_argument("--rate", type=float, default=None, metavar="HZ", help="sampler rate (default: the sensor's)")
    p.add_argument("--model-dir", metavar="DIR", help="a trained model (pydvfs train) instead of the built-in tree")
    add_objective_options(p)
    add_energy_option(p)
    g = p.add_argument_group("online search")
    g.add_argument("--search", choices=SEARCHES,
                   help="model: fit the U-curve, probe where the best clock is uncertain (default, needs numpy "
                        "and scipy); hill: the hill climb on the table")
    g.add_argument("--knobs", default="gpu", metavar="LIST",
                   help="clock domains to search: gpu (default) or gpu,emc,cpu (the joint search over whole "
                        "modes; docs/power-modes.md)")
    g.add_argument("--start", type=clock_mhz, metavar="MHZ", help="start here instead of the model's proposal")
    g.add_argument("--margin", dest="margin_pct", type=float, metavar="PCT",
                   help="hill: move only if J/step is lower by more than this (default 2); model: leave the "
                        "start only for a proven gain larger than this (default 0)")
    g.add_argument("--samples", type=count, metavar="N",
                   help="windows per probe (default 3; more where they disagree)")
    g.add_argument("--steps", type=count, metavar="N",
                   help="the count the progress file reaches at the end (CMD's total optimiser steps), if "
                        "known: the model search weighs a probe's gain over what is left of the run instead "
                        "of 10 minutes (a short run explores less, a long one more)")
    g.add_argument("--window", dest="min_window_s", type=seconds, metavar="S",
                   help="shortest measuring window (default 10 s)")
    g.add_argument("--min-steps", type=count, metavar="N", help="fewest steps per window (default 20)")
    g.add_argument("--settle", dest="settle_s", type=seconds_or_zero, metavar="S",
                   help="wait after each clock change before measuring (default 2 s)")
    g.add_argument("--reprobe", dest="reprobe_s", type=float, metavar="S",
                   help="search again after holding this long (default 600 s)")
    g.add_argument("--stall", dest="stall_s", type=float, metavar="S",
                   help="fall back to the start clock if no step is seen for this long (default 120 s)")
    add_above_power_mode(p)
    add_report_output(p)
    add_board_options(p)
    add_store_options(p, record=True, use=True)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the training command")
    p.set_defaults(func=cmd_run)

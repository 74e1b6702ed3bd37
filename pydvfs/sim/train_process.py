"""A simulated fine-tuning process that animates a fake Jetson board in (scaled) real time.

    python -m pydvfs.sim.train_process --sysfs-root DIR --model bert-base --task SST-2 \
        [--epochs 1 | --steps N] [--time-scale 200] [--progress-file F] [--seed 0] [--repeat 0] \
        [--board agx-orin|orin-nano-super|orin-nx|thor|agx-xavier|nano] [--member NAME]

It can be the CMD of a sweep or of ``pydvfs run``: every tick it re-reads the GPU clock limits
(devfreq ``min_freq``/``max_freq``), pins to ``max_freq`` when they are equal (snapped to the
OPP table) or emulates podgov between them, advances its steps at that clock's speed, and writes
``cur_freq``, the GPU ``load`` and every rail's mV/mA, as the drivers would. ``--time-scale K``
runs K simulated seconds per real second: rail powers stay real, so energy integrated from the
files is the simulated energy divided by K. The step count goes to ``--progress-file``.
``--member NAME``: the board's physics is that member of its uncertainty family
(:mod:`pydvfs.sim.uncertainty`: ``static-high``, ``corner-up``, ``held-out-3``...).
At exit (end, SIGTERM or SIGINT) the rails fall back to the idle board's values and a JSON
summary is printed on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from ..device.levels import nearest_level
from ..errors import InvalidValueError, PydvfsError
from ..progress import write_progress
from .board import BoardFiles
from .catalogue import get_workload
from .model import default_params, idle_board_power_w, operating_point, power_modes, run_noise
from .profiles import DEFAULT_BOARD, board_ids, mode_key, profile

ALL_MODES = tuple(dict.fromkeys(mode_key(m) for b in board_ids() for m in profile(b).modes))


class _Stop(Exception):
    pass


def _setting_for(lo_mhz: float, hi_mhz: float, power_mode: str, top_mode: str = "maxn",
                 levels=None) -> tuple[str, float | None]:
    levels = levels or profile(DEFAULT_BOARD).levels_mhz
    if abs(hi_mhz - lo_mhz) < 1.0:
        return "fixed", hi_mhz
    if power_mode != top_mode:
        return power_mode, None
    if lo_mhz <= levels[0] + 1 and hi_mhz >= levels[-1] - 1:
        return top_mode, None
    return "podgov", None


class _Points:
    """The operating points of the run's GPU limits, each computed once (with its run noise)."""

    def __init__(self, w, p, args, mode, power_mode: str, top_mode: str, levels_mhz):
        self.w, self.p, self.args, self.mode = w, p, args, mode
        self.power_mode, self.top_mode, self.levels_mhz = power_mode, top_mode, levels_mhz
        self.cache: dict = {}

    def __call__(self, lo_hz: int, hi_hz: int, emc_mhz=None, cpu_mhz=None):
        """The operating point of the GPU limits; under a pinned GPU clock also of the EMC rate
        and CPU clock the tree holds (None: the power mode's own)."""
        w, p, args, mode, cache = self.w, self.p, self.args, self.mode, self.cache
        power_mode, top_mode = self.power_mode, self.top_mode
        hi_hz = min(hi_hz, int(mode.gpu_max_mhz * 1e6 + 0.5e6))  # nvpmodel caps max_freq
        lo_hz = min(lo_hz, hi_hz)
        key = (lo_hz, hi_hz, emc_mhz, cpu_mhz)
        if key not in cache:
            lo, hi = lo_hz / 1e6, hi_hz / 1e6
            setting, f = _setting_for(lo, hi, power_mode, top_mode, self.levels_mhz)
            mode_key = ""
            if (emc_mhz, cpu_mhz) in ((mode.emc_mhz, mode.cpu_mhz), (mode.emc_mhz, None), (None, mode.cpu_mhz)):
                emc_mhz = cpu_mhz = None  # the power mode's own clocks: its own operating point
            if setting == "fixed" and (emc_mhz, cpu_mhz) != (None, None):
                emc_mhz = min(emc_mhz or mode.emc_mhz, mode.emc_mhz)  # the power mode's caps hold
                cpu_mhz = min(cpu_mhz or mode.cpu_mhz, mode.cpu_mhz)
                op = operating_point(w, "fixed", f, p, board=args.board, emc_mhz=emc_mhz, cpu_mhz=cpu_mhz)
                mode_key = f":emc{emc_mhz:g}:cpu{cpu_mhz:g}"
            elif setting == "fixed":
                op = operating_point(w, "fixed", f, p, board=args.board)
            elif setting == "podgov":
                op = operating_point(w, "podgov", None, p, min_mhz=lo, max_mhz=hi, board=args.board)
            else:
                op = operating_point(w, setting, None, p, board=args.board)
            tf, pf = run_noise(p, op.cpu_exposed_share, args.seed, w.name, op.setting + mode_key,
                               op.freq_mhz, args.repeat)
            cache[key] = (op, tf, pf)
        return cache[key]


def run(args: argparse.Namespace, point=None) -> dict:
    """Animate the board for ``args``' job; returns the summary. ``point``: the job's physics
    other than the simulator's (a callable as :class:`_Points`: the GPU limits in Hz and the
    EMC and CPU clocks in MHz -> (an operating point with ``power_w``, ``load``, ``t_step_s``,
    ``setting``, ``mean_freq_mhz`` and ``clock_trace_mhz``, time factor, power factor); the
    benches' independent physics); default: the simulator's, of ``args.member``."""
    p = default_params()
    if args.member:  # a board of the uncertainty family: physics the policies were not fitted to
        from .uncertainty import member

        p = member(args.board, args.member).params(p)
    w = get_workload(args.model, args.task, args.batch_size, args.epochs)
    tokens_per_step = w.batch_size * w.task.avg_tokens  # real tokens (padding excluded), as a trainer counts
    target_steps = args.steps if args.steps else w.steps
    prof = profile(args.board)
    modes = power_modes(args.board)
    top_mode = next(k for k, m in modes.items() if m.gpu_max_mhz == prof.top_mhz)
    power_mode = args.power_mode or top_mode
    if power_mode not in modes:
        raise InvalidValueError(f"board {args.board} has no power mode {power_mode!r}; "
                                f"expected one of {', '.join(modes)}")
    rails = prof.rail_names
    board = BoardFiles.discover(args.sysfs_root, rails)
    levels_mhz = tuple(hz / 1e6 for hz in board.levels_hz)
    mode = modes[power_mode]
    progress = Path(args.progress_file) if args.progress_file else None

    point = point or _Points(w, p, args, mode, power_mode, top_mode, prof.levels_mhz)

    def stop(signum, frame):
        raise _Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tick_s = args.tick_ms / 1000.0
    steps = 0.0
    sim_t = 0.0
    energy_j = {r: 0.0 for r in rails}  # simulated energy (J of the simulated run)
    interrupted = False
    # What the files held and from when: (CLOCK_MONOTONIC ns once written, W per rail). A
    # reader of the files is judged against this, not against ideal virtual time, which a busy
    # machine stretches (a late tick keeps the old power in the files for longer).
    log_rails = tuple(board.rails)
    written: list[tuple[int, tuple[float, ...]]] = []

    # Files are rewritten only when their value changes: an unchanged write costs CPU time that,
    # on a busy machine, delays the next tick (the log still records every tick's values).
    last: dict = {}

    def put(key, value, write) -> None:
        if last.get(key) != value:
            write(value)
            last[key] = value

    def put_power(power_w: dict) -> None:
        values = tuple(power_w.get(r, 0.0) for r in log_rails)
        put("power", power_w, board.write_power)
        written.append((time.monotonic_ns(), values))

    t_prev = time.monotonic()
    op, tf, pf = point(*board.read_limits_hz(), *board.read_mode_mhz())
    try:
        while steps < target_steps:
            op, tf, pf = point(*board.read_limits_hz(), *board.read_mode_mhz())
            power = board.quantised_power_w({r: op.power_w[r] * pf for r in rails})
            put_power(power)
            put("load", 1000.0 * op.load / tf, board.write_load)
            trace = op.clock_trace_mhz or (op.mean_freq_mhz,)
            i = int(sim_t / p.podgov_window_s) % len(trace)
            put("cur_freq", int(round(nearest_level(levels_mhz, trace[i]) * 1e6)), board.write_cur_freq)
            step_s = op.t_step_s * tf
            remaining_real = (target_steps - steps) * step_s / args.time_scale
            time.sleep(max(0.0, min(tick_s, remaining_real)))
            now = time.monotonic()
            dt_sim = (now - t_prev) * args.time_scale
            t_prev = now
            dt_sim = min(dt_sim, (target_steps - steps) * step_s)
            steps += dt_sim / step_s
            sim_t += dt_sim
            for r in rails:
                energy_j[r] += power.get(r, 0.0) * dt_sim
            if progress is not None:
                write_progress(progress, steps, steps * tokens_per_step)
            if steps >= target_steps - 1e-9:
                break
    except _Stop:
        interrupted = True
    finally:
        put_power(board.quantised_power_w(idle_board_power_w(p, args.board)))
        board.write_load(0)
        if args.write_log:
            Path(args.write_log).write_text(json.dumps(
                {"rails": list(log_rails), "t_ns": [t for t, _ in written], "power_w": [v for _, v in written]}))
    if progress is not None:
        write_progress(progress, steps, steps * tokens_per_step)
    return {
        "workload": w.name, "steps": round(steps, 3), "target_steps": target_steps,
        "sim_duration_s": sim_t, "real_duration_s": sim_t / args.time_scale,
        "time_scale": args.time_scale, "sim_energy_j": energy_j,
        "last_setting": op.setting, "interrupted": interrupted, "board": args.board,
    }


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pydvfs.sim.train_process",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sysfs-root", default=os.environ.get("PYDVFS_SYSFS_ROOT"),
                    help="root of the fake board tree (env PYDVFS_SYSFS_ROOT)")
    ap.add_argument("--model", required=True, help="e.g. bert-base, pythia-160m")
    ap.add_argument("--task", required=True, help="GLUE task, e.g. SST-2")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (default: whole run)")
    ap.add_argument("--time-scale", type=float, default=100.0,
                    help="simulated seconds per real second (default 100)")
    ap.add_argument("--tick-ms", type=float, default=5.0, help="real ms between file updates")
    ap.add_argument("--progress-file", default=None)
    ap.add_argument("--power-mode", default=None, choices=ALL_MODES,
                    help="the board's nvpmodel mode (default: its top mode, e.g. maxn)")
    ap.add_argument("--board", default=DEFAULT_BOARD, choices=board_ids(),
                    help="simulator profile: the board's clock table, rails and power (default agx-orin)")
    ap.add_argument("--member", default=None,
                    help="a member of the board's uncertainty family (pydvfs.sim.uncertainty), e.g. held-out-3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--write-log", metavar="F", default=None,
                    help="write a JSON log of every rail write (CLOCK_MONOTONIC ns, W per rail) at exit")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.sysfs_root:
        print("train_process: error: --sysfs-root (or PYDVFS_SYSFS_ROOT) is required", file=sys.stderr)
        return 2
    if args.time_scale <= 0 or args.tick_ms <= 0:
        print("train_process: error: --time-scale and --tick-ms must be > 0", file=sys.stderr)
        return 2
    try:
        summary = run(args)
    except PydvfsError as e:
        print(f"train_process: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 130 if summary["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())

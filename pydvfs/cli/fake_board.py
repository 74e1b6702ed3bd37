"""``pydvfs fake-board DIR``: a simulated Jetson sysfs tree to try every command on.

The tree is what ``pydvfs.device.fake`` lays out for the tests and the demo (discovered, not
assumed: unstable hwmonN numbers, decoy devices, NC channels), for any board of the table
(``--board``, docs/boards.md), with every clock domain the table gives the board (the EMC's BPMP
debugfs folder, the cpufreq policies: ``pin MHZ --emc R --cpu C`` works on it). Its rails hold
the board's simulated idle power; ``--animate MODEL`` then runs the simulated fine-tuning process
on it, by the board's own simulator profile, in the foreground (it follows the clocks a governor
pins and writes the rails, the GPU load and a step count) until its steps are done or Ctrl-C, and
says which. Without ``--animate`` the board is static: its ``cur_freq`` shows the
ceiling a pin sets, as a kernel would.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import signals
from ..command import stop_command
from ..errors import InvalidValueError
from ..progress import check_progress_file
from ..signals import Terminated, terminate_as_exception
from .common import emit, examples, int_range

LEVEL_TABLES = ("11", "13")
MAX_TIME_SCALE = 1e6    # simulated seconds per real second: a larger one is a typo
MAX_STEPS = 10_000_000  # --steps: a longer animation is a typo, not a plan
LAYOUT_BOARD = {"jp4": "agx-xavier", "jp5": "agx-orin", "jp6": "agx-orin"}  # --layout's older names


def joint_pin_example(board_id: str) -> str:
    """``--emc R --cpu C`` with a middle EMC rate and CPU level of the board's fake tables (the
    options of the joint pin, docs/domains.md); "" for a board without those domains."""
    from ..device.fake_domains import cpu_levels_khz
    from ..device.table import board

    b = board(board_id)
    parts = []
    if b.emc_mhz:
        parts.append(f"--emc {b.emc_mhz[len(b.emc_mhz) // 2]:g}")
    cpu = cpu_levels_khz(b)
    if cpu:
        parts.append(f"--cpu {cpu[len(cpu) // 2] / 1000:g}")
    return " ".join(parts)


def _write_idle_power(board) -> float:
    """The rails of a new fake board at its simulator profile's idle power (every board of the
    table has one); the module's idle power (W)."""
    from ..sim.board import BoardFiles
    from ..sim.model import default_params, idle_board_power_w
    from ..sim.profiles import profile

    power = idle_board_power_w(default_params(), board.board)
    BoardFiles.discover(board.root, profile(board.board).rail_names).write_power(power)
    return round(sum(power.get(r, 0.0) for r in profile(board.board).board.role_rails("module")), 3)


def cmd_fake_board(args: argparse.Namespace) -> int:
    from ..device.fake import ORIN_13_LEVELS_HZ, build_fake_board

    if args.animate is not None and not args.animate.strip():
        raise InvalidValueError("--animate takes a model name (e.g. bert-base); it was empty")
    if args.progress_file is not None and not args.animate:
        raise InvalidValueError("--progress-file is where --animate writes its step count: give --animate MODEL too")
    if args.steps is not None and not args.animate:
        raise InvalidValueError("--steps is how long --animate runs: give --animate MODEL too")
    if args.progress_file is not None:  # a step count it may replace; anything else is refused, left as it is
        check_progress_file(Path(args.progress_file))
    root = Path(args.dir)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InvalidValueError(f"{root} exists and is not an empty folder: give a new one")
    if args.from_capture:
        if args.board or args.layout:
            raise InvalidValueError("give --from alone: the capture names its board's layout")
        return _from_capture(args, root)
    if sum(x is not None for x in (args.board, args.layout, args.variant)) > 1:
        raise InvalidValueError("give one of --board, --variant or --layout (--layout jp5|jp6 is --board agx-orin)")
    if args.variant and (args.animate or args.levels != "11"):
        raise InvalidValueError("--variant lays out the variant's own table, unanimated: the simulator "
                                "animates its board's (--board)")
    if args.variant:
        from ..device.table import variants

        args.board = args.variant
    board_id = variants()[args.variant].board if args.variant else args.board or LAYOUT_BOARD[args.layout or "jp5"]
    if board_id != "agx-orin" and args.levels == "13":
        raise InvalidValueError("--levels 13 is an AGX Orin table; this board has its own")
    if args.animate:  # refused here, in one line, before a tree is laid out (not by the process later)
        from ..sim.catalogue import get_workload

        get_workload(args.animate, args.task)
    levels = ORIN_13_LEVELS_HZ if args.levels == "13" else None
    # every clock domain the table gives the board (the EMC's BPMP folder, the cpufreq policies),
    # so that the joint pin (`pin MHZ --emc .. --cpu ..`) can be tried on it
    if args.board:
        board = build_fake_board(root, board=args.board, levels_hz=levels, follow_clamp=not args.animate,
                                 clock_domains=True)
    else:
        board = build_fake_board(root, args.layout or "jp5", levels_hz=levels, follow_clamp=not args.animate,
                                 clock_domains=True)
    idle_w = _write_idle_power(board)
    data = {"sysfs_root": str(board.root.resolve()), "board": board.board, "variant": board.variant,
            "jetpack": board.jetpack,
            "layout": board.layout, "model": board.model,
            "levels_mhz": [hz / 1e6 for hz in board.levels_hz], "rails": sorted(board.rails),
            "domains": list(board.domains), "idle_power_w": idle_w, "animate": args.animate}
    root_arg = str(board.root)
    mid_mhz = f"{board.levels_hz[len(board.levels_hz) // 2] / 1e6:g}"
    joint = joint_pin_example(board.board)

    def text() -> str:
        lines = [f"fake {board.model} ({board.board}, JetPack {board.jetpack}, {len(board.levels_hz)} "
                 f"GPU levels{', ' + ', '.join(board.domains) if board.domains else ''}) in {root_arg}",
                 "try:", f"  pydvfs status --sysfs-root {root_arg}",
                 f"  pydvfs pin {mid_mhz} --sysfs-root {root_arg}"]
        if joint:
            lines.append(f"  pydvfs pin {mid_mhz} {joint} --sysfs-root {root_arg}")
        lines.append(f"  pydvfs restore --sysfs-root {root_arg}")
        return "\n".join(lines)

    emit(args, data, text)
    if not args.animate:
        return 0
    cmd = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", root_arg, "--board", board.board,
           "--model", args.animate, "--task", args.task, "--time-scale", str(args.time_scale)]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    if args.progress_file:
        cmd += ["--progress-file", args.progress_file]
    print(f"animating {args.animate} on {args.task} on the simulated {board.board} "
          f"({args.time_scale:g} simulated s per s); "
          "Ctrl-C stops it and leaves the rails at idle", file=sys.stderr, flush=True)
    env = dict(os.environ)
    t0 = time.monotonic()
    # SIGTERM/SIGHUP (a terminal closed, a service stopped) end the simulated process too, as
    # Ctrl-C does: it is never left running, writing the rails of a board nobody watches.
    with terminate_as_exception():
        signals.hold()
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        finally:
            signum = signals.release()
        try:
            if signum is not None:
                raise Terminated(signum)
            out, _ = proc.communicate()
        except KeyboardInterrupt:
            stop_command(proc)  # it got the same Ctrl-C and puts the idle values back
            print(f"animation ended after {time.monotonic() - t0:.1f} s: interrupted (Ctrl-C); the rails "
                  "are back at idle", file=sys.stderr, flush=True)
            return 0
        except Terminated as e:
            stop_command(proc)  # SIGINT first: the simulated process puts the idle values back
            print(f"animation ended after {time.monotonic() - t0:.1f} s: stopped ({signal.Signals(e.signum).name}); "
                  "the simulated process ended and the rails are back at idle", file=sys.stderr, flush=True)
            raise
    print(animation_end(proc.returncode, out, time.monotonic() - t0), file=sys.stderr, flush=True)
    return 0 if proc.returncode in (0, 130) else proc.returncode


def time_scale(text: str) -> float:
    """argparse type of --time-scale: simulated seconds per real second, > 0 and finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= MAX_TIME_SCALE:
        raise argparse.ArgumentTypeError(f"must be > 0 and at most {MAX_TIME_SCALE:g}: {text!r}")
    return value


time_scale.__name__ = "time scale"


def animation_end(rc: int, stdout: str, real_s: float) -> str:
    """One line: when the animation ended and why (its steps done, interrupted, or failed)."""
    try:
        summary = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = None
    if rc not in (0, 130) or not isinstance(summary, dict):
        return f"animation ended after {real_s:.1f} s: the simulated process failed (exit status {rc})"
    why = ("interrupted" if summary.get("interrupted") else
           f"its {summary.get('target_steps')} steps are done")
    return (f"animation ended after {real_s:.1f} s ({summary.get('sim_duration_s', 0.0):.0f} simulated s): "
            f"{why} ({summary.get('steps')} steps); the rails are back at idle")


def _from_capture(args: argparse.Namespace, root: Path) -> int:
    """``--from OUT``: the layout of a board capture (``pydvfs capture-board``), rebuilt."""
    from ..device.capture import read_capture, rebuild

    if args.animate:
        raise InvalidValueError("--animate runs on the simulated layouts, not with --from")
    cap = read_capture(args.from_capture)
    rebuild(cap, root)
    meta = cap.get("meta") or {}
    data = {"sysfs_root": str(root.resolve()), "from": str(args.from_capture), "model": meta.get("model"),
            "board": meta.get("board"), "source": meta.get("source"), "entries": len(cap["entries"])}
    emit(args, data, lambda: (f"the board of {args.from_capture} ({data['model'] or 'unknown model'}; "
                              f"{data['source']}) in {root}: {data['entries']} files and links\n"
                              f"try:\n  pydvfs status --sysfs-root {root}"))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "fake-board", parents=[common], help="make a simulated Jetson board (a sysfs tree) to try commands on",
        description="Lay out a simulated Jetson sysfs tree in DIR (a new or empty folder): the GPU's "
                    "devfreq files, power rails and the EMC and CPU clock domains of a board of the "
                    "table (default: the AGX Orin), its rails at the board's simulated idle power. "
                    "Every verb that touches a board takes it with --sysfs-root DIR. With --animate, "
                    "run the simulated fine-tuning of MODEL on it in the foreground: it follows the "
                    "clock you pin and writes the rails, the GPU load and its step count.",
        epilog=examples("pydvfs fake-board /tmp/orin",
                        "pydvfs fake-board /tmp/thor --board thor",
                        "pydvfs fake-board /tmp/nano --board orin-nano-super   (then: pydvfs pin 612 "
                        "--emc 2133 --cpu 1036.8 --sysfs-root /tmp/nano)",
                        "pydvfs fake-board /tmp/orin6 --layout jp6 --levels 13",
                        "pydvfs fake-board /tmp/orin --animate bert-base --progress-file /tmp/steps",
                        "pydvfs status --sysfs-root /tmp/orin      (in a second terminal)"))
    p.add_argument("dir", metavar="DIR", help="where to lay out the tree (a new or empty folder)")
    from ..device.table import boards

    p.add_argument("--board", choices=tuple(boards()), default=None,
                   help="a board of the table (docs/boards.md), laid out as on its newest JetPack "
                        "(AGX Xavier: JetPack 4), with its power modes as nvpmodel names them")
    from ..device.table import variants

    p.add_argument("--variant", choices=tuple(variants()), default=None,
                   help="a variant of a board of the table (docs/boards.md: another release's clock "
                        "table, modes or sensors), laid out on its newest JetPack")
    p.add_argument("--layout", choices=("jp4", "jp5", "jp6"), default=None,
                   help="the older names: jp5: AGX Orin JetPack 5 (the default), jp6: JetPack 6, "
                        "jp4: AGX Xavier (ina3221x)")
    p.add_argument("--levels", choices=LEVEL_TABLES, default="11",
                   help="GPU table: 11 levels 306..1300.5 MHz (default) or 13 levels 114.75..1300.5 MHz")
    p.add_argument("--from", dest="from_capture", metavar="OUT",
                   help="rebuild the layout of a board capture (a file from `pydvfs capture-board OUT`)")
    g = p.add_argument_group("animation")
    g.add_argument("--animate", metavar="MODEL", help="simulate fine-tuning MODEL (e.g. bert-base, pythia-160m) "
                                                      "on the board's simulator profile (every board of the table)")
    g.add_argument("--task", default="SST-2", help="GLUE task of the animation (default SST-2)")
    g.add_argument("--time-scale", type=time_scale, default=100.0, metavar="K",
                   help=f"simulated seconds per real second, > 0 and at most {MAX_TIME_SCALE:g} (default 100)")
    g.add_argument("--steps", type=int_range(1, MAX_STEPS), default=None, metavar="N",
                   help=f"stop after N steps, 1..{MAX_STEPS} (default: the whole run)")
    g.add_argument("--progress-file", metavar="F", help="where the animation writes its step count")
    p.set_defaults(func=cmd_fake_board)

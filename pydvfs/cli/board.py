"""Verbs that look at and change the board: ``status``, ``pin``, ``restore``."""
from __future__ import annotations

import argparse
import sys
import time
import warnings

from ..device import describe_domain, open_device
from ..errors import InvalidValueError, PydvfsError
from .common import (
    _Parser,
    add_above_power_mode,
    add_board_options,
    add_report_output,
    add_store_options,
    count,
    emit,
    examples,
    seconds,
)
from .hold import add_command_argument

LIVE_WINDOW_S = 0.25  # how long `status` samples the rails for its live watts


def _fmt(mhz: float) -> str:
    return f"{mhz:g}"


def live_power(sysfs_root: str, window_s: float = LIVE_WINDOW_S) -> dict | None:
    """Watts per rail, CPU+GPU watts and GPU load over one short window of the C sampler, or
    None where there are no rails to sample (govcore status: live_power, the same)."""
    from ..measure.sampler import Sampler

    try:
        with Sampler(sysfs_root=sysfs_root) as s:
            time.sleep(window_s)
    except PydvfsError:
        return None
    m = s.measurement
    if m.duration_s <= 0:
        return None
    by_role = {"module": m.module_energy_j, "cpu_gpu": m.cpu_gpu_energy_j, "gpu": m.gpu_energy_j}
    # rounded as govcore prints them (%.3f W, %.1f %%), so both front ends say the same
    return {"power_w": {name: round(w, 3) for name, w in m.avg_power_w.items()},
            **{f"{role}_power_w": None if e is None else round(e / m.duration_s, 3)
               for role, e in by_role.items()},
            "gpu_load_pct": None if m.gpu_util_pct is None else round(m.gpu_util_pct, 1)}


ROLE_LABELS = {"module": "module", "cpu_gpu": "cpu+gpu", "gpu": "gpu"}


def roles_text(roles: dict, module_partial: bool = False) -> str:
    """"module = VDD_IN; cpu+gpu = VDD_CPU_GPU_CV; gpu: no rail of its own" (as govcore)."""
    parts = []
    for role, label in ROLE_LABELS.items():
        rails = roles.get(role)
        parts.append(f"{label}: not known" if rails is None else
                     f"{label}: no rail of its own" if not rails else f"{label} = {' + '.join(rails)}"
                     + (" (partial: a rail of the table is missing)" if role == "module" and module_partial else ""))
    return "; ".join(parts)


def zero_rails_warning(power_w: dict) -> str | None:
    """The warning for a board whose rails all read 0 W: nothing measured there means anything."""
    if power_w and all(w == 0 for w in power_w.values()):
        return ("warning: every power rail reads 0 W: the sensor is off, or this is a fake board "
                "nobody animates (`pydvfs fake-board DIR --animate MODEL`); energies will be 0")
    return None


def power_mode_text(mode: dict | None, cap: dict | None) -> str:
    """status's line on the power mode and the GPU cap (govcore's gc_text_power_mode)."""
    mode = mode or {}
    if mode.get("id") is not None and mode.get("name"):
        text = f"mode      {mode['name']} (nvpmodel {mode['id']})"
    else:
        text = f"mode      unknown ({mode.get('unknown') or 'not reported'})"
    if not cap or not cap.get("cap_mhz"):
        return text + "; GPU cap unknown"
    when = "saved before the first pin" if cap["from_saved"] else "now"
    text += f"; GPU cap {_fmt(cap['cap_mhz'])} MHz (max_freq {when} {_fmt(cap['devfreq_max_mhz'])} MHz"
    if cap.get("nvpmodel_clk_cap_mhz"):
        text += f", nvpmodel_clk_cap {_fmt(cap['nvpmodel_clk_cap_mhz'])} MHz"
    return text + ")"


def _status_text(st: dict, learned: dict | None = None, calibrated: str | None = None) -> str:
    rails = ", ".join(r["name"] for r in st["rails"]) or "none found (no power sensor)"
    release = (f" (JetPack {st['jetpack']}, L4T {st['l4t']})" if st.get("jetpack")
               else f" (L4T {st['l4t']})" if st.get("l4t") else "")
    lines = [
        f"board     {st.get('board') or 'unknown'}: {st['model'] or '(no model)'}{release}",
        f"sysfs     {st['sysfs_root']}",
        f"gpu       {st['gpu']} ({st['devfreq_dir']})",
        f"governor  {st['governor']}",
        f"clock     {_fmt(st['cur_mhz'])} MHz (min {_fmt(st['min_mhz'])}, max "
        f"{_fmt(st['max_mhz'])} MHz){', pinned' if st['pinned'] else ''}",
        f"levels    {' '.join(_fmt(f) for f in st['available_mhz'])} MHz ({len(st['available_mhz'])})",
    ]
    live = st.get("live")
    load = live["gpu_load_pct"] if live and live["gpu_load_pct"] is not None else st["gpu_load_pct"]
    if load is not None:
        lines.append(f"gpu load  {load:.1f} %")
    lines.append(f"rails     {rails}")
    lines += [f"skipped   {r['name']}: {r['why']}" for r in st.get("skipped_rails", [])]
    lines.append(f"roles     {roles_text(st['roles'], st.get('module_partial', False))}")
    if live:
        watts = ", ".join(f"{name} {w:.2f} W" for name, w in live["power_w"].items())
        total = "".join(f"; {label} {live[role + '_power_w']:.2f} W" for role, label in ROLE_LABELS.items()
                        if live.get(role + "_power_w") is not None)
        lines.append(f"power     {watts}{total}")
    lines.append(power_mode_text(st.get("power_mode"), st.get("gpu_cap")))
    lines.extend(describe_domain(r) for r in st.get("domains", []))
    saved = st["saved_state"]
    if saved:
        lines.append(
            f"saved     {saved['path']} (governor {saved['governor']}, min {_fmt(saved['min_mhz'])}, "
            f"max {_fmt(saved['max_mhz'])} MHz); `pydvfs restore` puts it back"
        )
    elif not st.get("saved_state_known", True):
        lines.append("saved     not known: no private state folder ($XDG_RUNTIME_DIR is not set); "
                     "pass --state-dir DIR (or set PYDVFS_STATE_DIR) to look there")
    else:
        lines.append("saved     nothing (the board is as it was)")
    if learned is not None:
        lines.append(learned_text(learned))
    if calibrated is not None:
        lines.append(calibrated)
    return "\n".join(lines)


def calibration_status(board_id: str | None, data_dir) -> tuple[dict | None, str | None]:
    """status's record (None: not calibrated and no fit rejected; "calibrated" False: not
    calibrated, "last_rejected" the rejected fit's note) and line on the board's calibration
    (`pydvfs calibrate`, docs/boards.md, docs/calibration.md); no line for a board outside the
    board table."""
    from ..errors import StoreError
    from ..policy.board_calibration import CalibrationStore, board_calibration
    from ..sim.profiles import board_ids, profile

    if board_id is None or board_id not in board_ids():
        return None, None
    cal = board_calibration(board_id, data_dir, prefix="pydvfs status")
    try:
        rejected = CalibrationStore(data_dir).rejection(board_id)
    except (StoreError, OSError):
        rejected = None
    why = f"; the last fit was rejected ({rejected['utc']}, {rejected['source']}): {rejected['why']}" if rejected else ""
    if cal is None:  # a rejected fit is said (no calibration record: "calibration" means calibrated)
        kind = "calibrated profile" if profile(board_id).calibrated else "estimate"
        return ({"calibrated": False, "last_rejected": rejected} if rejected else None,
                f"calibrated no: apply decides from the built-in policy (its simulator is an {kind}); "
                f"`pydvfs calibrate` or one governed run measures this board{why}")
    path = CalibrationStore(data_dir).file_path(board_id)
    refit = (f", refitted {cal.refit_utc} with {cal.online_runs} online run{'s' * (cal.online_runs != 1)}"
             if cal.refit_utc else "")
    return ({"calibrated": True, "measurements": cal.measurements, "created_utc": cal.created_utc, "path": path, "knobs": cal.knobs,
             "online_runs": cal.online_runs, "refit_utc": cal.refit_utc or None,
             "rms_log_error": cal.rms_log_error, "last_rejected": rejected},
            f"calibrated yes: {cal.note()} ({cal.created_utc}{refit}, rms error {100 * cal.rms_log_error:.1f} %), "
            f"stored in {path}{why}")


def learned_text(r: dict) -> str:
    """status's line on the board's store of run records (docs/store.md)."""
    if r["data_dir"] is None:
        return "learned   nothing: the board is not in the board table (no runs are recorded for it)"
    if not r["runs"] and r["warning"]:
        return f"learned   not known: {r['warning']}"
    per = ", ".join(f"{n} {m}" for m, n in sorted(r["by_measure"].items()))
    return (f"learned   from {r['runs']} run{'s' * (r['runs'] != 1)} on this board"
            + (f" ({per}; {r['shapes']} workload shape{'s' * (r['shapes'] != 1)})" if r["runs"] else "")
            + f", recorded in {r['data_dir']}")


def _status_once(args: argparse.Namespace, dev) -> None:
    st = dev.status()
    st["live"] = live_power(dev.sysfs_root) if dev.rails else None
    from ..policy.learned import runs_count

    learned = runs_count(dev.board_id, getattr(args, "data_dir", None))
    if learned["warning"]:
        print(f"pydvfs status: warning: {learned['warning']}", file=sys.stderr, flush=True)
    if learned["runs"]:  # only where set: govcore status (which reads no store) has the same JSON otherwise
        st["learned_runs"] = learned
    cal, cal_line = calibration_status(dev.board_id, getattr(args, "data_dir", None))
    if cal is not None and cal["calibrated"]:  # only where set, as learned_runs
        st["calibration"] = cal
    elif cal is not None:  # not calibrated, and the last fit was rejected: why
        st["calibration_rejected"] = cal["last_rejected"]
    if st["warning"]:
        print(f"pydvfs status: warning: {st['warning']}", file=sys.stderr, flush=True)
    warning = zero_rails_warning(st["live"]["power_w"]) if st["live"] else None
    if warning:
        print(f"pydvfs status: {warning}", file=sys.stderr, flush=True)
    if getattr(args, "json", False) and args.watch is not None:
        emit(args, st, "", line=True)  # one JSON document per refresh, one per line (JSON Lines)
    else:
        emit(args, st, lambda: _status_text(st, learned, cal_line))


def cmd_status(args: argparse.Namespace) -> int:
    dev = open_device(args.sysfs_root, args.state_dir)
    if args.watch is None:
        if args.count is not None:
            raise InvalidValueError("--count N counts the refreshes of --watch: give --watch too")
        _status_once(args, dev)
        return 0
    if not args.watch > 0:
        raise InvalidValueError(f"--watch takes a positive number of seconds, got {args.watch:g}")
    if args.count is not None and args.count < 1:
        raise InvalidValueError("--count must be >= 1")
    n = 0
    try:
        while True:
            t0 = time.monotonic()
            if n and not args.json:
                print(f"--- {time.strftime('%H:%M:%S')} ---", flush=True)
            _status_once(args, dev)
            n += 1
            if args.count is not None and n >= args.count:
                return 0
            time.sleep(max(0.0, args.watch - (time.monotonic() - t0)))
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a watch ends


def cmd_pin(args: argparse.Namespace) -> int:
    from ..device import mhz_to_hz
    from .common import check_report_out
    from .hold import command_of, hold_while, until_exit_note

    cmd = command_of(args)
    check_report_out(args)
    mhz_to_hz(args.mhz)  # govcore's one grammar of a clock, before the board is opened
    dev = open_device(args.sysfs_root, args.state_dir)
    emc = None if args.emc is None else mhz_to_hz(args.emc) / 1e6
    cpu = None if args.cpu is None else mhz_to_hz(args.cpu) / 1e6

    def change():
        # govcore checks the table and snaps, directly or in the daemon (the same words)
        try:
            result = dev.pin(args.mhz, emc_mhz=emc, cpu_mhz=cpu, above_power_mode=args.above_power_mode,
                             nearest=args.nearest)
        except InvalidValueError as e:
            if args.nearest or "outside the board's table" not in str(e):
                raise
            raise InvalidValueError(f"{e}; pass --nearest to pin the nearest level anyway") from None
        if result.warning:
            print(f"pydvfs: warning: {result.warning}", file=sys.stderr, flush=True)
        if result.notice():
            print(f"pydvfs pin: {result.notice()}", file=sys.stderr, flush=True)
        return result

    if cmd:
        def held():
            result = change()
            return result.to_dict(), result.describe()

        return hold_while(args, dev, "pin", cmd, held)
    result = change()
    emit(args, result.to_dict(), result.describe)
    if dev.through_daemon:
        print(until_exit_note("pin", f"pinned {_fmt(result.freq_mhz)} MHz", f"pydvfs pin {args.mhz}"),
              file=sys.stderr)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from ..device import RestoreForcedWarning

    dev = open_device(args.sysfs_root, args.state_dir)
    domains = dev.saved_domains()  # to name them once they are back, as govcore restore does
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RestoreForcedWarning)
        restored = dev.restore(force=args.force)
    for w in caught:
        print(f"pydvfs: warning: {w.message}", file=sys.stderr, flush=True)
    # the board as it is now; cur_freq is not needed, and a restore that succeeded stays one
    # even where the clock cannot be read back
    try:
        st = dev.state()
        lo, hi, gov = st.min_mhz, st.max_mhz, st.governor
    except PydvfsError as e:
        print(f"pydvfs: note: cannot read the clock back ({e}): cur_freq unknown", file=sys.stderr)
        try:
            lo_hz, hi_hz, gov = dev.range_state()
            lo, hi = lo_hz / 1e6, hi_hz / 1e6
        except PydvfsError:
            lo = hi = gov = None
    domains = domains if restored else []
    data = {"restored": restored, "governor": gov, "min_mhz": lo, "max_mhz": hi, "domains": domains}
    if not restored:
        text = "nothing to restore (no saved state for this board)"
    elif lo is None:
        text = "restored the saved clock state (the clock cannot be read back now)"
    else:
        text = f"restored governor {gov or '(unknown)'}, min {_fmt(lo)} MHz, max {_fmt(hi)} MHz" \
            + (f"; and {', '.join(domains)}" if domains else "")
    emit(args, data, text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common], help="show the board, GPU clock, live power and GPU load",
                       description="Discover the Jetson GPU and INA3221 rails; show the clock state, "
                                   "the available levels, the watts each rail draws now and the GPU "
                                   "load (sampled over a quarter second), and any saved state.",
                       epilog=examples("pydvfs status --sysfs-root /tmp/orin",
                                       "pydvfs status --watch 2"))
    p.add_argument("--watch", type=seconds, nargs="?", const=1.0, default=None, metavar="S",
                   help="refresh every S seconds (default 1) until Ctrl-C (with --json: one JSON document per line)")
    p.add_argument("--count", type=count, default=None, metavar="N", help="with --watch: stop after N refreshes")
    add_board_options(p)
    add_store_options(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("pin", parents=[common], help="pin the GPU clock to one level",
                       description="Pin the GPU clock (min = max) to the available level nearest "
                                   "MHZ. The original governor/min/max are saved first; "
                                   "`pydvfs restore` puts them back. With -- CMD the pin is held "
                                   "while CMD runs, then restored (also when CMD fails, on Ctrl-C "
                                   "and SIGTERM), and the exit status is CMD's; through the govcore "
                                   "daemon a pin without CMD ends as this command exits. A clock "
                                   "more than one level outside the board's table (a typo such as "
                                   "99999) is refused unless --nearest is given. The power mode "
                                   "(nvpmodel) is the ceiling: a level above its GPU cap is "
                                   "lowered to it, with a notice, unless --above-power-mode. --emc "
                                   "pins the memory clock (one of its rates) and --cpu every "
                                   "cpufreq policy (each one's nearest level) with the GPU, as one: "
                                   "a clock not in a table or above the power mode's cap is refused "
                                   "before anything is written, and restore puts every clock back.",
                       epilog=examples("pydvfs pin 714 --sysfs-root /tmp/orin",
                                       "pydvfs pin 612 --emc 2133 --cpu 1036.8",
                                       "pydvfs pin 714 -- python train.py",
                                       "pydvfs pin 5000 --nearest --sysfs-root /tmp/orin"))
    p.add_argument("mhz", metavar="MHZ", help="clock in MHz; snapped to the board's table")

    def pin_options(q: argparse.ArgumentParser) -> argparse.ArgumentParser:
        q.add_argument("--nearest", action="store_true",
                       help="pin the nearest level even when MHZ lies far outside the table")
        q.add_argument("--emc", metavar="MHZ", default=None,
                       help="also pin the memory clock (EMC) to this rate, one of its table's")
        q.add_argument("--cpu", metavar="MHZ", default=None,
                       help="also pin every CPU policy (min = max) to its level nearest MHZ")
        add_above_power_mode(q)
        add_report_output(q)
        return add_board_options(q)

    pin_options(p)
    add_command_argument(p, pin_options(_Parser(prog="pydvfs pin", add_help=False, parents=[common])))
    p.set_defaults(func=cmd_pin)

    p = sub.add_parser("restore", parents=[common], help="put back the saved clock state",
                       description="Put back the governor/min/max saved before the first change "
                                   "(and the EMC's lock and rate and each CPU policy's governor "
                                   "and min/max, saved with them). "
                                   "Safe to run any number of times, and from a new process after "
                                   "a crash. While another process governs the GPU (holds its "
                                   "lock) it is refused, naming that process, unless --force. "
                                   "A saved state the board no longer matches is put back as "
                                   "far as the board allows, then removed; what was left is "
                                   "named.")
    add_board_options(p)
    p.add_argument("--force", action="store_true",
                   help="restore even while another process governs the GPU, and drop a saved "
                        "state that cannot be put back (damaged, or refused by the board) "
                        "after writing what it can")
    p.set_defaults(func=cmd_restore)

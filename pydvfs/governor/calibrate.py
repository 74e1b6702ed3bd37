"""``pydvfs calibrate``: calibrate the board's simulator from one training job (docs/boards.md,
"Calibrating a board").

While CMD trains (its step count in the progress file, as for ``pydvfs run``), the board is
pinned in turn at the clocks that tell the board's uncertainty family apart best
(:func:`pydvfs.policy.board_calibration.design`, MAXN among them: the board's own governor), each
measured over one window (the run verb's :class:`WindowParams`: at least ``min_window_s`` and
``min_steps`` after ``settle_s``), the simulator's free parameters are fitted to the J/step and
s/step measured (:func:`pydvfs.policy.board_calibration.fit`; with the online runs the board's store
already holds: :func:`pydvfs.policy.board_calibration.refit`) and stored in the board's data folder,
with a record the user can publish (JSON and Markdown: the board's capture without identifiers,
the measured curve beside the simulator's prediction before and after, the decisions before and
after: :func:`pydvfs.policy.board_calibration.share_record`).
Then CMD is stopped (``keep_running``: it finishes at the clock the calibrated simulator
chooses for it). The board is restored on every path.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from ..command import exit_status, start_command, stop_command
from ..device import open_device
from ..errors import InvalidValueError, PydvfsError, StoreError
from ..measure.energy import DEFAULT_MEASURE, check_measure
from ..measure.sampler import Sampler
from ..progress import StepsSeen, check_progress_file, read_progress_tokens
from .engine import WindowParams, window_energy_j


def _wait(proc, progress: Path, seen: StepsSeen, until: Callable[[float, int | None], bool], clock, sleep,
          poll_s: float, what: str, timeout_s: float):
    """Poll until ``until(t, steps)``, ``steps`` the steps ``seen`` since the start (None until
    CMD moved the count: a count left in the file is not CMD training); an error where CMD ends
    or no step comes within ``timeout_s``."""
    t0, last_steps, last_t = clock(), None, clock()
    while True:
        seen.see(*read_progress_tokens(progress))
        steps = seen.steps if seen.moved else None
        now = clock()
        if steps != last_steps:
            last_steps, last_t = steps, now
        if until(now, steps):
            return steps
        if proc.poll() is not None:
            raise InvalidValueError(f"the command ended (status {exit_status(proc.returncode)}) {what}: "
                                    "calibrate needs a job that trains for a few minutes")
        if now - last_t > timeout_s:
            if steps is None:
                raise InvalidValueError(f"no step count came in {progress} in {timeout_s:g} s {what}: calibrate "
                                        "needs CMD to write its completed step count there (--progress-timeout "
                                        "waits longer); the board was restored")
            raise InvalidValueError(f"no new step in {progress} for {timeout_s:g} s {what}")
        if now - t0 < 0:  # a clock that goes back
            t0 = now
        sleep(poll_s)


def _builtin_decisions(dev, measure: str) -> dict:
    """The built-in policy's clock (None: MAXN) for each workload a shareable record shows."""
    from ..policy.apply import decide
    from ..policy.board_calibration import RECORD_WORKLOADS
    from ..sim.catalogue import get_workload

    runs = [get_workload(m, t) for m, t in RECORD_WORKLOADS]
    return {w.name: decide(w.workload(), sysfs_root=dev.sysfs_root, energy=measure, use_runs=False).freq_mhz
            for w in runs}


def _write_record(store, cal, dev, before: dict) -> list[str]:
    """The shareable record (JSON and Markdown) beside the calibration; their paths."""
    from ..device.capture import capture_board
    from ..policy.board_calibration import record_markdown, share_record

    rec = share_record(cal, capture_board(dev.sysfs_root, source="pydvfs calibrate", board_id=cal.board), before)
    js, md = store.record_names(cal.board)
    return [store.write(cal.board, js, json.dumps(rec, indent=1) + "\n"),
            store.write(cal.board, md, record_markdown(rec))]


def calibrate(cmd: Sequence[str], workload, progress_file, *, keep_running: bool = False,
              window: WindowParams | None = None, rate_hz: float | None = None, sysfs_root=None,
              state_dir=None, data_dir=None, energy: str = DEFAULT_MEASURE, n_clocks: int = 4,
              log=None, clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> dict:
    """Calibrate the board from CMD's training (see the module); returns the report."""
    from ..policy.board_calibration import (
        CalibrationStore,
        FitRejected,
        calibrated_choice,
        design,
        fit,
        new_calibration,
        refit,
        sim_run_for,
    )
    from ..policy.store import RunStore
    from ..workload import Workload

    cmd = list(cmd)
    if not cmd:
        raise InvalidValueError("no training command given (put it after --)")
    if not progress_file:
        raise InvalidValueError("calibrate needs --progress-file F: the step count CMD writes")
    check_measure(energy)
    wl = Workload.from_any(workload)
    window = window or WindowParams()
    log = log or sys.stderr
    progress = Path(progress_file)
    seen = StepsSeen(check_progress_file(progress))  # a count left there is counted from, never removed
    dev = open_device(sysfs_root, state_dir)
    board_id = dev.board_id
    if board_id is None or dev.board is None:
        raise InvalidValueError("calibrate needs a board of the board table (pydvfs status names it)")
    from ..sim.profiles import profile

    profile(board_id)  # a board without a simulator profile: a clear error before anything runs
    store = CalibrationStore(data_dir)  # the folder is checked before the board is touched
    run = sim_run_for(wl)
    clocks = design(board_id, run, n_clocks, energy)
    sampler = Sampler(rate_hz=rate_hz, sysfs_root=dev.sysfs_root)
    print(f"pydvfs calibrate: measuring {len(clocks)} settings of {board_id} while {cmd[0]} trains: "
          + ", ".join("MAXN" if f is None else f"{f:g} MHz" for f in clocks), file=log, flush=True)
    measured, proc, report = {}, None, {"command": cmd, "board": board_id, "clocks_mhz": clocks}
    poll = window.poll_interval_s
    t_start = clock()
    try:
        with dev.governing(), sampler:
            proc = start_command(cmd, {"PYDVFS_POLICY": "calibrate"})
            try:
                print(f"pydvfs calibrate: waiting up to {window.progress_timeout_s:g} s for {cmd[0]}'s first step "
                      f"in {progress}", file=log, flush=True)
                for f in clocks:
                    if f is None:
                        dev.restore()
                    else:
                        dev.pin(f)
                    name = "MAXN" if f is None else f"{f:g} MHz"
                    t_set = clock()
                    s0 = _wait(proc, progress, seen, lambda t, s: t - t_set >= window.settle_s and s is not None,
                               clock, sleep, poll, f"before {name} was measured", window.progress_timeout_s)
                    sampler.begin_window("cal")
                    t0 = clock()
                    s1 = _wait(proc, progress, seen, lambda t, s: t - t0 >= window.min_window_s and s is not None
                               and s - s0 >= window.min_steps, clock, sleep, poll,
                               f"while {name} was measured", window.stall_s)
                    m = sampler.end_window("cal")
                    e = window_energy_j(m, energy)
                    if e is None:
                        raise InvalidValueError(f"the board's rails give no {energy} energy to calibrate on")
                    measured[f] = (e / (s1 - s0), m.duration_s / (s1 - s0))
                    print(f"pydvfs calibrate: {name}: {measured[f][0]:.5g} J/step, {measured[f][1]:.5g} s/step",
                          file=log, flush=True)
                try:
                    knobs, rms = fit(board_id, run, measured, energy)
                except FitRejected as e:  # the last good calibration (or none) stays
                    with contextlib.suppress(StoreError, OSError):
                        store.note_rejection(board_id, str(e), "pydvfs calibrate")
                    raise FitRejected(f"no calibration stored (the board's is as it was): {e}") from None
                cal = new_calibration(board_id, knobs, rms, wl, measured, energy)
                before = _builtin_decisions(dev, energy)  # the policy's, before the calibration decides
                with store.locked(board_id):  # with the online runs the store already holds
                    try:
                        cal, left = refit(cal, RunStore(data_dir).load(board_id).records)
                    except FitRejected as e:
                        left = 0
                        print(f"pydvfs calibrate: this job's fit alone is stored: with the recorded online runs "
                              f"the fit was rejected: {e}", file=log, flush=True)
                    path = store.save(cal)
                    store.clear_rejection(board_id)
                if left:
                    print(f"pydvfs calibrate: {left} recorded run{'s' * (left != 1)} the fit could not follow "
                          "left out", file=log, flush=True)
                rms = cal.rms_log_error
                record = _write_record(store, cal, dev, before)
                chosen = calibrated_choice(cal, wl, dev.available_frequencies_mhz, energy)
                report.update(calibration=cal.to_dict(), path=path, record=record, chosen_mhz=chosen,
                              measured_minutes=(clock() - t_start) / 60.0)
                print(f"pydvfs calibrate: {cal.note()} (rms error {100 * rms:.1f} %), stored in {path}; "
                      f"this job's clock: {chosen:g} MHz", file=log, flush=True)
                if keep_running:
                    dev.pin(chosen)
                    proc.wait()
                else:
                    stop_command(proc)
            except BaseException:
                stop_command(proc)
                raise
    finally:
        try:
            restored = dev.restore()
        except PydvfsError:
            restored = False
            if proc is None or proc.poll() is None:
                raise
    report.update(exit_status=exit_status(proc.returncode), restored=restored, stopped=not keep_running)
    return report


__all__ = ["calibrate"]

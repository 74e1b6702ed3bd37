"""The characterisation sweep on a board (paper A, steps 1-2): run a training command at every
GPU clock and under MAXN, measure each run with the C sampler, and append one dataset row per run.

Nothing is lost: rows are flushed as they complete, a rerun of the same sweep skips what is
already in the file, a half-written last line is cut off, and the board is restored at the end,
on Ctrl-C and on any error.
"""
from __future__ import annotations

import math
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..command import exit_status, start_command, stop_command
from ..device import mhz_to_hz, open_device
from ..device.levels import check_near_table, nearest_level
from ..errors import CommandError, InvalidValueError
from ..measure.energy import of as energy_of
from ..measure.energy import unknown_reason
from ..measure.sampler import Sampler
from ..signals import terminate_as_exception
from ..workload import WORKLOAD_ENV, Workload, parse_workload
from .dataset import RAILS, DatasetWriter, iter_rows

# The signals that stop a job (Ctrl-C, scancel, a time limit, a closed terminal, SIGKILL after
# KillWait): a command ended by one was cut off, not measured.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL})

MAX_REPEATS = 100  # runs per setting; a sweep of 12 settings x 100 repeats already takes days
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def workload_text(spec: dict) -> str:
    """A parsed workload (:func:`parse_workload`) written back in its grammar: what a cell's
    command reads in ``$PYDVFS_WORKLOAD``."""
    return ",".join(f"{k}={v}" for k, v in spec.items())


def workload_env(spec: dict) -> dict[str, str]:
    """The environment a cell's command gets for its workload: ``PYDVFS_WORKLOAD`` (the spec) and
    ``PYDVFS_WORKLOAD_<KEY>`` for each of its fields (``PYDVFS_WORKLOAD_MODEL=bert``)."""
    return {WORKLOAD_ENV: workload_text(spec), **{f"{WORKLOAD_ENV}_{k.upper()}": str(v) for k, v in spec.items()}}


def cell_command(cmd: Sequence[str], spec: dict) -> list[str]:
    """``cmd`` with each ``{key}`` filled from the workload's field of that name (``{model}``,
    ``{task}``, ``{name}``, ...; ``{{`` and ``}}`` stand for braces). InvalidValueError naming the
    placeholder for a key the grammar does not have, or the workload does not give: checked
    before anything runs."""
    from .. import _core

    def fill(m: re.Match) -> str:
        key = m.group(1)
        if key is None:
            return m.group(0)[0]
        if key not in _core.WORKLOAD_FIELDS:
            raise InvalidValueError(f"the command's {{{key}}} is not a workload field (known: "
                                    f"{', '.join(sorted(_core.WORKLOAD_FIELDS))}; write {{{{{key}}}}} for the text "
                                    f"{{{key}}})")
        if key not in spec:
            raise InvalidValueError(f"the command's {{{key}}} has no value in workload {spec.get('name')!r} "
                                    f"(give {key}=... in its spec)")
        return str(spec[key])

    return [_PLACEHOLDER.sub(fill, arg) for arg in cmd]


def parse_freqs(text: str, levels_mhz: Sequence[float]) -> list[float]:
    """``all`` or a list of MHz (``510,714`` or ``510 714``), each by govcore's one grammar of a
    clock and snapped to the board's table (duplicates dropped); one more than a level outside
    the table is refused, as ``pin`` without ``--nearest`` refuses it."""
    if text.strip() == "all":
        return list(levels_mhz)
    parts = [p for p in re.split(r"[, ]+", text) if p]
    if not parts:
        raise InvalidValueError("--freqs: give 'all' or clocks in MHz, e.g. 510,714,1300.5")
    out = []
    for part in parts:
        try:
            mhz = mhz_to_hz(part) / 1e6
        except InvalidValueError as e:
            raise InvalidValueError(f"--freqs: {e}") from None
        check_near_table(levels_mhz, mhz, "--freqs")
        level = nearest_level(levels_mhz, mhz)
        if level not in out:
            out.append(level)
    return out


@dataclass
class Progress:
    """One line on stderr per run, with an ETA from the mean duration so far."""

    total: int
    stream: object = None  # None: sys.stderr as it is when a line is written
    done: int = 0
    seconds: list = field(default_factory=list)

    def step(self, label: str, seconds: float, status: int) -> None:
        self.done += 1
        self.seconds.append(seconds)
        eta = (self.total - self.done) * (sum(self.seconds) / len(self.seconds))
        flag = "" if status == 0 else f"  FAILED (exit {status})"
        print(f"[{self.done:>4}/{self.total}] {label:<22s} {seconds:7.1f} s  ETA {_hms(eta)}{flag}",
              file=self.stream or sys.stderr, flush=True)


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_key(workload: str, setting: str, freq_mhz, repeat: int, emc_mhz=None, cpu_mhz=None) -> tuple:
    """What identifies one run of a dataset: a rerun (board or --sim) skips the keys present.
    ``emc_mhz``/``cpu_mhz``: the mode's other clocks (None: the stock mode's)."""
    def mhz(x):
        return None if x in (None, "") else round(float(x), 3)

    return (workload, setting, mhz(freq_mhz), int(repeat), mhz(emc_mhz), mhz(cpu_mhz))


def _idle_power_w(sampler: Sampler, seconds: float) -> float | None:
    """Idle CPU+GPU power (the dataset's ``idle_power_w``), by rail role; None where unknown."""
    if seconds <= 0:
        return None
    sampler.begin_window("idle")
    time.sleep(seconds)
    m = sampler.end_window("idle")
    e = energy_of(m, "cpu-gpu")
    return None if e is None or m.duration_s <= 0 else e / m.duration_s


def run_sweep(cmd: Sequence[str], workload: dict, out: str | os.PathLike, freqs: str = "all",
              repeats: int = 1, settle_s: float = 2.0, idle_s: float = 5.0, rate_hz: float | None = None,
              seed: int = 0, sysfs_root=None, state_dir=None, progress: Progress | None = None,
              sleep: Callable[[float], None] = time.sleep, on_row: Callable[[dict], None] | None = None,
              retry_failed: bool = False) -> dict:
    """Sweep ``cmd`` over the clocks; returns a summary (runs done, skipped, failed).
    ``on_row``: called with each row once it is written (a Slurm task records its node).
    ``retry_failed``: a cell whose last run failed is run again (its rows stay; the last counts)."""
    if not cmd:
        raise InvalidValueError("no training command given (put it after --)")
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidValueError(f"--repeats must be within 1..{MAX_REPEATS}, got {repeats}")
    for what, value in (("--settle", settle_s), ("--idle", idle_s)):
        if not (math.isfinite(value) and 0 <= value <= 3600):
            raise InvalidValueError(f"{what} must be within 0..3600 seconds, got {value!r}")
    dev = open_device(sysfs_root, state_dir)
    board = dev.board  # the board table's row: which rails make module and CPU+GPU energy
    if board is None:  # a row without either energy is no measurement
        raise InvalidValueError(unknown_reason(board, "module", dev.model))
    levels = parse_freqs(freqs, dev.available_frequencies_mhz)
    settings = [("fixed", f) for f in levels] + [("maxn", None)]
    wl = Workload.from_any(workload)
    name = workload["name"]
    cmd = cell_command(cmd, workload)  # before the first pin: a bad placeholder changes nothing
    cell_env = workload_env(workload)

    writer = DatasetWriter(out)  # repairs a half-written last line before we read what is done
    done = {run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"]): r for r in iter_rows(out)}
    if retry_failed:
        done = {k: r for k, r in done.items() if r["exit_status"] in (0, None)}
    plan = []
    for rep in range(repeats):
        order = list(settings)
        random.Random(f"{seed}/{name}/{rep}").shuffle(order)  # randomised per repeat
        plan += [(rep, s, f) for s, f in order if run_key(name, s, f, rep) not in done]
    summary = {"out": str(out), "workload": name, "planned": len(settings) * repeats,
               "skipped": len(settings) * repeats - len(plan), "runs": 0, "failed": [],
               "repaired_bytes": writer.repaired_bytes}
    idle_prev = [r["idle_power_w"] for r in done.values() if r["workload"] == name and r["idle_power_w"]]
    progress = progress or Progress(len(plan))
    try:
        # SIGTERM/SIGHUP/SIGQUIT unwind like Ctrl-C, through the restore below
        # one owner per GPU for the whole sweep, MAXN runs (restored board) included
        with terminate_as_exception(), dev.governing(), \
                Sampler(rate_hz=rate_hz, sysfs_root=dev.sysfs_root) as sampler:
            if plan:
                dev.restore()
                idle_w = idle_prev[0] if idle_prev else _idle_power_w(sampler, idle_s)
            for rep, setting, mhz in plan:
                if setting == "maxn":
                    dev.restore()
                else:
                    dev.pin(mhz)
                sleep(settle_s)
                label = f"{'MAXN' if mhz is None else f'{mhz:g} MHz'} rep {rep}"
                m, status = _measure(sampler, cmd, {**cell_env, "PYDVFS_SETTING": setting,
                                                     "PYDVFS_FREQ_MHZ": "" if mhz is None else f"{mhz:g}"})
                # ended by a termination signal (scancel or a time limit signals the whole step, and
                # the command may die before this process's own handler runs): a cut-off run, not a
                # measurement of the cell; left out, so that a resumed sweep runs it again
                recorded = status - 128 not in STOP_SIGNALS
                if recorded:
                    row = _row(workload, wl, setting, mhz, rep, m, status, idle_w, board)
                    writer.write(row)
                    if on_row:
                        on_row(row)
                    summary["runs"] += 1
                if status != 0:
                    summary["failed"].append({"setting": setting, "freq_mhz": mhz, "repeat": rep, "exit_status": status,
                                              "recorded": recorded})
                progress.step(label, m.duration_s, status)
    finally:
        try:
            dev.restore()  # first: closing the dataset can fail too (a full disk)
        finally:
            writer.close()
    return summary


def _measure(sampler: Sampler, cmd: Sequence[str], extra_env: dict):
    sampler.begin_window("run")
    try:
        proc = start_command(cmd, extra_env)
    except CommandError:
        sampler.end_window("run")
        raise
    try:
        proc.wait()
    except BaseException:  # Ctrl-C / an error of ours: do not leave the command running
        stop_command(proc)
        raise
    m = sampler.end_window("run")
    return m, exit_status(proc.returncode)


def _row(spec: dict, wl: Workload, setting: str, mhz, rep: int, m, status: int, idle_w, board) -> dict:
    energy = {f"energy_j_{r}": m.energy_j.get(r) for r in RAILS}
    cpu_gpu = m.cpu_gpu_energy_j  # by rail role (the sampler's): None where a role's rails were not read
    return {
        "workload": spec["name"], "model": wl.model, "model_size": spec.get("model_size"),
        "task": spec.get("task", ""), "layers": wl.layers, "hidden": wl.hidden,
        "heads": spec.get("heads"), "params": spec.get("params"), "seq_len": wl.seq_len,
        "batch_size": spec.get("batch_size") or wl.batch_size, "gpu_util_pct": None, **wl.method_columns(),
        "freq_mhz": mhz, "setting": setting, "repeat": rep, "duration_s": m.duration_s,
        **energy, "board": board.id, "energy_module_j": m.module_energy_j, "energy_cpu_gpu_j": cpu_gpu,
        "avg_power_w": None if cpu_gpu is None or m.duration_s <= 0 else cpu_gpu / m.duration_s,
        "avg_gpu_load_pct": m.gpu_util_pct, "samples": m.samples, "sampler_errors": m.read_errors,
        "exit_status": status, "source": "board", "idle_power_w": idle_w,
    }


__all__ = ["run_sweep", "parse_workload", "parse_freqs", "Progress", "cell_command", "workload_env"]

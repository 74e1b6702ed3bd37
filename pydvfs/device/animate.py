"""Move the power rails of a fake board: a known waveform written into the rail files while a
sampler reads them, so that its integrated energy can be checked against the exact value.

For tests and benchmarks only; production code never imports it (like ``fake.py``).

The writer is a separate process (``python -m pydvfs.device.animate``) so it never competes
with the process under test for the GIL. It rewrites the files in place with the fixed-width
fields of ``fake.py`` at ``rate_hz`` (default 4 kHz) on absolute deadlines, and logs the time
at which each value became visible. Two references follow:

- ``Waveform.energy_j(t0, t1)``: the analytic integral of the waveform;
- ``Animation.written_energy_j(rail, t0, t1)``: the integral of what the files actually held
  (each written value held until the next write), which includes the writer's own lag,
  rounding to whole mA / mW, and any stall when the machine was busy.

A sampler is judged against the second (that is the signal it was given); the difference
between the two is the writer's error, reported separately.

Times are CLOCK_MONOTONIC ns, i.e. ``time.monotonic_ns()``, the clock the C sampler uses.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path

from .fake import FIELD_WIDTH, FakeBoard


@dataclass(frozen=True)
class Waveform:
    """Power of one rail: a constant bus voltage and a current made of a base, a sine and a
    square wave of steps. Units in the names; t_s counts from the animation's origin."""

    voltage_mv: float = 5000.0
    base_ma: float = 2000.0
    sine_ma: float = 800.0      # amplitude
    sine_hz: float = 3.0
    step_ma: float = 1000.0     # added during the first half of each step period
    step_period_s: float = 0.25

    def current_ma(self, t_s: float) -> float:
        i = self.base_ma + self.sine_ma * math.sin(2 * math.pi * self.sine_hz * t_s)
        if self.step_ma and (t_s % self.step_period_s) < self.step_period_s / 2:
            i += self.step_ma
        return i

    def power_w(self, t_s: float) -> float:
        return self.voltage_mv * self.current_ma(t_s) / 1e6

    def _high_time_s(self, t_s: float) -> float:
        """Time in [0, t_s] during which the step is up."""
        period = self.step_period_s
        whole = math.floor(t_s / period)
        return whole * period / 2 + min(t_s - whole * period, period / 2)

    def _charge_mas(self, t_s: float) -> float:
        """Integral of the current from 0 to t_s, mA x s."""
        q = self.base_ma * t_s
        if self.sine_ma and self.sine_hz:
            w = 2 * math.pi * self.sine_hz
            q += self.sine_ma * (1 - math.cos(w * t_s)) / w
        if self.step_ma:
            q += self.step_ma * self._high_time_s(t_s)
        return q

    def energy_j(self, t0_s: float, t1_s: float) -> float:
        """Exact energy between t0_s and t1_s (from the origin), J."""
        return self.voltage_mv * (self._charge_mas(t1_s) - self._charge_mas(t0_s)) / 1e6


@dataclass
class _Target:
    """Where one rail's waveform is written."""

    kind: str                   # "hwmon": write mA (voltage fixed) | "ina3221x": write mW |
    voltage_path: str | None    # "power": write uW (an hwmon power channel, the INA238)
    value_path: str             # current (mA) or power (mW, uW) file
    waveform: Waveform

    def value(self, t_s: float) -> int:
        if self.kind == "hwmon":
            return round(self.waveform.current_ma(t_s))
        return round(self.waveform.power_w(t_s) * (1e6 if self.kind == "power" else 1000))

    @property
    def uw_per_unit(self) -> float:
        """uW per unit written: mA x the fixed mV, 1000 for mW, 1 for uW."""
        return self.waveform.voltage_mv if self.kind == "hwmon" else 1000.0 if self.kind == "ina3221x" else 1.0


class Animation:
    """A running writer process. Use :func:`animate` to start one."""

    def __init__(self, board: FakeBoard, waveforms: dict[str, Waveform], rate_hz: float,
                 duration_s: float, load_permille: int | None):
        self.board = board
        self.waveforms = dict(waveforms)
        self.rate_hz = rate_hz
        self.origin_ns = 0  # the writer's t = 0; it reports it once it runs
        self._names = list(waveforms)
        self._tmp = tempfile.TemporaryDirectory(prefix="pydvfs-animate-")
        self._log = Path(self._tmp.name) / "writes.bin"
        targets = []
        for name in self._names:
            rail = board.rails[name]
            wf = waveforms[name]
            if rail.power_path is not None:
                kind = "power" if rail.power_unit == "uW" else "ina3221x"
                targets.append(_Target(kind, None, str(rail.power_path), wf))
            else:
                targets.append(_Target("hwmon", str(rail.voltage_path), str(rail.current_path), wf))
        self._targets = targets
        spec = {
            "targets": [{**asdict(t), "waveform": asdict(t.waveform)} for t in targets],
            "rate_hz": rate_hz,
            "duration_s": duration_s,
            "log": str(self._log),
            "load_path": str(board.gpu_dir / "load") if load_permille is not None and board.has_load else None,
            "load_permille": load_permille,
        }
        # Write the first values here, so the files hold the waveform before anyone reads them.
        for t in targets:
            if t.voltage_path:
                _put(t.voltage_path, round(t.waveform.voltage_mv))
            _put(t.value_path, t.value(0.0))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2])] +
            ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pydvfs.device.animate", json.dumps(spec)], env=env,
            stdout=subprocess.PIPE)
        self._t_ns: array | None = None
        self._values: array | None = None

    def wait_started(self) -> None:
        """Block until the writer runs (it prints its origin, CLOCK_MONOTONIC ns)."""
        line = self._proc.stdout.readline()
        self._proc.stdout.close()
        if not line.strip():
            self._proc.wait(timeout=30)
            raise RuntimeError("the animator did not start")
        self.origin_ns = int(line)

    def stop(self) -> None:
        """Stop the writer (if still running) and load its log."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        rc = self._proc.wait(timeout=30)
        if rc != 0:
            raise RuntimeError(f"animator exited with status {rc}")
        raw = self._log.read_bytes()
        n = len(self._names)
        rows = array("q")
        rows.frombytes(raw)
        self._t_ns = rows[0::n + 1]
        self._values = rows
        self._tmp.cleanup()

    def __enter__(self) -> "Animation":
        return self

    def __exit__(self, *exc) -> None:
        if self._t_ns is None:
            self.stop()

    # -- references ---------------------------------------------------------------------------
    def energy_j(self, rail: str, t0_ns: int, t1_ns: int) -> float:
        """The waveform's exact energy between two monotonic times, J."""
        o = self.origin_ns
        return self.waveforms[rail].energy_j((t0_ns - o) / 1e9, (t1_ns - o) / 1e9)

    def write_times_ns(self) -> list[int]:
        if self._t_ns is None:
            raise RuntimeError("stop() the animation first")
        return list(self._t_ns)

    def written_energy_j(self, rail: str, t0_ns: int, t1_ns: int) -> float:
        """Energy of what the rail's files held between t0 and t1 (each value held until the
        next write), J. Call after stop()."""
        if self._t_ns is None:
            raise RuntimeError("stop() the animation first")
        n = len(self._names)
        col = self._names.index(rail) + 1
        target = self._targets[col - 1]
        first = target.value(0.0)  # the value written before the writer started (__init__)
        values = self._values[col::n + 1]
        return held_integral(self._t_ns, values, first, t0_ns, t1_ns) * target.uw_per_unit / 1e6

    def max_write_gap_s(self) -> float:
        """Longest time between two writes (a measure of how busy the machine was)."""
        t = self.write_times_ns()
        return max((b - a for a, b in zip(t, t[1:])), default=0) / 1e9


def held_integral(t_ns, values, initial: float, t0_ns: int, t1_ns: int) -> float:
    """Integral over [t0_ns, t1_ns] of a value written at times ``t_ns`` (ascending, CLOCK_MONOTONIC
    ns) and held until the next write; ``initial`` is held before the first write. Units: the
    value's x seconds (W -> J). This is how a writer's log says what a reader of the files saw."""
    total = 0.0
    held = initial
    t_prev = t0_ns
    for t, v in zip(t_ns, values):
        if t > t0_ns:
            seg_end = min(t, t1_ns)
            total += held * (seg_end - t_prev) / 1e9
            t_prev = seg_end
        held = v
        if t >= t1_ns:
            break
    if t_prev < t1_ns:
        total += held * (t1_ns - t_prev) / 1e9
    return total


def animate(board: FakeBoard, waveforms: dict[str, Waveform], rate_hz: float = 4000.0,
            duration_s: float = 5.0, load_permille: int | None = None) -> Animation:
    """Start writing ``waveforms`` (rail name -> Waveform) into ``board``'s files for at most
    ``duration_s``. Returns once the first values are in the files; the waveform's t = 0 is
    ``Animation.origin_ns``."""
    if not 0 < rate_hz <= 50000:
        raise ValueError("rate_hz must be in (0, 50000]")
    for name in waveforms:
        if name not in board.rails:
            raise KeyError(f"no rail {name!r} on the fake board")
    anim = Animation(board, waveforms, rate_hz, duration_s, load_permille)
    anim.wait_started()
    return anim


# ------------------------------------------------------------------- the writer process ---

def _put(path: str, value: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, f"{value:>{FIELD_WIDTH - 1}d}\n".encode(), 0)
    finally:
        os.close(fd)


def _writer(spec: dict) -> int:
    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    targets = [_Target(t["kind"], t["voltage_path"], t["value_path"], Waveform(**t["waveform"]))
               for t in spec["targets"]]
    fds = [os.open(t.value_path, os.O_WRONLY) for t in targets]
    if spec.get("load_path"):
        _put(spec["load_path"], int(spec["load_permille"]))
    period_ns = int(1e9 / spec["rate_hz"])
    origin = time.monotonic_ns()
    sys.stdout.write(f"{origin}\n")
    sys.stdout.flush()
    end = origin + int(spec["duration_s"] * 1e9)
    log = array("q")
    pwrite, monotonic_ns, width = os.pwrite, time.monotonic_ns, FIELD_WIDTH - 1
    deadline = origin
    while not stop:
        now = monotonic_ns()
        if now < deadline:
            time.sleep((deadline - now) / 1e9)
        t_s = (monotonic_ns() - origin) / 1e9
        values = [t.value(t_s) for t in targets]
        for fd, v in zip(fds, values):
            pwrite(fd, f"{v:>{width}d}\n".encode(), 0)
        t_visible = monotonic_ns()  # every file holds its new value from here on
        log.append(t_visible)
        log.extend(values)
        if t_visible >= end:
            break
        deadline += period_ns
        if deadline < t_visible:  # fell behind: keep the grid, skip the missed ticks
            deadline += ((t_visible - deadline) // period_ns + 1) * period_ns
    for fd in fds:
        os.close(fd)
    with open(spec["log"], "wb") as f:
        log.tofile(f)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write a power waveform into a fake board's rails")
    p.add_argument("spec", help="JSON written by pydvfs.device.animate.Animation")
    return _writer(json.loads(p.parse_args(argv).spec))


if __name__ == "__main__":
    sys.exit(main())

"""A load-following GPU governor like ``nvhost_podgov``, run against the step model.

Every ``podgov_window_s`` the governor looks at the GPU load of the last window (busy share):
at or above ``podgov_load_max`` it jumps to the top allowed clock; otherwise it proposes
``f * load / podgov_load_target`` and takes the lowest OPP at or above it. The proposal is
clamped to [min, max], as the devfreq core does. A step alternates a GPU-busy phase (its length
depends on the clock of the moment) and a CPU phase where the GPU idles; so a workload with
long CPU gaps gets lower clocks in the gaps and pays a ramp-up at each step start, and one with
a steady low load settles where its load meets the target. This is what MAXN does: it is not a
pinned top clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

WARMUP_WINDOWS = 40
MIN_WINDOWS = 240
MIN_STEPS = 12
MAX_WINDOWS = 20000


@dataclass(frozen=True)
class PodgovResult:
    mean_freq_mhz: float  # time-weighted
    t_step_s: float
    power_w: dict  # rail -> W, mean over whole steps
    load: float  # GPU busy share
    idle_share: float  # share of time the GPU waited
    clock_trace_mhz: tuple  # clock of each measured window


def propose_mhz(cur_mhz: float, load: float, levels: Sequence[float], load_target: float,
                load_max: float) -> float:
    """The governor's choice for the next window (levels ascending, already clamped)."""
    if load >= load_max:
        return levels[-1]
    target = cur_mhz * load / load_target
    for lv in levels:
        if lv >= target - 1e-9:
            return lv
    return levels[-1]


def simulate_podgov(state_at: Callable[[float], object], levels: Sequence[float], p) -> PodgovResult:
    """Run the governor until the step-averaged energy and time are steady.

    ``state_at(freq_mhz)`` returns a :class:`pydvfs.sim.model.ClockState`.
    """
    levels = tuple(sorted(levels))
    cache: dict = {}

    def st(f):
        if f not in cache:
            cache[f] = state_at(f)
        return cache[f]

    window = p.podgov_window_s
    f = levels[-1]
    phase, left = "gpu", 1.0  # gpu: share of the step's GPU work left; idle: seconds left
    t = 0.0
    energy = {}
    busy_total = 0.0
    freq_time = 0.0
    marks = []  # (t, energy copy, busy_total, freq_time) at each step completion
    trace = []
    n_win = 0
    while True:
        s = st(f)
        t_end = t + window
        busy = 0.0
        while t < t_end - 1e-15:
            if phase == "gpu":
                need = left * s.t_gpu_s
                dt = min(need, t_end - t)
                left -= dt / s.t_gpu_s
                pw = s.busy_power_w
                busy += dt
                if left <= 1e-12:
                    phase, left = "idle", s.t_idle_s
            else:
                dt = min(left, t_end - t)
                left -= dt
                pw = s.idle_power_w
                if left <= 1e-15:
                    phase, left = "gpu", 1.0
            for r, w in pw.items():
                energy[r] = energy.get(r, 0.0) + w * dt
            freq_time += f * dt
            t += dt
            if phase == "gpu" and left == 1.0 and dt > 0:
                marks.append((t, dict(energy), busy_total + busy, freq_time))
        busy_total += busy
        n_win += 1
        if n_win > WARMUP_WINDOWS:
            trace.append(f)
        done = [m for m in marks if m[0] > WARMUP_WINDOWS * window]
        if (n_win >= MIN_WINDOWS and len(done) > MIN_STEPS) or n_win >= MAX_WINDOWS:
            break
        f = propose_mhz(f, busy / window, levels, p.podgov_load_target, p.podgov_load_max)

    done = [m for m in marks if m[0] > WARMUP_WINDOWS * window]
    if len(done) < 2:  # steps longer than the whole simulation: average over the windows
        done = [(WARMUP_WINDOWS * window, {}, 0.0, 0.0), (t, energy, busy_total, freq_time)]
        steps = (t - WARMUP_WINDOWS * window) / max(st(levels[-1]).t_step_s, 1e-12)
    else:
        steps = len(done) - 1
    (t0, e0, b0, ft0), (t1, e1, b1, ft1) = done[0], done[-1]
    span = t1 - t0
    power = {r: (e1[r] - e0.get(r, 0.0)) / span for r in e1}
    load = (b1 - b0) / span
    return PodgovResult(
        mean_freq_mhz=(ft1 - ft0) / span,
        t_step_s=span / steps,
        power_w=power,
        load=load,
        idle_share=1.0 - load,
        clock_trace_mhz=tuple(trace),
    )

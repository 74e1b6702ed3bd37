"""A load-following GPU governor like ``nvhost_podgov``, run against the step model.

The published behaviour of NVIDIA's ``nvhost_podgov`` (Tegra devfreq governor), modelled here:

- it re-evaluates at most every block window (``podgov_window_s``, 50 ms);
- the load it steers on is an exponential moving average of the busy share with time constant
  ``podgov_smooth`` windows (``avg = (smooth * avg + load) / (smooth + 1)``);
- a window whose own load is above ``podgov_load_max`` (90 %) boosts the clock by a third of the
  top clock at once (undamped): a busy GPU ramps to the top within a few windows;
- otherwise the request moves in proportion to how far the smoothed load is from
  ``podgov_load_target`` (70 %): ``f + bias * f * (avg - target) / target`` (boost capped at a
  third of the top clock);
- the request is damped against its own moving average (``damp``/10 of the new request, the rest
  of the average), clamped to [min, max] and rounded up to an OPP, as the devfreq core does.

A step alternates GPU-busy work (its length depends on the clock of the moment) and host time
where the GPU waits. The host time does not come as one block: data loading, Python dispatch and
synchronisation interleave with the GPU work, so it is spread through the step in gaps of about
``podgov_host_gap_ms`` each. A long-stepping workload whose GPU waits a large share of every step
therefore looks to podgov like a steady moderate load, and podgov settles near the clock where
that load meets its target; a short step (one gap) gets lower clocks in the gap and pays a
ramp-up at each step start. This is what MAXN does: it is not a pinned top clock.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WARMUP_WINDOWS = 60
MIN_WINDOWS = 300
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


class PodgovState:
    """The governor's memory between windows (smoothed load, averaged request)."""

    def __init__(self, start_mhz: float):
        self.load_avg = 1.0
        self.freq_avg = start_mhz

    def next_mhz(self, cur_mhz: float, load: float, levels: Sequence[float], p) -> float:
        """The OPP for the next window, given the current clock and the last window's load.

        ``levels`` ascending, already clamped to the allowed [min, max] range."""
        smooth = p.podgov_smooth
        self.load_avg = (smooth * self.load_avg + load) / (smooth + 1.0)
        max_boost = levels[-1] / 3.0
        if load > p.podgov_load_max:
            boost, damp = max_boost, 10.0
        else:
            boost = p.podgov_bias * cur_mhz * (self.load_avg - p.podgov_load_target) / p.podgov_load_target
            boost, damp = min(boost, max_boost), p.podgov_damp
        req = cur_mhz + boost
        self.freq_avg = (smooth * self.freq_avg + req) / (smooth + 1.0)
        req = (damp * req + (10.0 - damp) * self.freq_avg) / 10.0
        req = min(max(req, levels[0]), levels[-1])
        for lv in levels:  # the devfreq core rounds up to an OPP
            if lv >= req - 1e-9:
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
    gov = PodgovState(f)
    # host time spread through the step in gaps of about podgov_host_gap_ms
    gaps = max(1, math.ceil(st(levels[-1]).t_idle_s / (p.podgov_host_gap_ms * 1e-3) - 1e-9))
    phase, left, chunk = "gpu", 1.0 / gaps, 0  # gpu: share of the step's GPU work left; idle: seconds
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
            step_done = False
            if phase == "gpu":
                need = left * s.t_gpu_s
                dt = min(need, t_end - t)
                left -= dt / s.t_gpu_s
                pw = s.busy_power_w
                busy += dt
                if left <= 1e-12:
                    phase, left = "idle", s.t_idle_s / gaps
            else:
                dt = min(left, t_end - t)
                left -= dt
                pw = s.idle_power_w
                if left <= 1e-15:
                    phase, left = "gpu", 1.0 / gaps
                    chunk += 1
                    if chunk == gaps:
                        chunk, step_done = 0, True
            for r, w in pw.items():
                energy[r] = energy.get(r, 0.0) + w * dt
            freq_time += f * dt
            t += dt
            if step_done:
                marks.append((t, dict(energy), busy_total + busy, freq_time))
        busy_total += busy
        n_win += 1
        if n_win > WARMUP_WINDOWS:
            trace.append(f)
        done = [m for m in marks if m[0] > WARMUP_WINDOWS * window]
        if (n_win >= MIN_WINDOWS and len(done) > MIN_STEPS) or n_win >= MAX_WINDOWS:
            break
        f = gov.next_mhz(f, busy / window, levels, p)

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

"""The physical model of a Jetson AGX Orin fine-tuning a transformer: step time and rail power.

One training step at GPU clock ``f`` (all times in seconds):

- ``t_comp(f)  = FLOPs / (peak_fp32(f) * eff)``: the GEMMs and attention, clock-scaled; ``eff``
  rises with the matrix sizes (small matrices leave SMs idle);
- ``t_lat(f)   = kernels * lat_cycles / f``: per-kernel fill/drain latency, clock-scaled, low activity;
- ``t_mem      = bytes / bandwidth``: element-wise and optimizer traffic; the EMC clock is fixed,
  so this does not scale with the GPU clock;
- ``t_gpu(f)   = t_comp + t_lat + t_mem`` (GPU busy);
- ``t_launch   = kernels * launch_s`` (CPU dispatch, overlaps the GPU: the step takes the smooth
  maximum of the two) and ``t_serial`` (data collation, ``loss.item()``, scheduler: exposed).
- ``t_step(f)  = smoothmax(t_gpu, t_launch) + t_serial``; the GPU idles ``t_step - t_gpu``.

Power per rail (W), the GPU core voltage ``V(f)`` from :func:`voltage_v`:

- VDD_GPU_SOC = SoC base + leakage(V) + C V^2 f (activity) + fabric traffic;
- VDD_CPU_CV  = CPU base + one dispatching thread (busy fraction);
- VDDQ_VDD2_1V8AO = DRAM base + energy per byte x traffic;
- VIN_SYS_5V0 = system base + a share of the other rails (regulator loss, IO).

:func:`operating_point` turns a clock setting (pinned, podgov between min and max, or a power
mode) into the step time and the rail powers; :mod:`pydvfs.sim.podgov` is the load-following
governor used when the clock is not pinned. :func:`simulate_run` is the virtual-time measurement
of a whole run, with run-to-run noise and CPU-interference spikes drawn from a seed.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, fields, replace

from ..errors import InvalidValueError
from ..levels import nearest_level
from ..rails import CPU_GPU_RAILS, ORIN_RAILS  # CPU_GPU_RAILS: what the paper calls CPU+GPU power
from .workloads import ATTENTION_FACTOR, SimRun

# ---- hardware facts (published, not fitted) --------------------------------------------------
ORIN_LEVELS_MHZ = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
GPU_CUDA_CORES = 2048  # 16 SMs x 128 (Ampere, AGX Orin 64GB)
DRAM_PEAK_GBPS = 204.8  # LPDDR5, 256 bit, 3200 MHz
EMC_MAX_MHZ = 3199.0
CPU_MAX_MHZ = 2201.6  # Cortex-A78AE, MAXN

RAILS = ORIN_RAILS


@dataclass(frozen=True)
class PowerMode:
    """An nvpmodel mode: GPU clock cap, CPU cores and clock, EMC clock (SPEC section 5)."""

    name: str
    gpu_max_mhz: float
    cpu_cores: int
    cpu_mhz: float
    emc_mhz: float


# 15W/30W CPU clocks are the devkit's nvpmodel.conf values for the 64GB module (1113.6 and
# 1728 MHz); GPU caps, core counts, the 50W CPU clock and the 15W EMC clock are from SPEC 5.
POWER_MODES = {
    "maxn": PowerMode("maxn", 1300.5, 12, CPU_MAX_MHZ, EMC_MAX_MHZ),
    "15w": PowerMode("15w", 408.0, 4, 1113.6, 2133.0),
    "30w": PowerMode("30w", 612.0, 8, 1728.0, EMC_MAX_MHZ),
    "50w": PowerMode("50w", 816.0, 12, 1497.6, EMC_MAX_MHZ),
}


@dataclass(frozen=True)
class SimParams:
    """Model parameters. Defaults are physical priors; fitted values live in calibrated_params.

    Units are in the names. Fitted by tools/calibrate_sim.py: see docs/sim-calibration.md.
    """

    # GPU compute
    eff_max: float = 0.55  # fraction of FP32 peak reached by large GEMMs
    eff_half_dim: float = 300.0  # GEMM size (geometric mean of m, n, k) at half of eff_max
    kernels_per_layer: float = 70.0  # forward + backward kernels per transformer layer
    kernels_fixed: float = 80.0  # embeddings, loss, optimizer (foreach) kernels per step
    lat_cycles_per_kernel: float = 4000.0  # GPU cycles of fill/drain per kernel
    # memory traffic (clock-independent time)
    optimizer_bytes_per_param: float = 40.0  # fp32 AdamW: w, grad, m, v read/written per step
    act_bytes_per_token_dim: float = 200.0  # element-wise traffic per token x hidden x layer
    attn_bytes_per_score: float = 24.0  # softmax / mask / dropout traffic per attention score
    dram_efficiency: float = 0.6  # achieved / peak bandwidth
    # CPU side
    launch_us_per_kernel: float = 22.0  # eager PyTorch dispatch at CPU_MAX_MHZ
    serial_ms_per_step: float = 6.0  # collation, loss.item(), scheduler, logging
    smoothmax_p: float = 6.0
    # V/f curve of the GPU rail
    v_min_mv: float = 610.0  # voltage floor (low OPPs)
    v_max_mv: float = 960.0  # at 1300.5 MHz
    v_knee_mhz: float = 560.0  # above this the voltage rises
    v_curve_exp: float = 1.3  # shape of the rise (1 = linear in f)
    # VDD_GPU_SOC power
    soc_base_w: float = 3.0  # SoC always-on part of the rail while training
    leak_w_at_vmax: float = 2.5  # GPU leakage at v_max; scales as (V/Vmax)^leak_exp
    leak_exp: float = 3.0
    cdyn_w_per_v2_ghz: float = 22.0  # switched capacitance at full activity
    act_lat: float = 0.25  # activity during kernel fill/drain
    act_mem: float = 0.35  # activity while memory-bound
    act_idle: float = 0.06  # clock tree and idle SMs while the GPU waits (clock still running)
    act_small_floor: float = 0.35  # activity of a GEMM that fills few SMs, relative to full
    fabric_w_per_gbps: float = 0.012  # SoC fabric / memory controller on VDD_GPU_SOC
    # VDD_CPU_CV
    cpu_base_w: float = 1.6  # 12 cores online, mostly idle
    cpu_thread_w: float = 1.3  # one busy core at CPU_MAX_MHZ
    cpu_spin_share: float = 0.5  # share of GPU-wait the main thread spends spinning
    # VDDQ and VIN_SYS_5V0
    dram_base_w: float = 0.6
    dram_w_per_gbps: float = 0.02
    sys_base_w: float = 2.2
    sys_share: float = 0.05
    # podgov (nvhost_podgov-like; the governor's published defaults, docs/sim.md)
    podgov_window_s: float = 0.05  # block window between re-evaluations
    podgov_load_target: float = 0.70
    podgov_load_max: float = 0.90  # above this a window boosts by a third of the top clock
    podgov_smooth: float = 10.0  # moving-average time constant of load and request (windows)
    podgov_damp: float = 7.0  # tenths of the new request kept against its moving average
    podgov_bias: float = 0.8  # gain of the proportional step towards the load target
    podgov_host_gap_ms: float = 20.0  # host time comes in gaps of about this length per step
    # run-to-run noise and CPU-interference spikes
    time_cv: float = 0.012
    power_cv: float = 0.008
    spike_prob: float = 0.18
    spike_amp: float = 0.6  # extra time as a share of the run's exposed CPU time

    def with_updates(self, **kw) -> "SimParams":
        names = {f.name for f in fields(self)}
        bad = set(kw) - names
        if bad:
            raise InvalidValueError(f"unknown sim parameter(s): {', '.join(sorted(bad))}")
        return replace(self, **kw)


def default_params() -> SimParams:
    """The calibrated parameters (tools/calibrate_sim.py writes calibrated_params.py)."""
    try:
        from .calibrated_params import PARAMS
    except ImportError:  # before the first calibration
        return SimParams()
    return SimParams().with_updates(**PARAMS)


# ---- V/f ---------------------------------------------------------------------------------------
def voltage_v(freq_mhz: float, p: SimParams) -> float:
    """GPU rail voltage (V) at a clock: a floor up to the knee, then a power-law rise to v_max."""
    top = ORIN_LEVELS_MHZ[-1]
    if freq_mhz <= p.v_knee_mhz:
        mv = p.v_min_mv
    else:
        x = min(1.0, (freq_mhz - p.v_knee_mhz) / (top - p.v_knee_mhz))
        mv = p.v_min_mv + (p.v_max_mv - p.v_min_mv) * x ** p.v_curve_exp
    return mv / 1000.0


def vf_table(p: SimParams) -> list[tuple[float, float]]:
    """(MHz, mV) for the Orin OPPs."""
    return [(f, round(voltage_v(f, p) * 1000.0, 1)) for f in ORIN_LEVELS_MHZ]


# ---- one step's work ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StepWork:
    """What one training step asks of the board (clock-independent quantities)."""

    flops: float
    eff: float  # fraction of FP32 peak
    act_comp: float  # relative switching activity of the compute phase
    kernels: float
    bytes: float
    t_mem_s: float
    t_launch_s: float
    t_serial_s: float
    cpu_mhz: float


def step_work(w: SimRun, p: SimParams, mode: PowerMode | None = None) -> StepWork:
    a = w.arch
    mode = mode or POWER_MODES["maxn"]
    b, s = w.batch_size, w.seq_len_padded
    tokens = b * s
    d, L = a.hidden, a.layers
    kv_dim = (a.kv_heads or a.heads) * (d // a.heads)
    ffn_mats = 3 if a.family == "gemma" else 2
    gemm_params = L * (2 * d * d + 2 * d * kv_dim + ffn_mats * d * a.ff)
    fwd = 2.0 * tokens * gemm_params + 4.0 * b * L * s * s * d * ATTENTION_FACTOR.get(a.name, 1.0)
    if a.family != "bert":
        fwd += 2.0 * b * d * 2  # classification head on the last token
    flops = 3.0 * fwd  # forward + backward (two GEMMs per forward GEMM)
    gemm_dim = (tokens * d * max(d, a.ff)) ** (1.0 / 3.0)
    sat = gemm_dim / (gemm_dim + p.eff_half_dim)
    eff = p.eff_max * sat
    act_comp = p.act_small_floor + (1.0 - p.act_small_floor) * sat
    kernels = p.kernels_per_layer * L + p.kernels_fixed
    nbytes = (p.optimizer_bytes_per_param * a.params
              + 3.0 * L * (p.act_bytes_per_token_dim * tokens * d
                           + p.attn_bytes_per_score * b * a.heads * s * s))
    bw = DRAM_PEAK_GBPS * 1e9 * p.dram_efficiency * (mode.emc_mhz / EMC_MAX_MHZ)
    cpu_scale = CPU_MAX_MHZ / mode.cpu_mhz
    return StepWork(
        flops=flops, eff=eff, act_comp=act_comp, kernels=kernels, bytes=nbytes,
        t_mem_s=nbytes / bw,
        t_launch_s=kernels * p.launch_us_per_kernel * 1e-6 * cpu_scale,
        t_serial_s=(p.serial_ms_per_step + w.host_ms_per_step) * 1e-3 * cpu_scale,
        cpu_mhz=mode.cpu_mhz,
    )


def _smoothmax(x: float, y: float, pwr: float) -> float:
    m = max(x, y)
    if m <= 0:
        return 0.0
    return m * ((x / m) ** pwr + (y / m) ** pwr) ** (1.0 / pwr)


@dataclass(frozen=True)
class ClockState:
    """Step time split and rail powers at one fixed GPU clock (no noise)."""

    freq_mhz: float
    t_comp_s: float
    t_lat_s: float
    t_mem_s: float
    t_gpu_s: float  # GPU busy per step
    t_step_s: float
    busy_power_w: dict  # rail -> W while the GPU is busy
    idle_power_w: dict  # rail -> W while the GPU waits for the CPU

    @property
    def t_idle_s(self) -> float:
        return self.t_step_s - self.t_gpu_s

    @property
    def load(self) -> float:
        return self.t_gpu_s / self.t_step_s

    def step_energy_j(self) -> dict:
        return {r: self.busy_power_w[r] * self.t_gpu_s + self.idle_power_w[r] * self.t_idle_s
                for r in RAILS}


def clock_state(sw: StepWork, freq_mhz: float, p: SimParams) -> ClockState:
    f_hz = freq_mhz * 1e6
    t_comp = sw.flops / (2.0 * GPU_CUDA_CORES * f_hz * sw.eff)
    t_lat = sw.kernels * p.lat_cycles_per_kernel / f_hz
    t_gpu = t_comp + t_lat + sw.t_mem_s
    t_step = _smoothmax(t_gpu, sw.t_launch_s, p.smoothmax_p) + sw.t_serial_s
    v = voltage_v(freq_mhz, p)
    vmax = p.v_max_mv / 1000.0
    leak = p.leak_w_at_vmax * (v / vmax) ** p.leak_exp
    dyn_full = p.cdyn_w_per_v2_ghz * v * v * (freq_mhz / 1000.0)
    act_busy = (sw.act_comp * t_comp + p.act_lat * t_lat + p.act_mem * sw.t_mem_s) / t_gpu
    gbps_busy = sw.bytes / t_gpu / 1e9
    cpu_scale = (sw.cpu_mhz / CPU_MAX_MHZ) ** 1.5  # lower CPU clock, lower voltage
    launch_share = min(1.0, sw.t_launch_s / t_gpu)
    cpu_busy_gpu_phase = launch_share + (1.0 - launch_share) * p.cpu_spin_share

    def rails(gpu_dyn: float, gbps: float, cpu_busy: float) -> dict:
        gpu = p.soc_base_w + leak + gpu_dyn + p.fabric_w_per_gbps * gbps
        cpu = p.cpu_base_w + p.cpu_thread_w * cpu_busy * cpu_scale
        ddr = p.dram_base_w + p.dram_w_per_gbps * gbps
        sys5 = p.sys_base_w + p.sys_share * (gpu + cpu + ddr)
        return {"VDD_GPU_SOC": gpu, "VDD_CPU_CV": cpu, "VDDQ_VDD2_1V8AO": ddr, "VIN_SYS_5V0": sys5}

    return ClockState(
        freq_mhz=freq_mhz, t_comp_s=t_comp, t_lat_s=t_lat, t_mem_s=sw.t_mem_s, t_gpu_s=t_gpu,
        t_step_s=t_step,
        busy_power_w=rails(dyn_full * act_busy, gbps_busy, cpu_busy_gpu_phase),
        idle_power_w=rails(dyn_full * p.act_idle, 0.0, 1.0),
    )


def idle_board_power_w(p: SimParams) -> dict:
    """Rail powers of the idle board (podgov at the lowest clock, CPU idle, no training)."""
    v = voltage_v(ORIN_LEVELS_MHZ[0], p)
    gpu = p.soc_base_w * 0.6 + p.leak_w_at_vmax * (v * 1000.0 / p.v_max_mv) ** p.leak_exp \
        + p.cdyn_w_per_v2_ghz * v * v * ORIN_LEVELS_MHZ[0] / 1000.0 * p.act_idle
    cpu = p.cpu_base_w
    ddr = p.dram_base_w
    return {"VDD_GPU_SOC": gpu, "VDD_CPU_CV": cpu, "VDDQ_VDD2_1V8AO": ddr,
            "VIN_SYS_5V0": p.sys_base_w + p.sys_share * (gpu + cpu + ddr)}


# ---- a clock setting -> the operating point -----------------------------------------------------
@dataclass(frozen=True)
class OperatingPoint:
    """Steady-state averages of one clock setting: what a run at it looks like (no noise)."""

    setting: str  # "fixed", "maxn", "15w", "30w", "50w", "podgov"
    freq_mhz: float | None  # pinned clock; None when podgov chooses
    mean_freq_mhz: float  # time-weighted mean clock
    t_step_s: float
    power_w: dict  # rail -> mean W over a step
    load: float  # GPU busy share, 0..1
    cpu_exposed_share: float  # share of the step the GPU waits for the CPU
    clock_trace_mhz: tuple = field(default=(), compare=False)  # podgov: one clock per window

    @property
    def cpu_gpu_power_w(self) -> float:
        return sum(self.power_w[r] for r in CPU_GPU_RAILS)


def snap_mhz(freq_mhz: float, levels=ORIN_LEVELS_MHZ) -> float:
    """The nearest OPP (the devfreq core snaps to its table the same way)."""
    return nearest_level(levels, freq_mhz)


def operating_point(w: SimRun, setting: str = "fixed", freq_mhz: float | None = None,
                    p: SimParams | None = None, min_mhz: float | None = None,
                    max_mhz: float | None = None) -> OperatingPoint:
    """Steady state of ``w`` under a clock setting.

    ``setting``: ``fixed`` (pin ``freq_mhz``, snapped to the OPP table), ``maxn``/``15w``/``30w``/
    ``50w`` (nvpmodel mode: podgov under the mode's caps) or ``podgov`` (podgov between
    ``min_mhz`` and ``max_mhz`` under MAXN's CPU/EMC).
    """
    from .podgov import simulate_podgov

    p = p or default_params()
    if setting == "fixed":
        if freq_mhz is None:
            raise InvalidValueError("a fixed setting needs freq_mhz")
        f = snap_mhz(freq_mhz)
        cs = clock_state(step_work(w, p), f, p)
        e = cs.step_energy_j()
        return OperatingPoint("fixed", f, f, cs.t_step_s,
                              {r: e[r] / cs.t_step_s for r in RAILS}, cs.load,
                              cs.t_idle_s / cs.t_step_s, (f,))
    if setting in POWER_MODES:
        mode = POWER_MODES[setting]
        lo, hi = ORIN_LEVELS_MHZ[0], mode.gpu_max_mhz
    elif setting == "podgov":
        mode = POWER_MODES["maxn"]
        lo = ORIN_LEVELS_MHZ[0] if min_mhz is None else min_mhz
        hi = ORIN_LEVELS_MHZ[-1] if max_mhz is None else max_mhz
    else:
        raise InvalidValueError(f"unknown setting {setting!r}; expected fixed, podgov or one of "
                                f"{', '.join(POWER_MODES)}")
    levels = tuple(lv for lv in ORIN_LEVELS_MHZ if lo - 0.5 <= lv <= hi + 0.5)
    if not levels:
        raise InvalidValueError(f"no OPP between {lo} and {hi} MHz")
    sw = step_work(w, p, mode)
    res = simulate_podgov(lambda f: clock_state(sw, f, p), levels, p)
    return OperatingPoint(setting, None, res.mean_freq_mhz, res.t_step_s, res.power_w,
                          res.load, res.idle_share, res.clock_trace_mhz)


# ---- a whole run in virtual time ----------------------------------------------------------------
@dataclass(frozen=True)
class RunResult:
    """What a sampler would report for one run (virtual time, noise included)."""

    workload: str
    setting: str
    freq_mhz: float | None
    repeat: int
    steps: int
    duration_s: float
    energy_j: dict  # rail -> J
    mean_freq_mhz: float
    avg_gpu_load_pct: float
    time_factor: float  # noise + spike multiplier applied to the duration
    power_factor: float  # noise multiplier applied to the powers

    @property
    def energy_cpu_gpu_j(self) -> float:
        return sum(self.energy_j[r] for r in CPU_GPU_RAILS)

    @property
    def avg_power_w(self) -> float:
        return self.energy_cpu_gpu_j / self.duration_s


def _rng_uniforms(*key, n: int = 4) -> list[float]:
    """n uniforms in (0, 1) from a hash of key: deterministic across processes and platforms."""
    out = []
    for i in range(n):
        h = hashlib.sha256(repr((key, i)).encode()).digest()
        out.append((int.from_bytes(h[:8], "big") + 0.5) / 2.0 ** 64)
    return out


def run_noise(p: SimParams, cpu_exposed_share: float, seed: int, workload: str, setting: str,
              freq_mhz: float | None, repeat: int) -> tuple[float, float]:
    """(time factor, power factor) for one run, deterministic in its key.

    Gaussian run-to-run noise on time and power, plus with probability ``spike_prob`` a CPU
    interference event (scheduling, page-cache, logging) that stretches the run by up to
    ``spike_amp`` of its exposed-CPU share: launch-bound small models get spiky curves, large
    GPU-bound models barely notice.
    """
    key = (int(seed), workload, setting, None if freq_mhz is None else round(freq_mhz, 1), int(repeat))
    u1, u2, u3, u4 = _rng_uniforms(*key)
    g1 = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    g2 = math.sqrt(-2.0 * math.log(u1)) * math.sin(2.0 * math.pi * u2)
    time_f = 1.0 + p.time_cv * g1
    if u3 < p.spike_prob:
        time_f += p.spike_amp * cpu_exposed_share * (0.3 + 0.7 * u4)
    power_f = 1.0 + p.power_cv * g2
    return max(0.5, time_f), max(0.5, power_f)


def energy_per_step_j(w: SimRun, setting: str = "fixed", freq_mhz: float | None = None,
                      seed: int = 0, repeat: int = 0, p: SimParams | None = None) -> float:
    """CPU+GPU energy of one training step (simulated J) at a setting, with the run's seeded
    noise: what the animated process (``train_process --seed S --repeat R``) spends per step."""
    p = p or default_params()
    op = operating_point(w, setting, freq_mhz, p)
    tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, repeat)
    return op.cpu_gpu_power_w * pf * op.t_step_s * tf


def simulate_run(w: SimRun, setting: str = "fixed", freq_mhz: float | None = None,
                 repeat: int = 0, seed: int = 0, p: SimParams | None = None,
                 noise: bool = True, op: OperatingPoint | None = None) -> RunResult:
    """One whole run, measured in virtual time (returns at once)."""
    p = p or default_params()
    op = op or operating_point(w, setting, freq_mhz, p)
    if noise:
        tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, repeat)
    else:
        tf, pf = 1.0, 1.0
    duration = w.steps * op.t_step_s * tf
    # Noise and spikes stretch the run at its mean power (a simplification: a spike is CPU time).
    energy = {r: op.power_w[r] * pf * duration for r in RAILS}
    return RunResult(w.name, op.setting, op.freq_mhz, repeat, w.steps, duration, energy,
                     op.mean_freq_mhz, 100.0 * op.load / tf, tf, pf)

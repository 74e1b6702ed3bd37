"""The physical model of a Jetson AGX Orin fine-tuning a transformer: step time and rail power.

One training step at GPU clock ``f`` (all times in seconds):

- ``t_comp(f)  = FLOPs / (peak_fp32(f) * eff)``: the GEMMs and attention, clock-scaled; ``eff``
  rises with the matrix sizes (small matrices leave SMs idle);
- ``t_lat(f)   = kernels * lat_cycles / f``: per-kernel fill/drain latency, clock-scaled, low activity;
- ``t_mem      = bytes / bandwidth``: element-wise and optimizer traffic; scales with the EMC
  rate (1/f_emc), not with the GPU clock;
- ``t_gpu(f)   = t_comp + t_lat + t_mem - mem_overlap x min(t_comp, t_mem)`` (GPU busy; the
  calibrated model hides none of the memory time under compute);
- ``t_launch   = kernels * launch_s`` (CPU dispatch, overlaps the GPU: the step takes the smooth
  maximum of the two) and ``t_serial`` (data collation, ``loss.item()``, scheduler: exposed); both
  scale with 1/f_cpu (and the board's host speed per MHz).
- ``t_step(f)  = smoothmax(t_gpu, t_launch) + t_serial``; the GPU idles ``t_step - t_gpu``.

Power per rail (W), the GPU core voltage ``V(f)`` from :func:`voltage_v`:

- VDD_GPU_SOC = SoC base + leakage(V) + C V^2 f (activity) + fabric traffic;
- VDD_CPU_CV  = CPU base + one dispatching thread (busy fraction; while the GPU runs the thread
  waits in CUDA's synchronisation, spinning a ``cpu_spin_share`` of that time) x (f_cpu/f_max)^1.5;
- VDDQ_VDD2_1V8AO = DRAM base (a share following the EMC rate) + energy per byte x traffic;
- VIN_SYS_5V0 = system base + a share of the other rails (regulator loss, IO).

The power is computed in components (gpu, soc, cv, cpu, dram, sys) that each board's profile
(:mod:`pydvfs.sim.profiles`) maps onto the rails of its board-table row; ``board="agx-orin"``,
the default, is the calibrated board and reproduces the numbers of before profiles existed. The
EMC rate and the CPU clock default to the top: the numbers then equal the GPU-only model's.

:func:`operating_point` turns a clock setting (pinned, podgov between min and max, or a power
mode) into the step time and the rail powers; :mod:`pydvfs.sim.podgov` is the load-following
governor used when the clock is not pinned. :func:`simulate_run` is the virtual-time measurement
of a whole run, with run-to-run noise and CPU-interference spikes drawn from a seed.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

from ..device import table as board_table
from ..device.levels import nearest_level
from ..errors import InvalidValueError
from .catalogue import ATTENTION_FACTOR, SimRun, layer_matrices, lora_matrices
from .profiles import DEFAULT_BOARD, SimProfile, mode_key, profile

# ---- hardware facts of the calibrated board (published, not fitted) -----------------------------
# From the board table (levels, CPU top, rails, roles) and the AGX Orin's simulator profile
# (CUDA cores, DRAM peak, EMC top): named here for the modules that use them.
_ORIN = profile(DEFAULT_BOARD)
ORIN_LEVELS_MHZ = _ORIN.levels_mhz
GPU_CUDA_CORES = _ORIN.cuda_cores  # 16 SMs x 128 (Ampere, AGX Orin 64GB)
DRAM_PEAK_GBPS = _ORIN.dram_peak_gbps  # LPDDR5, 256 bit, 3200 MHz
EMC_MAX_MHZ = _ORIN.emc_max_mhz
CPU_MAX_MHZ = _ORIN.cpu_max_mhz  # Cortex-A78AE, MAXN

RAILS = _ORIN.rail_names


@dataclass(frozen=True)
class PowerMode:
    """An nvpmodel mode: GPU clock cap, CPU cores and clock, EMC clock (SPEC section 5)."""

    name: str
    gpu_max_mhz: float
    cpu_cores: int
    cpu_mhz: float
    emc_mhz: float


def power_modes(board: str = DEFAULT_BOARD) -> dict:
    """A board's nvpmodel modes by setting name (``maxn``, ``15w``, ``maxn-super``...): the GPU cap
    from the board table, CPU cores/clock and EMC from the simulator profile (its sources there).
    The table's modes the profile does not model (``modes_not_simulated``: no GPU cap, or no CPU
    and EMC clocks in the public record) are no setting: nothing is assumed for them."""
    prof = profile(board)
    return {mode_key(m.name): PowerMode(mode_key(m.name), m.gpu_cap_mhz, prof.modes[m.name].cpu_cores,
                                        prof.modes[m.name].cpu_mhz, prof.modes[m.name].emc_mhz)
            for m in prof.board.power_modes if m.name in prof.modes}


def top_mode(board: str = DEFAULT_BOARD) -> PowerMode:
    """The board's unconstrained setting: GPU, CPU and EMC at the top of their tables."""
    prof = profile(board)
    return PowerMode("top", prof.top_mhz, prof.cpu_cores, prof.cpu_max_mhz, prof.emc_max_mhz)


# AGX Orin: 15W/30W CPU clocks are the devkit's nvpmodel.conf values for the 64GB module (1113.6
# and 1728 MHz); GPU caps from the board table; core counts, the 50W CPU clock and the 15W EMC
# clock are from SPEC 5 (pydvfs/sim/profiles.py).
POWER_MODES = power_modes(DEFAULT_BOARD)


@dataclass(frozen=True)
class SimParams:
    """Model parameters. Defaults are physical priors; fitted values live in calibrated_params.

    Units are in the names. Fitted by tools/fit_sim_to_papers.py: see docs/sim-calibration.md.
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
    mem_overlap: float = 0.0  # share of the memory time compute hides (0: they add, as calibrated)
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
    cpu_spin_share: float = 0.5  # share of GPU-wait the main thread spends spinning (prior; CUDA's
    # default schedule spins through every synchronisation: 1.0, see docs/power-modes.md)
    cpu_vf_exp: float = 1.5  # a CPU core's power ~ (f/f_max)^exp (f V^2 with V rising in f)
    # VDDQ and VIN_SYS_5V0
    dram_base_w: float = 0.6
    dram_w_per_gbps: float = 0.02
    # EMC rate (not calibrated: no measured Orin curve over EMC rates; docs/sim.md)
    emc_dram_rate_share: float = 0.6  # share of the DRAM base power that follows the EMC rate
    emc_ctrl_w: float = 1.0  # memory controller + fabric clock on VDD_GPU_SOC at the top rate
    emc_v_floor: float = 0.8  # EMC/SoC voltage at the lowest rate relative to the top (linear in f)
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
    # how the run trains (issue 28; priors, not calibrated: docs/sim.md "Training methods")
    tc_eff_rel: float = 0.5  # share of the tensor cores' peak ratio over FP32 that training GEMMs realise
    act_tc_rel: float = 1.2  # switching activity of tensor-core GEMMs relative to FP32 ones
    autocast_act_share: float = 0.6  # element-wise/attention traffic under autocast relative to fp32
    lora_kernels_per_matrix: float = 8.0  # an adapter's kernels per step (A, B forward; 4 backward; scale, dropout)
    dequant_kernels_per_matrix: float = 2.0  # bitsandbytes dequantises each 4/8-bit weight forward and backward
    quant_const_bytes_per_param: float = 0.0159  # NF4 block constants, double-quantised: 0.127 bit/param (QLoRA paper)
    int8_extra_kernels_per_matrix: float = 4.0  # LLM.int8(): outlier columns split and merged
    logits_bytes_per_logit: float = 16.0  # LM head: fp32 logits written, read by the loss, grad written, read

    def with_updates(self, **kw) -> "SimParams":
        names = {f.name for f in fields(self)}
        bad = set(kw) - names
        if bad:
            raise InvalidValueError(f"unknown sim parameter(s): {', '.join(sorted(bad))}")
        return replace(self, **kw)


def default_params() -> SimParams:
    """The calibrated parameters (tools/fit_sim_to_papers.py writes calibrated_params.py)."""
    try:
        from .paper_fit_params import PARAMS
    except ImportError:  # before the first calibration
        return SimParams()
    return SimParams().with_updates(**PARAMS)


# ---- V/f ---------------------------------------------------------------------------------------
def voltage_v(freq_mhz: float, p: SimParams, top_mhz: float = ORIN_LEVELS_MHZ[-1]) -> float:
    """GPU rail voltage (V) at a clock: a floor up to the knee, then a power-law rise to v_max.

    ``top_mhz``: the board's top level; another board's knee sits at the same share of its top
    (an estimate: docs/sim.md)."""
    top = ORIN_LEVELS_MHZ[-1]
    knee = p.v_knee_mhz
    if top_mhz != top:
        knee, top = p.v_knee_mhz * top_mhz / top, top_mhz
    if freq_mhz <= knee:
        mv = p.v_min_mv
    else:
        x = min(1.0, (freq_mhz - knee) / (top - knee))
        mv = p.v_min_mv + (p.v_max_mv - p.v_min_mv) * x ** p.v_curve_exp
    return mv / 1000.0


def vf_table(p: SimParams, board: str = DEFAULT_BOARD) -> list[tuple[float, float]]:
    """(MHz, mV) for the board's OPPs."""
    prof = profile(board)
    return [(f, round(voltage_v(f, p, prof.top_mhz) * 1000.0, 1)) for f in prof.levels_mhz]


def emc_voltage_rel(emc_mhz: float, prof: SimProfile, p: SimParams) -> float:
    """EMC/SoC voltage relative to the top rate's: linear from ``emc_v_floor`` at 0 to 1 at the top."""
    x = min(1.0, emc_mhz / prof.emc_max_mhz)
    return p.emc_v_floor + (1.0 - p.emc_v_floor) * x


@dataclass(frozen=True)
class PowerScales:
    """Multipliers that turn the calibrated AGX Orin's power coefficients into a board's."""

    gpu: float  # GPU switching and leakage
    static: float  # SoC, CPU, DRAM and system bases, one busy CPU thread
    source: str


_CALIBRATED = PowerScales(1.0, 1.0, "calibrated")


@lru_cache(maxsize=None)
def _power_scales(board: str, params_key: tuple) -> PowerScales:
    p = SimParams(**dict(params_key))
    ref_prof, prof = profile(DEFAULT_BOARD), profile(board)
    static = prof.tdp_low_w / ref_prof.tdp_low_w
    w = _reference_workload()
    ref = _module_power_w(w, DEFAULT_BOARD, p, PowerScales(1.0, 1.0, ""))
    target = ref * prof.tdp_top_w / ref_prof.tdp_top_w
    p0 = _module_power_w(w, board, p, PowerScales(0.0, static, ""))
    p1 = _module_power_w(w, board, p, PowerScales(1.0, static, ""))
    if p1 <= p0:
        raise InvalidValueError(f"simulator profile {board}: GPU power does not scale")
    gpu = max(0.05, (target - p0) / (p1 - p0))  # module power is linear in the GPU scale
    return PowerScales(gpu, static,
                       f"static x {static:.3f} (lowest mode {prof.tdp_low_w:g} W / {ref_prof.tdp_low_w:g} W); "
                       f"GPU x {gpu:.3f}: {w.name} at the top clock draws {target:.1f} W of module power, "
                       f"{prof.tdp_top_w:g}/{ref_prof.tdp_top_w:g} of the AGX Orin's {ref:.1f} W")


def power_scales(board: str = DEFAULT_BOARD, p: SimParams | None = None) -> PowerScales:
    """How a board's power coefficients are scaled from the calibrated AGX Orin's (docs/sim.md):

    - the static parts (SoC, CPU, DRAM and system bases, a busy CPU thread) by the ratio of the
      lowest power modes' module budgets (what the idle module must fit under);
    - the GPU's switching and leakage by the factor that makes a GPU-bound reference workload
      (bert-base/QNLI) at the top clock draw the same share of the top mode's module budget as
      on the AGX Orin (with its own CUDA cores, clocks and bandwidth)."""
    if board == DEFAULT_BOARD:
        return _CALIBRATED
    p = p or default_params()
    return _power_scales(board, tuple(sorted(vars(p).items())))


def _reference_workload():
    from .catalogue import get_workload

    return get_workload("bert-base", "QNLI")


def _module_power_w(w: SimRun, board: str, p: SimParams, scales: PowerScales) -> float:
    prof = profile(board)
    cs = clock_state(step_work(w, p, top_mode(board), board=board), prof.top_mhz, p, scales=scales)
    e = cs.step_energy_j()
    return board_table.role_sum(e, prof.board.role_rails("module")) / cs.t_step_s


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
    emc_mhz: float = EMC_MAX_MHZ
    board: str = DEFAULT_BOARD


def step_work(w: SimRun, p: SimParams, mode: PowerMode | None = None, board: str = DEFAULT_BOARD) -> StepWork:
    """The step's clock-independent work on ``board`` with ``mode``'s EMC rate and CPU clock
    (default: the board's top mode)."""
    a = w.arch
    m = w.method
    prof = profile(board)
    mode = mode or (POWER_MODES["maxn"] if board == DEFAULT_BOARD else top_mode(board))
    b, s = w.batch_size, w.seq_len_padded
    tokens = b * s
    d, L = a.hidden, a.layers
    ffn_mats = 3 if a.gated_mlp or a.family == "gemma" else 2
    gemm_params = L * (2 * d * a.q_dim + 2 * d * a.kv_dim + ffn_mats * d * a.ff)
    head_params = d * a.vocab if a.head == "lm" else 0  # SFT: logits over the vocabulary
    fwd_gemm = 2.0 * tokens * (gemm_params + head_params)
    attn = 4.0 * b * L * s * s * a.q_dim * ATTENTION_FACTOR.get(a.name, 1.0)
    if a.family != "bert" and a.head == "cls":
        fwd_gemm += 2.0 * b * d * 2  # classification head on the last token
    mats = layer_matrices(a)
    kernels = p.kernels_per_layer * L + p.kernels_fixed
    if m.peft == "none":
        flops = 3.0 * (fwd_gemm + attn)  # forward + backward (two GEMMs per forward GEMM)
        trained = a.params
    else:
        # frozen weights: forward and the input gradient, no weight gradient (4N per token); the
        # adapters: 6 r (d_in + d_out) per token each (SPEC 5c); attention as in full training
        adapters = sum(m.rank * (i + o) for i, o in lora_matrices(a))
        flops = 2.0 * fwd_gemm + 3.0 * attn + 6.0 * tokens * L * adapters
        trained = L * adapters
        kernels += L * (p.lora_kernels_per_matrix * len(lora_matrices(a)) - mats)  # no dW GEMM of frozen weights
    gemm_dim = (tokens * d * max(d, a.ff)) ** (1.0 / 3.0)
    sat = gemm_dim / (gemm_dim + p.eff_half_dim)
    speed = 1.0  # GEMM throughput over FP32's: tensor cores under 16-bit autocast
    if m.precision != "fp32":
        speed = max(1.0, prof.tensor_ratio[m.precision] * p.tc_eff_rel)
    eff = p.eff_max * sat * speed
    act_comp = p.act_small_floor + (1.0 - p.act_small_floor) * sat
    if speed > 1.0:
        act_comp *= p.act_tc_rel
    act_bytes = 3.0 * L * (p.act_bytes_per_token_dim * tokens * d + p.attn_bytes_per_score * b * a.heads * s * s)
    if m.precision != "fp32":
        act_bytes *= p.autocast_act_share
    nbytes = p.optimizer_bytes_per_param * trained + act_bytes
    # the weights as the GEMMs read them, forward and backward: the calibrated fp32 traffic holds
    # two reads of 4-byte weights; other widths change that share (docs/sim.md)
    weights = gemm_params + head_params
    bits = m.bits
    compute_bytes = 4.0 if m.precision == "fp32" else 2.0
    if bits in (4, 8):  # bitsandbytes: packed weights + constants read, a copy in the compute dtype written and read
        per_pass = bits / 8.0 + p.quant_const_bytes_per_param + 2.0 * compute_bytes
        kernels += L * mats * (p.dequant_kernels_per_matrix
                               + (p.int8_extra_kernels_per_matrix if bits == 8 else 0.0))
        cast = 0.0
    elif bits == 32 and m.precision != "fp32":  # autocast casts each fp32 weight once a step
        per_pass = 2.0
        cast = 6.0 * weights
        kernels += L * mats
    else:
        per_pass = bits / 8.0
        cast = 0.0
    nbytes += 2.0 * weights * (per_pass - 4.0) + cast
    if a.head == "lm":
        nbytes += p.logits_bytes_per_logit * tokens * a.vocab
    bw = prof.dram_peak_gbps * 1e9 * p.dram_efficiency * (mode.emc_mhz / prof.emc_max_mhz)
    # host time: the AGX Orin's at CPU_MAX_MHZ, stretched by the clock and the core's speed per MHz
    cpu_scale = CPU_MAX_MHZ / (mode.cpu_mhz * prof.cpu_ipc)
    return StepWork(
        flops=flops, eff=eff, act_comp=act_comp, kernels=kernels, bytes=nbytes,
        t_mem_s=nbytes / bw,
        t_launch_s=kernels * p.launch_us_per_kernel * 1e-6 * cpu_scale,
        t_serial_s=(p.serial_ms_per_step + w.host_ms_per_step) * 1e-3 * cpu_scale,
        cpu_mhz=mode.cpu_mhz, emc_mhz=mode.emc_mhz, board=board,
    )


# Training memory (issue 28; an estimate, docs/sim.md "Training methods"): activations per token,
# layer and hidden unit, in 16-bit (Korthikanti et al. 2022, "Reducing Activation Recomputation
# in Large Transformer Models": 34 s b h bytes per layer without the attention scores), twice that
# in fp32; the share of the module's DRAM a training process can have (the OS, the desktop and
# CUDA's own take the rest).
ACT_BYTES_PER_TOKEN_DIM_16 = 34.0
USABLE_MEMORY_SHARE = 0.8


def memory_need_gb(w: SimRun) -> float:
    """GB a training step of ``w`` holds: the weights as stored (fp32 master weights for full
    fine-tuning, whatever the autocast), gradients and AdamW's two moments of the trained
    parameters (fp32), activations of the padded batch and the fp32 logits of an LM head."""
    a, m = w.arch, w.method
    frozen_bytes = 4.0 if m.peft == "none" else m.bits / 8.0
    weights = a.params * frozen_bytes + (w.trainable_params * 4.0 if m.peft != "none" else 0.0)
    optimizer = w.trainable_params * (4.0 + 8.0)  # gradient + two moments
    tokens = w.batch_size * w.seq_len_padded
    act = ACT_BYTES_PER_TOKEN_DIM_16 * (1.0 if m.precision != "fp32" else 2.0) * tokens * a.hidden * a.layers
    logits = 2 * 4.0 * tokens * a.vocab if a.head == "lm" else 0.0  # logits and their gradient
    return (weights + optimizer + act + logits) / 1e9


def fits(w: SimRun, board: str = DEFAULT_BOARD) -> bool:
    """Whether a step of ``w`` fits the board's memory (:func:`memory_need_gb` within
    :data:`USABLE_MEMORY_SHARE` of it); True where the board's memory is not known."""
    gb = profile(board).memory_gb
    return not gb or memory_need_gb(w) <= USABLE_MEMORY_SHARE * gb


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
                for r in self.busy_power_w}


def _rails_from(prof: SimProfile, comp: dict) -> dict:
    """The board's rails (table order) from the power components, each carried where the profile
    says; the AGX Orin's VDD_GPU_SOC is summed in the order of the calibrated model."""
    out = {}
    for rail in prof.rail_names:
        parts = prof.rails[rail]
        out[rail] = comp[parts[0]] if len(parts) == 1 else sum(comp[c] for c in parts)
    return out


def clock_state(sw: StepWork, freq_mhz: float, p: SimParams, scales: PowerScales | None = None) -> ClockState:
    """Step time split and rail powers at a GPU clock, with the EMC rate and CPU clock of ``sw``."""
    prof = profile(sw.board)
    sc = scales or power_scales(sw.board, p)
    f_hz = freq_mhz * 1e6
    t_comp = sw.flops / (2.0 * prof.cuda_cores * f_hz * sw.eff)
    t_lat = sw.kernels * p.lat_cycles_per_kernel / f_hz
    # memory traffic overlapped with compute is hidden under it (mem_overlap 0: none is)
    t_gpu = t_comp + t_lat + sw.t_mem_s - p.mem_overlap * min(t_comp, sw.t_mem_s)
    t_step = _smoothmax(t_gpu, sw.t_launch_s, p.smoothmax_p) + sw.t_serial_s
    v = voltage_v(freq_mhz, p, prof.top_mhz)
    vmax = p.v_max_mv / 1000.0
    leak = p.leak_w_at_vmax * (v / vmax) ** p.leak_exp * sc.gpu
    dyn_full = p.cdyn_w_per_v2_ghz * v * v * (freq_mhz / 1000.0) * sc.gpu
    act_busy = min(1.0, (sw.act_comp * t_comp + p.act_lat * t_lat + p.act_mem * sw.t_mem_s) / t_gpu)
    gbps_busy = sw.bytes / t_gpu / 1e9
    # lower CPU clock, lower voltage: a core's power ~ (f/f_max)^cpu_vf_exp
    cpu_scale = (sw.cpu_mhz / prof.cpu_max_mhz) ** p.cpu_vf_exp
    launch_share = min(1.0, sw.t_launch_s / t_gpu)
    cpu_busy_gpu_phase = launch_share + (1.0 - launch_share) * p.cpu_spin_share
    soc_base, dram_base = p.soc_base_w * sc.static, p.dram_base_w * sc.static
    if sw.emc_mhz != prof.emc_max_mhz:  # the EMC below its top rate (exactly today's at the top)
        x = sw.emc_mhz / prof.emc_max_mhz
        soc_base += p.emc_ctrl_w * sc.static * (x * emc_voltage_rel(sw.emc_mhz, prof, p) ** 2 - 1.0)
        dram_base *= (1.0 - p.emc_dram_rate_share) + p.emc_dram_rate_share * x
    cpu_base, cpu_thread = p.cpu_base_w * sc.static, p.cpu_thread_w * sc.static
    sys_base = p.sys_base_w * sc.static

    def rails(gpu_dyn: float, gbps: float, cpu_busy: float) -> dict:
        if prof.board_id == DEFAULT_BOARD:  # the calibrated model's own order of summation
            gpu_soc = soc_base + leak + gpu_dyn + p.fabric_w_per_gbps * gbps
            gpu, soc = gpu_soc, 0.0
        else:
            gpu, soc = leak + gpu_dyn, soc_base + p.fabric_w_per_gbps * gbps
        cpu = cpu_base + cpu_thread * cpu_busy * cpu_scale
        ddr = dram_base + p.dram_w_per_gbps * gbps
        cv = prof.cv_idle_w
        sys5 = sys_base + p.sys_share * (gpu + soc + cv + cpu + ddr)
        return _rails_from(prof, {"gpu": gpu, "soc": soc, "cv": cv, "cpu": cpu, "dram": ddr, "sys": sys5})

    return ClockState(
        freq_mhz=freq_mhz, t_comp_s=t_comp, t_lat_s=t_lat, t_mem_s=sw.t_mem_s, t_gpu_s=t_gpu,
        t_step_s=t_step,
        busy_power_w=rails(dyn_full * act_busy, gbps_busy, cpu_busy_gpu_phase),
        idle_power_w=rails(dyn_full * p.act_idle, 0.0, 1.0),
    )


def idle_board_power_w(p: SimParams, board: str = DEFAULT_BOARD) -> dict:
    """Rail powers of the idle board (podgov at the lowest clock, CPU idle, no training)."""
    prof = profile(board)
    f0 = prof.levels_mhz[0]
    if board == DEFAULT_BOARD:  # the calibrated model, as it always was
        v = voltage_v(ORIN_LEVELS_MHZ[0], p)
        gpu = p.soc_base_w * 0.6 + p.leak_w_at_vmax * (v * 1000.0 / p.v_max_mv) ** p.leak_exp \
            + p.cdyn_w_per_v2_ghz * v * v * ORIN_LEVELS_MHZ[0] / 1000.0 * p.act_idle
        cpu = p.cpu_base_w
        ddr = p.dram_base_w
        return {"VDD_GPU_SOC": gpu, "VDD_CPU_CV": cpu, "VDDQ_VDD2_1V8AO": ddr,
                "VIN_SYS_5V0": p.sys_base_w + p.sys_share * (gpu + cpu + ddr)}
    sc = power_scales(board, p)
    v = voltage_v(f0, p, prof.top_mhz)
    gpu = (p.leak_w_at_vmax * (v * 1000.0 / p.v_max_mv) ** p.leak_exp
           + p.cdyn_w_per_v2_ghz * v * v * f0 / 1000.0 * p.act_idle) * sc.gpu
    comp = {"gpu": gpu, "soc": p.soc_base_w * 0.6 * sc.static, "cv": prof.cv_idle_w,
            "cpu": p.cpu_base_w * sc.static, "dram": p.dram_base_w * sc.static}
    comp["sys"] = p.sys_base_w * sc.static + p.sys_share * sum(comp.values())
    return _rails_from(prof, comp)


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

    board: str = field(default=DEFAULT_BOARD, compare=False)
    emc_mhz: float | None = field(default=None, compare=False)  # None: the setting's own (top)
    cpu_mhz: float | None = field(default=None, compare=False)

    @property
    def cpu_gpu_power_w(self) -> float:
        """The CPU+GPU rails' power (the papers' measure), by the board table's rail role."""
        return board_table.role_sum(self.power_w, profile(self.board).board.role_rails("cpu_gpu"))

    @property
    def role_power_w(self) -> dict:
        """Mean power (W) of each rail role of the board (module, cpu_gpu, gpu; None where the
        board has no such rail), summed by :func:`pydvfs.device.table.energies`."""
        return board_table.energies(self.power_w, profile(self.board).board)


def snap_mhz(freq_mhz: float, levels=ORIN_LEVELS_MHZ) -> float:
    """The nearest OPP (the devfreq core snaps to its table the same way)."""
    return nearest_level(levels, freq_mhz)


def _with_clocks(mode: PowerMode, emc_mhz: float | None, cpu_mhz: float | None, prof: SimProfile) -> PowerMode:
    """``mode`` with the EMC rate / CPU clock replaced where given (checked against the board)."""
    if emc_mhz is not None:
        if not 0 < emc_mhz <= prof.emc_max_mhz + 0.5:
            raise InvalidValueError(f"EMC rate {emc_mhz:g} MHz is outside (0, {prof.emc_max_mhz:g}] on {prof.board_id}")
        mode = replace(mode, emc_mhz=float(emc_mhz))
    if cpu_mhz is not None:
        if not 0 < cpu_mhz <= prof.cpu_max_mhz + 0.5:
            raise InvalidValueError(f"CPU clock {cpu_mhz:g} MHz is outside (0, {prof.cpu_max_mhz:g}] on {prof.board_id}")
        mode = replace(mode, cpu_mhz=float(cpu_mhz))
    return mode


def operating_point(w: SimRun, setting: str = "fixed", freq_mhz: float | None = None,
                    p: SimParams | None = None, min_mhz: float | None = None,
                    max_mhz: float | None = None, board: str = DEFAULT_BOARD,
                    emc_mhz: float | None = None, cpu_mhz: float | None = None) -> OperatingPoint:
    """Steady state of ``w`` under a clock setting on ``board`` (default: the calibrated AGX Orin).

    ``setting``: ``fixed`` (pin ``freq_mhz``, snapped to the OPP table), a power mode of the board
    (``maxn``/``15w``/``30w``/``50w`` on the AGX Orin, ``15w``/``25w``/``maxn-super`` on the Orin
    Nano Super...: podgov under the mode's GPU cap, with its CPU clock and EMC rate) or ``podgov``
    (podgov between ``min_mhz`` and ``max_mhz`` under the top CPU/EMC). ``emc_mhz``/``cpu_mhz``
    replace the setting's EMC rate / CPU clock (default: the setting's own; the top for fixed).
    """
    from .podgov import simulate_podgov

    p = p or default_params()
    prof = profile(board)
    modes = POWER_MODES if board == DEFAULT_BOARD else power_modes(board)
    levels_all = prof.levels_mhz
    top = modes["maxn"] if board == DEFAULT_BOARD else top_mode(board)
    if setting == "fixed":
        if freq_mhz is None:
            raise InvalidValueError("a fixed setting needs freq_mhz")
        f = snap_mhz(freq_mhz, levels_all)
        mode = _with_clocks(top, emc_mhz, cpu_mhz, prof)
        cs = clock_state(step_work(w, p, None if mode is top else mode, board=board), f, p)
        e = cs.step_energy_j()
        return OperatingPoint("fixed", f, f, cs.t_step_s,
                              {r: e[r] / cs.t_step_s for r in prof.rail_names}, cs.load,
                              cs.t_idle_s / cs.t_step_s, (f,), board, emc_mhz, cpu_mhz)
    if setting in modes:
        mode = modes[setting]
        lo, hi = levels_all[0], mode.gpu_max_mhz
    elif setting == "podgov":
        mode = top
        lo = levels_all[0] if min_mhz is None else min_mhz
        hi = levels_all[-1] if max_mhz is None else max_mhz
    else:
        raise InvalidValueError(f"unknown setting {setting!r}; expected fixed, podgov or one of "
                                f"{', '.join(modes)}")
    mode = _with_clocks(mode, emc_mhz, cpu_mhz, prof)
    levels = tuple(lv for lv in levels_all if lo - 0.5 <= lv <= hi + 0.5)
    if not levels:
        raise InvalidValueError(f"no OPP between {lo} and {hi} MHz")
    sw = step_work(w, p, mode, board=board)
    res = simulate_podgov(lambda f: clock_state(sw, f, p), levels, p)
    return OperatingPoint(setting, None, res.mean_freq_mhz, res.t_step_s, res.power_w,
                          res.load, res.idle_share, res.clock_trace_mhz, board, emc_mhz, cpu_mhz)


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
    board: str = DEFAULT_BOARD

    @property
    def energy_cpu_gpu_j(self) -> float:
        """The CPU+GPU rails' energy (the papers' measure), by the board table's rail role."""
        return board_table.role_sum(self.energy_j, profile(self.board).board.role_rails("cpu_gpu"))

    @property
    def role_energy_j(self) -> dict:
        """Energy (J) of each rail role of the board (module, cpu_gpu, gpu), by the board table."""
        return board_table.energies(self.energy_j, profile(self.board).board)

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
                      seed: int = 0, repeat: int = 0, p: SimParams | None = None,
                      energy: str = "cpu-gpu") -> float:
    """Energy of one training step (simulated J) at a setting, with the run's seeded noise: what
    the animated process (``train_process --seed S --repeat R``) spends per step. ``energy``: the
    measure (pydvfs.measure.energy: "cpu-gpu", the papers', or "module"), by the board table's rail roles."""
    from ..measure.energy import ROLE, check_measure

    p = p or default_params()
    op = operating_point(w, setting, freq_mhz, p)
    tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, repeat)
    return op.role_power_w[ROLE[check_measure(energy)]] * pf * op.t_step_s * tf


def simulate_run(w: SimRun, setting: str = "fixed", freq_mhz: float | None = None,
                 repeat: int = 0, seed: int = 0, p: SimParams | None = None,
                 noise: bool = True, op: OperatingPoint | None = None,
                 board: str = DEFAULT_BOARD) -> RunResult:
    """One whole run, measured in virtual time (returns at once)."""
    p = p or default_params()
    op = op or operating_point(w, setting, freq_mhz, p, board=board)
    if noise:
        tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, repeat)
    else:
        tf, pf = 1.0, 1.0
    duration = w.steps * op.t_step_s * tf
    # Noise and spikes stretch the run at its mean power (a simplification: a spike is CPU time).
    energy = {r: op.power_w[r] * pf * duration for r in profile(op.board).rail_names}
    return RunResult(w.name, op.setting, op.freq_mhz, repeat, w.steps, duration, energy,
                     op.mean_freq_mhz, 100.0 * op.load / tf, tf, pf, op.board)

"""An Orin Nano Super written apart from the project's simulator: the tests' "independent physics".

Issue 51 item 4: the built-ins are judged on physics the family (pydvfs/sim/uncertainty.py) was not
fitted to. Nothing here imports pydvfs.sim.model or its parameters; what is shared with the
project is only what is a fact, not a model: the board table's GPU clock levels and the
catalogue's model shapes (layers, hidden, heads, vocabulary, batch, padded length of a task).
Its structure differs from the simulator's on purpose: memory time partly hidden under compute
(a roofline, not a sum), host launches overlapped with the GPU, a linear V/f ramp, a CPU rail
of whole cores (idle cluster + busy cores x a core's power), MAXN as podgov's settled clock.

The numbers, and where each comes from (SPEC 5b/5d; /work/shared/data/real/jetson_facts):

- 1024 CUDA cores, 102.4 GB/s (LPDDR5 128-bit, Super), CPU 6 x Cortex-A78AE at 1728 MHz under
  MAXN SUPER, GPU 306-1020 MHz (the board table), module budgets 7 W (lowest mode) and 25 W;
- rails: VDD_IN (the module), VDD_CPU_GPU_CV (the CPU cluster, the GPU and the idle CV: the
  CPU+GPU measure), VDD_SOC;
- a busy A78AE core at 1.7 GHz on an 8 nm process draws about 0.8-1.0 W, the idle cluster a few
  tenths (estimates: no per-core figure of the Orin Nano is published); PyTorch's main thread
  spins through CUDA's synchronisations (CUDA's default schedule) and a DataLoader's workers
  tokenise and collate: during training one to three cores are busy, not one;
- the GPU's voltage: a floor to about half the top clock, then a ramp to the top (the Super's
  1020 MHz came with a higher voltage than the Orin Nano's 625 MHz); leakage ~ V^3;
- MAXN: nvhost_podgov holds the GPU where its load meets the 70 % target (its published default),
  the top clock where the load stays above it.

:data:`PHYSICS` holds two such boards: ``nominal`` (about 1.6 W of CPU rail while training) and
``cpu-heavy`` (the CPU rail's share within CPU+GPU large: about 2.6 W, two and a half busy cores
at 0.9 W, beside a GPU whose switching costs 7 W at the top): the Nano of issue 51, on which
408 MHz costs a GPU-bound job 4.3 % more than MAXN.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pydvfs.device.table import board
from pydvfs.sim.catalogue import get_workload

BOARD = "orin-nano-super"
LEVELS = tuple(float(f) for f in board(BOARD).gpu_levels_mhz)
TOP = LEVELS[-1]


@dataclass(frozen=True)
class NanoPhysics:
    name: str
    # GPU (GA10B, 8 SMs)
    cuda_cores: int = 1024
    eff_max: float = 0.6  # large GEMMs' share of FP32 peak
    eff_half_hidden: float = 256.0  # hidden width at which a GEMM reaches half of it
    cycles_per_kernel: float = 3000.0  # fill/drain of a kernel, GPU cycles
    v_floor: float = 0.60  # V, up to knee_share x top
    v_top: float = 0.85  # V at 1020 MHz
    knee_share: float = 0.5
    dyn_w_top: float = 9.0  # switching power at the top clock, full activity
    leak_w_top: float = 1.2  # leakage at v_top, ~ V^3
    # memory: 128-bit LPDDR5, 102.4 GB/s, of which a training step reaches this share
    dram_gbps: float = 102.4
    dram_eff: float = 0.65
    overlap: float = 0.65  # share of the shorter of compute and memory time hidden under the longer
    bytes_per_param: float = 32.0  # fp32 AdamW: weight, gradient, two moments, read and written
    # host (6 x Cortex-A78AE at 1728 MHz)
    launch_us: float = 25.0  # eager PyTorch dispatch per kernel
    serial_ms: float = 8.0  # collation, loss.item(), optimizer bookkeeping per step
    kernels_per_layer: float = 60.0
    kernels_fixed: float = 60.0
    cluster_w: float = 0.35  # six cores online, idle
    core_w: float = 0.85  # one busy core at 1728 MHz
    busy_cores: float = 1.5  # main thread spinning + DataLoader workers' share
    cv_w: float = 0.05
    # the rest of the module
    soc_w: float = 2.0  # VDD_SOC: EMC at its top rate, fabric, always-on
    soc_w_per_gbps: float = 0.01
    dram_w: float = 0.6
    dram_w_per_gbps: float = 0.015
    vin_eff: float = 0.88  # VDD_IN: the rails above and the rest of the module, after regulation
    podgov_target: float = 0.70


PHYSICS = {
    "nominal": NanoPhysics("nominal"),
    "cpu-heavy": NanoPhysics("cpu-heavy", core_w=0.9, busy_cores=2.5, dyn_w_top=7.0),
}


def voltage(p: NanoPhysics, f: float) -> float:
    knee = p.knee_share * TOP
    return p.v_floor if f <= knee else p.v_floor + (p.v_top - p.v_floor) * (f - knee) / (TOP - knee)


@dataclass(frozen=True)
class Step:
    t_s: float
    load: float
    cpu_gpu_w: float
    module_w: float
    soc_w: float  # VDD_SOC (in neither measure; an animated job writes it)


def step(p: NanoPhysics, model: str, task: str, f: float) -> Step:
    """One full-fp32 training step of ``model`` on ``task`` at GPU clock ``f`` (MHz)."""
    w = get_workload(model, task)
    a = w.arch
    b, s, d, L = w.batch_size, w.seq_len_padded, a.hidden, a.layers
    tokens = b * s
    n_layer = a.layers * (4 * d * d + 2 * d * a.ff)
    flops = 6.0 * tokens * n_layer + 12.0 * b * L * s * s * d
    eff = p.eff_max * d / (d + p.eff_half_hidden)
    t_comp = flops / (2.0 * p.cuda_cores * f * 1e6 * eff)
    kernels = p.kernels_per_layer * L + p.kernels_fixed
    t_lat = kernels * p.cycles_per_kernel / (f * 1e6)
    nbytes = p.bytes_per_param * a.params + 3.0 * 68.0 * tokens * d * L + 6.0 * 4.0 * b * a.heads * s * s * L
    t_mem = nbytes / (p.dram_gbps * 1e9 * p.dram_eff)
    t_gpu = max(t_comp, t_mem) + (1.0 - p.overlap) * min(t_comp, t_mem) + t_lat
    t_launch = kernels * p.launch_us * 1e-6
    t = max(t_gpu, t_launch) + p.serial_ms * 1e-3
    load = t_gpu / t
    v = voltage(p, f)
    act = (1.0 * t_comp + 0.35 * t_mem + 0.2 * t_lat) / (t_comp + t_mem + t_lat)
    dyn = p.dyn_w_top * (v / p.v_top) ** 2 * (f / TOP)
    gpu = p.leak_w_top * (v / p.v_top) ** 3 + dyn * (act * load + 0.05 * (1.0 - load))
    cpu = p.cluster_w + p.core_w * p.busy_cores + p.cv_w
    gbps = nbytes / t / 1e9
    soc = p.soc_w + p.soc_w_per_gbps * gbps
    dram = p.dram_w + p.dram_w_per_gbps * gbps
    return Step(t, load, gpu + cpu, (gpu + cpu + soc + dram) / p.vin_eff, soc)


def maxn_clock(p: NanoPhysics, model: str, task: str) -> float:
    """podgov's settled clock: the lowest level whose load meets the target; the top where none does."""
    ok = [f for f in LEVELS if step(p, model, task, f).load <= p.podgov_target]
    return ok[0] if ok else TOP


@dataclass(frozen=True)
class Curve:
    """A workload's energy per step on one physics: per level and at MAXN, both measures."""

    name: str
    workload: dict  # as pydvfs.apply takes it, util_pct the GPU load at MAXN
    energy_j: dict  # measure -> {MHz: J}
    maxn_j: dict  # measure -> J

    def vs_maxn_pct(self, measure: str, mhz: float | None) -> float:
        e = self.maxn_j[measure] if mhz is None else self.energy_j[measure][mhz]
        return 100.0 * (e / self.maxn_j[measure] - 1.0)

    def best_saving_pct(self, measure: str) -> float:
        return -min(self.vs_maxn_pct(measure, f) for f in self.energy_j[measure])


def curve(p: NanoPhysics, model: str, task: str) -> Curve:
    steps = {f: step(p, model, task, f) for f in LEVELS}
    m = steps[maxn_clock(p, model, task)]
    a = get_workload(model, task).arch
    work = {"model": a.family, "layers": a.layers, "hidden": a.hidden,
            "seq_len": get_workload(model, task).task.avg_tokens, "util_pct": round(100.0 * m.load, 2)}
    return Curve(f"{model}/{task}", work,
                 {"cpu-gpu": {f: s.cpu_gpu_w * s.t_s for f, s in steps.items()},
                  "module": {f: s.module_w * s.t_s for f, s in steps.items()}},
                 {"cpu-gpu": m.cpu_gpu_w * m.t_s, "module": m.module_w * m.t_s})


def physics(name: str, **changes) -> NanoPhysics:
    return replace(PHYSICS[name], **changes)

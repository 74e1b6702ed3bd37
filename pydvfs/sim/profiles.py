"""Simulator profiles per board: the constants the simulator needs beyond the board table.

Board facts (GPU clock table, power modes' GPU caps, rails and their roles, EMC rates, CPU top
clock) come from ``pydvfs/data/boards.json`` through :mod:`pydvfs.device.table`, never from here. What
lives here is simulator-only, per board, each number with where it came from:

- the GPU's FP32 width (CUDA cores) and the DRAM's peak bandwidth (public spec sheets);
- the host speed per MHz relative to the AGX Orin's Cortex-A78AE (``cpu_ipc``, an estimate);
- the module power of the top and the lowest power mode (public module TDPs), from which the
  simulator's power coefficients are scaled (:func:`power_scales`);
- the CPU cores/clock and EMC rate of each nvpmodel mode (the GPU cap comes from the table);
- which of the simulator's power components each rail carries (the rails are the table's).

The AGX Orin profile is the calibrated one (docs/sim-calibration.md): all its scales are 1 and
its numbers are the simulator's of before profiles existed. Every other board is a scaled
estimate, stated in docs/sim.md ("Boards").

Power components (W) the model computes at an operating point (:func:`pydvfs.sim.model.clock_state`):
``gpu`` (GPU leakage + switching), ``soc`` (SoC always-on part, fabric and memory controller),
``cv`` (vision accelerators, idle), ``cpu`` (CPU cluster), ``dram`` (DRAM, VDDQ) and ``sys``
(the rest of the module: 5 V system rail, regulator losses, IO).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..device import table as board_table
from ..errors import InvalidValueError

COMPONENTS = ("gpu", "soc", "cv", "cpu", "dram", "sys")
DEFAULT_BOARD = "agx-orin"
# The AGX Orin's Cortex-A78AE cpufreq table is 115.2 + 76.8 k MHz; the sweep clocks of the
# Orin boards are points of it (the power modes' own clocks among them).
ORIN_CPU_STEP_MHZ = 76.8


@dataclass(frozen=True)
class ModeClocks:
    """An nvpmodel mode's CPU and EMC settings (the GPU cap comes from the board table)."""

    cpu_cores: int
    cpu_mhz: float
    emc_mhz: float
    source: str


@dataclass(frozen=True)
class SimProfile:
    board_id: str
    calibrated: bool
    cuda_cores: int
    dram_peak_gbps: float
    emc_max_mhz: float  # the EMC rate at which dram_peak_gbps is reached
    cpu_ipc: float  # host work per MHz relative to the AGX Orin's Cortex-A78AE
    cpu_cores: int
    tdp_top_w: float  # module power budget of the top power mode
    tdp_low_w: float  # module power budget of the lowest power mode (idle/static scaling)
    cv_idle_w: float  # an idle CV rail where the board has one alone (AGX Xavier)
    rails: dict  # rail -> components it carries (every rail of the board table, each once)
    modes: dict  # board-table mode name -> ModeClocks: the modes the simulator models
    sweep_cpu_mhz: tuple  # a few CPU clocks for joint sweeps (top included)
    # dense fp16 / bf16 GEMM peak over the FP32 CUDA cores' (tensor cores; 1: no 16-bit path
    # faster than FP32, e.g. bf16 emulated where the GPU has no bf16 units)
    tensor_ratio: dict = field(default_factory=lambda: {"fp16": 1.0, "bf16": 1.0})
    memory_gb: float = 0.0  # the module's DRAM, shared by CPU and GPU (0: not known)
    # the board table's other modes, each with why the simulator does not model it (its CPU and
    # EMC clocks, or its GPU cap, are not in the public record): no setting of the simulator, so
    # no baseline is made up for it (a mode modelled as uncapped would be MAXN under its name)
    modes_not_simulated: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def board(self) -> board_table.Board:
        return board_table.board(self.board_id)

    @property
    def levels_mhz(self) -> tuple:
        return self.board.gpu_levels_mhz

    @property
    def top_mhz(self) -> float:
        return self.levels_mhz[-1]

    @property
    def cpu_max_mhz(self) -> float:
        return self.board.cpu_max_mhz

    @property
    def emc_rates_mhz(self) -> tuple:
        """The board table's EMC rates; boards without a settable EMC in the table run at the top."""
        return self.board.emc_mhz or (self.emc_max_mhz,)

    @property
    def rail_names(self) -> tuple:
        return self.board.rails


_A78_SWEEP = (729.6, 1113.6, 1497.6)
NO_MODE_CLOCKS = "its CPU cores and clock and its EMC rate are not in the public record read"
NO_MODE_CAP = "its GPU cap is not in the public record read (the table's gpu_cap_mhz is null)"

PROFILES_SPEC = {
    "agx-orin": dict(
        calibrated=True, cuda_cores=2048, dram_peak_gbps=204.8, emc_max_mhz=3199.0, cpu_ipc=1.0,
        cpu_cores=12, tdp_top_w=60.0, tdp_low_w=15.0, cv_idle_w=0.0,
        rails={"VDD_GPU_SOC": ("gpu", "soc"), "VDD_CPU_CV": ("cpu",), "VIN_SYS_5V0": ("sys",),
               "VDDQ_VDD2_1V8AO": ("dram",)},
        modes={"MAXN": ModeClocks(12, 2201.6, 3199.0, "SPEC 5 (no caps)"),
               "MODE_15W": ModeClocks(4, 1113.6, 2133.0, "SPEC 5 (cores, EMC); devkit nvpmodel.conf (CPU)"),
               "MODE_30W": ModeClocks(8, 1728.0, 3199.0, "SPEC 5 (cores); devkit nvpmodel.conf (CPU)"),
               "MODE_50W": ModeClocks(12, 1497.6, 3199.0, "SPEC 5")},
        sweep_cpu_mhz=_A78_SWEEP + (2201.6,),
        tensor_ratio={"fp16": 8.0, "bf16": 8.0},
        memory_gb=64.0,
        sources={"memory_gb": "AGX Orin 64GB: 64 GB LPDDR5",
                 "tensor_ratio": "Ampere GA10B: 4 tensor cores per SM, 256 dense fp16/bf16 FMA/clk each, against 128 FP32 FMA/clk per SM (NVIDIA Ampere GA102 whitepaper; Jetson AGX Orin technical brief)",
                 "cuda_cores": "16 SMs x 128 (Ampere GA10B, AGX Orin 64GB data sheet)",
                 "dram_peak_gbps": "LPDDR5 256-bit at 6400 MT/s",
                 "tdp": "AGX Orin 64GB: 15-60 W",
                 "power": "calibrated (docs/sim-calibration.md)"}),
    "orin-nano-super": dict(
        calibrated=False, cuda_cores=1024, dram_peak_gbps=102.4, emc_max_mhz=3199.0, cpu_ipc=1.0,
        cpu_cores=6, tdp_top_w=25.0, tdp_low_w=7.0, cv_idle_w=0.0,
        rails={"VDD_IN": COMPONENTS, "VDD_CPU_GPU_CV": ("gpu", "cpu"), "VDD_SOC": ("soc",)},
        modes={"15W": ModeClocks(6, 1497.6, 2133.0, "estimate: JetPack 6.2 Orin Nano 8GB mode table"),
               "25W": ModeClocks(6, 1344.0, 3199.0, "estimate: JetPack 6.2 Orin Nano 8GB mode table"),
               "MAXN_SUPER": ModeClocks(6, 1728.0, 3199.0, "no caps: table's CPU and EMC tops")},
        modes_not_simulated={"7W": NO_MODE_CLOCKS},
        sweep_cpu_mhz=(729.6, 1113.6, 1344.0, 1728.0),
        tensor_ratio={"fp16": 8.0, "bf16": 8.0},
        memory_gb=8.0,
        sources={"memory_gb": "Orin Nano 8GB: 8 GB LPDDR5",
                 "tensor_ratio": "Ampere GA10B, as the AGX Orin",
                 "cuda_cores": "8 SMs x 128 (Orin Nano 8GB data sheet: 1024 CUDA cores)",
                 "dram_peak_gbps": "LPDDR5 128-bit at 6400 MT/s (Super: 102 GB/s)",
                 "tdp": "Orin Nano 8GB Super: 7-25 W"}),
    "orin-nx": dict(
        calibrated=False, cuda_cores=1024, dram_peak_gbps=102.4, emc_max_mhz=3199.0, cpu_ipc=1.0,
        cpu_cores=8, tdp_top_w=40.0, tdp_low_w=10.0, cv_idle_w=0.0,
        rails={"VDD_IN": COMPONENTS, "VDD_CPU_GPU_CV": ("gpu", "cpu"), "VDD_SOC": ("soc",)},
        modes={"MAXN_SUPER": ModeClocks(8, 1984.0, 3199.0, "no caps: table's CPU and EMC tops")},
        modes_not_simulated={"25W": NO_MODE_CLOCKS},
        sweep_cpu_mhz=_A78_SWEEP + (1984.0,),
        tensor_ratio={"fp16": 8.0, "bf16": 8.0},
        memory_gb=16.0,
        sources={"memory_gb": "Orin NX 16GB: 16 GB LPDDR5",
                 "tensor_ratio": "Ampere GA10B, as the AGX Orin",
                 "cuda_cores": "8 SMs x 128 (Orin NX 16GB data sheet: 1024 CUDA cores)",
                 "dram_peak_gbps": "LPDDR5 128-bit at 6400 MT/s",
                 "tdp": "Orin NX 16GB Super: 10-40 W"}),
    "thor": dict(
        calibrated=False, cuda_cores=2560, dram_peak_gbps=273.0, emc_max_mhz=4266.0, cpu_ipc=1.6,
        cpu_cores=14, tdp_top_w=130.0, tdp_low_w=40.0, cv_idle_w=0.0,
        rails={"VDD_GPU": ("gpu",), "VDD_CPU_SOC_MSS": ("cpu", "soc"), "VIN_SYS_5V0": ("sys",),
               "ina238": COMPONENTS},
        modes={"MAXN": ModeClocks(14, 2601.0, 4266.0, "no caps: table's CPU top, LPDDR5X top")},
        modes_not_simulated={"120W": NO_MODE_CLOCKS, "90W": NO_MODE_CAP, "70W": NO_MODE_CAP},
        sweep_cpu_mhz=(1300.8, 1950.7, 2601.0),
        tensor_ratio={"fp16": 8.0, "bf16": 8.0},
        memory_gb=128.0,
        sources={"memory_gb": "Jetson AGX Thor T5000: 128 GB LPDDR5X",
                 "tensor_ratio": "estimate: Blackwell tensor cores taken at Ampere's dense fp16 ratio per SM (no dense fp16 figure per SM published for Thor)",
                 "cuda_cores": "20 SMs x 128 (Blackwell, Jetson AGX Thor: 2560 CUDA cores)",
                 "dram_peak_gbps": "LPDDR5X 256-bit at 8533 MT/s: 273 GB/s",
                 "cpu_ipc": "estimate: Neoverse V3AE vs Cortex-A78AE per clock",
                 "tdp": "Jetson AGX Thor T5000: 40-130 W"}),
    "agx-xavier": dict(
        calibrated=False, cuda_cores=512, dram_peak_gbps=136.5, emc_max_mhz=2133.0, cpu_ipc=0.8,
        cpu_cores=8, tdp_top_w=30.0, tdp_low_w=10.0, cv_idle_w=0.2,
        rails={"GPU": ("gpu",), "CPU": ("cpu",), "SOC": ("soc",), "CV": ("cv",), "VDDRQ": ("dram",),
               "SYS5V": ("sys",)},
        modes={"MAXN": ModeClocks(8, 2265.6, 2133.0, "no caps: table's CPU top, LPDDR4x top")},
        sweep_cpu_mhz=(1190.4, 1728.0, 2265.6),
        tensor_ratio={"fp16": 8.0, "bf16": 1.0},
        memory_gb=32.0,
        sources={"memory_gb": "AGX Xavier 32GB: 32 GB LPDDR4x",
                 "tensor_ratio": "Volta GV10B: 8 tensor cores per SM, 64 fp16 FMA/clk each, against 64 FP32 FMA/clk per SM (NVIDIA Volta whitepaper); no bf16 before Ampere (sm_80): bf16 runs at the FP32 rate",
                 "cuda_cores": "8 SMs x 64 (Volta GV10B: 512 CUDA cores)",
                 "dram_peak_gbps": "LPDDR4x 256-bit at 4266 MT/s: 136.5 GB/s",
                 "cpu_ipc": "estimate: Carmel vs Cortex-A78AE per clock",
                 "cv_idle_w": "estimate: DLA/PVA idle", "tdp": "AGX Xavier 32GB: 10-30 W"}),
    "nano": dict(
        calibrated=False, cuda_cores=128, dram_peak_gbps=25.6, emc_max_mhz=1600.0, cpu_ipc=0.55,
        cpu_cores=4, tdp_top_w=10.0, tdp_low_w=5.0, cv_idle_w=0.0,
        rails={"POM_5V_IN": COMPONENTS, "POM_5V_GPU": ("gpu",), "POM_5V_CPU": ("cpu",)},
        modes={"MAXN": ModeClocks(4, 1479.0, 1600.0, "no caps: table's CPU top, LPDDR4 top")},
        modes_not_simulated={"5W": NO_MODE_CLOCKS},
        sweep_cpu_mhz=(710.4, 1036.8, 1479.0),
        tensor_ratio={"fp16": 2.0, "bf16": 1.0},
        memory_gb=4.0,
        sources={"memory_gb": "Jetson Nano: 4 GB LPDDR4",
                 "tensor_ratio": "Maxwell GM20B: no tensor cores; fp16x2 arithmetic at twice the FP32 rate (Tegra X1); no bf16",
                 "cuda_cores": "1 SM x 128 (Maxwell GM20B: 128 CUDA cores)",
                 "dram_peak_gbps": "LPDDR4 64-bit at 3200 MT/s: 25.6 GB/s",
                 "cpu_ipc": "estimate: Cortex-A57 vs Cortex-A78AE per clock",
                 "tdp": "Jetson Nano: 5-10 W"}),
}


@lru_cache(maxsize=None)
def profile(board_id: str = DEFAULT_BOARD) -> SimProfile:
    """The simulator profile of a board of the table; a clear error for anything else."""
    if board_id not in PROFILES_SPEC:
        raise InvalidValueError(f"no simulator profile for board {board_id!r}; "
                                f"expected one of {', '.join(PROFILES_SPEC)}")
    spec = dict(PROFILES_SPEC[board_id])
    prof = SimProfile(board_id=board_id, **spec)
    b = prof.board
    if set(prof.rails) != set(b.rails):  # the rails are the table's: a profile only maps them
        raise InvalidValueError(f"simulator profile {board_id}: rails {sorted(prof.rails)} are not "
                                f"the board table's {sorted(b.rails)}")
    names = [m.name for m in b.power_modes]
    if sorted([*prof.modes, *prof.modes_not_simulated]) != sorted(names):
        raise InvalidValueError(f"simulator profile {board_id}: modes {sorted(prof.modes)} and not simulated "
                                f"{sorted(prof.modes_not_simulated)} are not the board table's {sorted(names)}")
    uncapped = [m.name for m in b.power_modes if m.gpu_cap_mhz is None and m.name in prof.modes]
    if uncapped:  # no GPU cap is ever assumed: such a mode is not modelled
        raise InvalidValueError(f"simulator profile {board_id}: modes {uncapped} have no GPU cap in the table")
    return prof


def board_ids() -> tuple:
    return tuple(PROFILES_SPEC)


def mode_key(name: str) -> str:
    """The simulator's setting name of an nvpmodel mode, the same for every spelling nvpmodel
    has used: ``MAXN_SUPER`` and ``MAXN SUPER`` -> ``maxn-super``, ``MODE_30W`` -> ``30w``."""
    key = name.lower().replace(" ", "-").replace("_", "-")
    return key[len("mode-"):] if key.startswith("mode-") else key

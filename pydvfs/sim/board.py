"""The files of a (fake) Jetson sysfs tree that the animated simulator reads and writes.

The simulated training process plays the kernel's part: it reads the devfreq limits a governor
wrote, emulates podgov when they leave room, and writes the rail readings and GPU load a real
power-sensor driver and GPU driver would. It finds the files with the production discovery
(govcore's ``gc_board_open`` through ``_core.Board``), so any tree built by
``pydvfs.device.fake.build_fake_board`` works, for every board of the table: INA3221 hwmon rails
(mV and mA files), an hwmon power channel (``powerN_input`` in uW: Thor's INA238) and JetPack 4's
ina3221x driver (a mW file beside mV and mA). A board without a GPU load file (Thor) gets none.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..device.fake import read_int, rewrite_int
from ..errors import DeviceNotFoundError

# INA3221 bus voltage written for each rail (mV). The 0x40 rails sit on the 5 V module input;
# VDDQ_VDD2_1V8AO on its 1.8 V supply; any other board's rail (simulator profiles) at 5 V. Only
# V x I matters to a sampler.
RAIL_BUS_MV = {"VDD_GPU_SOC": 5000.0, "VDD_CPU_CV": 5000.0, "VIN_SYS_5V0": 5000.0,
               "VDDQ_VDD2_1V8AO": 1800.0}
DEFAULT_BUS_MV = 5000.0
# The EMC's and the CPU's clock files under a board's root (as JetPack 5/6 lays them out)
EMC_RATE = "sys/kernel/debug/bpmp/debug/clk/emc/rate"
CPUFREQ = "sys/devices/system/cpu/cpufreq"


def bus_mv(label: str) -> float:
    return RAIL_BUS_MV.get(label, DEFAULT_BUS_MV)


@dataclass(frozen=True)
class RailFiles:
    """One rail's files as discovery found them (``_core.Board.rails``): ``kind`` "hwmon" (mV
    and mA files), "power" (one uW file) or "ina3221x" (a mW file, what govcore reads, beside mV
    and mA files)."""

    kind: str
    voltage: Path | None
    current: Path | None
    power: Path | None

    def readings(self, label: str, watts: float) -> dict:
        """{path: integer} a driver would show for ``watts`` on this rail."""
        if self.kind == "power":
            return {self.power: round(watts * 1e6)}
        mv = round(bus_mv(label))
        out = {self.voltage: mv, self.current: round(watts * 1e6 / mv)}
        if self.kind == "ina3221x":
            out[self.power] = round(watts * 1e3)
        return out

    def read_back_w(self, label: str, watts: float) -> float:
        """The power a sampler reads after the files' rounding (govcore: mV x mA, mW or uW)."""
        if self.kind == "power":
            return round(watts * 1e6) / 1e6
        if self.kind == "ina3221x":
            return round(watts * 1e3) / 1e3
        mv = round(bus_mv(label))
        return mv * round(watts * 1e6 / mv) / 1e6


@dataclass
class BoardFiles:
    root: Path
    devfreq_dir: Path
    load_path: Path | None  # None: the board has no GPU load file (Thor)
    rails: dict = field(default_factory=dict)  # label -> RailFiles
    levels_hz: tuple = ()

    @classmethod
    def discover(cls, root: str | os.PathLike, rail_names=tuple(RAIL_BUS_MV)) -> "BoardFiles":
        """Find the files by the production discovery (govcore, through ``_core.Board``).

        ``rail_names``: the rails to animate (default: the AGX Orin's; a simulator profile's
        ``rail_names`` for another board)."""
        from .. import _core

        def path(p: str) -> Path | None:
            return Path(p) if p else None

        board = _core.Board(str(root))
        rails = {name: RailFiles(kind, path(vpath), path(ipath), path(ppath))
                 for name, kind, vpath, ipath, ppath in board.rails
                 if name in rail_names and kind in ("hwmon", "power", "ina3221x")}
        if not rails:
            raise DeviceNotFoundError(f"no power rails named {', '.join(rail_names)} under {root}")
        devfreq_dir = Path(board.devfreq_dir)
        load_path = Path(board.load_path) if board.load_path else None
        return cls(Path(root), devfreq_dir, load_path, rails, tuple(sorted(board.freqs_hz)))

    def read_mode_mhz(self) -> tuple:
        """(EMC rate, CPU clock) in MHz the tree holds beside the GPU's, None where it has no such
        file: the EMC's BPMP debugfs ``rate`` and the lowest ``scaling_max_freq`` of the cpufreq
        policies (a pinned policy runs at it; a busy one under schedutil too), the files a pin of
        those domains writes (docs/power-modes.md)."""
        emc = self.root / EMC_RATE
        emc_mhz = read_int(emc) / 1e6 if emc.is_file() else None
        maxes = [read_int(d / "scaling_max_freq") / 1000.0 for d in sorted((self.root / CPUFREQ).glob("policy*"))
                 if (d / "scaling_max_freq").is_file()]
        return emc_mhz, (min(maxes) if maxes else None)

    def read_limits_hz(self) -> tuple[int, int]:
        return read_int(self.devfreq_dir / "min_freq"), read_int(self.devfreq_dir / "max_freq")

    def write_cur_freq(self, hz: int) -> None:
        rewrite_int(self.devfreq_dir / "cur_freq", hz)
        if (self.devfreq_dir / "target_freq").exists():
            rewrite_int(self.devfreq_dir / "target_freq", hz)

    def write_load(self, load_permille: int) -> None:
        """The GPU load (tenths of a percent); nothing on a board without a load file."""
        if self.load_path is not None:
            rewrite_int(self.load_path, max(0, min(1000, int(round(load_permille)))))

    def write_power(self, power_w: dict) -> None:
        """Write each rail's files for the given power (W), as its driver shows it."""
        for label, files in self.rails.items():
            for p, value in files.readings(label, power_w.get(label, 0.0)).items():
                rewrite_int(p, value)

    def quantised_power_w(self, power_w: dict) -> dict:
        """The power a reader of the files sees after the rounding of :meth:`write_power`."""
        return {label: files.read_back_w(label, power_w.get(label, 0.0)) for label, files in self.rails.items()}

"""Lay out fake Jetson sysfs trees in a directory: what tests, the demo and the simulator use.

The trees follow what the real boards expose (see SPEC section 5), including the parts that must
be *discovered* rather than assumed: unstable ``hwmonN`` numbers, decoy devfreq and hwmon
devices, ``NC`` channels and the INA3221 shunt-sum channel. The code that reads and changes a
board never imports this module (``pydvfs fake-board`` hands it to users); that code only ever
sees a sysfs root.

Values are written the way the real files read: devfreq in Hz, hwmon in mV / mA, GPU load in
tenths of a percent. Rail and load files are rewritten *in place* with fixed-width fields, so a
reader holding the file open never sees an empty file (as with real sysfs attributes).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# The 11-level GPU table seen on AGX Orin (JetPack 5) and the 13-level one of other releases. Hz.
ORIN_11_LEVELS_HZ = (
    306000000, 408000000, 510000000, 612000000, 714000000, 816000000,
    918000000, 1020000000, 1122000000, 1224000000, 1300500000,
)
ORIN_13_LEVELS_HZ = tuple(114750000 + 102000000 * i for i in range(12)) + (1300500000,)
XAVIER_LEVELS_HZ = (
    114750000, 216750000, 318750000, 420750000, 522750000, 624750000, 675750000,
    828750000, 905250000, 1032750000, 1198500000, 1236750000, 1338750000, 1377000000,
)

LAYOUTS = ("jp4", "jp5", "jp6")
ORIN_MODEL = "NVIDIA Jetson AGX Orin Developer Kit"
XAVIER_MODEL = "Jetson-AGX"

# Rails of the AGX Orin devkit: (i2c address, channel, label). Channel 1-0041:1 and :3 are NC.
ORIN_RAILS = (
    ("1-0040", 1, "VDD_GPU_SOC"),
    ("1-0040", 2, "VDD_CPU_CV"),
    ("1-0040", 3, "VIN_SYS_5V0"),
    ("1-0041", 1, "NC"),
    ("1-0041", 2, "VDDQ_VDD2_1V8AO"),
    ("1-0041", 3, "NC"),
)
# JetPack 4 (Xavier, ina3221x driver): (i2c address, channel 0..2, rail_name).
XAVIER_RAILS = (
    ("1-0040", 0, "GPU"),
    ("1-0040", 1, "CPU"),
    ("1-0040", 2, "SOC"),
    ("1-0041", 0, "CV"),
    ("1-0041", 1, "VDDRQ"),
    ("1-0041", 2, "SYS5V"),
)

FIELD_WIDTH = 12  # fixed width of rewritten numeric files, newline included


@dataclass
class FakeRail:
    """Where one fake rail's numbers live. hwmon rails have mV/mA files, ina3221x a mW file."""

    name: str
    voltage_path: Path | None = None  # inN_input, mV
    current_path: Path | None = None  # currN_input, mA
    power_path: Path | None = None  # in_powerN_input, mW (ina3221x only)


@dataclass
class FakeBoard:
    """A fake Jetson sysfs tree under ``root``; pass ``root`` as the sysfs root."""

    root: Path
    layout: str
    model: str
    devfreq_dir: Path
    gpu_dir: Path
    levels_hz: tuple[int, ...]
    rails: dict[str, FakeRail] = field(default_factory=dict)
    hwmon_dirs: list[Path] = field(default_factory=list)

    # -- what a kernel driver would update -------------------------------------------------
    def set_rail(self, name: str, voltage_mv: float, current_ma: float) -> None:
        """Write one rail's bus voltage (mV) and current (mA), in place."""
        rail = self.rails[name]
        if rail.power_path is not None:
            rewrite_int(rail.power_path, round(voltage_mv * current_ma / 1000.0))
            if rail.voltage_path is not None:
                rewrite_int(rail.voltage_path, round(voltage_mv))
            if rail.current_path is not None:
                rewrite_int(rail.current_path, round(current_ma))
            return
        rewrite_int(rail.voltage_path, round(voltage_mv))
        rewrite_int(rail.current_path, round(current_ma))

    def set_load(self, load_permille: int) -> None:
        """GPU load in tenths of a percent (0..1000), as the ``load`` file reports it."""
        rewrite_int(self.gpu_dir / "load", int(load_permille))

    def set_cur_freq(self, hz: int) -> None:
        rewrite_int(self.devfreq_dir / "cur_freq", int(hz))

    def set_update_interval(self, interval_ms: int) -> None:
        for d in self.hwmon_dirs:
            (d / "update_interval").write_text(f"{int(interval_ms)}\n")

    # -- what a user would read -------------------------------------------------------------
    def read_hz(self, name: str) -> int:
        """Read a devfreq file (``min_freq``, ``max_freq``, ``cur_freq``) as Hz."""
        return int((self.devfreq_dir / name).read_text().strip())

    def governor(self) -> str:
        return (self.devfreq_dir / "governor").read_text().strip()


def rewrite_int(path: Path, value: int) -> None:
    """Rewrite a numeric file in place with a fixed-width field (no truncate, so a reader holding
    the file open never sees it empty), as a kernel driver's attribute reads."""
    text = f"{int(value):>{FIELD_WIDTH - 1}d}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, text, 0)
    finally:
        os.close(fd)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _link(link: Path, target: Path) -> None:
    """A relative symlink, as sysfs uses, so the tree stays valid wherever it lives."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def build_fake_board(
    root: str | os.PathLike,
    layout: str = "jp5",
    levels_hz: tuple[int, ...] | None = None,
    model: str | None = None,
    hwmon_start: int = 2,
) -> FakeBoard:
    """Create a fake board tree under ``root`` and return its handle.

    ``layout``: ``jp5`` (ga10b, hwmon INA3221), ``jp6`` (gpu, hwmon INA3221) or ``jp4``
    (Xavier gv11b, legacy ``ina3221x`` driver). ``levels_hz``: the GPU table (default: the
    11-level Orin table; 14-level Xavier table for jp4). ``hwmon_start``: first hwmonN number
    used, to show that discovery does not depend on it.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    root = Path(root)
    sys_ = root / "sys"
    if layout == "jp4":
        levels = tuple(levels_hz or XAVIER_LEVELS_HZ)
        gpu_dir = sys_ / "devices" / "17000000.gv11b"
        of_name = "gv11b"
        model = model or XAVIER_MODEL
    elif layout == "jp5":
        levels = tuple(levels_hz or ORIN_11_LEVELS_HZ)
        gpu_dir = sys_ / "devices" / "17000000.ga10b"
        of_name = "ga10b"
        model = model or ORIN_MODEL
    else:
        levels = tuple(levels_hz or ORIN_11_LEVELS_HZ)
        gpu_dir = sys_ / "devices" / "platform" / "bus@0" / "17000000.gpu"
        of_name = "gpu"
        model = model or ORIN_MODEL

    _write(gpu_dir / "of_node" / "name", of_name + "\n")
    rewrite_int(gpu_dir / "load", 0)
    devfreq_dir = gpu_dir / "devfreq" / gpu_dir.name
    _write(devfreq_dir / "available_frequencies", " ".join(str(f) for f in levels) + "\n")
    _write(devfreq_dir / "available_governors", "nvhost_podgov userspace performance simple_ondemand\n")
    _write(devfreq_dir / "governor", "nvhost_podgov\n")
    rewrite_int(devfreq_dir / "min_freq", min(levels))
    rewrite_int(devfreq_dir / "max_freq", max(levels))
    rewrite_int(devfreq_dir / "cur_freq", max(levels))
    rewrite_int(devfreq_dir / "target_freq", max(levels))
    _write(devfreq_dir / "polling_interval", "0\n")
    _link(devfreq_dir / "device", gpu_dir)
    _link(sys_ / "class" / "devfreq" / gpu_dir.name, devfreq_dir)

    # A decoy devfreq device (the DLA) listed before the GPU: discovery must skip it.
    dla = sys_ / "devices" / "15880000.nvdla0"
    _write(dla / "of_node" / "name", "nvdla0\n")
    dla_df = dla / "devfreq" / dla.name
    _write(dla_df / "available_frequencies", "1369600000\n")
    _write(dla_df / "governor", "userspace\n")
    _link(dla_df / "device", dla)
    _link(sys_ / "class" / "devfreq" / dla.name, dla_df)

    _write(root / "proc" / "device-tree" / "model", model + "\0")

    board = FakeBoard(root=root, layout=layout, model=model, devfreq_dir=devfreq_dir,
                      gpu_dir=gpu_dir, levels_hz=levels)
    if layout == "jp4":
        _add_ina3221x(board, sys_)
    else:
        _add_hwmon(board, sys_, hwmon_start)
    return board


def _add_hwmon(board: FakeBoard, sys_: Path, hwmon_start: int) -> None:
    n = hwmon_start
    # A decoy hwmon (a thermal sensor) takes the first number: discovery matches on `name`.
    decoy = sys_ / "devices" / "virtual" / "thermal" / "thermal_zone0" / "hwmon" / f"hwmon{n}"
    _write(decoy / "name", "cpu_thermal\n")
    _write(decoy / "temp1_input", "45000\n")
    _link(sys_ / "class" / "hwmon" / f"hwmon{n}", decoy)
    n += 1
    for addr in ("1-0040", "1-0041"):
        d = sys_ / "bus" / "i2c" / "drivers" / "ina3221" / addr / "hwmon" / f"hwmon{n}"
        _link(sys_ / "class" / "hwmon" / f"hwmon{n}", d)
        n += 1
        _write(d / "name", "ina3221\n")
        _write(d / "update_interval", "7\n")
        _write(d / "samples", "4\n")
        for addr_, ch, label in ORIN_RAILS:
            if addr_ != addr:
                continue
            _write(d / f"in{ch}_label", label + "\n")
            _write(d / f"in{ch}_enable", "0\n" if label == "NC" else "1\n")
            rewrite_int(d / f"in{ch}_input", 0)
            rewrite_int(d / f"curr{ch}_input", 0)
            rewrite_int(d / f"in{ch + 3}_input", 0)  # shunt voltage, uV
            if label != "NC":
                board.rails[label] = FakeRail(label, d / f"in{ch}_input", d / f"curr{ch}_input")
        # The shunt-sum channel: must be skipped by discovery.
        _write(d / "in7_label", "sum of shunt voltages\n")
        rewrite_int(d / "in7_input", 0)
        rewrite_int(d / "curr4_input", 0)
        board.hwmon_dirs.append(d)


def _add_ina3221x(board: FakeBoard, sys_: Path) -> None:
    for i, addr in enumerate(("1-0040", "1-0041")):
        d = sys_ / "bus" / "i2c" / "drivers" / "ina3221x" / addr / f"iio:device{i}"
        _write(d / "name", "ina3221x\n")
        for addr_, ch, label in XAVIER_RAILS:
            if addr_ != addr:
                continue
            _write(d / f"rail_name_{ch}", label + "\n")
            rewrite_int(d / f"in_power{ch}_input", 0)
            rewrite_int(d / f"in_voltage{ch}_input", 0)
            rewrite_int(d / f"in_current{ch}_input", 0)
            board.rails[label] = FakeRail(
                label,
                voltage_path=d / f"in_voltage{ch}_input",
                current_path=d / f"in_current{ch}_input",
                power_path=d / f"in_power{ch}_input",
            )

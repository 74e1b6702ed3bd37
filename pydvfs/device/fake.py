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
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import table


def _levels_hz(board_id: str) -> tuple[int, ...]:
    return tuple(round(mhz * 1e6) for mhz in table.board(board_id).gpu_levels_mhz)


# The AGX Orin's 11-level GPU table (the board table's) and the 13-level one some releases show.
ORIN_11_LEVELS_HZ = _levels_hz("agx-orin")
ORIN_13_LEVELS_HZ = tuple(114750000 + 102000000 * i for i in range(12)) + (1300500000,)
XAVIER_LEVELS_HZ = _levels_hz("agx-xavier")

# The layouts the first tests were written against: AGX Orin on JetPack 5 / 6, AGX Xavier on 4.
LAYOUTS = ("jp4", "jp5", "jp6")
_LAYOUT_BOARD = {"jp4": ("agx-xavier", 4), "jp5": ("agx-orin", 5), "jp6": ("agx-orin", 6)}
BOARDS = tuple(table.boards())  # every board of the table
VARIANTS = tuple(table.variants())  # every variant of a board (docs/boards.md): build_fake_board(board=ID) too
ORIN_MODEL = table.board("agx-orin").model_example
XAVIER_MODEL = table.board("agx-xavier").model_example

FIELD_WIDTH = 12  # fixed width of rewritten numeric files, newline included


@dataclass
class FakeRail:
    """Where one fake rail's numbers live. INA3221 hwmon rails have mV/mA files, ina3221x a mW
    file (and mV/mA ones), hwmon power channels (the INA238) a uW file."""

    name: str
    voltage_path: Path | None = None  # inN_input, mV
    current_path: Path | None = None  # currN_input, mA
    power_path: Path | None = None  # in_powerN_input (mW, ina3221x) or powerN_input (uW)
    power_unit: str = "mW"            # of power_path: "mW" (ina3221x) or "uW" (hwmon power)
    enable_path: Path | None = None   # INA3221 inN_enable (1 measured, 0 disabled)


@dataclass
class FakeBoard:
    """A fake Jetson sysfs tree under ``root``; pass ``root`` as the sysfs root."""

    root: Path
    layout: str                       # jp4 / jp5 / jp6, or "<board>-jp<N>"
    model: str
    devfreq_dir: Path
    gpu_dir: Path | None              # the GPU device folder; None where there is none (Thor)
    levels_hz: tuple[int, ...]
    rails: dict[str, FakeRail] = field(default_factory=dict)
    hwmon_dirs: list[Path] = field(default_factory=list)
    board: str = "agx-orin"           # the board table's id
    jetpack: int = 5
    domains: list[str] = field(default_factory=list)  # clock domains beside the GPU's: "emc", "cpu0", ...
    variant: str | None = None        # the table's variant laid out (board is then its row's id)

    @property
    def has_load(self) -> bool:
        return self.gpu_dir is not None and (self.gpu_dir / "load").exists()

    # -- what a kernel driver would update -------------------------------------------------
    def set_rail(self, name: str, voltage_mv: float, current_ma: float) -> None:
        """Write one rail's bus voltage (mV) and current (mA), in place."""
        rail = self.rails[name]
        if rail.power_path is not None:
            uw = voltage_mv * current_ma
            rewrite_int(rail.power_path, round(uw if rail.power_unit == "uW" else uw / 1000.0))
            if rail.voltage_path is not None:
                rewrite_int(rail.voltage_path, round(voltage_mv))
            if rail.current_path is not None:
                rewrite_int(rail.current_path, round(current_ma))
            return
        rewrite_int(rail.voltage_path, round(voltage_mv))
        rewrite_int(rail.current_path, round(current_ma))

    def disable_rail(self, name: str) -> None:
        """Turn an INA3221 channel off (``inN_enable`` 0, kernel Documentation/hwmon/ina3221.rst),
        as some releases leave the AGX Orin's VDDQ_VDD2_1V8AO: discovery then skips it."""
        rail = self.rails[name]
        if rail.enable_path is None:
            raise ValueError(f"rail {name} has no enable file (only INA3221 hwmon channels do)")
        rail.enable_path.write_text("0\n")

    def set_load(self, load_permille: int) -> None:
        """GPU load in tenths of a percent (0..1000), as the ``load`` file reports it."""
        if not self.has_load:
            raise ValueError(f"the fake {self.board} has no GPU load file (as the real one)")
        rewrite_int(self.gpu_dir / "load", int(load_permille))

    def set_cur_freq(self, hz: int) -> None:
        rewrite_int(self.devfreq_dir / "cur_freq", int(hz))

    def set_update_interval(self, interval_ms: int) -> None:
        for d in self.hwmon_dirs:
            (d / "update_interval").write_text(f"{int(interval_ms)}\n")

    # -- what a user would read -------------------------------------------------------------
    def read_hz(self, name: str) -> int:
        """Read a devfreq file (``min_freq``, ``max_freq``, ``cur_freq``) as Hz."""
        return read_int(self.devfreq_dir / name)

    def governor(self) -> str:
        return (self.devfreq_dir / "governor").read_text().strip()


def read_int(path: Path) -> int:
    """Read a numeric file. A writer that truncates and rewrites it (govcore pinning a plain file
    of a fake tree; real sysfs writes are atomic) can leave it empty for an instant: retry."""
    for _ in range(200):
        text = path.read_text().strip()
        if text:
            try:
                return int(text)
            except ValueError:
                pass
        time.sleep(0.0005)
    return int(path.read_text().strip())


def rewrite_int(path: Path, value: int) -> None:
    """Rewrite a numeric file in place with a fixed-width field (no truncate, so a reader holding
    the file open never sees it empty), as a kernel driver's attribute reads."""
    text = f"{int(value):>{FIELD_WIDTH - 1}d}\n".encode()
    try:
        if os.stat(path).st_nlink > 1:  # cur_freq linked to max_freq (follow_clamp): a writer
            os.unlink(path)             # that drives cur_freq takes it over
    except FileNotFoundError:
        pass
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


def _add_dla_decoy(sys_: Path) -> None:
    """A decoy devfreq device (the DLA) listed before the GPU: discovery must skip it."""
    dla = sys_ / "devices" / "15880000.nvdla0"
    _write(dla / "of_node" / "name", "nvdla0\0")
    dla_df = dla / "devfreq" / dla.name
    _write(dla_df / "available_frequencies", "1369600000\n")
    _write(dla_df / "governor", "userspace\n")
    _link(dla_df / "device", dla)
    _link(sys_ / "class" / "devfreq" / dla.name, dla_df)


def build_fake_board(
    root: str | os.PathLike,
    layout: str | None = None,
    levels_hz: tuple[int, ...] | None = None,
    model: str | None = None,
    hwmon_start: int = 2,
    board: str | None = None,
    jetpack: int | None = None,
    follow_clamp: bool = False,
    clock_domains: bool = False,
) -> FakeBoard:
    """Create a fake board tree under ``root`` and return its handle.

    ``board``: a board of the table (``pydvfs/data/boards.json``: orin-nano-super, orin-nx,
    agx-orin, thor, agx-xavier, nano), or one of its variants (its clock table, model string,
    CPU maximum and power modes over the row's, the INA3221 channels it leaves off), laid out as
    that board shows itself on ``jetpack`` (default: the newest the table lists): its
    device-tree model, ``/etc/nv_tegra_release``, GPU devfreq node (Thor: the virtual
    ``gpu-gpc-0``, no of_node, no load file, podgov tunables in ``nvhost_podgov/``), clock table
    and sensors (INA3221 hwmon, ina3221x on JetPack 4, Thor's INA238 power channel), its power
    modes in ``/etc/nvpmodel.conf`` (:func:`mode_in_force` in force) and its memory-clock
    devfreq device (Thor's ``bwmgr``). ``layout``: the older names, ``jp5`` / ``jp6`` (AGX
    Orin) and ``jp4`` (AGX Xavier), without nvpmodel's files (a test writes its own); the
    default is ``jp5``. ``levels_hz``: another GPU table.
    ``hwmon_start``: first hwmonN number used, to show that discovery does not depend on it.
    ``follow_clamp``: ``cur_freq`` is the same file as ``max_freq`` (a static board whose clock
    follows the ceiling a pin sets, as a kernel would show it; a writer of ``cur_freq`` such as
    the simulator takes the file over).
    ``clock_domains``: also the EMC's BPMP debugfs folder and the cpufreq policies the table
    gives the board (``fake_domains.add_clock_domains``), so that ``pin --emc/--cpu`` can be used.
    """
    from_table = board is not None  # a board or variant of the table: its nvpmodel files too
    if board is None:
        layout = layout or "jp5"
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
        board, jp = _LAYOUT_BOARD[layout]
        jetpack = jetpack or jp
    elif layout is not None:
        raise ValueError("give board= or layout=, not both")
    variant = table.variants().get(board)
    if variant is not None:  # the variant's facts over its row's (dataclasses.replace: None keeps the row's)
        row = table.board(variant.board)
        b = replace(row, jetpack=variant.jetpack,
                    gpu_levels_mhz=variant.gpu_levels_mhz or row.gpu_levels_mhz,
                    power_modes=variant.power_modes or row.power_modes,
                    cpu_max_mhz=variant.cpu_max_mhz or row.cpu_max_mhz,
                    model_example=variant.model_example or row.model_example,
                    emc_devfreq_names=tuple(dict.fromkeys(row.emc_devfreq_names + variant.emc_devfreq_names)))
        board = row.id
    else:
        b = table.board(board)  # ValueError naming the boards for an unknown id
    jp4_sensors = any(s["driver"] == "ina3221x" for s in b.sensors)  # JetPack 4's driver
    jetpack = jetpack or (4 if jp4_sensors else max(b.jetpack))
    if jetpack not in b.jetpack or (jp4_sensors and jetpack != 4):
        raise ValueError(f"the table describes {b.name} on JetPack "
                         f"{4 if jp4_sensors else ', '.join(map(str, b.jetpack))}, not {jetpack}")
    layout = layout or f"{variant.id if variant else board}-jp{jetpack}"
    root = Path(root)
    sys_ = root / "sys"
    levels = tuple(levels_hz or (round(mhz * 1e6) for mhz in b.gpu_levels_mhz))
    model = model or b.model_example
    # Boards with two GPU names: the first is JetPack 5's (17000000.ga10b), the last newer ones'.
    pick = 0 if jetpack <= 5 else -1
    devfreq_name = b.gpu_devfreq_names[pick]
    if b.gpu_of_node_names:
        of_name = b.gpu_of_node_names[pick]
        gpu_dir = sys_ / "devices" / (devfreq_name if jetpack <= 5 else f"platform/bus@0/{devfreq_name}")
        # device-tree strings are NUL-terminated, no newline, as the kernel shows them
        _write(gpu_dir / "of_node" / "name", of_name + "\0")
        if b.gpu_has_load:
            rewrite_int(gpu_dir / "load", 0)
        devfreq_dir = gpu_dir / "devfreq" / gpu_dir.name
    else:  # Thor: a virtual devfreq device, no of_node, no load file
        gpu_dir = None
        devfreq_dir = sys_ / "devices" / "virtual" / "devfreq" / devfreq_name
        for name, value in (("load_target", "700"), ("load_max", "900"), ("block_window", "30000"),
                            ("smooth", "3")):
            _write(devfreq_dir.parent / "nvhost_podgov" / name, value + "\n")
    _write(devfreq_dir / "available_frequencies", " ".join(str(f) for f in levels) + "\n")
    _write(devfreq_dir / "available_governors", "nvhost_podgov userspace performance simple_ondemand\n")
    _write(devfreq_dir / "governor", "nvhost_podgov\n")
    rewrite_int(devfreq_dir / "min_freq", min(levels))
    rewrite_int(devfreq_dir / "max_freq", max(levels))
    if follow_clamp:
        os.link(devfreq_dir / "max_freq", devfreq_dir / "cur_freq")
    else:
        rewrite_int(devfreq_dir / "cur_freq", max(levels))
    rewrite_int(devfreq_dir / "target_freq", max(levels))
    _write(devfreq_dir / "polling_interval", "0\n")
    if gpu_dir is not None:
        _link(devfreq_dir / "device", gpu_dir)
    _link(sys_ / "class" / "devfreq" / devfreq_dir.name, devfreq_dir)

    _add_dla_decoy(sys_)
    _write(root / "proc" / "device-tree" / "model", model + "\0")
    l4t = table.l4t_release(b, jetpack)
    _write(root / "etc" / "nv_tegra_release",
           f"# R{l4t} (release), REVISION: 0.0, GCID: 0, BOARD: generic, EABI: aarch64, "
           "DATE: fake board (pydvfs fake-board)\n")

    fake = FakeBoard(root=root, layout=layout, model=model, devfreq_dir=devfreq_dir,
                     gpu_dir=gpu_dir, levels_hz=levels, board=board, jetpack=jetpack,
                     variant=variant.id if variant else None)
    _add_sensors(fake, b, sys_, hwmon_start)
    if from_table:
        _add_table_clocks(root, b)
    if variant is not None:
        for name in variant.disabled_rails:
            fake.disable_rail(name)
    if clock_domains:
        from .fake_domains import add_clock_domains

        fake.domains = add_clock_domains(root, b)
    return fake


def mode_in_force(b):
    """The power mode a fake board of ``b`` (a row, or a row with a variant's facts) has in force:
    the first whose GPU cap is the top of its clock table (MAXN, MAXN_SUPER), as the board's
    max_freq at the top shows; else its first."""
    top = max(b.gpu_levels_mhz)
    return next((m for m in b.power_modes if m.gpu_cap_mhz is not None and abs(m.gpu_cap_mhz - top) < 0.5),
                b.power_modes[0])


def _add_table_clocks(root: Path, b) -> None:
    """What a board of the table shows beside its GPU and sensors: its power modes as nvpmodel's
    files hold them (the names nvpmodel prints, :func:`mode_in_force` in force; a mode whose cap
    the table does not know has no GPU line: the board's own max_freq is then its cap) and its
    memory-clock devfreq device (Thor's bwmgr: no of_node, not a GPU)."""
    if b.power_modes:
        blocks = [f"< POWER_MODEL ID={m.id} NAME={m.name} >\n"
                  + (f"GPU MAX_FREQ {round(m.gpu_cap_mhz * 1e6)}\n" if m.gpu_cap_mhz is not None else "")
                  for m in b.power_modes]
        mode = mode_in_force(b)
        _write(root / "etc" / "nvpmodel.conf", "".join(blocks) + f"< PM_CONFIG DEFAULT={mode.id} >\n")
        _write(root / "var" / "lib" / "nvpmodel" / "status", f"pmode:{mode.id:04d} fmode:quiet\n")
    for name in b.emc_devfreq_names:
        d = root / "sys" / "devices" / "virtual" / "devfreq" / name
        _write(d / "available_frequencies", "4266000000\n")
        _write(d / "governor", "nvhost_podgov\n")
        for f in ("min_freq", "max_freq", "cur_freq"):
            rewrite_int(d / f, 4266000000)
        _link(root / "sys" / "class" / "devfreq" / name, d)


def _add_sensors(fake: FakeBoard, b, sys_: Path, hwmon_start: int) -> None:
    """The board's sensors, as the table lists them, where their drivers put them."""
    n = hwmon_start
    if any(s["driver"] != "ina3221x" for s in b.sensors):
        # A decoy hwmon (a thermal sensor) takes the first number: discovery matches on `name`.
        decoy = sys_ / "devices" / "virtual" / "thermal" / "thermal_zone0" / "hwmon" / f"hwmon{n}"
        _write(decoy / "name", "cpu_thermal\n")
        _write(decoy / "temp1_input", "45000\n")
        _link(sys_ / "class" / "hwmon" / f"hwmon{n}", decoy)
        n += 1
    iio = 0
    for sensor in b.sensors:
        driver, addr = sensor["driver"], sensor["address"]
        if driver == "ina3221x":
            _add_ina3221x(fake, sys_ / "bus" / "i2c" / "drivers" / driver / addr / f"iio:device{iio}",
                          sensor["channels"])
            iio += 1
            continue
        d = sys_ / "bus" / "i2c" / "drivers" / driver / addr / "hwmon" / f"hwmon{n}"
        _link(sys_ / "class" / "hwmon" / f"hwmon{n}", d)
        n += 1
        _write(d / "name", driver + "\n")
        if driver == "ina3221":
            _add_ina3221(fake, d, sensor["channels"])
        for ch, label in sensor.get("power_channels", {}).items():
            rewrite_int(d / f"power{ch}_input", 0)
            if sensor.get("labels", True):
                _write(d / f"power{ch}_label", label + "\n")
            fake.rails[label] = FakeRail(label, power_path=d / f"power{ch}_input", power_unit="uW")
        if driver != "ina3221" and sensor.get("power_channels"):
            fake.hwmon_dirs.append(d)


def _add_ina3221(fake: FakeBoard, d: Path, channels: dict) -> None:
    _write(d / "update_interval", "7\n")
    _write(d / "samples", "4\n")
    for ch_text, label in channels.items():
        ch = int(ch_text)
        _write(d / f"in{ch}_label", label + "\n")
        _write(d / f"in{ch}_enable", "0\n" if label == "NC" else "1\n")
        rewrite_int(d / f"in{ch}_input", 0)
        rewrite_int(d / f"curr{ch}_input", 0)
        rewrite_int(d / f"in{ch + 3}_input", 0)  # shunt voltage, uV
        if label != "NC":
            fake.rails[label] = FakeRail(label, d / f"in{ch}_input", d / f"curr{ch}_input",
                                         enable_path=d / f"in{ch}_enable")
    # The shunt-sum channel: must be skipped by discovery.
    _write(d / "in7_label", "sum of shunt voltages\n")
    rewrite_int(d / "in7_input", 0)
    rewrite_int(d / "curr4_input", 0)
    fake.hwmon_dirs.append(d)


def _add_ina3221x(fake: FakeBoard, d: Path, channels: dict) -> None:
    _write(d / "name", "ina3221x\n")
    for ch_text, label in channels.items():
        ch = int(ch_text)
        _write(d / f"rail_name_{ch}", label + "\n")
        rewrite_int(d / f"in_power{ch}_input", 0)
        rewrite_int(d / f"in_voltage{ch}_input", 0)
        rewrite_int(d / f"in_current{ch}_input", 0)
        fake.rails[label] = FakeRail(
            label,
            voltage_path=d / f"in_voltage{ch}_input",
            current_path=d / f"in_current{ch}_input",
            power_path=d / f"in_power{ch}_input",
        )

"""Issue 27 item 15 (the hwmon parts; both front ends): 200 decoy `ina3221` hwmon devices no longer
crowd the board's real rails past the 16-channel limit (the board table's rails are taken first,
and the truncation is said once); a tree without /sys/class/hwmon finds the rails under every
power monitor driver's devices, Thor's INA238 as well as the INA3221."""
from __future__ import annotations

import json
import shutil
import subprocess

import pydvfs
from pydvfs.device.fake import build_fake_board


def _plant_decoys(root, n: int = 200) -> None:
    cls = root / "sys/class/hwmon"
    for i in range(n):
        dev = root / f"sys/devices/virtual/decoy/d{i}/hwmon/hwmon{i}"
        dev.mkdir(parents=True)
        (dev / "name").write_text("ina3221\n")
        for ch in (1, 2, 3):
            (dev / f"in{ch}_label").write_text(f"DECOY_{i}_{ch}\n")
            (dev / f"in{ch}_input").write_text("5000\n")
            (dev / f"curr{ch}_input").write_text("100\n")
        (cls / f"hwmon{i}").symlink_to(f"../../devices/virtual/decoy/d{i}/hwmon/hwmon{i}")


def _status_both(root, govcore_bin, cli) -> list[dict]:
    g = subprocess.run([govcore_bin, "--sysfs-root", str(root), "--json", "status"], capture_output=True, text=True)
    p = cli("status", "--sysfs-root", str(root), "--json")
    assert g.returncode == 0 and p.returncode == 0, g.stderr + p.stderr
    return [json.loads(g.stdout), json.loads(p.stdout)]


def _rail_names(st: dict) -> list[str]:
    return [r if isinstance(r, str) else r["name"] for r in st["rails"]]


def test_decoy_hwmon_devices_do_not_crowd_out_the_real_rails(tmp_path, govcore_bin, cli):
    b = build_fake_board(tmp_path / "board", "jp6", hwmon_start=300)  # the real sensors after the decoys
    real = set(b.rails)
    _plant_decoys(b.root)
    for st in _status_both(b.root, govcore_bin, cli):
        names = _rail_names(st)
        assert len(names) == 16 and real <= set(names), names  # before: 16 decoys, no real rail
        assert "more than 16 power channels" in json.dumps(st) and "the board table's rails were taken first" \
            in json.dumps(st)
    dev = pydvfs.open_device(b.root)
    roles = dev.status()["roles"]
    assert roles["module"] and roles["cpu_gpu"], roles  # module energy is known


def test_without_class_hwmon_the_ina238_s_driver_folder_is_read_too(tmp_path, govcore_bin, cli):
    b = build_fake_board(tmp_path / "board", board="thor")
    assert "ina238" in b.rails
    shutil.rmtree(b.root / "sys/class/hwmon")
    for st in _status_both(b.root, govcore_bin, cli):
        names = _rail_names(st)
        assert set(b.rails) <= set(names), names  # before: the INA3221's only


def test_without_class_hwmon_an_ina238_alone_is_found(tmp_path, govcore_bin, cli):
    b = build_fake_board(tmp_path / "board", board="thor")
    shutil.rmtree(b.root / "sys/class/hwmon")
    shutil.rmtree(b.root / "sys/bus/i2c/drivers/ina3221")
    for st in _status_both(b.root, govcore_bin, cli):
        assert _rail_names(st) == ["ina238"], st["rails"]  # before: no rail at all

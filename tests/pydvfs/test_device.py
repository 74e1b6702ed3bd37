"""Discovery, pinning and restoring through the Python API, on every fake layout."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

import pydvfs
from pydvfs.device.fake import ORIN_13_LEVELS_HZ, build_fake_board


def test_discovers_every_layout(any_board):
    dev = pydvfs.open_device(any_board.root)
    assert dev.available_frequencies_hz == tuple(sorted(any_board.levels_hz))
    assert dev.available_frequencies_mhz[-1] == max(any_board.levels_hz) / 1e6
    assert {r.name for r in dev.rails} == set(any_board.rails)
    assert dev.model == any_board.model
    st = dev.state()
    assert (st.min_mhz, st.max_mhz) == (min(any_board.levels_hz) / 1e6, max(any_board.levels_hz) / 1e6)
    assert st.governor == "nvhost_podgov" and not st.pinned


def test_orin_rails_skip_nc_and_shunt_sum(board):
    dev = pydvfs.open_device(board.root)
    assert [r.name for r in dev.rails] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert all(r.kind == "hwmon" for r in dev.rails)
    assert dev.sensor_interval_ms == 7


def test_hwmon_numbering_does_not_matter(tmp_path):
    fb = build_fake_board(tmp_path / "b", "jp5", hwmon_start=9)  # hwmon9, hwmon10, hwmon11
    assert len(pydvfs.open_device(fb.root).rails) == 4


def test_gpu_load(board):
    board.set_load(625)
    assert pydvfs.open_device(board.root).gpu_load_pct() == 62.5


def test_env_sysfs_root(board, monkeypatch):
    monkeypatch.setenv("PYDVFS_SYSFS_ROOT", str(board.root))
    assert pydvfs.open_device().sysfs_root == str(board.root)


def test_no_board_is_a_clear_error(tmp_path):
    with pytest.raises(pydvfs.DeviceNotFoundError, match="no Jetson GPU devfreq node"):
        pydvfs.open_device(tmp_path)
    with pytest.raises(pydvfs.DeviceNotFoundError, match="does not exist"):
        pydvfs.open_device(tmp_path / "missing")


@pytest.mark.parametrize("want, got", [(700, 714), (714, 714), (663, 612), (5000, 1300.5), (1, 306)])
def test_pin_snaps_to_nearest_level(board, want, got):
    res = pydvfs.pin(want, sysfs_root=board.root)
    assert res.freq_mhz == got
    assert res.snapped == (want != got)
    assert board.read_hz("min_freq") == board.read_hz("max_freq") == round(got * 1e6)


def test_pin_13_level_table(tmp_path):
    fb = build_fake_board(tmp_path / "b", "jp6", levels_hz=ORIN_13_LEVELS_HZ)
    assert pydvfs.pin(700, sysfs_root=fb.root).freq_mhz == 726.75


@pytest.mark.parametrize("bad", ["abc", "", "-5", "0", "nan", "inf", None])
def test_pin_rejects_bad_values(board, bad):
    with pytest.raises(pydvfs.InvalidValueError, match="not a clock"):
        pydvfs.pin(bad, sysfs_root=board.root)
    assert board.read_hz("max_freq") == 1300500000  # nothing was written


def test_pin_up_and_down_then_restore(board):
    dev = pydvfs.open_device(board.root)
    for mhz in (306, 1300.5, 510, 1122, 408):
        dev.pin(mhz)
        assert dev.state().min_mhz == dev.state().max_mhz == mhz
    saved = dev.saved_state()
    assert (saved.min_mhz, saved.max_mhz, saved.governor) == (306, 1300.5, "nvhost_podgov")
    assert math.isnan(saved.cur_mhz)
    assert dev.restore() is True
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (306000000, 1300500000)
    assert dev.restore() is False  # idempotent
    assert dev.saved_state() is None


def test_restore_from_a_new_process_after_a_crash(board, tmp_path):
    state_dir = tmp_path / "state"
    code = (
        "import os, pydvfs; pydvfs.pin(510, sysfs_root=os.environ['ROOT'], "
        "state_dir=os.environ['SD']); os._exit(9)"  # dies without restoring
    )
    env = {**os.environ, "ROOT": str(board.root), "SD": str(state_dir)}
    proc = subprocess.run([sys.executable, "-c", code], env=env)
    assert proc.returncode == 9
    assert board.read_hz("max_freq") == 510000000
    assert pydvfs.restore(sysfs_root=board.root, state_dir=state_dir) is True
    assert board.read_hz("max_freq") == 1300500000


def test_state_file_is_per_board(tmp_path):
    a = build_fake_board(tmp_path / "a", "jp5")
    b = build_fake_board(tmp_path / "b", "jp5")
    pydvfs.pin(510, sysfs_root=a.root)
    pydvfs.pin(918, sysfs_root=b.root)
    assert pydvfs.restore(sysfs_root=a.root) is True
    assert b.read_hz("max_freq") == 918000000  # b untouched by a's restore
    assert pydvfs.restore(sysfs_root=b.root) is True
    assert b.read_hz("max_freq") == 1300500000


def test_state_file_written_before_the_change(board):
    dev = pydvfs.open_device(board.root)
    path = dev.state_file()
    assert not os.path.exists(path)
    dev.pin(612)
    text = open(path).read()
    assert "min_hz=306000000" in text and "max_hz=1300500000" in text
    assert "governor=nvhost_podgov" in text
    assert not [p for p in os.listdir(os.path.dirname(path)) if ".tmp." in p]  # no leftovers


def test_unwritable_clock_file_is_a_clear_error_and_changes_nothing(board):
    # As root a chmod does not stop a write; a folder in place of max_freq does.
    os.replace(board.devfreq_dir / "max_freq", board.devfreq_dir / "max_freq.real")
    (board.devfreq_dir / "max_freq").mkdir()
    (board.devfreq_dir / "max_freq.real").rename(board.devfreq_dir / "max_freq" / "x")
    with pytest.raises(pydvfs.PydvfsError, match="max_freq"):
        pydvfs.pin(918, sysfs_root=board.root)
    assert board.read_hz("min_freq") == 306000000


def test_restore_after_an_exception(board):
    dev = pydvfs.open_device(board.root)
    with pytest.raises(RuntimeError):
        try:
            dev.pin(408)
            raise RuntimeError("training crashed")
        finally:
            dev.restore()
    assert board.read_hz("max_freq") == 1300500000


def test_import_is_light():
    code = ("import sys, pydvfs; pydvfs.open_device; "
            "heavy = [m for m in ('torch', 'sklearn', 'matplotlib', 'pandas') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

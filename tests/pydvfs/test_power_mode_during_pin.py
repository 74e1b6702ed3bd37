"""Issue 27 item 8: a power-mode change during a pin is honoured where the kernel has no
nvpmodel_clk_cap. A pin holds 714; root lowers max_freq to 612 as nvpmodel does; the next pin
asks 1020: before, 1020 was written (the cap came from the saved original's max) and restore put
the old ceiling back. Now the saved original follows the new ceiling: the pin is capped at 612,
says so, and restore leaves max_freq at 612. Both front ends; and through the Python API."""
from __future__ import annotations

import json
import subprocess

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board


@pytest.fixture
def board(tmp_path):
    return build_fake_board(tmp_path / "board", "jp5")  # AGX Orin: 306..1300.5 MHz, no nvpmodel_clk_cap


def _lower_power_mode(board, hz: int) -> None:
    (board.devfreq_dir / "max_freq").write_text(f"{hz}\n")  # what nvpmodel writes


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_a_power_mode_lowered_during_a_pin_caps_the_next_pin_and_restore(board, cli, govcore_bin, front):
    root = str(board.root)
    assert board.read_hz("max_freq") == 1300500000 and not (board.root / "sys/kernel/nvpmodel_clk_cap").exists()

    def pin(mhz):
        if front == "pydvfs":
            return cli("pin", str(mhz), "--sysfs-root", root, "--json")
        return subprocess.run([govcore_bin, "--sysfs-root", root, "--json", "pin", str(mhz)], capture_output=True,
                              text=True)

    p = pin(714)
    assert p.returncode == 0, p.stderr
    _lower_power_mode(board, 612000000)
    p = pin(1020)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["freq_mhz"] == 612, rec  # before: 1020, above the power mode
    assert board.read_hz("max_freq") == 612000000 and board.read_hz("min_freq") == 612000000
    assert "power mode lowered the GPU's max_freq to 612 MHz" in p.stdout + p.stderr
    p = cli("restore", "--sysfs-root", root) if front == "pydvfs" else \
        subprocess.run([govcore_bin, "--sysfs-root", root, "restore"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # the original floor, the new mode's ceiling (before: 1300.5 put back)
    assert board.read_hz("max_freq") == 612000000 and board.read_hz("min_freq") == 306000000


def test_restore_alone_obeys_a_power_mode_lowered_during_the_pin(board):
    dev = pydvfs.open_device(board.root)
    dev.pin(714)
    _lower_power_mode(board, 510000000)
    assert dev.restore() is True
    assert board.read_hz("max_freq") == 510000000 and board.read_hz("min_freq") == 306000000


def test_an_unchanged_power_mode_restores_the_original(board):
    dev = pydvfs.open_device(board.root)
    dev.pin(714)
    dev.pin(408)
    assert dev.restore() is True
    assert board.read_hz("max_freq") == 1300500000 and board.read_hz("min_freq") == 306000000

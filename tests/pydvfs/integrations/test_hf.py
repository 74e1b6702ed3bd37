"""GovernorCallback in a real transformers.Trainer (a tiny BERT built from a config, on CPU),
on an animated fake Orin: its clock changes reach the board, its energy agrees with `pydvfs
measure` of the same run and with what the rail files held, and the board is restored after a
normal end, an exception and a SIGTERM."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wrapped import report

pytest.importorskip("transformers")

from pydvfs.device.animate import Waveform, animate
from pydvfs.device.fake import build_fake_board

SCRIPT = Path(__file__).with_name("hf_train.py")
REPO = Path(__file__).resolve().parents[3]
FULL = (306000000, 1300500000)
WAVES = {"VDD_GPU_SOC": Waveform(voltage_mv=5000, base_ma=2000, sine_ma=300, sine_hz=3.0, step_ma=500,
                                 step_period_s=0.25),
         "VDD_CPU_CV": Waveform(voltage_mv=5000, base_ma=600, sine_ma=100, sine_hz=1.7, step_ma=0)}


@pytest.fixture
def orin(tmp_path):
    return build_fake_board(tmp_path / "board", "jp6")


def env():
    return dict(os.environ, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")


def limits(orin):
    return orin.read_hz("min_freq"), orin.read_hz("max_freq")


def test_a_trainer_governed_in_process_matches_pydvfs_measure(orin, tmp_path):
    out = tmp_path / "out.json"
    anim = animate(orin, WAVES, rate_hz=2000, duration_s=600)
    try:
        res = subprocess.run([sys.executable, "-m", "pydvfs", "measure", "--sysfs-root", str(orin.root), "--json",
                              "--rate", "1000", "--", sys.executable, str(SCRIPT), str(orin.root), str(out),
                              "normal", "150"], capture_output=True, text=True, env=env(), timeout=600, check=False)
    finally:
        anim.stop()
    assert res.returncode == 0, res.stderr[-3000:]
    measure = report(res)
    data = json.loads(out.read_text())
    r = data["report"]
    assert limits(orin) == FULL and r["restored"]
    assert r["steps"] == 150 and r["policy"] == "online" and r["probed"]
    # the clocks it chose reached the board, and it moved them
    seen = data["seen"]
    assert len(seen) == 150 and all(abs(board - mhz) < 0.5 for board, mhz in seen)
    assert len({mhz for _, mhz in seen}) >= 2
    assert len(r["switches"]) >= 2
    # its energy: what the rail files held over its span (to 2 %), and pydvfs measure's power
    t0, t1 = r["monotonic_ns"]
    held = sum(anim.written_energy_j(rail, t0, t1) for rail in WAVES)
    assert r["cpu_gpu_energy_j"] == pytest.approx(held, rel=0.02)
    assert r["cpu_gpu_energy_j"] < measure["cpu_gpu_energy_j"]  # measure also saw the start-up
    power = r["cpu_gpu_energy_j"] / r["duration_s"]
    assert power == pytest.approx(measure["cpu_gpu_energy_j"] / measure["duration_s"], rel=0.03)
    # energy_j, j_per_step and gpu_clock_mhz reached the Trainer's logs
    logged = [h for h in data["log_history"] if "energy_j" in h]
    assert len(logged) >= 10
    assert all(h["gpu_clock_mhz"] in r["search"]["levels_mhz"] for h in logged)
    assert [h["energy_j"] for h in logged] == sorted(h["energy_j"] for h in logged)
    assert logged[-1]["j_per_step"] == pytest.approx(logged[-1]["energy_j"] / logged[-1]["step"], rel=0.05)


@pytest.mark.parametrize("mode, status", [("raise", 1), ("sigterm", -15)])
def test_the_board_is_restored_when_training_dies(orin, tmp_path, mode, status):
    orin.set_rail("VDD_GPU_SOC", 5000, 2000)
    orin.set_rail("VDD_CPU_CV", 5000, 400)
    out = tmp_path / "out.json"
    res = subprocess.run([sys.executable, str(SCRIPT), str(orin.root), str(out), mode, "200"],
                         capture_output=True, text=True, env=env(), timeout=600, check=False)
    assert res.returncode == status, res.stderr[-3000:]
    seen = json.loads(out.read_text())["seen"]
    assert len(seen) == 30 and all(abs(board - mhz) < 0.5 for board, mhz in seen)  # pinned then
    assert limits(orin) == FULL  # and restored now
    if mode == "sigterm":
        assert "SIGTERM: the GPU clock was restored" in res.stderr
    else:
        assert "boom in the training loop" in res.stderr

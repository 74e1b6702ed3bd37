"""The animated board: the energy the C sampler integrates from the rail files matches the
virtual-time energy of the same run."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pydvfs import Sampler
from pydvfs.device.fake import build_fake_board
from pydvfs.sim.model import RAILS, default_params, operating_point, run_noise
from pydvfs.sim.workloads import get_workload

REPO = Path(__file__).resolve().parents[3]
TIME_SCALE = 50.0


def _measure_energy(board, cmd, env):
    """Run the animated process while the C sampler (pydvfs.Sampler) integrates the rails."""
    with Sampler(rate_hz=1000, sysfs_root=board.root) as s:
        s.begin_window("run")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate()
        m = s.end_window("run")
    return m, proc, err


def _expected(w, setting, freq, steps, seed, repeat, **kw):
    p = default_params()
    op = operating_point(w, setting, freq, p, **kw)
    tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, repeat)
    return {r: op.power_w[r] * pf * steps * op.t_step_s * tf / TIME_SCALE for r in RAILS}, op


@pytest.mark.parametrize("pin_mhz", [714, None], ids=["pinned-714", "podgov"])
def test_animated_energy_matches_virtual_time(tmp_path, pin_mhz):
    board = build_fake_board(tmp_path / "root", layout="jp5")
    w = get_workload("bert-base", "SST-2")
    if pin_mhz:
        hz = pin_mhz * 1_000_000
        (board.devfreq_dir / "min_freq").write_text(f"{hz}\n")  # going down: min first
        (board.devfreq_dir / "max_freq").write_text(f"{hz}\n")
        op0 = operating_point(w, "fixed", pin_mhz)
    else:
        op0 = operating_point(w, "maxn")
    steps = max(20, int(1.5 * TIME_SCALE / op0.t_step_s))  # about 1.5 s of real time
    progress = tmp_path / "progress"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    m, proc, err = _measure_energy(
        board, [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(board.root),
                "--model", "bert-base", "--task", "SST-2", "--steps", str(steps),
                "--time-scale", str(TIME_SCALE), "--progress-file", str(progress), "--seed", "5"], env)
    assert proc.returncode == 0, err
    assert m.read_errors == 0 and m.samples > 500
    measured = m.energy_j
    exp, op = _expected(w, "fixed" if pin_mhz else "maxn", pin_mhz, steps, 5, 0)
    for rail in ("VDD_GPU_SOC", "VDD_CPU_CV"):
        assert measured[rail] == pytest.approx(exp[rail], rel=0.02), rail
    total_m = measured["VDD_GPU_SOC"] + measured["VDD_CPU_CV"]
    total_e = exp["VDD_GPU_SOC"] + exp["VDD_CPU_CV"]
    assert total_m == pytest.approx(total_e, rel=0.02)
    assert int(progress.read_text()) == steps
    cur = board.read_hz("cur_freq")
    if pin_mhz:
        assert cur == pin_mhz * 1_000_000
    else:
        assert cur in board.levels_hz


def test_clock_change_mid_run_is_followed(tmp_path):
    """Lowering the pinned clock while it runs slows the steps (it re-reads the limits)."""
    board = build_fake_board(tmp_path / "root", layout="jp6")
    w = get_workload("bert-large", "SST-2")
    progress = tmp_path / "progress"
    (board.devfreq_dir / "min_freq").write_text("1300500000\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(board.root),
         "--model", "bert-large", "--task", "SST-2", "--time-scale", "20",
         "--progress-file", str(progress)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not progress.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        t0, s0 = time.monotonic(), int(progress.read_text())
        time.sleep(1.0)
        fast = (int(progress.read_text()) - s0) / (time.monotonic() - t0)
        assert board.read_hz("cur_freq") == 1300500000
        (board.devfreq_dir / "min_freq").write_text("306000000\n")
        (board.devfreq_dir / "max_freq").write_text("306000000\n")
        time.sleep(0.1)
        t0, s0 = time.monotonic(), int(progress.read_text())
        time.sleep(1.0)
        slow = (int(progress.read_text()) - s0) / (time.monotonic() - t0)
        assert board.read_hz("cur_freq") == 306000000
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    ratio = operating_point(w, "fixed", 1300.5).t_step_s / operating_point(w, "fixed", 306).t_step_s
    # wall-clock rates on a shared machine: a loose bound, still far from "no change" (ratio ~0.3)
    assert slow / fast == pytest.approx(ratio, rel=0.35)
    assert proc.returncode == 130
    assert int(board.rails["VDD_GPU_SOC"].current_path.read_text()) > 0  # idle values, not zero

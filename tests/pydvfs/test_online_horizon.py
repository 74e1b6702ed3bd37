"""The run's length as the model search's horizon: the engine converts the steps left into
windows (steps left x s/step / window length) before each decision, on a fake board with a
sampler whose windows last exactly as long as the test's clock says; and the front ends pass
the length (``total_steps=``, ``pydvfs run --steps``, the trainers' step counts) and a model
folder's V/f curve to the search."""
from __future__ import annotations

import math
import shutil
import sys
import time
from types import SimpleNamespace

import pytest
from wrapped import report as wrapped_report

import pydvfs
from pydvfs.device import open_device
from pydvfs.errors import InvalidValueError
from pydvfs.governor.engine import OnlineEngine, WindowParams
from pydvfs.governor.mode_search import CurveParams, ModeSearch
from pydvfs.governor.search import HillClimb

FULL = (306000000, 1300500000)  # the jp6 fake board's own (min, max)
POWER_W = 10.0


@pytest.fixture
def orin(powered_orin):
    return powered_orin


class ClockedSampler:
    """The engine's sampler interface; a window lasts what the test's clock ``now_s`` says and
    holds POWER_W watts of the AGX Orin module's energy (its four rails)."""

    def __init__(self):
        self.now_s = 0.0
        self.open: dict[str, float] = {}

    def begin_window(self, name):
        self.open[name] = self.now_s

    def end_window(self, name):
        d = self.now_s - self.open.pop(name)
        share = {"VDD_GPU_SOC": 0.6, "VDD_CPU_CV": 0.2, "VIN_SYS_5V0": 0.15, "VDDQ_VDD2_1V8AO": 0.05}
        energy_j = {r: k * POWER_W * d for r, k in share.items()}
        return SimpleNamespace(duration_s=d, energy_j=energy_j, module_energy_j=POWER_W * d,  # the sampler's sums
                               cpu_gpu_energy_j=energy_j["VDD_GPU_SOC"] + energy_j["VDD_CPU_CV"], board="agx-orin")


class Recording(ModeSearch):
    """The model search, recording what it was told before each window: (remaining windows,
    the level it favoured then, the count of windows fed before)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.told: list[tuple[int | None, float]] = []

    def observe(self, freq_mhz, j_per_step, now_s, s_per_step=None):
        self.told.append((self.remaining_windows, self.best_mhz))
        return super().observe(freq_mhz, j_per_step, now_s, s_per_step)


def drive(engine, sampler, steps: int, s_per_step) -> None:
    """``steps`` training steps, each ``s_per_step(pinned MHz)`` long, the engine ticked after each."""
    count = 0
    for _ in range(steps):
        sampler.now_s += s_per_step(engine.pinned_mhz)
        count += 1
        engine.tick(sampler.now_s, count)


def test_window_count_of_steps():
    w = WindowParams(min_window_s=10.0, min_steps=20)
    assert w.windows_for_steps(1000, 0.2) == pytest.approx(1000 / 50)  # time-bound: 10 s hold 50 steps
    assert w.windows_for_steps(1000, 1.0) == pytest.approx(1000 / 20)  # step-bound: 20 steps take 20 s


def count_at(engine, k: int) -> int:
    """The step count when window k closed: the first window opens at the first count seen (1),
    each next one a step after the last closed (no settling here)."""
    return 1 + sum(x["steps"] for x in engine.trajectory[:k + 1]) + k


@pytest.mark.parametrize("s_step, total", [(0.25, 1000), (1.0, 300)])
def test_the_engine_tells_the_search_the_windows_left(orin, s_step, total):
    """One clock, steps of a fixed length: every decision is told (total - count) / window steps."""
    dev = open_device(orin.root)
    sampler = ClockedSampler()
    w = WindowParams(min_window_s=10.0, min_steps=20, settle_s=0.0)
    search = Recording.gpu(dev.available_frequencies_mhz, 714.0, CurveParams(reprobe_s=math.inf))
    engine = OnlineEngine(dev, sampler, search, w, "the test", None, total_steps=total)
    try:
        dev.pin(714.0)
        steps_per_window = max(20, round(10.0 / s_step))  # 40 steps in 10 s, or 20 steps in 20 s
        drive(engine, sampler, 4 * steps_per_window + 4, lambda mhz: s_step)
        assert len(engine.trajectory) >= 3 and all(x["steps"] == steps_per_window for x in engine.trajectory)
        for k, (told, _) in enumerate(search.told):
            assert told == math.floor((total - count_at(engine, k)) / steps_per_window), (k, told)
        report = engine.report()
        assert report["total_steps"] == total and report["search"]["remaining_windows"] == search.told[-1][0]
    finally:
        dev.restore()
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL


def test_the_windows_left_are_counted_at_the_favoured_level(orin):
    """While probing a slow level the run's rest is converted at the step time of the level the
    search favours (the median of its windows), not at the probe's."""
    dev = open_device(orin.root)
    sampler = ClockedSampler()
    w = WindowParams(min_window_s=1.0, min_steps=5, settle_s=0.0)
    search = Recording.gpu(dev.available_frequencies_mhz, 1300.5, CurveParams(reprobe_s=math.inf))
    total = 100_000
    engine = OnlineEngine(dev, sampler, search, w, "the test", None, total_steps=total)

    def s_per_step(mhz):
        return 0.01 * (0.4 + 1000.0 / mhz)  # t = a/f + b: slower at lower clocks

    try:
        dev.pin(1300.5)
        drive(engine, sampler, 3000, s_per_step)
        assert len({x["freq_mhz"] for x in engine.trajectory}) >= 3
        converted_elsewhere = 0
        for k, (told, favoured) in enumerate(search.told):
            times = sorted(x["s_per_step"] for x in engine.trajectory[:k] if x["freq_mhz"] == favoured)
            s = times[len(times) // 2] if times else engine.trajectory[k]["s_per_step"]
            assert told == math.floor(w.windows_for_steps(total - count_at(engine, k), s)), (k, told, favoured)
            converted_elsewhere += engine.trajectory[k]["freq_mhz"] != favoured and bool(times)
        assert converted_elsewhere >= 2  # windows at a probe, converted at the favoured level's pace
    finally:
        dev.restore()


def test_an_unknown_or_overrun_length_leaves_the_default_horizon(orin):
    dev = open_device(orin.root)
    w = WindowParams(min_window_s=1.0, min_steps=5, settle_s=0.0)
    try:
        dev.pin(714.0)
        for total, expect_none_after in ((None, 0), (40, 40)):
            sampler = ClockedSampler()
            search = Recording.gpu(dev.available_frequencies_mhz, 714.0, CurveParams(reprobe_s=math.inf))
            engine = OnlineEngine(dev, sampler, search, w, "the test", None, total_steps=total)
            engine.pinned_mhz = 714.0
            drive(engine, sampler, 120, lambda mhz: 0.1)
            for k, (told, _) in enumerate(search.told):
                count = count_at(engine, k)
                # past the total given, it was wrong: unknown again
                assert (told is None) == (count > expect_none_after or total is None), (total, count, told)
        # the hill climb has no horizon: it is left alone
        hill = HillClimb(dev.available_frequencies_mhz, 714.0)
        engine = OnlineEngine(dev, ClockedSampler(), hill, w, "the test", None, total_steps=1000)
        engine.pinned_mhz = 714.0
        drive(engine, engine.sampler, 60, lambda mhz: 0.1)
        assert engine.trajectory and not hasattr(hill, "remaining_windows")
    finally:
        dev.restore()


def test_total_steps_in_the_plain_loop_governor(orin):
    FAST = WindowParams(min_window_s=0.02, min_steps=3, settle_s=0.0)
    with pydvfs.OnlineGovernor(sysfs_root=orin.root, start_mhz=714, window=FAST, total_steps=500, log=None) as gov:
        for _ in range(60):
            time.sleep(0.003)
            gov.step()
        assert gov.engine.trajectory and gov.engine.total_steps == 500 and gov.engine.search.remaining_windows is not None
        gov.total_steps = 2000  # a trainer may know it only after the start
        assert gov.engine.total_steps == 2000
        with pytest.raises(InvalidValueError):
            gov.total_steps = 0
    assert gov.report["total_steps"] == 2000
    for bad in (0, -5, 2.5, "100", True):
        with pytest.raises(InvalidValueError, match="total steps"):
            pydvfs.OnlineGovernor(sysfs_root=orin.root, total_steps=bad, log=None)
    with pytest.raises(InvalidValueError, match="policy 'online'"):
        pydvfs.OnlineGovernor("ffg", {"model": "bert", "layers": 2, "hidden": 128, "seq_len": 20},
                              sysfs_root=orin.root, total_steps=100, log=None)
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL


def test_steps_left_from_a_trainer():
    from pydvfs.integrations.common import steps_left

    assert steps_left(1000, 0) == 1000
    assert steps_left(1000, 400) == 600  # a resumed run
    for total, done in ((0, 0), (-1, 0), (float("inf"), 0), (100, 100), (None, 0), (100, 150)):
        assert steps_left(total, done) is None, (total, done)


def test_the_hf_callback_passes_max_steps_less_the_resumed_steps(orin):
    pytest.importorskip("transformers")
    from pydvfs.integrations.hf import GovernorCallback

    cb = GovernorCallback(sysfs_root=orin.root, start_mhz=714, log=None)
    state = SimpleNamespace(max_steps=900, global_step=300, log_history=[])
    cb.on_train_begin(None, state, None)
    try:
        assert cb.governor.total_steps == 600 and cb.governor.engine.total_steps == 600
    finally:
        cb.on_train_end(None, state, None)
    assert cb.report["total_steps"] == 600
    # the user's own total_steps wins
    cb = GovernorCallback(sysfs_root=orin.root, start_mhz=714, log=None, total_steps=50)
    cb.on_train_begin(None, state, None)
    cb.close()
    assert cb.report["total_steps"] == 50
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL


def test_the_lightning_callback_takes_the_estimated_stepping_batches(orin):
    pytest.importorskip("lightning")
    from pydvfs.integrations.lightning import GovernorCallback

    cb = GovernorCallback(sysfs_root=orin.root, start_mhz=714, log=None)
    trainer = SimpleNamespace(estimated_stepping_batches=1200, global_step=200, train_dataloader=None,
                              accumulate_grad_batches=1)
    cb.on_fit_start(trainer, SimpleNamespace())
    cb.on_train_start(trainer, SimpleNamespace())  # after a checkpoint's global_step is restored
    try:
        assert cb.governor.engine.total_steps == 1000
    finally:
        cb.close()
    assert cb.report["total_steps"] == 1000
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL


# -- the board's V/f curve from a model folder ----------------------------------------------------
def test_the_model_folders_vf_reaches_the_search(orin, trained, tmp_path):
    from pydvfs.governor.loop import search_vf
    from pydvfs.policy.roofline_curve import read_roofline

    model, _ = trained
    board_vf = read_roofline(model / "roofline.txt").vf
    vf, source = search_vf(model)
    assert vf == board_vf and source.startswith("model folder roofline.txt")
    assert search_vf(None) == (None, "default Orin table")
    bare = tmp_path / "bare"
    shutil.copytree(model, bare)
    (bare / "roofline.txt").unlink()
    vf, source = search_vf(bare)
    assert vf is None and source.startswith("default Orin table") and "no roofline.txt" in source
    FAST = WindowParams(min_window_s=0.02, min_steps=3, settle_s=0.0)
    for folder, want_vf, want in ((model, board_vf, "model folder roofline.txt"), (bare, None, "default Orin table"),
                                  (None, None, "default Orin table")):
        with pydvfs.OnlineGovernor(sysfs_root=orin.root, start_mhz=714, model_dir=folder, window=FAST,
                                   log=None) as gov:
            for _ in range(5):
                time.sleep(0.003)
                gov.step()
            assert gov.engine.search.vf == want_vf
        assert gov.report["search"]["vf_source"].startswith(want), folder
    # a damaged roofline.txt is bad input, before the board changes
    broken = tmp_path / "broken"
    shutil.copytree(model, broken)
    (broken / "roofline.txt").write_text("version=1\n")
    with pytest.raises(InvalidValueError, match="roofline"):
        pydvfs.OnlineGovernor(sysfs_root=orin.root, model_dir=broken, log=None).start()
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL


# -- pydvfs run --steps -------------------------------------------------------------------------
WRITER = ("import os, sys, time\n"
          "p = sys.argv[1]\n"
          "for i in range(1, 200):\n"
          "    open(p + '.tmp', 'w').write(str(i)); os.replace(p + '.tmp', p); time.sleep(0.005)\n")


def test_run_steps_reaches_the_search(cli, orin, tmp_path):
    progress = tmp_path / "steps"
    res = cli("run", "--sysfs-root", str(orin.root), "--start", "714", "--progress-file", str(progress),
              "--window", "0.05", "--min-steps", "3", "--settle", "0", "--steps", "199", "--search", "model",
              "--json", "--", sys.executable, "-c", WRITER, str(progress))
    assert res.returncode == 0, res.stderr
    r = wrapped_report(res)
    assert r["total_steps"] == 199 and r["trajectory"]
    told = r["search"]["remaining_windows"]
    assert told is not None and 0 <= told < 199 / 3
    planned = r["search"]["horizon"]  # the length the search planned for (issue 37 item 25)
    assert planned["length"] == "told" and planned["windows"] >= 1 and planned["run_windows"] >= 1
    assert r["search"]["vf_source"] == "default Orin table"
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL
    assert "--steps N" in cli("run", "--help").stdout
    text = cli("run", "--sysfs-root", str(orin.root), "--start", "714", "--progress-file", str(progress),
               "--window", "0.05", "--min-steps", "3", "--settle", "0", "--steps", "199", "--search", "model",
               "--", sys.executable, "-c", WRITER, str(progress))
    assert text.returncode == 0, text.stderr
    assert "V/f curve: default Orin table; horizon: the run's 199 steps (--steps); planned at the last decision: " \
        in text.stderr


def test_run_steps_bad_values_are_one_line(cli, orin, tmp_path):
    p = ["--sysfs-root", str(orin.root), "--progress-file", str(tmp_path / "steps")]
    for bad in (["--steps", "0"], ["--steps", "-3"], ["--steps", "ten"], ["--steps", "2.5"], ["--steps"],
                ["--policy", "ffg", "--workload", "model=bert,layers=12,hidden=768,seq_len=13.3", "--steps", "100"]):
        res = cli("run", *p, *bad, "--", "true")
        assert res.returncode == 2, (bad, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, (bad, res.stderr)
        assert "steps" in res.stderr, (bad, res.stderr)
        assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL, bad

"""The one start of a policy (governor/loop.py's start_policy), shared by `pydvfs run` and
`OnlineGovernor`: the first clock goes through the engine's handling of a refused clock, as every
later one does. The board refuses clocks above a cap the way gc_pin_hz reports a power mode's
(min/max written, read back clamped: the original put back, then ClockVerifyError) while its
max_freq still reads the full table: the search cannot know the cap before it pins."""
from __future__ import annotations

import io
import sys
import time

import pytest

import pydvfs
from pydvfs.device import Device
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import ClockVerifyError
from pydvfs.governor.engine import WindowParams
from pydvfs.governor.loop import run_governed

FULL = (306000000, 1300500000)  # the jp6 fake board's own (min, max)
CAP_MHZ = 612.0


@pytest.fixture
def capped(tmp_path, monkeypatch):
    """A jp6 fake board whose clock takes nothing above CAP_MHZ; the clocks asked for, in order."""
    orin = build_fake_board(tmp_path / "board", "jp6")
    orin.set_rail("VDD_GPU_SOC", 5000, 2000)
    orin.set_rail("VDD_CPU_CV", 5000, 400)
    real_pin, asked = Device.pin, []

    def pin(self, mhz):
        level = self.snap_mhz(mhz)
        asked.append(level)
        if level > CAP_MHZ:
            self.restore()  # as gc_pin_hz does before it reports the refusal
            raise ClockVerifyError(f"clock did not take: asked min {level:.2f} max {level:.2f} MHz, board reports "
                                   f"min 306.00 max {CAP_MHZ:.2f} MHz (a power-mode cap? check nvpmodel); "
                                   "original clock state restored")
        return real_pin(self, mhz)

    monkeypatch.setattr(Device, "pin", pin)
    return orin, asked


def limits(orin) -> tuple[int, int]:
    return orin.read_hz("min_freq"), orin.read_hz("max_freq")


def check_refused_start(r: dict, asked: list, log: str) -> None:
    """What a refused later level gets (test_online's test_a_refused_level_is_dropped...): the
    level dropped for good, said so, the search goes on below it, no fallback."""
    assert asked[0] == 714.0 and r["dropped"][0]["freq_mhz"] == 714.0 and r["dropped"][0]["t_s"] == 0.0
    assert "the board refused 714 MHz" in log and "dropped from the search" in log
    assert 714.0 not in r["search"]["levels_mhz"] and 714.0 in r["search"]["dropped_mhz"]
    assert r["fallback"] is None
    held = [s["freq_mhz"] for s in r["switches"]] + [w["freq_mhz"] for w in r["trajectory"]]
    assert held and all(f is not None and f <= CAP_MHZ for f in held), held
    assert r["switches"][0]["t_s"] == 0.0 and r["switches"][0]["freq_mhz"] <= CAP_MHZ


@pytest.mark.parametrize("search", ["model", "hill"])
def test_pydvfs_run_drops_a_refused_start_clock_and_searches_on(capped, tmp_path, search):
    orin, asked = capped
    progress, log = tmp_path / "steps", io.StringIO()
    cmd = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(orin.root), "--model",
           "bert-base", "--task", "SST-2", "--steps", "3000", "--time-scale", "400", "--tick-ms", "1",
           "--progress-file", str(progress), "--seed", "0"]
    r = run_governed(cmd, "online", progress_file=progress, rate_hz=1000, start_mhz=714, search_kind=search,
                     window=WindowParams(min_window_s=0.15, min_steps=100, settle_s=0.05),
                     sysfs_root=orin.root, log=log)
    assert r["exit_status"] == 0 and r["steps"] == 3000
    check_refused_start(r, asked, log.getvalue())
    assert limits(orin) == FULL and r["restored"]


@pytest.mark.parametrize("search", ["model", "hill"])
def test_online_governor_drops_a_refused_start_clock_and_searches_on(capped, search):
    orin, asked = capped
    log = io.StringIO()
    gov = pydvfs.OnlineGovernor(sysfs_root=orin.root, start_mhz=714, search=search, log=log,
                                window=WindowParams(min_window_s=0.02, min_steps=3, settle_s=0.0))
    for _ in range(300):
        time.sleep(0.002)
        gov.step()
        assert gov.current_mhz is not None and gov.current_mhz <= CAP_MHZ
        assert orin.read_hz("max_freq") == round(gov.current_mhz * 1e6)
    r = gov.close()
    check_refused_start(r, asked, log.getvalue())
    assert limits(orin) == FULL and r["restored"]


def test_a_static_policy_s_refused_clock_leaves_the_board_s_own_state(capped, tmp_path):
    """A static policy's one clock, refused: the board stays at its own state (govcore put it
    back), the report says so, and the command or loop still runs; in both front ends."""
    orin, asked = capped
    wl = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3}
    assert pydvfs.decide(wl, "ffg", sysfs_root=orin.root).freq_mhz > CAP_MHZ  # this test's premise
    log = io.StringIO()
    r = run_governed([sys.executable, "-c", "pass"], "ffg", workload=wl, sysfs_root=orin.root, log=log)
    assert r["exit_status"] == 0 and r["chosen_mhz"] is None and "refused" in r["fallback"]
    assert "the board stays at its own clock state" in log.getvalue()
    assert r["decision"]["freq_mhz"] > CAP_MHZ and limits(orin) == FULL  # (nothing left to restore)
    log = io.StringIO()
    with pydvfs.OnlineGovernor("ffg", wl, sysfs_root=orin.root, log=log) as gov:
        gov.step()
        assert gov.current_mhz is None and limits(orin) == FULL
    assert gov.report["chosen_mhz"] is None and "refused" in gov.report["fallback"]
    assert "the board stays at its own clock state" in log.getvalue()
    assert len(asked) == 2 and limits(orin) == FULL

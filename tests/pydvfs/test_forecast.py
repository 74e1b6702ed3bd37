"""Energy per unit of work and the forecast of a run's rest (pydvfs.governor.forecast), the
progress file's token count, and J/token in OnlineGovernor's stats and report."""
from __future__ import annotations

import pytest

from pydvfs.governor.forecast import describe, forecast, per_work
from pydvfs.progress import read_progress, read_progress_tokens, write_progress


def window(mhz, jps, sps):
    return {"freq_mhz": mhz, "j_per_step": jps, "s_per_step": sps}


def test_per_work_divides_once_and_says_unknown():
    assert per_work(100.0, 10.0, 50, 5000) == {"power_w": 10.0, "j_per_step": 2.0, "j_per_token": 0.02,
                                               "tokens_per_j": 50.0}
    assert per_work(None, 10.0, 50, 5000) == dict.fromkeys(("power_w", "j_per_step", "j_per_token", "tokens_per_j"))
    assert per_work(100.0, 0.0, 0, None) == {"power_w": None, "j_per_step": None, "j_per_token": None,
                                             "tokens_per_j": None}


def test_forecast_uses_the_settled_clock_and_the_measured_maxn():
    traj = [window(None, 3.0, 0.10), window(None, 3.2, 0.10), window(816, 2.0, 0.15), window(816, 2.2, 0.15),
            window(612, 2.5, 0.2)]
    fc = forecast(traj, 816, steps_done=100, total_steps=1100, tokens_done=25_600, spent_j=260.0)
    assert fc["steps_left"] == 1000 and fc["j_per_step"] == pytest.approx(2.1)
    assert fc["energy_left_j"] == pytest.approx(2100.0) and fc["time_left_s"] == pytest.approx(150.0)
    assert fc["energy_total_j"] == pytest.approx(2360.0)
    assert fc["maxn_source"] == "measured" and fc["maxn_energy_total_j"] == pytest.approx(3.1 * 1100)
    assert fc["saving_vs_maxn_pct"] == pytest.approx(100 * (1 - 2360 / 3410))
    assert fc["j_per_token"] == pytest.approx(2.1 / 256)
    line = describe(fc, "module")
    assert "1000 steps left" in line and "(module)" in line and "MAXN" in line and "% saved" in line


def test_forecast_without_maxn_takes_the_top_clock_and_says_so():
    fc = forecast([window(1300.5, 3.0, 0.1), window(816, 2.0, 0.15)], 816, 10, 20)
    assert fc["maxn_source"] == "the top clock's windows" and fc["maxn_energy_total_j"] == pytest.approx(60.0)
    assert fc["energy_total_j"] is None and fc["saving_vs_maxn_pct"] is None


@pytest.mark.parametrize("total, chosen", [(None, 816), (5, 816), (100, 612)])
def test_no_forecast_for_an_unknown_length_a_passed_total_or_an_unmeasured_clock(total, chosen):
    assert forecast([window(816, 2.0, 0.15)], chosen, 10, total) is None


def test_the_progress_file_carries_tokens_and_old_readers_see_steps(tmp_path):
    p = tmp_path / "steps"
    write_progress(p, 12, 3072)
    assert p.read_text() == "12 3072\n"
    assert read_progress(p) == 12 and read_progress_tokens(p) == (12, 3072)
    write_progress(p, 13)
    assert read_progress_tokens(p) == (13, None)
    for bad in ("12 x", "1 2 3", "x", ""):
        p.write_text(bad)
        assert read_progress_tokens(p) == (None, None)


def test_online_governor_counts_tokens(powered_orin):
    import pydvfs

    gov = pydvfs.OnlineGovernor("maxn", sysfs_root=powered_orin.root, log=None)
    with pytest.raises(pydvfs.InvalidValueError, match="tokens must be >= 0"):
        gov.step(tokens=-1)
    for _ in range(5):
        gov.step(tokens=100)
    s = gov.stats()
    assert s["tokens"] == 500 and s["j_per_token"] == pytest.approx(s["energy_j"] / 500)
    r = gov.close()
    assert r["tokens"] == 500 and r["j_per_token"] == pytest.approx(r["module_energy_j"] / 500)
    assert r["tokens_per_j"] == pytest.approx(500 / r["module_energy_j"])

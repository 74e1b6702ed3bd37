"""U-curve numbers and shape flags on synthetic sweeps whose answers are known in closed form."""
import numpy as np
import pandas as pd
import pytest

from pydvfs.characterise import ucurve
from pydvfs.errors import InvalidValueError

CLOCKS = [306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5]


def sweep(energy_fn=None, time_fn=None, clocks=CLOCKS, repeats=3, noise_rel=0.0, seed=0,
          workload="w", maxn=None):
    """Rows of a sweep: time = 600/f + 0.5 s, power = 0.02 f + 6 W unless overridden."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in clocks:
        t = time_fn(f) if time_fn else 600.0 / f + 0.5
        e = energy_fn(f) if energy_fn else t * (0.02 * f + 6.0)
        for r in range(repeats):
            ee = e * (1 + noise_rel * rng.standard_normal())
            rows.append(dict(workload=workload, freq_mhz=f, setting="fixed", repeat=r,
                             duration_s=t, energy_j=ee, avg_power_w=ee / t))
    if maxn is not None:
        t, e = maxn
        for r in range(repeats):
            rows.append(dict(workload=workload, freq_mhz=np.nan, setting="maxn", repeat=r,
                             duration_s=t, energy_j=e, avg_power_w=e / t))
    return pd.DataFrame(rows)


def one(df, **kw):
    results, curves = ucurve.analyse(df, **kw)
    assert len(results) == 1
    return results[0], curves


def test_clean_u_curve_numbers_match_closed_form():
    df = sweep(maxn=(1.2, 30.0))
    r, curves = one(df)
    f = np.array(CLOCKS)
    t = 600.0 / f + 0.5
    e = t * (0.02 * f + 6.0)  # = 12 + 3600/f + 0.01 f + 3: minimum near sqrt(360000) = 600 MHz
    best = int(np.argmin(e))
    assert r.sweet_spot == 612 == f[best]
    assert r.sweet_energy_j == pytest.approx(e[best])
    assert r.top == 1300.5 and r.top_energy_j == pytest.approx(e[-1])
    assert r.savings_vs_top_pct == pytest.approx(100 * (1 - e[best] / e[-1]))
    assert r.time_penalty_vs_top_pct == pytest.approx(100 * (t[best] / t[-1] - 1))
    assert r.savings_vs_maxn_pct == pytest.approx(100 * (1 - e[best] / 30.0))
    assert r.time_penalty_vs_maxn_pct == pytest.approx(100 * (t[best] / 1.2 - 1))
    assert r.maxn_power_w == pytest.approx(25.0)
    # time = a/f + b and power = slope f + intercept are recovered exactly.
    assert r.time_fit["a"] == pytest.approx(600.0) and r.time_fit["b"] == pytest.approx(0.5)
    assert r.time_fit["r2"] == pytest.approx(1.0)
    assert r.power_fit["slope"] == pytest.approx(0.02) and r.power_fit["intercept"] == pytest.approx(6.0)
    assert r.u_shaped and r.flags == [] and r.minima == [612.0]
    assert r.n_clocks == 11 and r.n_runs == 36
    assert list(curves["n"]) == [3] * 11 and (curves["energy_j_std"] == 0).all()


def test_noisy_repeats_keep_a_clean_curve_u_shaped():
    r, _ = one(sweep(noise_rel=0.003, repeats=5))
    assert r.u_shaped and not r.spiky and r.sweet_spot in (510, 612, 714)
    assert r.pooled_std_j > 0 and 0 < r.spikiness < 1


def test_minimum_at_an_end_is_not_u_shaped():
    falling = one(sweep(energy_fn=lambda f: 1000.0 / f))[0]
    assert falling.flags == [ucurve.FLAG_MIN_HIGH] and not falling.u_shaped
    assert falling.savings_vs_top_pct == pytest.approx(0.0)
    rising = one(sweep(energy_fn=lambda f: f))[0]
    assert rising.flags == [ucurve.FLAG_MIN_LOW] and rising.sweet_spot == 306


def test_two_minima_beyond_noise_are_flagged_but_small_wiggles_are_not():
    base = {f: 10 + ((f - 700) / 300) ** 2 for f in CLOCKS}  # U with minimum at 714
    w = dict(base)
    w[1122] = base[1020] - 0.5  # a second dip, 0.5 J deep on each side (> 1 % of ~10 J)
    r = one(sweep(energy_fn=w.get))[0]
    assert r.flags == [ucurve.FLAG_MULTI] and r.minima == [714.0, 1122.0]
    small = dict(base)
    small[1122] = base[1020] - 0.05  # 0.5 % of the minimum: noise
    r = one(sweep(energy_fn=small.get))[0]
    assert r.u_shaped and r.minima == [714.0]
    # the same 0.5 J dip does not count when repeats scatter by 0.5 J (2 sigma = ~1 J)
    r = one(sweep(energy_fn=w.get, noise_rel=0.05, repeats=4, seed=3))[0]
    assert ucurve.FLAG_MULTI not in r.flags


def test_spiky_when_repeat_spread_exceeds_neighbour_steps():
    r = one(sweep(noise_rel=0.1, repeats=4, seed=0))[0]  # 10 % scatter vs steps of ~1-7 %
    assert r.spiky and ucurve.FLAG_SPIKY in r.flags and r.spikiness > 1
    # no repeats: spread unknown, never spiky
    r = one(sweep(repeats=1))[0]
    assert r.spikiness is None and not r.spiky and r.pooled_std_j is None


def test_flat_and_too_few():
    r = one(sweep(energy_fn=lambda f: 100.0 + 1e-4 * f))[0]  # 0.1 % range: below the 1 % floor
    assert ucurve.FLAG_FLAT in r.flags and not r.u_shaped
    r = one(sweep(clocks=[612, 1300.5]))[0]
    assert ucurve.FLAG_TOO_FEW in r.flags and not r.u_shaped


def test_prepare_filters_and_infers():
    df = sweep(repeats=2, maxn=(1.2, 30.0)).drop(columns=["setting"])
    df.loc[0, "energy_j"] = 1e9  # a failed run that must be dropped
    df["exit_status"] = 0
    df.loc[0, "exit_status"] = 1
    r, _ = one(df)
    assert r.maxn_energy_j == pytest.approx(30.0)  # setting inferred from NaN clock
    assert r.n_runs == 2 * 11 + 2 - 1
    with pytest.raises(InvalidValueError, match="energy_cpu_gpu_j"):
        ucurve.analyse(df, energy_column="energy_cpu_gpu_j")
    only_maxn = df[df["freq_mhz"].isna()]
    with pytest.raises(InvalidValueError, match="fixed-clock"):
        ucurve.analyse(only_maxn)


def test_energy_column_and_power_from_same_rails():
    df = sweep(repeats=1)
    df["energy_cpu_gpu_j"] = df["energy_j"] * 0.5
    df = df.drop(columns=["energy_j"])
    r, curves = one(df, energy_column="energy_cpu_gpu_j")
    assert r.sweet_spot == 612
    assert curves["power_w_mean"].iloc[0] == pytest.approx(0.5 * (0.02 * 306 + 6.0))


def test_several_workloads_and_json_safe():
    df = pd.concat([sweep(workload="a"), sweep(workload="b", energy_fn=lambda f: f)])
    results, curves = ucurve.analyse(df)
    assert [r.workload for r in results] == ["a", "b"]
    assert set(curves["workload"]) == {"a", "b"} and "freq_mhz" in curves.columns
    d = results[1].to_dict()
    assert d["maxn_energy_j"] is None and isinstance(d["sweet_spot"], float)


@pytest.mark.parametrize(
    "energy,tol,expect",
    [
        ([5, 4, 3, 4, 5], 0.5, [2]),
        ([5, 4, 4, 4, 5], 0.5, [1]),  # plateau: its first point
        ([1, 2, 3], 0.5, [0]),  # minimum at the start
        ([3, 1, 3, 0.5, 3], 0.5, [1, 3]),
        ([3, 1, 1.2, 0.5, 3], 0.5, [3]),  # the dip at index 1 rises only 0.2 before going lower
        ([3, 1, 1.2, 0.5, 3], 0.1, [1, 3]),
        ([2, 1, 2, 1.9], 0.5, [1]),  # end wiggle of 0.1 is noise
    ],
)
def test_significant_minima(energy, tol, expect):
    assert ucurve.significant_minima(np.array(energy, float), tol) == expect


def test_power_modes_are_baselines_not_curve_points():
    df = sweep(repeats=2, maxn=(1.2, 30.0))
    mode = df[df["setting"] == "maxn"].assign(setting="30W", freq_mhz=float("nan"),
                                              duration_s=2.0, energy_j=26.0)
    r, curves = one(pd.concat([df, mode]))
    assert len(curves) == 11 and set(r.baselines) == {"maxn", "30w"}
    b = r.baselines["30w"]
    assert b["n"] == 2 and b["power_w"] == pytest.approx(13.0)
    assert b["savings_pct"] == pytest.approx(100 * (1 - r.sweet_energy_j / 26.0))
    assert b["time_penalty_pct"] == pytest.approx(100 * (r.sweet_time_s / 2.0 - 1))
    assert r.savings_vs_maxn_pct == r.baselines["maxn"]["savings_pct"]

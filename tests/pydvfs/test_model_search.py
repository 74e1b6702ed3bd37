"""The model-based online search on synthetic and simulated curves: no board, no time, no files.
Each window carries J/step and s/step, as the engine feeds them."""
from __future__ import annotations

import math
import random

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.governor.mode_search import CurveParams, CurveSearch, expected_improvement
from pydvfs.policy.objective import Objective
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.model import ORIN_LEVELS_MHZ, default_params, operating_point, run_noise

LEVELS = ORIN_LEVELS_MHZ
NEVER = CurveParams(reprobe_s=math.inf)


def physical(a=1.0, b=0.4, p0=7.0, c=14.0):
    """t = a/f + b (f in GHz), P = p0 + c f V(f)^2 with the Orin-like V/f: (J/step, s/step)."""
    from pydvfs.model.curve import DEFAULT_VF

    def curve(f):
        g = f / 1000.0
        t = a / g + b
        return (p0 + c * g * float(DEFAULT_VF.voltage_v(f)) ** 2) * t, t
    return curve


def simulated(model: str, seed: int = 0):
    """What the animated simulated Orin produces at each level (its seeded noise included)."""
    p, w = default_params(), get_workload(model, "SST-2")
    table = {}
    for f in LEVELS:
        op = operating_point(w, "fixed", f, p)
        tf, pf = run_noise(p, op.cpu_exposed_share, seed, w.name, op.setting, op.freq_mhz, 0)
        table[f] = (op.cpu_gpu_power_w * pf * op.t_step_s * tf, op.t_step_s * tf)
    return table.__getitem__


def drive(search, curve, windows: int, noise=None, t0: float = 0.0):
    ran = []
    for i in range(windows):
        f = search.target_mhz
        j, s = curve(f)
        k = noise() if noise else 1.0
        ran.append(f)
        search.observe(f, j * k, t0 + i + 1.0, s * k)
    return ran


def gap_pct(curve, f) -> float:
    best = min(curve(x)[0] for x in LEVELS)
    return 100 * (curve(f)[0] / best - 1)


@pytest.mark.parametrize("start", LEVELS)
def test_noise_free_it_settles_on_the_best_level_from_anywhere(start):
    curve = physical()
    s = CurveSearch(LEVELS, start, NEVER)
    drive(s, curve, 80)
    assert s.converged and gap_pct(curve, s.best_mhz) < 0.01, (start, s.best_mhz, s.decisions)
    assert s.best_mhz in s.estimates()  # never a level it did not measure


@pytest.mark.parametrize("model", ["bert-base", "bert-large", "pythia-160m", "bert-small", "bert-mini",
                                   "pythia-410m", "bert-medium"])
def test_noisy_windows_on_the_simulated_orin_settle_within_one_percent(model):
    curve = simulated(model)
    gaps, probes = [], []
    for seed in range(6):
        rng = random.Random(seed)
        s = CurveSearch(LEVELS, 1300.5, NEVER)
        drive(s, curve, 60, noise=lambda rng=rng: 1 + 0.01 * rng.gauss(0, 1))
        assert s.converged, (model, seed)
        gaps.append(gap_pct(curve, s.best_mhz))
        probes.append(len(s.probes))
    assert sum(gaps) / len(gaps) < 1.0 and max(gaps) < 2.6, (model, gaps)
    # the hill climb took 8-11 from the top on these; with the recalibrated podgov simulator
    # (issue 14) bert-small needs 11 on one seed of six
    assert max(probes) <= 11, probes


def test_the_guard_keeps_the_start_on_a_flat_curve_unless_a_gain_is_proven():
    def flat(f):
        return 1.0 + 0.001 * (f in (612.0, 816.0)) - 0.002 * (f == 510.0), 0.1

    for seed in range(5):
        rng = random.Random(seed)
        s = CurveSearch(LEVELS, 714.0, NEVER)
        drive(s, flat, 150, noise=lambda rng=rng: 1 + 0.01 * rng.gauss(0, 1))
        assert s.converged and s.best_mhz == 714.0, (seed, s.decisions)
    # a real gain, measured beyond the noise, moves it
    s = CurveSearch(LEVELS, 714.0, NEVER)
    drive(s, lambda f: (1.0 - 0.08 * (f == 612.0), 0.1), 40)
    assert s.best_mhz == 612.0


def test_a_slowdown_bound_keeps_the_step_time_within_it():
    curve = physical()
    fastest = curve(LEVELS[-1])[1]
    for pct in (5.0, 15.0, 40.0):
        s = CurveSearch(LEVELS, 1300.5, NEVER, objective=Objective("energy", pct))
        drive(s, curve, 80)
        assert curve(s.best_mhz)[1] <= fastest * (1 + pct / 100) + 1e-12, (pct, s.best_mhz)
        admissible = [f for f in LEVELS if curve(f)[1] <= fastest * (1 + pct / 100)]
        assert s.best_mhz == min(admissible, key=lambda f: curve(f)[0]), pct


def test_edp_settles_at_a_faster_clock_than_energy():
    curve = physical()
    chosen = {}
    for kind in ("energy", "edp", "ed2p"):
        s = CurveSearch(LEVELS, 1300.5, NEVER, objective=Objective(kind))
        drive(s, curve, 80)
        chosen[kind] = s.best_mhz
        k = {"energy": 0, "edp": 1, "ed2p": 2}[kind]
        cost = {f: curve(f)[0] * curve(f)[1] ** k for f in LEVELS}
        assert cost[s.best_mhz] <= min(cost.values()) * 1.005, kind
    assert chosen["energy"] < chosen["edp"] < chosen["ed2p"]


def test_a_phase_change_is_researched_locally():
    first, second = physical(), physical(a=0.5, b=1.2, p0=9.0)  # a longer clock-free part: lower optimum
    s = CurveSearch(LEVELS, 1300.5, CurveParams(reprobe_s=1e9, drift_pct=5.0))
    drive(s, first, 60)
    held = s.best_mhz
    assert held == 714.0 and min(LEVELS, key=lambda f: second(f)[0]) == 612.0  # the optimum moved
    n_before = len(s.probes)
    drive(s, second, 60, t0=100.0)
    assert s.reprobe_reasons and s.reprobe_reasons[0][1] == "drift" and s.round == 1
    second_round = [p.freq_mhz for p in s.probes[n_before:]]
    # local: the held level first, then levels next to it, not a jump from the top again
    assert second_round[0] == held and LEVELS[-1] not in second_round[:3]
    assert all(abs(LEVELS.index(f) - LEVELS.index(held)) <= 1 for f in second_round[:3])
    assert s.converged and s.best_mhz == 612.0


def test_a_refused_level_is_dropped_for_good():
    s = CurveSearch(LEVELS, 1300.5, NEVER)
    drive(s, physical(), 1)
    nxt = s.drop(s.target_mhz, 2.0)
    assert nxt in s.levels_mhz and len(s.levels_mhz) == len(LEVELS) - 1
    drive(s, physical(), 80, t0=3.0)
    assert s.converged and s.dropped_mhz[0] not in [p.freq_mhz for p in s.probes[1:]]


def test_bad_windows_and_params_are_refused():
    s = CurveSearch(LEVELS, 714, NEVER)
    for j, t in ((0.0, 0.1), (1.0, None), (float("nan"), 0.1), (1.0, -1.0)):
        with pytest.raises(InvalidValueError):
            s.observe(714, j, 1.0, t)
    for bad in ({"samples": 0}, {"max_samples": 1, "samples": 2}, {"horizon_windows": 0}, {"jump_frac": 0},
                {"design_samples": 4}, {"resolution_pct": -1}):
        with pytest.raises(InvalidValueError):
            CurveParams(**bad)


def test_expected_improvement():
    assert expected_improvement(1.0, 1.0, 0.0) == 0.0
    assert expected_improvement(1.0, 0.9, 0.0) == pytest.approx(0.1)
    assert expected_improvement(1.0, 1.0, 0.1) == pytest.approx(0.1 / math.sqrt(2 * math.pi))
    assert expected_improvement(1.0, 2.0, 0.1) < 1e-20


def test_a_spike_window_is_left_out_of_a_levels_cost_and_a_few_windows_do_not_set_the_noise():
    s = CurveSearch(LEVELS, 714.0, NEVER)
    for t, j in enumerate((1.00, 1.001, 1.30, 0.999, 1.0), start=1):  # one interference spike: +30 %
        s.observe(714.0, j, float(t), 0.1)
    # the probe's windows: the spike is outside the band around their median, the rest are averaged
    assert s._mode_cost(714.0) == pytest.approx(1.0, abs=1e-3)
    # five nearly equal windows do not make the search believe its windows are 0.1 % precise:
    # the prior (1.5 %, worth 4 windows) still weighs about half
    assert 0.9 < 100 * s._window_noise() < 1.5
    s2 = CurveSearch(LEVELS, 714.0, NEVER)
    rng = random.Random(3)
    for _ in range(1, 60):  # many windows 3 % apart: the data outweighs the prior
        s2._win.setdefault(714.0, []).append((1.0 + 0.03 * rng.gauss(0, 1), 0.1))
    assert 2.3 < 100 * s2._window_noise() < 3.7


def drive_with_maxn(search, curve, maxn, windows: int, noise=None):
    """As drive(), where a target of None runs under MAXN (``maxn``: its (J/step, s/step))."""
    ran = []
    for i in range(windows):
        f = search.target_mhz
        j, s = maxn if f is None else curve(f)
        k = noise() if noise else 1.0
        ran.append(f)
        search.observe(f, j * k, i + 1.0, s * k)
    return ran


@pytest.mark.parametrize("seed", range(5))
def test_where_the_model_keeps_maxn_it_is_measured_first_and_kept_unless_a_level_is_proven_better(seed):
    curve = physical()
    best = min(curve(f)[0] for f in LEVELS)
    fastest_s = curve(LEVELS[-1])[1]
    rng = random.Random(seed)

    def noise():
        return 1 + 0.01 * rng.gauss(0, 1)

    # MAXN as cheap as the best level (a small, spiky workload): it stays there
    s = CurveSearch(LEVELS, 714.0, NEVER, maxn_anchor=True)
    assert s.target_mhz is None and s.best_mhz is None
    ran = drive_with_maxn(s, curve, (best, fastest_s), 80, noise)
    assert ran[:3] == [None] * 3  # MAXN first, a full probe
    assert s.converged and s.best_mhz is None and s.target_mhz is None
    assert s.maxn_probes and s.estimate(None) == pytest.approx(best, rel=0.03)
    assert len(s.probes) >= 3  # it measured levels (three for the fit) before keeping MAXN
    # MAXN 15 % dearer than the best level: a level is proven better and taken
    s = CurveSearch(LEVELS, 714.0, NEVER, maxn_anchor=True)
    drive_with_maxn(s, curve, (1.15 * best, fastest_s), 80, noise)
    assert s.converged and s.best_mhz is not None and gap_pct(curve, s.best_mhz) <= 1.0
    assert s.state()["maxn_anchor"] and s.state()["maxn_probes"]


def assert_looked_up_from_714(ran):
    """The clocks a search ``ran`` (None: MAXN), started at 714 MHz: MAXN, the start, then the level
    above it, and never a level below the start."""
    moves = [f for i, f in enumerate(ran) if i == 0 or ran[i - 1] != f]
    assert moves[:3] == [None, 714.0, 816.0]
    assert not [f for f in ran if f is not None and f < 714.0]


@pytest.mark.parametrize("seed", range(3))
def test_where_maxn_beats_the_start_the_design_looks_above_it_and_never_below(seed):
    """Issue 51: on a board whose least is its top (much static power), the design bracketed the
    start from below first, a probe that cost its windows for nothing; the start measured
    dearer than MAXN (the board's governor near the top under training's load) sends the design
    up, and a level above the start that beats it rules out every level below (one least)."""
    curve = physical(p0=40.0)
    rng = random.Random(seed)
    s = CurveSearch(LEVELS, 714.0, NEVER, maxn_anchor=True)
    ran = drive_with_maxn(s, curve, curve(LEVELS[-1]), 60, lambda: 1 + 0.01 * rng.gauss(0, 1))
    assert_looked_up_from_714(ran)
    assert s.best_mhz is None or gap_pct(curve, s.best_mhz) <= 1.0


@pytest.mark.parametrize("p0", (18.5, 19.0))
def test_where_maxn_measures_cheaper_than_the_start_within_noise_the_design_still_looks_up(p0):
    """Issue 51: MAXN measured 0.25-1 % below the start (within a window's noise) sent the design
    below the start first, where the curve climbs fastest (on a held-out AGX Xavier whose least is
    its top, 905 MHz took 5 windows at +14 %); the least lies above (here 918-1020 MHz)."""
    curve = physical(p0=p0)
    s = CurveSearch(LEVELS, 714.0, NEVER, maxn_anchor=True)
    ran = drive_with_maxn(s, curve, curve(LEVELS[-1]), 60)
    assert_looked_up_from_714(ran)
    assert gap_pct(curve, s.best_mhz) <= 0.1


def test_a_short_remaining_run_stops_exploration_that_a_long_one_does():
    """The same windows, the run's length told: with a few windows left no probe beyond the
    initial design pays; with hours left the model probes on; unknown: today's 60 windows."""
    curve = physical()
    fine = tuple(float(f) for f in range(306, 1301, 25))  # a fine table: the model's probes matter
    probes = {}
    for left in (None, 4, 1000):
        s = CurveSearch(fine, fine[-1], NEVER)
        rng = random.Random(0)
        for i in range(120):
            f = s.target_mhz
            j, t = curve(f)
            k = 1 + 0.01 * rng.gauss(0, 1)
            s.remaining_windows = left
            s.observe(f, j * k, i + 1.0, t * k)
        probes[left] = len(s.probes)
        assert s.converged and s.state()["remaining_windows"] == left
        if left == 4:  # past the initial design only what the model expects to pay, no neighbour walk
            assert not [d for d in s.decisions if d["why"].startswith("neighbour")], s.decisions
    assert probes[4] < probes[None] < probes[1000], probes


def test_the_vf_source_is_reported():
    from pydvfs.model.curve import DEFAULT_VF, VFCurve

    assert CurveSearch(LEVELS, 714, NEVER).state()["vf_source"] == "default Orin table"
    board_vf = VFCurve(DEFAULT_VF.freqs_mhz, tuple(v * 1.1 for v in DEFAULT_VF.volts_v))
    s = CurveSearch(LEVELS, 714, NEVER, vf=board_vf, vf_source="model folder roofline.txt (x)")
    assert s.vf is board_vf and s.state()["vf_source"] == "model folder roofline.txt (x)"

"""The online clock search on synthetic energy-per-step curves: no board, no time, no files."""
from __future__ import annotations

import math
import random

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.governor.search import HillClimb, SearchParams
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.model import ORIN_LEVELS_MHZ, operating_point

LEVELS = ORIN_LEVELS_MHZ  # 306 .. 1300.5, 11 levels


def u_curve(f_opt: float, static_w: float = 6.0):
    """J/step of a model GPU: time ~ 1/f, power = static + k f^3 with the minimum at f_opt."""
    k = static_w / (2.0 * f_opt ** 3)  # d/df (static/f + k f^2) = 0 at f_opt
    return lambda f: static_w / f + k * f * f


def sim_curve(model: str, task: str = "SST-2"):
    w = get_workload(model, task)
    table = {f: operating_point(w, "fixed", f).cpu_gpu_power_w * operating_point(w, "fixed", f).t_step_s
             for f in LEVELS}
    return table.__getitem__


CURVES = {
    "u-510": u_curve(510.0),
    "u-714": u_curve(714.0),
    "u-1100": u_curve(1100.0),
    "u-350": u_curve(350.0),
    "sim-bert-base": sim_curve("bert-base"),
    "sim-bert-large": sim_curve("bert-large"),
    "sim-pythia-160m": sim_curve("pythia-160m"),
    "sim-bert-tiny": sim_curve("bert-tiny"),
}


def drive(search: HillClimb, curve, windows: int, noise=None, t0: float = 0.0):
    """Feed ``windows`` windows (1 s apart) measured on ``curve`` at whatever the search asks;
    returns the clocks it ran, one per window."""
    ran = []
    for i in range(windows):
        f = search.target_mhz
        j = curve(f) * (noise() if noise else 1.0)
        ran.append(f)
        search.observe(f, j, t0 + i + 1.0)
    return ran


def near_optimal(curve, f: float, margin_pct: float) -> bool:
    """f is the minimum, or a level whose J/step is within the margin of it."""
    best = min(curve(x) for x in LEVELS)
    return curve(f) <= best * (1 + margin_pct / 100.0) + 1e-12


def moves_are_monotone(search: HillClimb) -> bool:
    steps = [(b - a) for _, a, b in search.moves]
    return all(s < 0 for s in steps) or all(s > 0 for s in steps)


@pytest.mark.parametrize("name", sorted(CURVES))
@pytest.mark.parametrize("start", LEVELS)
def test_converges_from_every_start_without_noise(name, start):
    curve = CURVES[name]
    s = HillClimb(LEVELS, start, SearchParams(margin_pct=2.0, samples=1, reprobe_s=math.inf))
    drive(s, curve, 60)
    assert s.converged
    assert near_optimal(curve, s.best_mhz, 2.0), (s.best_mhz, s.estimates())
    # it only ever moves downhill, in one direction (a U has one bottom), and never back
    assert moves_are_monotone(s)
    assert len(s.probes) <= len(LEVELS) + 2


def test_exact_minimum_when_the_margin_is_zero():
    for name, curve in CURVES.items():
        for start in (LEVELS[0], LEVELS[5], LEVELS[-1]):
            s = HillClimb(LEVELS, start, SearchParams(margin_pct=0.0, samples=1))
            drive(s, curve, 40)
            assert s.best_mhz == min(LEVELS, key=curve), name


def test_holds_still_once_converged_and_reprobes_on_a_timer():
    curve = CURVES["u-714"]
    s = HillClimb(LEVELS, 1300.5, SearchParams(samples=3, reprobe_s=50.0))
    ran = drive(s, curve, 400)
    chosen = s.best_mhz
    assert near_optimal(curve, chosen, 2.0)
    assert s.round >= 5  # re-probed every ~50 windows
    assert all(r == "timer" for _, r in s.reprobe_reasons)
    # after the first convergence it never moved again: re-probes visit the neighbours only
    first_hold = s.probes[[p.round for p in s.probes].index(1)].t_s - 50
    i = LEVELS.index(chosen)
    assert {LEVELS[i - 1], chosen, LEVELS[i + 1]} <= set(ran[int(first_hold):]) <= set(LEVELS[i - 2:i + 3])
    assert [m for m in s.moves if m[0] > first_hold] == []
    # re-probing costs little: most windows run at the chosen clock
    later = ran[int(first_hold):]
    assert later.count(chosen) / len(later) > 0.8


@pytest.mark.parametrize("name", ["u-510", "sim-bert-base", "sim-bert-large", "u-1100"])
def test_noisy_windows_still_land_near_the_minimum(name):
    """1 % Gaussian noise per window, 2 % margin, median of 3: over 40 seeded runs the search
    ends within the margin of the minimum (or one level next to it) and never wanders far."""
    curve = CURVES[name]
    f_opt = min(LEVELS, key=curve)
    best = curve(f_opt)
    ends = []
    for seed in range(40):
        rng = random.Random(seed)
        s = HillClimb(LEVELS, LEVELS[seed % len(LEVELS)], SearchParams(margin_pct=2.0, reprobe_s=1e9))
        drive(s, curve, 150, noise=lambda: 1.0 + 0.01 * rng.gauss(0, 1))
        assert s.converged
        ends.append(s.best_mhz)
        assert curve(s.best_mhz) <= best * 1.04, (seed, s.best_mhz)
        assert abs(LEVELS.index(s.best_mhz) - LEVELS.index(f_opt)) <= 2
    assert sum(near_optimal(curve, f, 2.0) for f in ends) >= 36


def test_spiky_windows_are_outvoted():
    """15 % of windows carry a +40 % spike (CPU interference): the median of a probe's windows
    ignores a lone spike, and disagreeing windows buy extra samples."""
    curve = CURVES["sim-bert-base"]
    for seed in range(30):
        rng = random.Random(seed)

        def noise():
            return (1.0 + 0.005 * rng.gauss(0, 1)) * (1.4 if rng.random() < 0.15 else 1.0)

        s = HillClimb(LEVELS, 1300.5, SearchParams(margin_pct=2.0, reprobe_s=1e9))
        ran = drive(s, curve, 200, noise=noise)
        assert s.converged or s.round >= 1  # (a burst of spikes may have started a re-probe)
        assert near_optimal(curve, s.best_mhz, 2.5), (seed, s.best_mhz, s.estimates())
        assert ran[-60:].count(s.best_mhz) >= 45  # and it mostly stays there
    assert max(p.windows for p in s.probes) <= s.params.max_samples


def test_no_oscillation_between_two_near_equal_levels():
    """612 and 714 within 0.3 % of each other, 1 % noise: hysteresis keeps it on one of them
    through many re-probe rounds instead of hopping every round."""
    table = dict(zip(LEVELS, [4.7, 3.9, 3.5, 3.352, 3.350, 3.42, 3.55, 3.7, 3.9, 4.2, 4.4]))
    rng = random.Random(7)
    s = HillClimb(LEVELS, 1300.5, SearchParams(margin_pct=2.0, reprobe_s=20.0))
    drive(s, table.__getitem__, 1000, noise=lambda: 1.0 + 0.01 * rng.gauss(0, 1))
    assert s.round >= 20
    assert s.best_mhz in (612.0, 714.0)
    later = [m for m in s.moves if m[0] > 100]
    assert len(later) <= 2, later  # at most a rare move, not one per round


def test_drift_triggers_a_new_search():
    """The workload changes under it (say, a longer sequence phase): J/step at the held clock
    rises by 20 % and the optimum moves up; the drift check notices before the timer."""
    first, second = CURVES["u-510"], CURVES["u-1100"]
    s = HillClimb(LEVELS, 714.0, SearchParams(samples=3, reprobe_s=1e6, drift_pct=5.0))
    drive(s, first, 60)
    assert s.best_mhz == 510.0 and s.converged
    drive(s, lambda f: 1.2 * second(f) * first(510.0) / second(510.0), 100, t0=60.0)
    assert s.reprobe_reasons and s.reprobe_reasons[0][1] == "drift"
    assert s.converged and near_optimal(second, s.best_mhz, 2.0)


def test_other_tables_and_edges():
    # a 13-level table (JetPack 6 on some boards), snapped start
    levels13 = (114.75, 216.75, 318.75, 420.75, 522.75, 624.75, 726.75, 828.75, 930.75, 1032.75,
                1134.75, 1236.75, 1300.5)
    curve = u_curve(700.0)
    s = HillClimb(levels13, 1000.0, SearchParams(samples=1))
    assert s.start_mhz == 1032.75
    drive(s, curve, 40)
    assert s.best_mhz in (624.75, 726.75)
    # one level: converged after the first probe, holds there
    s = HillClimb([612.0], 1300.0, SearchParams(samples=2))
    drive(s, curve, 4)
    assert s.converged and s.target_mhz == 612.0
    # a window measured at another clock (the loop lagged a switch) is ignored
    s = HillClimb(LEVELS, 714.0, SearchParams(samples=1))
    assert s.observe(1300.5, 9.9, 1.0) == 714.0 and s.probes == []
    # bad measurements and parameters
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidValueError):
            s.observe(714.0, bad, 2.0)
    with pytest.raises(InvalidValueError):
        HillClimb([], 714.0)
    for kw in ({"margin_pct": -1}, {"samples": 0}, {"samples": 3, "max_samples": 2},
               {"reprobe_s": 0}, {"lookahead": 0}, {"drift_pct": 0}):
        with pytest.raises(InvalidValueError):
            SearchParams(**kw)


def test_state_is_json_ready():
    import json

    s = HillClimb(LEVELS, 1300.5, SearchParams(samples=1))
    drive(s, CURVES["u-510"], 30)
    state = json.loads(json.dumps(s.state()))
    assert state["phase"] == "hold" and state["best_mhz"] == 510.0
    assert state["moves"][0]["from_mhz"] == 1300.5
    assert {e["freq_mhz"] for e in state["estimates"]} >= {408.0, 510.0, 612.0}


def test_a_dropped_level_is_never_proposed_again():
    """The board refuses a level (a power-mode cap): the search goes on over the table without
    it, and lands on the best level it can take."""
    curve = CURVES["u-714"]
    s = HillClimb(LEVELS, 612.0, SearchParams(samples=1, reprobe_s=20.0))
    s.observe(612.0, curve(612.0), 1.0)
    assert s.target_mhz == 510.0  # the lower neighbour first
    s.observe(510.0, curve(510.0), 2.0)
    assert s.target_mhz == 714.0
    assert s.drop(714.0, 2.5) == 816.0  # 612's upper neighbour now
    assert s.dropped_mhz == [714.0] and 714.0 not in s.levels_mhz
    ran = drive(s, curve, 200, t0=3.0)
    assert 714.0 not in ran and s.converged and s.round >= 5
    best_left = min(curve(f) for f in s.levels_mhz)  # 816 MHz, 0.9 % below 612: inside the margin
    assert s.best_mhz in (612.0, 816.0) and curve(s.best_mhz) <= best_left * 1.02
    assert s.estimate(612.0) == curve(612.0) and s.state()["dropped_mhz"] == [714.0]


def test_dropping_the_level_being_held_or_the_last_one():
    curve = CURVES["u-510"]
    s = HillClimb(LEVELS, 714.0, SearchParams(samples=1, reprobe_s=math.inf))
    drive(s, curve, 30)
    assert s.converged and s.best_mhz == 510.0
    # the held level itself: the best measured level left is accepted, and searched from
    nxt = s.drop(510.0, 31.0)
    assert 510.0 not in s.levels_mhz and nxt != 510.0
    ran = drive(s, curve, 30, t0=32.0)
    assert 510.0 not in ran and s.converged and s.best_mhz in (408.0, 612.0)
    # dropping a level nobody is measuring changes nothing else
    target = s.target_mhz
    assert s.drop(1300.5, 70.0) == target and 1300.5 not in s.levels_mhz
    one = HillClimb([612.0, 714.0], 714.0, SearchParams(samples=1))
    assert one.drop(714.0, 1.0) == 612.0
    with pytest.raises(InvalidValueError):
        one.drop(612.0, 2.0)
    assert one.levels_mhz == (612.0,)

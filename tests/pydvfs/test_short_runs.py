"""Short runs with noisy windows (issue 39, issue 37 item 25), replayed window by window as
bench/bench_short_runs.py does: 60-120 windows 3-5 % noisy, the run's length not told. The
model search keeps >= 90 % of the oracle's saving where the search before issue 39 kept 85-88 %
(it took every noisy probe to 5 windows, searched again from scratch on false drift alarms and
checked the neighbours of modes several % worse); with quiet windows the rules for noisy ones
stay off, so long runs search as they did; the search state says which length it planned for;
a noisy hold on a curve that never moves raises no drift alarm while a real phase change still
does; a new round keeps what the run measured; and a tie the run cannot resolve holds the better
estimate."""
from __future__ import annotations

import statistics

import pytest
from repo_scripts import load

from pydvfs.governor.mode_search import CurveParams, CurveSearch

BENCH = load("bench/bench_short_runs.py")
SEEDS = 4
START = 816.0  # the built-in tree's clock for these models (fixed: the test must not follow the policy)


@pytest.fixture(scope="module")
def curves():
    flat = BENCH.flat_curve("flat 408-816", 408.0, 816.0)
    return {c.name: c for c in BENCH.sim_curves(["pythia-160m", "pythia-410m", "bert-medium", "pythia-70m"]) + [flat]}


def replays(c, start, windows, noise_pct, seeds=SEEDS):
    """(runs, searches): ``seeds`` runs of ``windows`` windows, the length not told."""
    runs, searches = [], []
    for seed in range(seeds):
        s = CurveSearch(c.levels, start, CurveParams(reprobe_s=float("inf")))
        r = BENCH.curve_replay(c, s, windows * BENCH.WINDOW_S / 60, BENCH.WINDOW_S, BENCH.SETTLE_S, seed,
                               noise=BENCH.noisy(noise_pct), baseline=c.levels[-1])
        r["share_pct"] = 100 * r["saving_pct"] / r["oracle_saving_pct"]
        runs.append(r)
        searches.append(s)
    return runs, searches


# (the search before issue 39: 85.7, 87.7 and 87.4 % on these seeds; from the top in 60 windows,
# 87.3 and 85.0 % before the design's first jump became 0.4 of the table and a level walled in by
# clearly worse ones stopped being probed)
@pytest.mark.parametrize("name,start,windows,noise_pct", [("pythia-160m", "top", 120, 5.0),
                                                          ("pythia-410m", "model", 60, 5.0),
                                                          ("bert-medium", "model", 120, 5.0),
                                                          ("pythia-70m", "top", 60, 5.0),
                                                          ("flat 408-816", "top", 60, 5.0)])
def test_a_short_noisy_run_keeps_90pct_of_the_oracles_saving(curves, name, start, windows, noise_pct):
    c = curves[name]
    runs, searches = replays(c, c.levels[-1] if start == "top" else START, windows, noise_pct)
    share = statistics.mean(r["share_pct"] for r in runs)
    assert share >= 90.0, [round(r["share_pct"], 1) for r in runs]
    assert statistics.mean(r["gap_pct"] for r in runs) <= 1.0, [r["settled"] for r in runs]
    for s in searches:  # the length it planned for: unknown, and the windows were found noisy
        assert s.state()["horizon"]["length"] == "unknown" and s.state()["horizon"]["noisy"]


def test_quiet_windows_leave_the_rules_for_noisy_ones_off(curves):
    """1-1.5 % windows (the bench's long runs): the search never counts them noisy, so its
    rules for noisy windows (issue 39) never act."""
    c = curves["bert-medium"]
    for seed in range(SEEDS):
        s = CurveSearch(c.levels, c.levels[-1], CurveParams(reprobe_s=float("inf")))
        seen = []
        observe = s.observe

        def spy(*a, **k):
            out = observe(*a, **k)
            seen.append(s._noisy(s._window_noise()))
            return out

        s.observe = spy
        BENCH.curve_replay(c, s, 10.0, BENCH.WINDOW_S, BENCH.SETTLE_S, seed, noise=BENCH.noisy(1.2),
                           baseline=c.levels[-1])
        assert seen and not any(seen)
        assert s.state()["horizon"]["noisy"] is False


def _steady_runs(c, seeds, reprobe_s):
    """120-window runs from the top with 5 % windows, every search kept."""
    out = []
    for seed in range(seeds):
        s = CurveSearch(c.levels, c.levels[-1], CurveParams(reprobe_s=reprobe_s))
        BENCH.curve_replay(c, s, 120 * BENCH.WINDOW_S / 60, BENCH.WINDOW_S, BENCH.SETTLE_S, seed,
                           noise=BENCH.noisy(5.0), baseline=c.levels[-1])
        out.append(s)
    return out


def test_a_noisy_hold_on_a_curve_that_never_moves_raises_no_drift_alarm(curves):
    """The drift check of a noisy hold: its median of five against the held mode's median, the
    band from the held mode's own spread, and a move that lasts five windows (before: 3 false
    alarms in these 12 runs, each a new search)."""
    alarms = [r for c in curves.values() for s in _steady_runs(c, SEEDS, float("inf"))
              for r in s.reprobe_reasons if r[1] == "drift"]
    assert alarms == []


def test_a_noisy_phase_change_is_still_noticed():
    """A held level whose cost rises 25 % for good (4 % windows): an alarm within 12 windows."""
    import random

    levels = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0)
    cost = {f: 1.0 + 0.5 * ((f - 612.0) / 500.0) ** 2 for f in levels}
    rng = random.Random(1)
    s = CurveSearch(levels, 612.0, CurveParams(reprobe_s=float("inf")))
    f, t = s.target_mhz, 0.0
    for _ in range(60):
        t += 10.0
        f = s.observe(f, cost[f] * (1 + 0.04 * rng.gauss(0, 1)), t, 0.1)
    drift = [r for r in s.reprobe_reasons if r[1] == "drift"]
    assert s.phase == s.HOLD and s.state()["horizon"]["noisy"] and not drift
    for _ in range(12):
        t += 10.0
        f = s.observe(f, 1.25 * cost[f] * (1 + 0.04 * rng.gauss(0, 1)), t, 0.1)
        drift = [r for r in s.reprobe_reasons if r[1] == "drift"]
        if drift:
            break
    assert drift


def test_a_new_search_keeps_what_the_run_measured():
    """A timer's new search around the held level: the earlier rounds' windows join its fit, so
    the model never sends it back to the top level the run measured 30-45 % worse (before: 3 of
    these 8 runs probed it again on the model's word)."""
    for c in BENCH.sim_curves(["bert-tiny", "bert-mini"]):
        for s in _steady_runs(c, SEEDS, 300.0):
            assert s.round >= 1
            back = [d for d in s.decisions if d.get("probe") == c.levels[-1] and d["why"].startswith("model")]
            assert back == [], back


def test_a_tie_the_run_cannot_resolve_holds_the_better_estimate():
    """From the built-in policy's clock (816 MHz, 1.3-2.6 % above the best on these models), 5 %
    windows: proving the gain at the guard's bar would take more windows than the run has, a
    tie (issue 39 item 2): the search holds the better estimate, and settles within 1 % of the
    best on average over 12 seeds (before: it kept the start, 1.3-1.9 % above the best, in every
    run; a run that holds the wrong one of two levels 1-4 % apart moves a mean of 4 by ~0.5 %)."""
    for c in BENCH.sim_curves(["bert-mini", "bert-base", "pythia-1b"]):
        runs, searches = replays(c, START, 60, 5.0, seeds=12)
        assert statistics.mean(r["gap_pct"] for r in runs) <= 1.0, [r["settled"] for r in runs]
        assert any(d["why"].startswith("tie:") for s in searches for d in s.decisions)


def test_a_level_walled_in_by_clearly_worse_ones_is_not_probed(curves):
    """A flat-bottomed curve from the top: once the design has measured 918 MHz and the top
    clearly worse than the best, the levels between them cannot beat it on a U-shaped curve,
    whatever the fit's misfit says there (before: 2 of these 4 runs probed 1224 MHz, 1.9 x the
    best, on the model's word)."""
    c = curves["flat 408-816"]
    _, searches = replays(c, c.levels[-1], 60, 5.0)
    walled = [d for s in searches for d in s.decisions if 918.0 < d["probe_mhz"] < c.levels[-1]]
    assert walled == [], walled


@pytest.mark.parametrize("name,member,seed", [("bert-tiny/SST-2", "default", 0), ("bert-tiny/SST-2", "cpu-exp-1.0", 0),
                                              ("bert-tiny/SST-2", "cpu-exp-1.0", 2), ("bert-base/SST-2", "corner-a", 1)])
def test_a_short_joint_run_of_unknown_length_trusts_its_fit_one_span_beyond_what_it_measured(name, member, seed):
    """#37 item 25: a 3-minute run (18 windows) on the Orin Nano Super's family, its length not
    told. The joint fit (13 coefficients on 7-8 modes, its misfit read as the floor) sent these
    runs to the corner of the grid on its word: EMC 665 or 204 MHz, measured down to 2133, for
    3-5 windows; they kept 20-31 % of the joint oracle's saving (the GPU-only search, 41-68 %).
    A model probe now lies within one measured span of what was measured along every axis."""
    from pydvfs.governor.replay import Grid, make, replay
    from pydvfs.sim.catalogue import get_workload
    from pydvfs.sim.perturbed import family

    pert = {p.name: p for p in family()}[member]
    g = Grid("orin-nano-super", get_workload(*name.split("/")), pert, run_seed=seed)
    s = make("joint", g)
    r = replay(g, s, False, 18 * BENCH.WINDOW_S / 60, BENCH.WINDOW_S, BENCH.SETTLE_S, seed,
               noise=BENCH.noisy(1.5), told=False)
    share = r["saving_pct"] / (1 - g.j[g.best] / g.j[g.stock])  # % of the joint oracle's saving
    assert share >= 45.0, share
    seen = [tuple(g.stock)]
    for d in s.decisions:
        if "probe" not in d:
            continue
        m = tuple(d["probe"])
        if d["why"].startswith("model"):
            for axis in range(3):
                lo, hi = min(x[axis] for x in seen), max(x[axis] for x in seen)
                assert lo * lo / hi * (1 - 1e-9) <= m[axis] <= hi * hi / lo * (1 + 1e-9), (d, seen)
        seen.append(m)


@pytest.fixture(scope="module")
def family_rows():
    """120-window runs at 5 % on the AGX Orin family, 4 seeds (rows of bench_short_runs.py): the
    GPU-only search on bert-base, two members; the joint search on bert-tiny, one."""
    rows = BENCH.family_runs(["bert-base/SST-2"], 120, 5.0, SEEDS, False, ["default", "corner-a"], kinds=["gpu-only"]) + \
        BENCH.family_runs(["bert-tiny/SST-2"], 120, 5.0, SEEDS, False, ["corner-a"], kinds=["joint"])
    return {(r["search"], r["workload"]): r for r in rows}


def test_a_noisy_mode_is_weighed_with_the_fit_over_every_measured_mode(family_rows):
    """With 5-7 % windows a level 4.6 % above the best read 4 % low over 9 windows and the search
    held it over one 0.3 % above the best, read 3 % high over 10 (the fit over every level ordered
    them right). A measured mode's windows are now weighed with the fit's word there, by their
    spreads. The search before (these seeds): GPU-only bert-base kept 89.4 and 87.7 % of the
    oracle's saving and settled 1.22 % from the best on the default member; the joint search
    settled 2.16 % from the best on bert-tiny. (The bar on the gap is issue 39's, 1 %: since the
    level beyond a rival is weighed on the fit's word, one run of corner-a settles 3.1 % from the
    best, at 1020 MHz; the mean 0.78 %.)"""
    gpu = [family_rows[("gpu-only", f"bert-base/SST-2 {m}")] for m in ("default", "corner-a")]
    assert all(r["share_pct_mean"] >= 90.0 for r in gpu), [r["share_pct_mean"] for r in gpu]
    assert all(r["gap_pct_mean"] <= 1.0 for r in gpu), [r["gap_pct_mean"] for r in gpu]
    joint = family_rows[("joint", "bert-tiny/SST-2 corner-a")]
    assert joint["gap_pct_mean"] <= 1.0 and joint["share_pct_mean"] >= 90.0, joint


@pytest.fixture(scope="module")
def bert_base_runs():
    """60 windows at 5 % from the top clock, GPU-only, bert-base on the family's default and
    corner-a members, 4 seeds: (member, seed, grid, search, the run's share of the oracle's
    saving in %)."""
    from pydvfs.governor.replay import Grid, make, replay
    from pydvfs.sim.catalogue import get_workload
    from pydvfs.sim.perturbed import family

    members = {p.name: p for p in family()}
    out = []
    for member in ("default", "corner-a"):
        for seed in range(SEEDS):
            g = Grid("agx-orin", get_workload("bert-base", "SST-2"), members[member], run_seed=seed)
            s = make("gpu-only", g)
            r = replay(g, s, True, 60 * BENCH.WINDOW_S / 60, BENCH.WINDOW_S, BENCH.SETTLE_S, seed,
                       noise=BENCH.noisy(5.0), told=False)
            out.append((member, seed, g, s, r["saving_pct"] / (1 - g.j[g.gpu_best] / g.j[g.stock])))
    return out


def test_the_guard_measures_the_anchor_only_where_its_windows_pay(bert_base_runs):
    """A level measured 13-15 % below the top clock, 2.2-2.9 standard errors (the guard's bar:
    3.5 with eight levels measured), sent two of these runs back to the top clock (then, in one,
    its neighbour) for up to 7 windows, 17 % above the best (they kept 54 and 71 % of the
    oracle's saving). The chance that the top clock is the better, times by how much, over the
    horizon, is worth less than those windows: the search holds the better estimate, measuring it
    (free) where it needs."""
    for member, seed, g, s, share in bert_base_runs:
        back = [d["why"] for d in s.decisions if d.get("probe") == g.stock[0]]
        assert back == [] and share >= 70.0, (member, seed, share, back)


def test_a_level_beyond_a_rival_is_weighed_on_the_fits_word(bert_base_runs):
    """The neighbour check of a level measured a few % low by chance (a rival within noise of the
    best) went on beyond it, away from the best, to the table's ends: 408 and 1224 MHz, 29 and
    17 % above the best, in the run that kept 71 % of the oracle's saving. On a U-shaped curve
    such a level climbs on from the rival: it is now checked only where the fit's expected gain
    there pays its windows. No rival's neighbour more than 15 % above the best is checked, and
    each run keeps at least 74 %."""
    for member, seed, g, s, share in bert_base_runs:
        far = [d["probe"] for d in s.decisions if str(d.get("why", "")).startswith("neighbour of a mode")
               and g.j[(d["probe"],) + g.stock[1:]] > 1.15 * g.j[g.gpu_best]]
        assert far == [] and share >= 74.0, (member, seed, share, far)


def test_the_bests_neighbours_are_weighed_on_the_fits_word(curves):
    """From the built-in policy's clock at 5 %, the check of the best's neighbour one step down
    the slope read it low by chance and went on from there: pythia-70m checked 510 MHz next to
    the best, 612, then 408, and settled 2.4 % above the best; over 12 seeds the mean gap was
    1.43 %. Once the best has its windows, a neighbour of it is checked only where the fit's
    expected gain there pays its windows, as a level beyond a rival is: the mean gap is within
    the issue's 1 % and the mean share above 90 %."""
    c = curves["pythia-70m"]
    runs, _ = replays(c, START, 60, 5.0, seeds=12)
    gaps = [round(r["gap_pct"], 2) for r in runs]
    assert statistics.mean(gaps) <= 1.0, gaps
    assert statistics.mean(r["share_pct"] for r in runs) >= 90.0

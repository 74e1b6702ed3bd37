"""The one search over modes (ModeSearch) on physics it was not fitted to: the perturbed
simulator family (sim/perturbed.py), a model passed in that is wrong, a run of known length,
and a prior given as data."""
from __future__ import annotations

import math
import random

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.governor.mode_search import CurveSearch, JointParams, JointSearch, ModeSearch, Prediction, SearchPrior
from pydvfs.governor.replay import Grid, make, replay
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.perturbed import DEFAULT, family, member, mode_factors, perturbed_params

BERT = get_workload("bert-base", "SST-2")


def run(g, search, windows, noise_seed=0, left=None):
    """Feed ``windows`` windows (0.5 % noise) of grid ``g`` to ``search``; ``left``: the run's
    length in windows, told before each window as the engine does. Returns the modes proposed."""
    rng = random.Random(noise_seed)
    target, proposed = search.target_mode, []
    for i in range(windows):
        if left is not None:
            search.remaining_windows = max(0, left - i - 1)
        k = 1 + 0.005 * rng.gauss(0, 1)
        proposed.append(target)
        target = search.observe(target, g.j[target] * k, 10.0 * (i + 1), g.s[target] * k)
    return proposed


def test_the_family_moves_the_physics_the_model_assumes_and_fixes_a_spread_per_run():
    names = [m.name for m in family()]
    assert names[0] == "default" and len(set(names)) == len(names) >= 8
    assert perturbed_params(DEFAULT) == perturbed_params(member("default"))
    corner = member("corner-a")
    p = perturbed_params(corner)
    assert (p.cpu_vf_exp, p.cpu_spin_share, p.mem_overlap) == (2.5, 1.0, 0.6)
    with pytest.raises(ValueError, match="no perturbed simulator"):
        member("nope")
    # the default simulator: no spread, the grid as before; a member: a fixed spread per run
    assert mode_factors(DEFAULT, (612.0, 3199.0, 2201.6)) == (1.0, 1.0)
    m = (612.0, 3199.0, 2201.6)
    assert mode_factors(corner, m, 0) == mode_factors(corner, m, 0) != mode_factors(corner, m, 1)
    g0, g1 = Grid("orin-nano-super", BERT), Grid("orin-nano-super", BERT, member("mem-hidden-0.6"))
    assert g0.modes == g1.modes and any(abs(g1.s[x] / g0.s[x] - 1) > 0.02 for x in g0.modes)


def test_one_class_for_both_spaces():
    g = Grid("orin-nano-super", BERT)
    one = CurveSearch(g.levels, g.levels[-1])
    joint = JointSearch(g.modes, g.stock)
    assert type(one) is type(joint) is ModeSearch
    assert one.axes == 1 and joint.axes == 3
    assert one.state()["kind"] == "model" and joint.state()["kind"] == "joint"


class WrongModel:
    """A model that places a fantastic optimum at the lowest GPU level, lowest CPU clock: a
    misfit the search must survive (it may probe there, it must not settle there unmeasured)."""

    kind, axes, vf, vf_source = "wrong", 3, None, "none"

    def fit(self, coords, time_s, power_w, space):
        base_t, base_p = min(time_s), min(power_w)
        lo_g, lo_c = min(c[0] for c in space), min(c[2] for c in space)
        t = [base_t * (0.5 if (c[0], c[2]) == (lo_g, lo_c) else 1.0) for c in space]
        return Prediction(t, [base_p] * len(space), [0.0] * len(space), [0.0] * len(space))


@pytest.mark.parametrize("pert", ["default", "corner-a", "cpu-exp-2.5"])
def test_a_wrong_model_never_makes_it_settle_worse_than_the_gpu_only_modes_it_measured(pert):
    g = Grid("orin-nano-super", BERT, member(pert), run_seed=1)
    for model in (None, WrongModel()):
        s = ModeSearch(g.modes, g.stock, model, JointParams(reprobe_s=math.inf))
        run(g, s, 60, left=60)
        assert s.converged
        best = s.best_mode
        assert best in s._win  # settled on a mode measured in this run
        gpu_only = [m for m in s._win if m[1:] == g.stock[1:]]
        assert s._mode_cost(best) <= min(s._mode_cost(m) for m in gpu_only)
        assert g.j[best] <= g.j[g.stock]  # never worse than the start


def test_a_structured_misfit_stops_extrapolation_along_its_axis():
    g = Grid("orin-nano-super", BERT)
    s = JointSearch(g.modes, g.stock)
    top = g.stock
    # residuals that rise with the GPU clock by far more than noise: a structure along the GPU axis
    resid = {(f, top[1], top[2]): r for f, r in ((1020.0, 0.0), (714.0, -0.08), (408.0, -0.16))}
    se = {m: 0.005 for m in resid}
    assert s._structured_axes(resid, se, 0.015) == [0]
    flat = {m: 0.004 * (-1) ** i for i, m in enumerate(resid)}
    assert s._structured_axes(flat, se, 0.015) == []
    # and the prediction then places no mode beyond the measured range of that axis
    rng = random.Random(0)
    # the board is off the model at one end by 20 %, in a way no smooth curve follows
    for f, bias in ((1020.0, 1.0), (918.0, 1.0), (816.0, 1.0), (714.0, 1.0), (612.0, 1.0), (510.0, 0.8)):
        m = s._snap((f, top[1], top[2]))
        s._win[m] = [(g.j[m] * bias * (1 + 0.003 * rng.gauss(0, 1)), g.s[m]) for _ in range(3)]
    pred = s._predict()
    assert "gpu" in s.fit_summary["structured_axes"]
    assert pred and all(m[0] >= 510.0 for m in pred)


def test_a_short_run_explores_less():
    g = Grid("agx-orin", get_workload("pythia-1b", "SST-2"))
    spent = {}
    for left in (24, 60, None):
        s = JointSearch(g.modes, g.stock, JointParams(reprobe_s=math.inf))
        run(g, s, left or 60, left=left)
        off = sum(len(w) for m, w in s._win.items() if m != s.best_mode)
        spent[left] = (s.probed_modes, off)
        assert s.converged
    assert spent[24][0] < spent[60][0] and spent[24][1] < spent[60][1]


def test_a_good_prior_shortens_exploration():
    g = Grid("agx-orin", get_workload("pythia-1b", "SST-2"))
    first = JointSearch(g.modes, g.stock, JointParams(reprobe_s=math.inf))
    run(g, first, 60, left=60)
    # what the board recorded of that run: its probes (mode, J/step, s/step) and where it settled
    record = [(p.freq_mhz, p.j_per_step, p.s_per_step) for p in first.probes]
    prior = SearchPrior(tuple(record), start=first.best_mode, source="the board's record")
    second = JointSearch(g.modes, g.stock, JointParams(reprobe_s=math.inf), prior=prior)
    proposed = run(g, second, 60, noise_seed=1, left=60)
    assert second.converged
    assert second.probed_modes < first.probed_modes
    assert proposed[1] == second._snap(first.best_mode)  # the prior's start right after the start
    assert g.j[second.best_mode] <= 1.02 * g.j[g.best]
    assert second.state()["prior"]["observations"] == len(record)
    # the prior's forms and its checks
    assert SearchPrior.of([{"mode": g.stock, "j_per_step": 1.0, "s_per_step": 0.1}]).observations[0][1] == 1.0
    with pytest.raises(InvalidValueError):
        SearchPrior.of([(g.stock, -1.0, 0.1)])


def test_the_family_replay_the_joint_search_contains_the_gpu_only_one():
    """On two perturbed members, both boards' smallest grid: the joint search's run ends on a
    mode no worse than the best GPU-only mode it measured, and saves against the stock mode."""
    for pert in ("spin-1.0", "emc-dram-heavy"):
        g = Grid("orin-nano-super", BERT, member(pert), run_seed=0)
        s = make("joint", g)
        r = replay(g, s, False, 10.0, 10.0, 2.0, 0)
        gpu_only = [m for m in s._win if m[1:] == g.stock[1:]]
        assert s._mode_cost(s.best_mode) <= min(s._mode_cost(m) for m in gpu_only)
        assert g.j[tuple(r["settled"])] < g.j[g.stock] and r["saving_pct"] > 0, r


def test_the_prior_reaches_the_search_through_new_search_and_the_governor(powered_orin):
    orin = powered_orin
    import pydvfs
    from pydvfs.governor.loop import new_search

    levels = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1300.5)
    s = new_search("model", levels, 1300.5, prior={"observations": [(714.0, 2.0, 0.1), (510.0, 2.1, 0.12),
                                                                     (1020.0, 2.3, 0.08)], "start": 714.0})
    assert s.state()["prior"] == {"observations": 3, "start": 714.0, "source": ""}
    # the start (the table's top) is a one-window scout; the prior's start comes next
    assert s.observe(1300.5, 2.5, 1.0, 0.07) == 714.0
    with pytest.raises(InvalidValueError, match="hill climb"):
        new_search("hill", levels, 1300.5, prior=[(714.0, 2.0, 0.1)])
    for bad in ([(714.0, "x", 0.1)], {"policy": "mlg"}):
        kwargs = {"prior": bad} if isinstance(bad, list) else {"prior": [(714.0, 2.0, 0.1)], **bad}
        with pytest.raises(InvalidValueError):
            pydvfs.OnlineGovernor(sysfs_root=orin.root, log=None, **kwargs).start()
    gov = pydvfs.OnlineGovernor(sysfs_root=orin.root, log=None, start_mhz=918, prior=[(714.0, 2.0, 0.1)])
    assert gov.prior.observations == ((714.0, 2.0, 0.1),)


def test_the_family_bench_reports_the_worst_case_beside_the_default(tmp_path):
    from repo_scripts import load

    bench = load("bench/bench_joint_search.py")
    res = bench.run_family(["orin-nano-super"], [("bert-base/SST-2+host", 4.0)], 1, ["default", "spin-1.0"],
                           progress=False, warm=True)
    assert [r["member"] for r in res["rows"]] == ["default", "spin-1.0"]
    for r in res["rows"]:
        assert set(r["searches"]) == {"joint", "gpu-only", "joint (warm)", "gpu-only (warm)", "knows the physics"}
        # the yardstick that knows the member's physics measures the stock mode and its 6 best
        assert r["searches"]["knows the physics"]["probes_max"] == 7
        assert 0 <= r["joint_worse_than_gpu_only"] <= 1 and 0 <= r["joint_worse_than_gpu_only_warm"] <= 1
        # the warm start is the built-in policy's clock (production's start), a level of the board
        assert r["policy_mhz"] in (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0)
        assert r["smooth_best_gap_pct_worst"] >= 0.0
    assert res["rows"][0]["smooth_best_gap_pct_worst"] == 0.0  # the default simulator has no spread
    text = bench.family_summary(res)
    assert "| orin-nano-super | 4 min host-bound | default | stock mode |" in text and "| worst of 2 |" in text
    assert "| default | + policy's clock |" in text and "a search that knows the physics" in text
    doc = tmp_path / "d.md"
    doc.write_text(f"a\n{bench.FAMILY_MARK[0]}\nold\n{bench.FAMILY_MARK[1]}\nb\n")
    bench.write_doc(doc, text, bench.FAMILY_MARK)
    assert "old" not in doc.read_text() and "worst of 2" in doc.read_text()

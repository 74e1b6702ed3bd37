"""The joint online search (GPU x EMC x CPU) on the simulator's mode grids: it settles within
1 % of the mode of least energy with at most 12 probed modes, noiseless and with window noise,
never proposes a mode above the power mode's caps, and the replay bench writes its table."""
from __future__ import annotations

import json
import math

import pytest
from repo_scripts import load

from pydvfs.errors import InvalidValueError
from pydvfs.governor.joint_search import JointParams, JointSearch, parse_knobs, within_caps
from pydvfs.policy.objective import Objective
from pydvfs.sim.catalogue import get_workload

BENCH = load("bench/bench_joint_search.py")
GRIDS = {}


def grid(board, name):
    if (board, name) not in GRIDS:
        model, task = name.split("/")
        GRIDS[board, name] = BENCH.Grid(board, get_workload(model, task))
    return GRIDS[board, name]


def noiseless(g, search, windows=80):
    target = search.target_mode
    proposed = [target]
    for i in range(windows):
        target = search.observe(target, g.j[target], 10.0 * (i + 1), g.s[target])
        proposed.append(target)
    return proposed


CASES = [("agx-orin", "bert-base/SST-2"), ("agx-orin", "pythia-1b/SST-2"), ("agx-orin", "bert-tiny/SST-2"),
         ("orin-nano-super", "bert-base/SST-2"), ("orin-nano-super", "bert-large/QNLI")]


@pytest.mark.parametrize("board,name", CASES)
def test_noiseless_settles_within_1pct_in_12_probes(board, name):
    g = grid(board, name)
    s = JointSearch(g.modes, g.stock)
    noiseless(g, s)
    assert s.converged
    assert s.probed_modes <= 12
    assert g.j[s.best_mode] <= 1.01 * g.j[g.best], (s.best_mode, g.best)


@pytest.mark.parametrize("board,name", [("agx-orin", "bert-base/SST-2"), ("agx-orin", "bert-large/QNLI"),
                                        ("orin-nano-super", "bert-base/SST-2")])
def test_noisy_replay_settles_near_the_best_and_keeps_the_oracles_saving(board, name):
    # (within 1 % on average and 2 % in any run: one-window design probes (issue 30) trade a little
    # of the final choice's precision on the default simulator for a cheaper exploration on
    # physics it was not fitted to; the design's longer first jump (issue 39) moves which seed
    # lands on a neighbour 1.6 % worse, not the mean: 0.41 -> 0.37 % over 4 seeds of these cases)
    g = grid(board, name)
    gaps = []
    for seed in range(2):
        r = BENCH.replay(g, BENCH.make("joint", g), False, 60.0, 10.0, 2.0, seed)
        gaps.append(r["gap_pct"])
        assert r["gap_pct"] <= 2.0, r
        assert r["probes"] <= 12, r
        assert r["share_pct"] >= 90.0, r
        gpu = BENCH.replay(g, BENCH.make("gpu-only", g), True, 60.0, 10.0, 2.0, seed)
        assert r["saving_pct"] > gpu["saving_pct"]  # the EMC/CPU clocks add to the GPU clock here
    assert sum(gaps) / len(gaps) <= 1.0, gaps


def test_never_probes_above_the_caps():
    g = grid("agx-orin", "bert-base/SST-2")
    caps = (612.0, 2133.0, 1497.6)  # a 30W-like cap: GPU, EMC and CPU all below the top
    s = JointSearch(g.modes, g.stock, caps=caps)
    assert s.start_mode == (612.0, 2133.0, 1497.6)  # the stock top snaps to the caps
    proposed = noiseless(g, s)
    assert s.converged and s.probed_modes <= 12
    assert all(m[0] <= 612.0 and m[1] <= 2133.0 and m[2] <= 1497.6 for m in proposed)
    allowed = within_caps(g.modes, caps)
    assert g.j[s.best_mode] <= 1.01 * min(g.j[m] for m in allowed)
    with pytest.raises(InvalidValueError, match="caps"):
        JointSearch(g.modes, g.stock, caps=(100.0, None, None))


def test_slowdown_bound_and_drop():
    g = grid("agx-orin", "bert-base/SST-2")
    s = JointSearch(g.modes, g.stock, objective=Objective("energy", 10.0))
    noiseless(g, s)
    fastest = min(g.s.values())
    assert g.s[s.best_mode] <= 1.10 * fastest * 1.01
    s2 = JointSearch(g.modes, g.stock)
    first = s2.target_mode
    nxt = s2.drop(first, 0.0)
    assert nxt != first and first not in s2.modes
    noiseless(g, s2)
    assert s2.converged and s2.best_mode != first


def test_params_and_inputs_are_checked():
    with pytest.raises(InvalidValueError):
        JointParams(max_modes=3)
    with pytest.raises(InvalidValueError):
        JointParams(explore_share=0.0)
    g = grid("agx-orin", "bert-base/SST-2")
    s = JointSearch(g.modes, g.stock)
    with pytest.raises(InvalidValueError):
        s.observe(g.stock, math.nan, 1.0, 0.1)
    assert s.state()["kind"] == "joint"
    json.dumps(s.state())


@pytest.mark.parametrize("text,want", [("gpu", ("gpu",)), ("gpu,emc,cpu", ("gpu", "emc", "cpu")),
                                       ("cpu, GPU,emc", ("gpu", "emc", "cpu"))])
def test_parse_knobs(text, want):
    assert parse_knobs(text) == want


@pytest.mark.parametrize("text", ["gpu,mem", "", "emc,cpu", "gpu,gpu", "gpu,emc"])
def test_parse_knobs_refuses(text):
    with pytest.raises(InvalidValueError):
        parse_knobs(text)


def test_bench_writes_results_and_doc_table(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{BENCH.MARK[0]}\nold\n{BENCH.MARK[1]}\nafter\n")
    out = tmp_path / "r.json"
    assert BENCH.main(["--seeds", "1", "--minutes", "10", "--boards", "orin-nano-super",
                       "--workloads", "bert-base/SST-2", "--out", str(out), "--doc", str(doc)]) == 0
    res = json.loads(out.read_text())
    row = res["rows"][0]
    assert set(row["searches"]) == {"joint", "gpu-only"} and row["modes"] == 128
    text = doc.read_text()
    assert "old" not in text and "joint search" in text and text.endswith("after\n")
    assert "bert-base/SST-2" in text and "25w" in text


def test_the_plans_gpu_clock_is_the_joint_searchs_warm_start():
    """Production gives the joint search the online plan's GPU clock (the board's record, the
    built-in policy) as its prior's start, the EMC and CPU at the top mode's: probed right after
    the top mode; the middle-of-the-table fallback is no start (issue 30 item 4)."""
    from pydvfs.governor.joint_search import joint_setup
    from pydvfs.governor.loop import MIDDLE, joint_start

    modes = [(g, e, c) for g in (306.0, 612.0, 918.0, 1300.5) for e in (2133.0, 3199.0) for c in (1113.6, 2201.6)]
    plan = {"centre_mhz": 600.0, "start_source": "mlg"}
    search, _, info = joint_setup(None, None, pin_mode=lambda *m: None, modes=modes, **joint_start(plan))
    assert search.prior_start == (612.0, 3199.0, 2201.6)
    assert "612/3199/2201.6 (mlg)" in info["start_source"]
    assert search.target_mode == (1300.5, 3199.0, 2201.6)
    assert search.observe((1300.5, 3199.0, 2201.6), 10.0, 10.0, 0.1) == (612.0, 3199.0, 2201.6)
    assert joint_start({"centre_mhz": 612.0, "start_source": MIDDLE}) == {}
    own, _, _ = joint_setup(None, None, pin_mode=lambda *m: None, modes=modes, prior={"start": (918.0, 2133.0, 1113.6)},
                            **joint_start(plan))
    assert own.prior_start == (918.0, 2133.0, 1113.6)  # a prior's own start wins

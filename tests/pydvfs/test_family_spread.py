"""The family's spread in the model search (issue 35, item 5): on a board whose profile is an
estimate, the round-0 design moves onto the spread of the best clock where the start lies
outside it; without a spread (a calibrated board) the design is as before."""
from __future__ import annotations

import json

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.governor.mode_search import CurveParams, CurveSearch, SearchPrior

NX = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1173.0)


def design(prior, start=1020.0, maxn_anchor=False, windows=12) -> list:
    """The targets a search proposes, in order (repeats folded), on a smooth U-shaped curve."""
    s = CurveSearch(NX, start, CurveParams(reprobe_s=float("inf")), maxn_anchor=maxn_anchor, prior=prior)
    out, target = [], s.target_mhz
    for k in range(windows):
        f = target or NX[-1]
        if not out or out[-1] != target:
            out.append(target)
        target = s.observe(target, 1.0 + ((f - 650.0) / 1000.0) ** 2, 10.0 * (k + 1), 100.0 / f)
    return out


def test_the_design_probes_the_spreads_ends_where_the_start_lies_outside_it():
    assert design(None)[:3] == [1020.0, 918.0, 1122.0]  # the usual bracket around the start
    assert design(SearchPrior(spread=(510.0, 816.0)))[:3] == [1020.0, 510.0, 816.0]
    # anchored at MAXN (the policy keeps the workload there): MAXN, the centre, then the spread
    assert design(None, 714.0, True)[:4] == [None, 714.0, 612.0, 816.0]
    assert design(SearchPrior.of({"spread": [510, 612]}), 714.0, True)[:3] == [None, 714.0, 510.0]


def test_a_spread_around_the_start_leaves_the_design_unchanged():
    for start, anchor in ((1020.0, False), (714.0, True)):
        assert design(SearchPrior(spread=(612.0, 1173.0)), start, anchor) == design(None, start, anchor)
    assert SearchPrior(spread=(510, 816)).to_dict()["spread_mhz"] == [510.0, 816.0]
    assert "spread_mhz" not in SearchPrior().to_dict()
    for bad in ((816.0,), (816.0, 510.0), ("x", 1.0), (0.0, 510.0)):
        with pytest.raises(InvalidValueError, match="spread"):
            SearchPrior(spread=bad)


@pytest.mark.parametrize("board,spread", [("orin-nx", True), ("agx-orin", False)])
def test_the_plan_gives_the_spread_to_the_search_on_an_estimate_board_only(tmp_path, board, spread):
    from pydvfs.device import open_device
    from pydvfs.device.fake import build_fake_board
    from pydvfs.governor.loop import new_search, plan_online

    fake = build_fake_board(tmp_path / "b", board=board)
    dev = open_device(fake.root, str(tmp_path / "state"))
    wl = {"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 128}
    plan = plan_online(dev, wl, use_runs=False, data_dir=tmp_path / "d")
    assert plan["family_spread_mhz"] is not None  # the plan reports it on every simulated board
    if spread:
        assert plan["prior"] == {"spread": plan["family_spread_mhz"]}
        s = new_search("model", plan["search_levels_mhz"], plan["centre_mhz"], prior=plan["prior"])
        assert s.state()["prior"]["spread_mhz"] == plan["family_spread_mhz"]
    else:  # calibrated: the search is given nothing new
        assert plan["prior"] is None
    hill = plan_online(dev, wl, use_runs=False, data_dir=tmp_path / "d", search_kind="hill")
    assert hill["prior"] is None  # the hill climb takes no prior


def test_the_spread_bench_runs(tmp_path):
    from repo_scripts import load

    bench_family_spread = load("bench/bench_family_spread.py")

    out = tmp_path / "fs.json"
    assert bench_family_spread.main(["--seeds", "1", "--minutes", "10", "--length", "told", "--boards", "orin-nx",
                                     "--workloads", "pythia-31m/QQP", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["search"] for r in rows} == {"spread", "no spread"} and len(rows) == 6
    assert all(r["design"][1] == 510.0 for r in rows if r["search"] == "spread")

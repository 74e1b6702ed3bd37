"""Issue 51: every fit of a board's calibration earns its place (pydvfs.policy.board_calibration.gated_fit):
a curve the board's family cannot follow, knobs pushed to a bound by a loose fit, too few clocks,
a partial run or a record repeated are never a calibration, nor can one record pull the rest."""
from __future__ import annotations

import pytest

from pydvfs.policy.board_calibration import (
    MAX_RMS,
    FitRejected,
    calibrated_choice,
    calibrated_points,
    fit,
    gated_fit,
    new_calibration,
    predict,
    refit,
    run_group,
    sim_run_for,
)
from pydvfs.sim.uncertainty import held_out
from pydvfs.workload import Workload

BOARD = "orin-nano-super"
CLOCKS = (1020.0, None, 306.0, 510.0, 714.0)  # calibrate's design for bert-base on this board
BERT = Workload.from_any({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3})
RUN = sim_run_for(BERT)
TRUE = dict(held_out(BOARD, 0).knobs)


def curve(knobs=TRUE, run=RUN, clocks=CLOCKS):
    return predict(BOARD, knobs, run, clocks)


def record(points: dict, workload: Workload, partial=False):
    return {"workload": workload.to_dict(), "partial": partial, "measure": "module",
            "probes": [{"freq_mhz": f, "j_per_step": j, "s_per_step": s} for f, (j, s) in points.items()]}


def test_a_curve_whose_steps_do_not_follow_the_clock_is_rejected_in_one_line():
    """The tester's command (steps at a constant rate whatever the GPU does) fitted with 47.6 %
    rms error, knobs at bounds, and was stored."""
    true = curve()
    steady = {f: (j / s * 0.01, 0.01) for f, (j, s) in true.items()}  # s/step constant: J/step follows power
    with pytest.raises(FitRejected, match="do not follow the GPU clock") as e:
        fit(BOARD, RUN, steady)
    assert "\n" not in str(e.value)
    knobs, rms = fit(BOARD, RUN, true)  # the board's own curve: kept
    assert rms < 0.01


def test_too_few_clocks_and_a_partial_run_never_calibrate():
    true = curve()
    with pytest.raises(FitRejected, match="only 2 distinct GPU clocks"):
        fit(BOARD, RUN, {f: true[f] for f in (1020.0, 510.0, None)})
    two = {f: true[f] for f in (510.0, 1020.0)}
    assert run_group(record(two, BERT), [306.0, 510.0, 714.0, 1020.0]) is not None
    assert run_group(record(true, BERT, partial=True), list(CLOCKS[2:]) + [1020.0]) is None  # Ctrl-C'd


def test_a_knob_pushed_to_its_bound_by_a_loose_fit_is_rejected():
    from pydvfs.policy.board_calibration import BOUND_RMS, fit_rejection

    groups = [(RUN, curve(), "module")]
    assert fit_rejection(groups, {**TRUE, "static": 0.6}, (BOUND_RMS + MAX_RMS) / 2) is not None
    assert fit_rejection(groups, {**TRUE, "static": 0.6}, BOUND_RMS / 2) is None  # a tight fit says it lies there
    assert fit_rejection(groups, TRUE, (BOUND_RMS + MAX_RMS) / 2) is None


def test_one_record_cannot_outvote_the_rest_and_repeats_are_one_vote():
    """A per-run refit took a record with 369.5 % rms error; one record given N times counted N."""
    levels = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0]
    cal = new_calibration(BOARD, *fit(BOARD, RUN, curve()), BERT, curve(), "module")
    other = Workload.from_any({"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 40.0})
    good = record(curve(run=sim_run_for(other)), other)
    wild = record({f: (j * (5.0 if f and f < 600 else 1.0), s) for f, (j, s) in curve(run=sim_run_for(other)).items()},
                  Workload.from_any({"model": "bert", "layers": 24, "hidden": 1024, "seq_len": 30.0}))
    kept, left = refit(cal, [good, wild])
    assert left == 1 and kept.online_runs == 1 and kept.rms_log_error <= MAX_RMS
    for w in (BERT, other):  # the decisions are the calibration's, as without the wild record
        assert calibrated_choice(kept, w, levels) == calibrated_choice(cal, w, levels)
    again, _ = refit(cal, [good, good, good])
    assert again.online_runs == 1 and again.measurements == len(cal.points) + len(good["probes"])
    with pytest.raises(FitRejected):
        gated_fit(BOARD, [run_group(wild, levels)])  # alone, it is no calibration either


def test_no_record_moves_a_calibrated_decision_by_itself_and_two_that_agree_do():
    """A plausible record (fits well on its own: another member of the family) moved the
    calibrated decisions alone; now a change needs two fitted runs that fit better with it."""
    from pydvfs.sim.uncertainty import member

    levels = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0]
    cal = new_calibration(BOARD, *fit(BOARD, RUN, curve()), BERT, curve(), "module")
    elsewhere = {**TRUE, **dict(member(BOARD, "corner-up").knobs)}
    ws = [Workload.from_any({"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 40.0}),
          Workload.from_any({"model": "bert", "layers": 24, "hidden": 1024, "seq_len": 30.0})]
    recs = [record(curve(knobs=elsewhere, run=sim_run_for(w)), w) for w in ws]
    with pytest.raises(FitRejected, match="one run alone would move the calibrated clock .* until another run agrees"):
        refit(cal, recs[:1])
    both, _ = refit(cal, recs)
    assert [calibrated_choice(both, w, levels) for w in ws] != [calibrated_choice(cal, w, levels) for w in ws]


def test_the_fit_moves_the_cpu_rail_and_the_vf_top_and_a_format_1_calibration_still_reads():
    """Issue 51: the family gained the CPU rail's busy power and the V/f top (`cpu`, `vf_top`), the
    fit did not: on the independent cpu-heavy Orin Nano Super (not the simulator) under CPU+GPU
    energy, the five-knob fit of bert-base's curve chose 510 MHz for workloads whose least is at
    612 (+2.6 %). Fitting the seven, within 1 %; a stored format-1 calibration (five knobs) still
    reads, the other two at the default's."""
    import independent_nano as nano

    from pydvfs.policy.board_calibration import FORMAT_V1, check_calibration, fit_groups
    from pydvfs.sim.uncertainty import ESTIMATE_RANGES

    p, levels = nano.PHYSICS["cpu-heavy"], list(nano.LEVELS)
    c = nano.curve(p, "bert-base", "SST-2")
    points = {f: (c.energy_j["cpu-gpu"][f], nano.step(p, "bert-base", "SST-2", f).t_s) for f in (510.0, 612.0, 714.0, 1020.0)}
    points[None] = (c.maxn_j["cpu-gpu"], nano.step(p, "bert-base", "SST-2", nano.maxn_clock(p, "bert-base", "SST-2")).t_s)
    group = [(sim_run_for(Workload.from_any(c.workload)), points, "cpu-gpu")]
    seven, five = (new_calibration(BOARD, *fit_groups(BOARD, group, r), BERT, points, "cpu-gpu") for r in (None, ESTIMATE_RANGES))
    assert {"cpu", "vf_top"} <= set(seven.knobs) and seven.knobs["vf_top"] < 1.0 and seven.rms_log_error < five.rms_log_error
    for model, task in (("bert-small", "RTE"), ("pythia-1b", "STS-B")):
        w = nano.curve(p, model, task)
        e = w.energy_j["cpu-gpu"]
        def cost(f):
            return 100.0 * (e[f] / min(e.values()) - 1)

        sims = {k: calibrated_points(cal, Workload.from_any(w.workload), levels, "cpu-gpu")[1] for k, cal in
                (("seven", seven), ("five", five))}  # each simulator's own least
        least = {k: cost(min(levels, key=lambda f, pts=pts: pts[f][0])) for k, pts in sims.items()}
        assert least["seven"] <= 1.0 < 2.0 < least["five"], (w.name, least)
    old = {**five.to_dict(), "format": FORMAT_V1}
    assert set(old["knobs"]) == set(ESTIMATE_RANGES)
    read = check_calibration(old)
    assert read.knobs == {**five.knobs, "cpu": 1.0, "vf_top": 1.0}
    with pytest.raises(ValueError, match="knobs missing"):
        check_calibration({**seven.to_dict(), "knobs": {k: v for k, v in seven.knobs.items() if k != "static"}})
    with pytest.raises(ValueError, match="knobs missing"):  # format 2 with format 1's five knobs
        check_calibration(five.to_dict())


def test_the_fit_starts_from_the_family_corners_too_and_finds_the_basin_the_default_misses():
    """Issue 51: the shape's error has several basins within a few tenths of a % rms of each other.
    On the independent nominal Orin Nano Super (not the simulator) under CPU+GPU energy, the fit
    from bert-base's exact points at 408-714 MHz started from the default alone settled with the
    V/f rise convex from 470 MHz and put 510 MHz 0.1 % above 612 for bert-large/QQP (+2.8 % in
    truth); from the family's corners too it finds the knee near 510 MHz, a tighter fit, and 510."""
    import independent_nano as nano

    from pydvfs.policy.board_calibration import fit_groups

    p, levels = nano.PHYSICS["nominal"], list(nano.LEVELS)
    c = nano.curve(p, "bert-base", "SST-2")
    points = {f: (c.energy_j["cpu-gpu"][f], nano.step(p, "bert-base", "SST-2", f).t_s) for f in (408.0, 510.0, 612.0, 714.0)}
    knobs, rms = fit_groups(BOARD, [(sim_run_for(Workload.from_any(c.workload)), points, "cpu-gpu")])
    cal = new_calibration(BOARD, knobs, rms, BERT, points, "cpu-gpu")
    assert rms < 0.015
    for model, task in (("bert-small", "RTE"), ("bert-large", "QQP"), ("pythia-160m", "CoLA"), ("pythia-1b", "STS-B")):
        w = nano.curve(p, model, task)
        assert calibrated_choice(cal, Workload.from_any(w.workload), levels, "cpu-gpu") == 510.0 == \
            min(levels, key=w.energy_j["cpu-gpu"].get)

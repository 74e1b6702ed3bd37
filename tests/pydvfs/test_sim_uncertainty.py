"""The uncertainty family per board (pydvfs/sim/uncertainty.py, docs/sim.md "Uncertainty family")."""
import pytest

from pydvfs.device import table as boards
from pydvfs.errors import InvalidValueError
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.model import default_params, idle_board_power_w, operating_point
from pydvfs.sim.perturbed import perturbed_params
from pydvfs.sim.profiles import profile
from pydvfs.sim.uncertainty import (
    CALIBRATED_RANGES,
    ESTIMATE_RANGES,
    family,
    held_out,
    member,
    optimum_spread,
    ranges,
)


def test_the_calibrated_board_has_the_narrow_family():
    assert ranges("agx-orin") == CALIBRATED_RANGES
    assert ranges("orin-nano-super") == ESTIMATE_RANGES
    for knob, (lo, hi) in CALIBRATED_RANGES.items():
        elo, ehi = ESTIMATE_RANGES[knob]
        assert elo <= lo < hi <= ehi, knob


def test_the_family_moves_the_module_energy_optimum_of_an_estimate_not_of_the_calibrated_board():
    lo, hi = optimum_spread("orin-nano-super")
    levels = boards.board("orin-nano-super").gpu_levels_mhz
    # from below the default's optimum to the top of the table: the emulator is inside
    assert levels.index(hi) - levels.index(lo) >= 3 and hi == levels[-1]
    lo, hi = optimum_spread("agx-orin")
    orin = boards.board("agx-orin").gpu_levels_mhz
    assert orin.index(hi) - orin.index(lo) <= 1


@pytest.mark.parametrize("board", ["orin-nano-super", "orin-nx", "nano", "agx-xavier", "thor", "agx-orin"])
def test_every_member_stays_within_the_boards_published_power_budgets(board):
    """The public facts that bound the family: the idle module fits under the lowest power mode's
    budget, a GPU-bound workload at the top clock under the top mode's."""
    prof, row = profile(board), boards.board(board)
    w = get_workload("bert-base", "QNLI")
    for m in family(board) + [held_out(board, s) for s in range(3)]:
        p = m.params()
        assert boards.energies(idle_board_power_w(p, board), row)["module"] < prof.tdp_low_w, m.name
        top = operating_point(w, "fixed", prof.top_mhz, p, board=board)
        assert top.role_power_w["module"] < prof.tdp_top_w, m.name


def test_held_out_members_are_drawn_inside_the_ranges_and_are_not_trained_on():
    a, b = held_out("orin-nx", 7), held_out("orin-nx", 7)
    assert a == b and a != held_out("orin-nx", 8)
    names = {m.name for m in family("orin-nx")}
    assert a.name not in names and member("orin-nx", a.name) == a
    for knob, value in a.knobs:
        lo, hi = ESTIMATE_RANGES[knob]
        assert lo <= value <= hi
    assert a.knobs not in {m.knobs for m in family("orin-nx")}


def test_a_member_is_a_perturbation_for_the_joint_replay():
    m = member("orin-nano-super", "static-high")
    base = perturbed_params(family("orin-nano-super")[0])
    assert perturbed_params(m).soc_base_w == pytest.approx(base.soc_base_w * ESTIMATE_RANGES["static"][1])
    assert m.params() == perturbed_params(m)


def test_an_unknown_member_is_a_clear_error():
    with pytest.raises(InvalidValueError, match="no member 'hot' in the nano family"):
        member("nano", "hot")


def test_the_unfitted_knobs_are_the_familys_not_the_calibrations():
    """Issue 51 item 4: the CPU rail's busy power and the V/f top move in an estimate board's family
    (and in held-out-wide members, the other knobs keeping their held-out values), not in the
    calibrated board's, and a calibration's knobs stay the five it fits."""
    from pydvfs.sim.uncertainty import UNFITTED_ESTIMATE_RANGES

    names = {m.name for m in family("orin-nano-super")}
    assert {"cpu-high", "cpu-low", "vf_top-low", "corner-cpu", "corner-host"} <= names
    assert "vf_top-high" not in names  # its high edge is the default
    assert not {n for n in (m.name for m in family("agx-orin")) if n.startswith(("cpu", "vf_top", "corner-cpu"))}
    wide, narrow = held_out("orin-nano-super", 3, unfitted=True), held_out("orin-nano-super", 3)
    assert wide.knobs[:len(narrow.knobs)] == narrow.knobs and member("orin-nano-super", wide.name) == wide
    extra = dict(wide.knobs[len(narrow.knobs):])
    assert set(extra) == set(UNFITTED_ESTIMATE_RANGES) and set(ranges("orin-nano-super")) == set(ESTIMATE_RANGES)
    p, base = member("orin-nano-super", "corner-cpu").params(), default_params()
    assert p.cpu_thread_w == pytest.approx(base.cpu_thread_w * 3.0) and p.v_max_mv < base.v_max_mv

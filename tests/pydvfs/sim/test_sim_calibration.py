"""The stored calibration meets its stated bounds (docs/sim-calibration.md)."""
import pytest

from pydvfs.sim import paper_fit as cal
from pydvfs.sim.model import default_params
from pydvfs.sim.paper_fit_params import CALIBRATION_RUNS


@pytest.fixture(scope="module")
def params():
    return default_params()


@pytest.mark.parametrize("run", cal.REAL_RUNS, ids=lambda r: r.name)
def test_real_orin_curves_within_bounds(run, params):
    fit = cal.fit_run(run, params, CALIBRATION_RUNS[run.name]["host_ms_per_step"])
    assert fit.rms <= cal.BOUND_CURVE_RMS
    assert fit.max_abs <= cal.BOUND_CURVE_MAX
    bound = cal.BOUND_MAXN_EXCEPTIONS.get(run.name, cal.BOUND_MAXN)
    assert abs(fit.maxn_rel_err) <= bound
    # the fitted length is the one stored by the tool
    assert fit.scale == pytest.approx(CALIBRATION_RUNS[run.name]["scale_steps"], rel=1e-3)


def test_real_orin_curve_shape(params):
    """Same best clock (within one OPP) as the published DeBERTa curves; Gemma stays near top under MAXN."""
    for run in cal.REAL_RUNS[:2]:
        fit = cal.fit_run(run, params, CALIBRATION_RUNS[run.name]["host_ms_per_step"])
        real_best = min(run.energy_j, key=run.energy_j.get)
        sim_best = min(fit.sim_j, key=fit.sim_j.get)
        assert abs(real_best - sim_best) <= 102
    gem = cal.REAL_RUNS[2]
    fit = cal.fit_run(gem, params, CALIBRATION_RUNS[gem.name]["host_ms_per_step"])
    assert abs(fit.sim_maxn_clock_mhz - gem.maxn_clock_mhz) < 30


def test_paper_findings(params):
    curves = cal.paper_curves(params)
    f = cal.findings(curves)
    assert f["u_shaped"]
    assert f["mean_saving_big_pct"] > 22.0
    assert f["share_opt_in_510_816"] >= 0.9
    assert 510 <= f["opt_min_mhz"] and f["opt_max_mhz"] <= 1122
    assert len(f["optimal_levels_mhz"]) >= 3  # one fixed clock is not optimal for all
    assert f["min_power_r2"] > 0.9  # power ~ proportional to clock
    # small models vary more: their savings spread wider than the large models'
    assert f["min_saving_small_pct"] < f["min_saving_big_pct"] - 10

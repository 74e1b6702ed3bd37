"""The one curve model: fits recover known curves, uncertainty grows with noise, the argmin and
the within-noise set are over the board's table (11 or 13 levels)."""
import numpy as np
import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.model import curve as cm

L11 = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
L13 = tuple(114.75 + 102.0 * i for i in range(12)) + (1300.5,)


def truth(f_mhz, a=2.0, b=1.0, p0=8.0, c=20.0, vf=cm.DEFAULT_VF):
    f = np.asarray(f_mhz, float) / 1000.0
    t = a / f + b
    p = p0 + c * f * vf.voltage_v(f * 1000.0) ** 2
    return t, p


def sweep(levels, repeats=3, cv=0.0, seed=0, **kw):
    rng = np.random.default_rng(seed)
    f = np.repeat(levels, repeats)
    t, p = truth(f, **kw)
    return f, t * (1 + cv * rng.standard_normal(len(f))), p * (1 + cv * rng.standard_normal(len(f)))


@pytest.mark.parametrize("levels", [L11, L13])
def test_noise_free_fit_recovers_the_constants_and_the_argmin(levels):
    f, t, p = sweep(levels, repeats=1)
    fit = cm.fit_time_power(f, t, p)
    assert (fit.a, fit.b, fit.p0, fit.c) == pytest.approx((2.0, 1.0, 8.0, 20.0), rel=1e-6)
    e_true = truth(levels)[0] * truth(levels)[1]
    assert fit.curve.argmin_mhz(levels) == levels[int(np.argmin(e_true))]
    assert np.allclose(fit.curve.energy_j(levels), e_true, rtol=1e-6)
    assert fit.curve.regret(fit.curve.argmin_mhz(levels), levels) == 0.0
    assert fit.curve.within_noise_mhz(levels) == (fit.curve.argmin_mhz(levels),)


def test_energy_is_the_product_of_time_and_power_in_the_basis():
    f, t, p = sweep(L11, repeats=2, cv=0.02, seed=3)
    fit = cm.fit_time_power(f, t, p)
    assert np.allclose(fit.curve.energy_j(L11), fit.time_s(L11) * fit.power_w(L11))


def test_noise_widens_the_within_noise_set_and_the_std():
    quiet = cm.fit_time_power(*sweep(L11, repeats=3, cv=0.002, seed=1)).curve
    noisy = cm.fit_time_power(*sweep(L11, repeats=3, cv=0.05, seed=1)).curve
    assert noisy.energy_std_j(L11).mean() > 5 * quiet.energy_std_j(L11).mean()
    assert len(noisy.within_noise_mhz(L11)) >= len(quiet.within_noise_mhz(L11))
    assert noisy.argmin_mhz(L11) in noisy.within_noise_mhz(L11)
    pb = noisy.p_best(L11, n=300, seed=0)
    assert sum(pb.values()) == pytest.approx(1.0)
    assert max(pb, key=pb.get) in noisy.within_noise_mhz(L11)


def test_fitted_argmin_beats_raw_argmin_on_noisy_sweeps():
    """Over many noisy sweeps the fitted curve's argmin costs less (on the true curve) than the
    raw points' argmin: the reason labels come from the fit."""
    e_true = np.prod(truth(L11), axis=0)
    fit_reg, raw_reg = [], []
    for seed in range(40):
        f, t, p = sweep(L11, repeats=1, cv=0.03, seed=seed)
        c = cm.fit_time_power(f, t, p).curve
        fit_reg.append(e_true[L11.index(c.argmin_mhz(L11))] / e_true.min() - 1)
        raw_reg.append(e_true[int(np.argmin(t * p))] / e_true.min() - 1)
    assert np.mean(fit_reg) < np.mean(raw_reg)


def test_energy_only_fit_matches_the_time_power_fit_without_noise():
    f, t, p = sweep(L13, repeats=1)
    c = cm.fit_energy(f, t * p)
    assert np.allclose(c.energy_j(L13), t * p, rtol=1e-4)
    assert c.argmin_mhz(L13) == L13[int(np.argmin(t * p))]


def test_energy_fit_with_a_prior_uses_few_points():
    prior = cm.fit_time_power(*sweep(L11, repeats=1)).curve
    # The same shape at twice the energy, measured at two clocks only.
    f = np.array([1300.5, 1122.0])
    e = 2 * np.prod(truth(f), axis=0)
    c = cm.fit_energy(f, e, prior=prior)
    assert c.argmin_mhz(L11) == prior.argmin_mhz(L11)
    assert np.allclose(c.energy_j(L11), 2 * prior.energy_j(L11), rtol=0.02)
    assert np.all(np.isfinite(c.energy_std_j(L11)))
    with pytest.raises(InvalidValueError):
        cm.fit_energy(f, e)  # two clocks and no prior: not enough


def test_known_sigma_gives_an_uncertainty_without_residual_dof():
    f = np.array(L11[2:6])
    e = np.prod(truth(f), axis=0)
    c = cm.fit_energy(f, e, sigma_j=0.01 * e)
    assert np.all(np.isfinite(c.energy_std_j(L11))) and np.all(c.energy_std_j(L11) > 0)


def test_roundtrip_and_bad_input():
    c = cm.fit_time_power(*sweep(L11, cv=0.01)).curve
    d = c.to_dict()
    back = cm.EnergyCurve.from_dict(d)
    assert np.allclose(back.energy_j(L11), c.energy_j(L11))
    with pytest.raises(InvalidValueError):
        cm.fit_time_power([500, 600], [1, 1], [1, 1])
    with pytest.raises(InvalidValueError):
        cm.VFCurve((1.0, 0.5), (0.6, 0.7))
    with pytest.raises(InvalidValueError):
        cm.EnergyCurve.from_dict({"coef": [1, 2], "cov": [[0]]})


def test_point_cv():
    cv = cm.point_cv([500, 500, 600], [1.0, 1.2, 3.0])
    assert cv[500.0] == pytest.approx(np.std([1.0, 1.2], ddof=1) / 1.1)
    assert np.isnan(cv[600.0])

import numpy as np
import pandas as pd

from pydvfs.roofline import decomposition, speedup


def test_laws_are_one_at_one_device():
    assert speedup.tp_saturating(1, 5.0, 2.0) == 1.0
    assert speedup.amdahl_generalised(1, 0.9, 0.02, 1.5) == 1.0
    assert speedup.usl(1, 0.1, 0.01) == 1.0


def test_fit_recovers_amdahl_parameters():
    n = np.array([1, 2, 3, 4, 5, 6, 7, 8], float)
    s = speedup.amdahl_generalised(n, 0.95, 0.01, 1.5)
    f = speedup.fit_law(n, s, "amdahl_gen", "fsdp")
    assert f.rmse < 1e-6
    assert abs(f.params["p"] - 0.95) < 1e-3 and abs(f.params["g"] - 1.5) < 1e-2


def test_fit_recovers_saturating_exponential():
    n = np.arange(1, 9, dtype=float)
    s = speedup.tp_saturating(n, 3.0, 2.5)
    f = speedup.fit_law(n, s, "saturating_exp", "tp")
    assert abs(f.params["s_max"] - 3.0) < 1e-3 and abs(f.params["n_half"] - 2.5) < 1e-3
    assert f.curve[1] == 1.0


def test_nnls_decomposition_and_regimes():
    rng = np.random.default_rng(3)
    c = rng.uniform(1e12, 1e14, 200)
    m = rng.uniform(1e8, 1e10, 200)
    e = 2e-12 * c + 3e-8 * m + 15.0
    df = pd.DataFrame({"compute": c, "memory": m, "energy_j": e})
    d = decomposition.fit(df)
    assert abs(d.eps_comp_j / 2e-12 - 1) < 1e-6 and abs(d.eps_mem_j / 3e-8 - 1) < 1e-6
    assert abs(d.e0_j - 15.0) < 1e-4 and d.r2 > 0.999999
    expected_compute = int(np.sum(2e-12 * c >= 3e-8 * m))
    assert d.n_compute_bound == expected_compute and 0 < expected_compute < 200
    assert abs(d.ridge_intensity - 3e-8 / 2e-12) < 1e-3 * 1.5e4


def test_nnls_keeps_coefficients_non_negative():
    rng = np.random.default_rng(4)
    c = rng.uniform(1, 10, 50)
    m = rng.uniform(1, 10, 50)
    df = pd.DataFrame({"compute": c, "memory": m, "energy_j": 100.0 - 5 * c + 0 * m + 60})
    d = decomposition.fit(df)
    assert d.eps_comp_j >= 0 and d.eps_mem_j >= 0 and d.e0_j >= 0

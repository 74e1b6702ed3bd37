"""The paper's claims on the simulated node: the eta law beats the plain power law and recovers
the simulator's known exponents within its confidence intervals."""
import json

import numpy as np
import pytest

from pydvfs.roofline import law, multigpu_sim, pipeline
from pydvfs.roofline import sweep_csv as dataset


def _frame(seed):
    return dataset.add_proxies(dataset.validate(dataset.from_native(multigpu_sim.sweep(seed=seed))))


@pytest.fixture(scope="module")
def sim0():
    return _frame(0)


def test_sweep_shape_is_like_the_paper(sim0):
    assert len(sim0) == 410
    assert set(sim0["strategy"]) == {"single", "tp", "fsdp"}
    assert set(sim0["n_devices"]) == {1, 2, 4, 8}
    assert sim0["arch"].nunique() >= 40
    for col in ("layers", "hidden", "heads", "ff", "seq_len", "batch"):
        assert sim0[col].nunique() >= 2, col
    # deterministic with a seed, different across seeds
    again = multigpu_sim.sweep(seed=0)
    assert np.array_equal(again["energy_j"].to_numpy(), sim0["energy_j"].to_numpy())
    assert not np.array_equal(multigpu_sim.sweep(seed=1)["energy_j"].to_numpy()[:20],
                              sim0["energy_j"].to_numpy()[:20])


def test_simulator_energy_is_power_times_gpu_seconds(sim0):
    raw = multigpu_sim.sweep(seed=0, energy_noise=0.0, time_noise=0.0, arch_noise=0.0)
    assert np.allclose(raw["energy_j"], raw["power_w"] * raw["n_devices"] * raw["time_s"])
    # communication makes parallel runs less than perfectly efficient
    par = raw[raw["n_devices"] > 1]
    assert (par["speedup"] < par["n_devices"]).all()


def test_eta_law_beats_baseline_by_0_07_adjusted_r2(sim0):
    base = law.fit(sim0, law.LAWS["baseline"])
    eta = law.fit(sim0, law.LAWS["eta"])
    assert eta.adj_r2 - base.adj_r2 >= 0.07
    assert eta.cv_r2 - base.cv_r2 >= 0.07
    assert eta.rmse_log < base.rmse_log


def test_known_exponents_within_confidence_intervals():
    # 95 % CIs: over ten seeds each known value must be covered at least 8 times (with correct
    # CIs, 3+ misses out of 10 happen about 1 % of the time); and seed 0, the CLI default, all.
    hits = {k: 0 for k in ("a_C", "a_M", "a_eta")}
    for seed in range(10):
        fit = law.fit(_frame(seed), law.LAWS["eta"], cv_folds=3)
        for k, v in pipeline.known_check(fit).items():
            if k in hits:
                hits[k] += v["within_ci"]
    assert all(h >= 8 for h in hits.values()), hits


def test_fit_cli_on_simulated_sweep(tmp_path, run_cli):
    csv = tmp_path / "sim.csv"
    rc, out, err = run_cli("roofline", "simulate", "--out", csv)
    assert rc == 0 and csv.exists(), err
    rc, out, err = run_cli("roofline", "fit", "--data", csv, "--json", "--plot", tmp_path / "plots",
                           "--save", tmp_path / "fit.json")
    assert rc == 0, err
    res = json.loads(out)
    g = res["groups"]["bert/rtx2080ti-sim"]
    s = g["summary"]
    assert s["eta_adj_r2"] - s["baseline_adj_r2"] >= 0.07
    assert {"baseline_cv_r2", "eta_cv_r2", "improved_cv_r2"} <= set(s)
    eta = g["laws"]["eta"]["coefficients"]["log_eta"]
    assert eta["ci_low"] < -0.9 and eta["ci_high"] > -1.1
    assert {f["strategy"] for f in g["speedup_laws"]} == {"tp", "fsdp"}
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    for stem in ("pred_vs_measured", "roofline", "speedup"):
        assert any(n.startswith(stem) and n.endswith(".png") for n in names), stem
        assert any(n.startswith(stem) and n.endswith(".svg") for n in names), stem
    # predict from the saved fit: FSDP on 4 GPUs with the fitted speedup law
    rc, out, err = run_cli("roofline", "predict", "--fit", tmp_path / "fit.json", "--law", "eta",
                           "--layers", 12, "--hidden", 768, "--seq-len", 128, "--batch", 32,
                           "--steps", 50, "--strategy", "fsdp", "--devices", 4, "--json")
    assert rc == 0, err
    p = json.loads(out)
    assert p["energy_j"] > 0 and 0 < p["eta"] < 1 and p["speedup_source"].startswith("fitted")
    rc1, out1, _ = run_cli("roofline", "predict", "--fit", tmp_path / "fit.json", "--law", "eta",
                           "--layers", 12, "--hidden", 768, "--seq-len", 128, "--batch", 32,
                           "--steps", 50, "--strategy", "fsdp", "--devices", 4, "--speedup", 2.0, "--json")
    # less efficiency, more energy (a_eta < 0): eta 0.5 against the fitted one
    e_half = json.loads(out1)["energy_j"]
    assert (e_half > p["energy_j"]) == (0.5 < p["eta"])

"""The analysis reads the dataset the simulated sweep writes (docs/dataset.md) as it is."""
import json

import pytest

from pydvfs import cli

pytest.importorskip("pydvfs.sim")


def test_sweet_spots_agree_with_the_sweep_and_power_modes_are_baselines(capsys, tmp_path):
    data = tmp_path / "sweep.csv"
    assert cli.main(["sweep", "--sim", "--out", str(data), "--models", "bert-base", "pythia-70m",
                     "--tasks", "SST-2", "--repeats", "2", "--power-modes", "30w", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best_mhz"]
    assert cli.main(["analyse", str(data), "--out", str(tmp_path / "a"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["energy_column"] == "energy_module_j"  # the module's energy by default, as the sweep's best
    got = {w["workload"]: w for w in res["workloads"]}
    assert set(got) == set(best) == {"bert-base/SST-2", "pythia-70m/SST-2"}
    for name, w in got.items():
        assert w["sweet_spot"] == best[name]
        assert set(w["baselines"]) == {"maxn", "30w"}
        b = w["baselines"]["30w"]
        assert b["savings_pct"] == pytest.approx(100 * (1 - w["sweet_energy_j"] / b["energy_j"]))
        assert w["savings_vs_maxn_pct"] == w["baselines"]["maxn"]["savings_pct"]
        assert w["layers"] > 0 and w["seq_len"] > 0
    assert (tmp_path / "a" / "plots" / "optimal_map.svg").exists()
    assert "savings_vs_30w_pct" in (tmp_path / "a" / "summary.csv").read_text().splitlines()[0]

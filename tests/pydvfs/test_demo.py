"""`pydvfs demo --quick`: the main job end to end, ending in a report."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from report_numbers import check_numbers_from_results


def results_online_ok(out) -> bool:
    o = json.loads((out / "results.json").read_text())["online"]
    # the model search ends on a clock whose true (simulated) energy per step is within 1 % of
    # the optimum's (the hill climb stopped up to its 2 % margin plus the noise above it)
    truth = o["simulated_j_per_step"]
    return truth[f"{o['final_mhz']:g}"] <= 1.01 * truth[f"{o['simulated_optimum_mhz']:g}"]


def test_demo_quick_writes_a_report(cli, tmp_path):
    out = tmp_path / "demo"
    res = cli("demo", "--quick", "--out", str(out), "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    assert "[demo] --- evaluate ---" in res.stderr  # progress on stderr
    assert summary["stages"] == ["board", "characterise", "train", "evaluate", "governed_run", "online",
                                 "real_data", "roofline", "replication"]
    # the summary and the replication ledger show only numbers of this run's results.json
    assert check_numbers_from_results(out) > 100
    assert results_online_ok(out)
    results = json.loads((out / "results.json").read_text())
    ev = results["evaluate"]["summary"]
    assert ev["mlg"]["mean_saving_pct"] > 0 and ev["mlg"]["share_of_oracle"] > 0.5
    tr = results["train"]
    assert tr["shipped"] in ("tree", "ffg") and tr["ship_reason"] and tr["noise"]["n_workloads"] > 0
    assert any(r["name"].startswith("roofline model") and r["lomo_mean_regret_pct"] >= 0 for r in tr["table"])
    gov = results["governed_run"]
    assert gov["runs"]["mlg"]["energy_cpu_gpu_j"] < gov["runs"]["maxn"]["energy_cpu_gpu_j"]
    assert gov["runs"]["maxn"]["samples"] > 100
    md = (out / "report.md").read_text()
    for section in ("Characterisation", "frequency model", "Evaluation on unseen tasks", "governed run", "online governor",
                    "real measurements", "roofline", "honest selection"):
        assert section in md
    for line in md.splitlines():  # every picture the report shows exists
        if line.startswith("!["):
            assert (out / line.split("](", 1)[1].rstrip(")")).is_file(), line
    assert "](ucurves/plots/bert-base_SST-2.png)" in md and "](real/perseus_gpt3_a100/plots/" in md
    assert (out / "report.html").read_text().count("<img") >= 8

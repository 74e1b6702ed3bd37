"""``pydvfs analyse`` end to end: files written, --json shape, one-line errors with exit 2."""
import json
import os

import numpy as np
import pandas as pd
import pytest

from pydvfs import cli

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "pydvfs", "data", "real")


@pytest.fixture(autouse=True)
def only_analyse(monkeypatch):
    # Build the real parser with just this verb, so the test does not depend on other verbs.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["pydvfs.cli.analyse"])


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def native_csv(path):
    """A sweep in the dataset's layout: two workloads, repeats, MAXN rows, a failed run."""
    rows = []
    for wl, layers, seq, scale in (("bert-base/sst2", 12, 24.0, 1.0), ("bert-small/rte", 4, 60.0, 0.3)):
        for rep in range(2):
            for f in (306, 510, 714, 918, 1122, 1300.5):
                t = scale * (600 / f + 0.5)
                p = 0.02 * f + 6 + 0.1 * rep
                rows.append(dict(workload=wl, model=wl.split("/")[0], layers=layers, seq_len=seq,
                                 freq_mhz=f, setting="fixed", repeat=rep, duration_s=t,
                                 energy_cpu_gpu_j=t * p, energy_j_VDD_GPU_SOC=0.7 * t * p,
                                 avg_power_w=p + 3, exit_status=0))
            rows.append(dict(workload=wl, model=wl.split("/")[0], layers=layers, seq_len=seq,
                             freq_mhz=np.nan, setting="maxn", repeat=rep, duration_s=scale * 1.0,
                             energy_cpu_gpu_j=scale * 40.0, energy_j_VDD_GPU_SOC=scale * 28.0,
                             avg_power_w=43.0, exit_status=0))
    rows.append(dict(rows[0], repeat=9, energy_cpu_gpu_j=1.0, exit_status=137))
    pd.DataFrame(rows).to_csv(path, index=False)


def test_native_sweep_with_plots_and_map(capsys, tmp_path):
    data = tmp_path / "sweep.csv"
    native_csv(data)
    out = tmp_path / "out"
    rc, _, err = run(capsys, "analyse", str(data), "--out", str(out), "--json")
    assert rc == 2 and "no module energy" in err and "--energy cpu-gpu" in err  # a CPU+GPU-only sweep
    rc, stdout, _ = run(capsys, "analyse", str(data), "--out", str(out), "--json", "--energy", "cpu-gpu")
    assert rc == 0
    res = json.loads(stdout)
    assert res["energy_column"] == "energy_cpu_gpu_j" and res["knob"] == "freq_mhz"
    assert [w["workload"] for w in res["workloads"]] == ["bert-base/sst2", "bert-small/rte"]
    w = res["workloads"][0]
    assert w["sweet_spot"] == 510 and w["n_runs"] == 14  # the exit_status 137 run is dropped
    assert w["savings_vs_maxn_pct"] == pytest.approx(100 * (1 - w["sweet_energy_j"] / 40.0))
    assert w["layers"] == 12 and w["seq_len"] == 24.0
    for name in ("summary.json", "summary.csv", "curves.csv"):
        assert (out / name).stat().st_size > 0
    for stem in ("bert-base_sst2", "bert-small_rte", "optimal_map"):
        for ext in ("png", "svg"):
            p = out / "plots" / f"{stem}.{ext}"
            assert p.stat().st_size > 1000, p
    assert (out / "plots" / "optimal_map.png").read_bytes()[:4] == b"\x89PNG"
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["sweet_spot"]) == [510, 510]
    assert {"time_fit_r2", "power_fit_slope", "flags"} <= set(summary.columns)
    curves = pd.read_csv(out / "curves.csv")
    assert len(curves) == 12 and set(curves["n"]) == {2}
    # another energy column: the GPU rail alone
    rc, stdout, _ = run(capsys, "analyse", str(data), "--out", str(out), "--json", "--no-plots",
                        "--energy-column", "energy_j_VDD_GPU_SOC")
    assert rc == 0 and json.loads(stdout)["energy_column"] == "energy_j_VDD_GPU_SOC"


def test_perseus_text_output(capsys, tmp_path):
    path = os.path.join(REAL, "perseus_sosp24", "gpt3-175b+a100_sxm_bf16.csv")
    rc, stdout, _ = run(capsys, "analyse", path, "--out", str(tmp_path), "--perseus-by", "total")
    assert rc == 0
    assert "1 workloads (perseus" in stdout and "gpt3-175b+a100_sxm_bf16/total" in stdout
    assert "1080MHz" in stdout and "27.1" in stdout
    assert (tmp_path / "plots" / "gpt3-175b_a100_sxm_bf16_total.svg").exists()
    assert not (tmp_path / "plots" / "optimal_map.png").exists()  # no layers/seq_len here


def test_zeus_selected_workloads(capsys, tmp_path):
    path = os.path.join(REAL, "zeus_nsdi23", "summary_power_a40.csv")
    rc, stdout, _ = run(capsys, "analyse", path, "--out", str(tmp_path), "--json", "--no-plots",
                        "--workloads", "*/squad/bert*")
    assert rc == 0
    res = json.loads(stdout)
    assert res["format"] == "zeus" and res["knob"] == "power_limit_w" and res["n_workloads"] == 8
    assert all(175 <= w["sweet_spot"] <= 200 for w in res["workloads"])


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--energy-column", "energy_gpu_j"], "no column 'energy_gpu_j'"),
        (["--workloads", "nothing*"], "no workload matches"),
        (["--noise-floor-pct", "-1"], "--noise-floor-pct"),
        (["--noise-sigmas", "inf"], "finite number"),  # was taken: no wiggle ever counted
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, extra, msg):
    data = tmp_path / "sweep.csv"
    native_csv(data)
    rc, stdout, err = run(capsys, "analyse", str(data), "--out", str(tmp_path / "o"), "--energy", "cpu-gpu", *extra)
    assert rc == 2 and stdout == "" and err.count("\n") == 1 and msg in err


def test_missing_file_and_mixed_formats(capsys, tmp_path):
    rc, _, err = run(capsys, "analyse", str(tmp_path / "none.csv"), "--out", str(tmp_path))
    assert rc == 2 and "no such file" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "analyse", os.path.join(REAL, "zeus_nsdi23", "summary_power_a40.csv"),
                     os.path.join(REAL, "perseus_sosp24", "bloom+a40_bf16.csv"), "--out", str(tmp_path))
    assert rc == 2 and "mix formats" in err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    rc, _, err = run(capsys, "analyse", str(bad), "--out", str(tmp_path))
    assert rc == 2 and "no energy_module_j or energy_cpu_gpu_j column" in err

import json

import pandas as pd


def test_sweep_sim_writes_dataset_and_plots(cli, tmp_path):
    out, plots = tmp_path / "d.csv", tmp_path / "plots"
    res = cli("sweep", "--sim", "--json", "--out", str(out), "--plot", str(plots),
              "--models", "bert-base", "--tasks", "MRPC", "--repeats", "2")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["rows"] == 24  # 11 clocks + MAXN, 2 repeats
    df = pd.read_csv(out)
    assert len(df) == 24 and set(df["source"]) == {"sim"}
    assert {p.suffix for p in plots.iterdir()} == {".png", ".svg"}
    assert 510 <= summary["best_mhz"]["bert-base/MRPC"] <= 816


def test_sweep_sim_bad_input(cli, tmp_path):
    for args in (["sweep", "--sim"],
                 ["sweep", "--sim", "--out", str(tmp_path / "x.csv"), "--models", "bert-huge"],
                 ["sweep", "--sim", "--out", str(tmp_path / "x.csv"), "--", "echo"]):
        res = cli(*args)
        assert res.returncode == 2, args
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr

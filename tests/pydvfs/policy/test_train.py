"""Training: labels, leave-one-out selection by regret, the comparison table, the model folder."""
from __future__ import annotations

import json
import pickle

import pytest
import synthetic

from pydvfs.errors import InvalidValueError
from pydvfs.policy.curves import curves_from_frame, read_dataset
from pydvfs.policy.train import FixedClock, loocv, score


def test_curves_and_labels(syn_csv):
    curves = curves_from_frame(read_dataset(syn_csv))
    assert len(curves) == 8 * 5
    for c in curves:
        assert c.best_mhz == synthetic.true_optimum(c.workload.layers, c.workload.seq_len)
        assert c.regret(c.best_mhz) == 0.0
        assert c.saving_vs_maxn(None) == 0.0
        assert c.nearest_mhz(700) == 714.0


def test_ffg_and_loocv(syn_csv):
    curves = curves_from_frame(read_dataset(syn_csv), tasks=["sst2"])
    ffg = FixedClock().fit(curves)
    assert ffg.mhz in curves[0].freqs_mhz
    choices = loocv(FixedClock, curves)
    s = score("ffg", curves, choices)
    assert s.mean_regret_pct >= 0 and 0 <= s.accuracy <= 1


def test_model_folder(trained):
    out, metrics = trained
    for name in ("model.pkl", "meta.json", "metrics.json", "rules.txt", "policy_tree.c", "policy.so",
                 "tree.png", "tree.svg"):
        assert (out / name).is_file(), name
    assert (out / "policy_tree.c").read_text().startswith("/* GENERATED")
    names = [r["name"] for r in metrics["table"]]
    for expected in ("ffg (best fixed clock)", "rules (paper A)", "knn (k=3)", "random forest",
                     "gradient boosting", "curve regression (random forest, argmin)", "oracle (best clock per workload)"):
        assert expected in names
    assert any(n.startswith("tree (paper") for n in names) and any(n.startswith("tree (roofline") for n in names)
    # the synthetic rule is a depth-2 tree on layers and seq_len: LOOCV finds it exactly
    assert metrics["selected"]["mean_regret_pct"] == pytest.approx(0.0, abs=1e-9)
    assert metrics["selected"]["loocv_accuracy"] == 1.0
    oracle = next(r for r in metrics["table"] if r["name"].startswith("oracle"))
    assert all(r["mean_regret_pct"] >= oracle["mean_regret_pct"] for r in metrics["table"])
    meta = json.loads((out / "meta.json").read_text())
    clf = pickle.loads((out / "model.pkl").read_bytes())
    assert meta["classes_mhz"] == [int(c) / 1000.0 for c in clf.classes_]  # classes are kHz
    assert "MHz" in (out / "rules.txt").read_text()


def test_train_cli(cli, syn_csv, tmp_path):
    # one task's 8 workloads: the CLI's path end to end (training itself is test_model_folder's,
    # on 24), at a third of the LOOCV fits
    exclude = ["--exclude-tasks", "qnli,mrpc,rte,cola"]
    out = cli("train", "--data", str(syn_csv), "--out", str(tmp_path / "m"), *exclude, "--json")
    assert out.returncode == 2 and "--energy cpu-gpu" in out.stderr  # the synthetic data is CPU+GPU only
    out = cli("train", "--data", str(syn_csv), "--out", str(tmp_path / "m"), *exclude, "--json",
              "--energy", "cpu-gpu")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["n_workloads"] == 8 and (tmp_path / "m" / "policy.so").is_file()
    assert d["energy_column"] == "energy_cpu_gpu_j"


@pytest.mark.parametrize("args, message", [
    (["--data", "/nonexistent.csv"], "no such dataset"),
    (["--data", "{bad}"], "lacks column"),
    (["--data", "{syn}", "--tasks", "nosuchtask", "--energy", "cpu-gpu"], "no workload"),
])
def test_train_bad_input(cli, syn_csv, tmp_path, args, message):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    args = [a.replace("{bad}", str(bad)).replace("{syn}", str(syn_csv)) for a in args]
    out = cli("train", *args, "--out", str(tmp_path / "m"))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_too_few_workloads(syn_csv, tmp_path):
    from pydvfs.policy.train import train
    curves = curves_from_frame(read_dataset(syn_csv))[:2]
    with pytest.raises(InvalidValueError, match="at least 3"):
        train(curves, tmp_path, source="x")


def test_the_oracle_keeps_maxn_where_no_level_beats_it():
    """The oracle is the best of what a policy can choose, MAXN included: where MAXN used less
    energy than every level, a policy keeping MAXN scored 225 % of an oracle held to the levels."""
    from pydvfs.policy.curves import Curve
    from pydvfs.workload import Workload

    wl = Workload.from_any({"model": "bert", "layers": 2, "hidden": 128, "seq_len": 64})
    levels = (510.0, 612.0, 714.0)
    maxn_best = Curve(wl, "SST-2", 1e6, levels, (10.0, 9.5, 10.2), maxn_energy_j=9.0)
    level_best = Curve(wl, "MRPC", 1e6, levels, (9.5, 9.0, 9.8), maxn_energy_j=10.0)
    assert maxn_best.oracle_mhz is None and level_best.oracle_mhz == 612.0
    s = score("keeps MAXN where it is best", [maxn_best, level_best], [None, 612.0])
    assert s.share_of_oracle == pytest.approx(1.0)

"""The laws on real single-GPU A100 measurements (bundled ML-energy file)."""
import json
import os

import pytest

from pydvfs.roofline import law
from pydvfs.roofline import sweep_csv as dataset

A100_CSV = os.path.join(os.path.dirname(dataset.__file__), "data", "mlenergy_a100.csv")


@pytest.fixture(scope="module")
def a100():
    df, fmt = dataset.load(A100_CSV)
    assert fmt == "mlenergy"
    return df


def test_format_recognised_and_repeats_averaged(a100):
    # 1576 rows in the file, 643 distinct (family, hardware, configuration)
    assert len(a100) == 643
    assert set(a100["strategy"]) == {"single"} and (a100["eta"] == 1.0).all()
    assert set(a100["campaign"]) == {"main", "s256-block"}


@pytest.mark.parametrize("family,paper_max,improved_min", [("bert", 0.80, 0.90), ("gpt", 0.90, 0.93)])
def test_grouped_cv_per_family(a100, family, paper_max, improved_min):
    g = a100[(a100["family"] == family) & (a100["hardware"] == "a100")]
    paper = law.fit(g, law.LAWS["eta"])       # eta = 1 here: the compute/memory law
    improved = law.fit(g, law.LAWS["improved"])
    assert "log_eta" not in paper.coef       # constant terms are dropped
    assert paper.cv_r2 < paper_max            # the paper's two proxies: ~0.78 BERT, ~0.87 GPT
    assert improved.cv_r2 >= improved_min
    assert improved.cv_r2 - paper.cv_r2 >= 0.05
    # the attention-traffic term is real: its CI excludes zero
    a = improved.coef["log_A"]
    assert a["ci_low"] > 0


def test_improved_law_terms_ablation_bert(a100):
    """Each added ingredient carries weight under grouped CV (none is decoration)."""
    g = a100[(a100["family"] == "bert") & (a100["hardware"] == "a100")]
    full = law.fit(g, law.LAWS["improved"]).cv_r2
    for drop in [("log_A",), ("campaign",)]:
        terms = tuple(t for t in law.LAWS["improved"].terms if t not in drop)
        factors = tuple(f for f in law.LAWS["improved"].factors if f not in drop)
        spec = law.LawSpec("ablation", terms, factors, "")
        assert law.fit(g, spec).cv_r2 < full - 0.02, drop


def test_fit_cli_on_bundled_file(run_cli):
    rc, out, err = run_cli("roofline", "fit", "--data", A100_CSV, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["format"] == "mlenergy"
    bert = res["groups"]["bert/a100"]["summary"]
    gpt = res["groups"]["gpt/a100"]["summary"]
    assert 0.70 < bert["eta_cv_r2"] < 0.80       # the paper's law: ~0.76-0.78
    assert bert["improved_cv_r2"] >= 0.90
    assert gpt["improved_cv_r2"] >= 0.93
    checks = {c["model"]: c for c in res["scale_checks"] if c["fit_group"] in ("gpt/a100", "bert/a100")}
    assert checks["GPT-3 175B"]["label"].startswith("order-of-magnitude")
    assert checks["GPT-3 175B"]["within_10x"]
    rc, out, err = run_cli("roofline", "predict", "--data", A100_CSV, "--group", "bert/a100",
                           "--layers", 6, "--hidden", 768, "--seq-len", 512, "--batch", 256)
    assert rc == 0 and " J " in out, err

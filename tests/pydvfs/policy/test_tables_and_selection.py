"""Training on either Orin table (11 or 13 levels), honest selection against FFG, the noise
verdict of a sweep, and the roofline policy in C against its Python model (golden)."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import background
import numpy as np
import pytest
import synthetic

from pydvfs import _core
from pydvfs.device.fake import ORIN_11_LEVELS_HZ, ORIN_13_LEVELS_HZ, build_fake_board
from pydvfs.model.curve import DEFAULT_VF, VFCurve
from pydvfs.policy.curves import curves_from_frame, dataset_noise, noise_summary, read_dataset
from pydvfs.policy.roofline_curve import CONSTANTS, RooflineBoard, read_roofline, write_roofline

TABLES = {"11": (synthetic.LEVELS, ORIN_11_LEVELS_HZ), "13": (synthetic.LEVELS_13, ORIN_13_LEVELS_HZ)}


def _flat_labels(layers, s, levels):
    return 714.0


def _random_labels():
    rnd, table = random.Random(7), {}
    return lambda layers, s, levels: table.setdefault((layers, s), rnd.choice((612.0, 714.0)))


# The four trainings of this module (about 40 s each) run in the background from the start of
# the session (tests/background.py): `pydvfs train` on a synthetic dataset, one job each.
DATASETS = {
    "11": dict(tasks=("sst2", "rte"), levels=synthetic.LEVELS),
    "13": dict(tasks=("sst2", "rte"), levels=synthetic.LEVELS_13),
    # one task's 8 workloads: as flat as 16, at a third of the leave-one-out fits
    "flat": dict(tasks=("sst2",), optimum=_flat_labels),
    # labels that are noise (a random best clock per workload, no rule behind it); one task's 8
    # workloads: random labels send the tree search to its deepest trees, and the leave-one-out
    # selection over them grows with the square of the workloads
    "random": dict(tasks=("sst2",)),
}


def _train(name: str) -> tuple[Path, subprocess.CompletedProcess]:
    d = background.new_dir(f"train-{name}")
    kw = dict(DATASETS[name], optimum=_random_labels()) if name == "random" else DATASETS[name]
    synthetic.write(d / "data.csv", **kw)
    res = background.run([sys.executable, "-m", "pydvfs", "train", "--data", d / "data.csv", "--out", d / "model",
                          "--energy", "cpu-gpu"], 1200)
    assert res.returncode == 0, res.stderr[-3000:]
    return d, res


def training(name: str):
    return background.start(f"train on {name} labels", _train, name)


BACKGROUND = [lambda name=name: training(name) for name in DATASETS]


@pytest.fixture(scope="module", params=sorted(TABLES), ids=lambda k: f"{k}-levels")
def trained_on_table(request):
    levels, levels_hz = TABLES[request.param]
    d, _ = training(request.param).result()
    curves = curves_from_frame(read_dataset(d / "data.csv"))
    metrics = json.loads((d / "model" / "metrics.json").read_text())
    return levels, levels_hz, d / "model", metrics, curves


def test_train_on_either_table(trained_on_table):
    levels, _, model, metrics, curves = trained_on_table
    meta = json.loads((model / "meta.json").read_text())
    assert set(meta["classes_mhz"]) <= set(levels) | {0.0}
    assert meta["levels_mhz"] == list(levels)
    assert metrics["shipped"] == "tree", metrics["ship_reason"]
    assert metrics["selected"]["mean_regret_pct"] == pytest.approx(0.0, abs=1e-9)
    for c in curves:
        assert c.best_mhz == synthetic.true_optimum(c.workload.layers, c.workload.seq_len, levels)
        assert c.best_mhz in c.within_mhz and c.is_hit(c.best_mhz)
    lomo = [r for r in metrics["table"] if "lomo_mean_regret_pct" in r]
    assert {r["name"] for r in lomo} >= {"ffg (best fixed clock)", "roofline model (physics, argmin)"}
    assert metrics["n_architectures"] == 8
    assert read_roofline(model / "roofline.txt").constants == pytest.approx(
        tuple(metrics["roofline"]["constants"][k] for k in CONSTANTS))


@pytest.mark.parametrize("policy", ["mlg", "roofline", "ffg"])
def test_apply_on_either_table_python_and_binary_agree(trained_on_table, policy, cli, govcore_bin, tmp_path):
    levels, levels_hz, model, metrics, _ = trained_on_table
    board = build_fake_board(tmp_path / "board", "jp5", levels_hz=levels_hz)
    for model_type, layers, hidden, seq in (("bert", 24, 1024, 70.0), ("bert", 2, 128, 25.0), ("pythia", 6, 512, 84.0)):
        args = ["apply", "--model", model_type, "--layers", str(layers), "--hidden", str(hidden), "--seq-len",
                str(seq), "--policy", policy, "--model-dir", str(model), "--json", "--sysfs-root", str(board.root)]
        py = cli(*args)
        assert py.returncode == 0, py.stderr
        c = subprocess.run([govcore_bin, *args], capture_output=True, text=True)
        assert c.returncode == 0, c.stderr
        a, b = json.loads(py.stdout), json.loads(c.stdout)
        assert a["freq_mhz"] == b["freq_mhz"] and a["freq_mhz"] in levels
        assert board.read_hz("max_freq") == round(a["freq_mhz"] * 1e6)
        if policy == "mlg":
            assert a["freq_mhz"] == synthetic.true_optimum(layers, seq, levels)


def test_roofline_needs_a_model_dir(cli, board, govcore_bin):
    args = ["apply", "--model", "bert", "--layers", "2", "--hidden", "128", "--seq-len", "20", "--policy",
            "roofline", "--sysfs-root", str(board.root)]
    for res in (cli(*args), subprocess.run([govcore_bin, *args], capture_output=True, text=True)):
        assert res.returncode == 2 and "model-dir" in res.stderr and "Traceback" not in res.stderr
    assert board.read_hz("max_freq") == 1300500000


def test_ffg_ships_when_the_tree_cannot_beat_it():
    """Every workload has the same best clock: nothing to learn; the model folder's policy is the
    best fixed clock, and `pydvfs train` says so and why."""
    d, res = training("flat").result()
    assert "shipped: ffg" in res.stdout and "does not beat FFG" in res.stdout
    metrics = json.loads((d / "model" / "metrics.json").read_text())
    assert metrics["shipped"] == "ffg" and metrics["ffg_mhz"] == 714.0
    tree = _core.Tree(d / "model")
    assert tree.classes_mhz == (714.0,)
    for wl in ((False, None, 2, 128, 20.0), (True, 90.0, 16, 2048, 200.0)):
        assert tree.propose(wl) == 714.0


def test_tree_that_fits_noise_does_not_ship():
    """Labels that are noise (a random best clock per workload, no rule behind it): whatever the
    tree learns, it must not beat FFG beyond the noise, so FFG ships."""
    d, _ = training("random").result()
    metrics = json.loads((d / "model" / "metrics.json").read_text())
    assert metrics["shipped"] == "ffg", metrics["ship_reason"]
    assert not metrics["ship_test"]["significant"]


def test_a_noisy_sweep_is_flagged_with_advice(tmp_path):
    synthetic.write(tmp_path / "noisy.csv", tasks=("sst2",), noise=0.08)
    s = noise_summary(curves_from_frame(read_dataset(tmp_path / "noisy.csv")))
    assert s.noise_source == "repeats" and s.median_cv > 0.03
    assert not s.ok and s.repeats == 2 and s.repeats_needed > 2
    assert f"--repeats {s.repeats_needed}" in s.advice()
    assert dataset_noise(tmp_path / "noisy.csv")["ok"] is False
    (tmp_path / "no_maxn.csv").write_text("\n".join(
        line for line in (tmp_path / "noisy.csv").read_text().splitlines() if ",maxn," not in line))
    assert dataset_noise(tmp_path / "no_maxn.csv") is None  # nothing to label yet
    synthetic.write(tmp_path / "quiet.csv", tasks=("sst2",), noise=0.0005)
    q = noise_summary(curves_from_frame(read_dataset(tmp_path / "quiet.csv")))
    assert q.ok and "resolved" in q.advice()


def _random_board(rnd) -> RooflineBoard:
    k = (10 ** rnd.uniform(-7, -4), 10 ** rnd.uniform(-10, -8), 10 ** rnd.uniform(-6, -3),
         10 ** rnd.uniform(-7, -4), rnd.uniform(2, 12), rnd.uniform(5, 40), rnd.uniform(0.5, 10),
         10 ** rnd.uniform(-10, -8))
    vf = DEFAULT_VF if rnd.random() < 0.5 else VFCurve((300.0, 600.0 + rnd.uniform(0, 300), 1400.0),
                                                         (0.6, 0.65, rnd.uniform(0.9, 1.1)))
    return RooflineBoard(k, (float("nan"),) * 8, vf)


def test_golden_c_roofline_equals_python_model(tmp_path):
    """gc_propose_roofline and RooflineBoard.argmin_mhz agree on a grid of workloads and boards,
    on both tables; the energies agree to rounding."""
    rnd = random.Random(3)
    n_checked = 0
    for b in range(25):
        board = _random_board(rnd)
        path = write_roofline(board, tmp_path / f"r{b}.txt", source=f"random board {b}")
        c = _core.Roofline(path)
        for _ in range(40):
            layers, hidden = rnd.randint(1, 48), rnd.choice((64, 128, 256, 512, 768, 1024, 2048, 4096))
            seq = rnd.uniform(4, 2048)
            wl = (rnd.random() < 0.5, None, layers, hidden, seq)
            for levels in (synthetic.LEVELS, synthetic.LEVELS_13):
                e_py = board.energy_curve(layers, hidden, seq).energy_j(levels)
                e_c = np.array([c.energy_j(wl, f) for f in levels])
                assert np.allclose(e_c, e_py, rtol=1e-12)
                want = board.argmin_mhz(layers, hidden, seq, levels)
                got = c.propose(wl, levels)
                if got != want:  # only a tie to rounding may differ
                    assert e_py[levels.index(got)] == pytest.approx(e_py[levels.index(want)], rel=1e-12)
                n_checked += 1
    assert n_checked == 2000


def test_perseus_curves_are_real_u_curves():
    from pydvfs.errors import InvalidValueError
    from pydvfs.policy.perseus import ARCHITECTURES, model_of, perseus_curves, stage_layers

    for _, layers, _, _ in ARCHITECTURES.values():
        assert sum(stage_layers(layers, s) for s in range(8)) == layers
    curves, vf = perseus_curves("a100_sxm_bf16")
    assert len(curves) == 8 and {model_of(c) for c in curves} == {"gpt3-175b", "bloom"}
    assert vf.freqs_mhz[-1] == 1410.0
    for c in curves:
        # a U: the best clock is inside the sweep and saves energy against the top clock
        assert c.freqs_mhz[0] < c.best_mhz < c.freqs_mhz[-1] and c.saving_vs_maxn(c.best_mhz) > 0.2
        assert c.time_s is not None and len(c.time_s) == len(c.freqs_mhz)
    with pytest.raises(InvalidValueError):
        perseus_curves("h100")

"""pydvfs.apply / governed and `pydvfs apply` vs `govcore apply`, on fake boards."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pydvfs
from pydvfs.errors import InvalidValueError

REPO = Path(__file__).resolve().parents[3]
WORKLOADS = [("bert", 12, 768, 128.0, None), ("bert", 2, 128, 13.3, 55.0), ("pythia", 6, 512, 40.0, 88.0),
             ("bert", 24, 1024, 70.2, 90.0), ("gpt", 16, 2048, 30.0, None)]


def test_apply_pins_and_governed_restores(board):
    w = pydvfs.Workload(model="bert", layers=12, hidden=768, seq_len=128)
    with pydvfs.governed(w, sysfs_root=board.root) as d:
        assert d.policy == "mlg" and d.freq_mhz in pydvfs.open_device(board.root).available_frequencies_mhz
        assert board.read_hz("min_freq") == board.read_hz("max_freq") == round(d.freq_mhz * 1e6)
        assert set(d.features) >= {"is_decoder", "layers", "hidden", "seq_len"}
    assert board.read_hz("max_freq") == 1300500000 and board.read_hz("min_freq") == 306000000


def test_governed_restores_after_an_exception(board):
    with pytest.raises(ZeroDivisionError):
        with pydvfs.governed({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 40},
                             policy="rules", sysfs_root=board.root):
            assert board.read_hz("max_freq") == 714000000
            1 / 0  # noqa: B018 - the error the block must survive
    assert board.read_hz("max_freq") == 1300500000


@pytest.mark.parametrize("policy, expected", [("rules", 816.0), ("ffg", None), ("maxn", None)])
def test_policies(board, policy, expected):
    d = pydvfs.apply({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 128}, policy=policy,
                     sysfs_root=board.root)
    if policy == "maxn":
        assert d.freq_mhz is None and board.read_hz("max_freq") == 1300500000
    elif policy == "ffg":
        from pydvfs.policy.apply import load_tree
        assert d.freq_mhz == pydvfs.open_device(board.root).snap_mhz(load_tree().ffg_mhz)
    else:
        assert d.freq_mhz == expected


def test_huggingface_config_and_model(board):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    d1 = pydvfs.decide(cfg, seq_len=64, sysfs_root=board.root)
    assert d1.workload["layers"] == 4 and d1.workload["hidden"] == 256 and d1.workload["model"] == "bert"
    model = transformers.BertModel(cfg)
    assert pydvfs.decide(model, seq_len=64, sysfs_root=board.root).freq_mhz == d1.freq_mhz
    neox = transformers.GPTNeoXConfig(num_hidden_layers=6, hidden_size=512, num_attention_heads=8, intermediate_size=2048)
    assert pydvfs.decide(neox, seq_len=40, sysfs_root=board.root).workload["model"] == "gpt_neox"
    with pytest.raises(InvalidValueError, match="seq_len"):
        pydvfs.decide(cfg, sysfs_root=board.root)


@pytest.mark.parametrize("bad", [{"model": "toaster", "layers": 1, "hidden": 1, "seq_len": 1},
                                 {"model": "bert", "layers": 0, "hidden": 768, "seq_len": 64},
                                 {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64, "util_pct": 140},
                                 "not a workload"])
def test_bad_workloads(board, bad):
    with pytest.raises(InvalidValueError):
        pydvfs.apply(bad, sysfs_root=board.root)
    assert board.read_hz("max_freq") == 1300500000


def test_unknown_policy(board):
    with pytest.raises(InvalidValueError, match="unknown policy"):
        pydvfs.apply({"model": "bert", "layers": 2, "hidden": 128, "seq_len": 10}, policy="fast", sysfs_root=board.root)


@pytest.mark.parametrize("policy", ["mlg", "ffg", "rules", "maxn"])
def test_cli_and_binary_agree(cli, board, govcore_bin, policy, tmp_path):
    for model, layers, hidden, seq, util in WORKLOADS:
        args = ["apply", "--model", model, "--layers", str(layers), "--hidden", str(hidden), "--seq-len", str(seq),
                "--policy", policy, "--json", "--sysfs-root", str(board.root)]
        if util is not None:
            args += ["--util", str(util)]
        py = cli(*args)
        assert py.returncode == 0, py.stderr
        c = subprocess.run([govcore_bin, *args], capture_output=True, text=True)
        assert c.returncode == 0, c.stderr
        a, b = json.loads(py.stdout), json.loads(c.stdout)
        assert a["freq_mhz"] == b["freq_mhz"] and a["policy"] == b["policy"] == policy
        # the family's range of a built-in's clock: both front ends read govcore/gen_policy_ranges.c
        assert a["model"] == b["model"] and set(a) == set(b)
        assert a["saving_range_pct"] == b["saving_range_pct"]
        assert (a["saving_range_pct"] is not None) == (policy == "mlg")
        assert a["features"] == b["features"]
        assert {k: v for k, v in a["workload"].items() if k != "name"} == b["workload"]
        if a["freq_mhz"] is not None:
            assert board.read_hz("max_freq") == round(a["freq_mhz"] * 1e6)


def test_trained_model_dir_used_by_both(cli, board, govcore_bin, trained):
    model_dir, _ = trained
    args = ["--model", "bert", "--layers", "24", "--hidden", "1024", "--seq-len", "70", "--json",
            "--sysfs-root", str(board.root), "--model-dir", str(model_dir), "--dry-run"]
    py = json.loads(cli("apply", *args).stdout)
    c = json.loads(subprocess.run([govcore_bin, "apply", *args], capture_output=True, text=True).stdout)
    assert py["freq_mhz"] == c["freq_mhz"] == 816.0  # the synthetic rule: deep model, long sequences
    assert py["model"].startswith("trained")
    assert board.read_hz("max_freq") == 1300500000  # dry run wrote nothing
    bad = cli("apply", *args[:-3], "--model-dir", str(board.root), "--dry-run")
    assert bad.returncode == 2 and "policy.so" in bad.stderr


def test_cli_bad_input(cli, board):
    for args in (["apply", "--model", "bert", "--layers", "x", "--hidden", "1", "--seq-len", "1"],
                 ["apply", "--model", "bert"],
                 ["apply", "--model", "toaster", "--layers", "1", "--hidden", "1", "--seq-len", "1",
                  "--sysfs-root", str(board.root)]):
        res = cli(*args)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("mhz, words", [(99999.0, "99999 MHz is outside the board's table (306..1300.5 MHz)"),
                                        (-500.0, "-500 MHz, which is not a clock"),
                                        (1e300, "1e+300 MHz, which is not a clock")])
def test_a_policy_clock_far_off_the_table_is_refused_not_the_top_level(board, tmp_path, mhz, words):
    """A model folder whose tree proposes 99999, -500 or inf MHz once pinned the top level and
    exited 0, while `pin 99999` was refused: both front ends now refuse it in one line (an
    infinite or NaN one too: tests/govcore/test_policy.c, as C source cannot spell it)."""
    from pydvfs import _core
    from pydvfs.policy.manifest import POLICY_SO, TREE_C, write_manifest
    from pydvfs.policy.to_c import compile_policy, constant_to_c

    builtin = _core.Tree(None)
    model = tmp_path / "model"
    model.mkdir()
    prov = {"data_file": "made-up.csv", "data_sha256": "0" * 64, "trained_utc": "2026-12-01T00:00:00Z"}
    (model / TREE_C).write_text(constant_to_c(mhz, builtin.feature_names, (50.0, 50.0), "off-table", "a test", prov))
    compile_policy(model / TREE_C, model / POLICY_SO)
    write_manifest(model, builtin.feature_names, [mhz], prov)
    args = ["apply", "--model-dir", str(model), "--workload", "model=bert,layers=12,hidden=768,seq_len=64",
            "--sysfs-root", str(board.root), "--state-dir", str(tmp_path)]
    for front in ([sys.executable, "-m", "pydvfs"], [str(REPO / "govcore" / "govcore")]):
        out = subprocess.run([*front, *args], capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1, \
            (front, out.stdout, out.stderr)
        assert board.read_hz("max_freq") == 1300500000 and board.read_hz("min_freq") == 306000000

"""How a workload trains (issue 28): peft, rank, trainable_params, weight_bits, precision,
batch_size, tokens_per_step in pydvfs.Workload, in `--workload` of both front ends (pydvfs and
govcore: the same parse, the same decision, the same one-line refusals), the features the trees
see (Python and C agree), and what a real PeftModel and TrainingArguments give."""
from __future__ import annotations

import copy
import json
import subprocess

import pytest

import pydvfs
from pydvfs import _core
from pydvfs.errors import InvalidValueError
from pydvfs.model.features import ALL_FEATURES, METHOD_FEATURES, workload_features
from pydvfs.workload import Workload, method_of_model, parse_workload, precision_of_args

QWEN = "model=qwen2.5-0.5b,layers=24,hidden=896,seq_len=200"
METHOD = "peft=lora,rank=16,precision=bf16,batch_size=8,tokens_per_step=1600"


def test_defaults_keep_full_fp32_fine_tuning():
    w = Workload(model="bert", layers=12, hidden=768, seq_len=64)
    assert (w.peft, w.rank, w.trainable_params, w.weight_bits, w.precision, w.batch_size,
            w.tokens_per_step) == ("none", None, None, None, "fp32", None, None)
    assert w.weight_bits_effective == 32 and w.trainable_share == 1.0 and w.lora_rank is None
    # the C policies see the five paper values and the defaults (zeros) of the method
    assert w.as_core() == (False, None, 12, 768, 64, "none", 0, 0, 0, "fp32", 0, 0.0)
    assert _core.features(ALL_FEATURES, w.as_core()) == _core.features(ALL_FEATURES, w.as_core()[:5])


def test_method_keys_parse_and_resolve():
    w = Workload.from_any(parse_workload(f"{QWEN},{METHOD}"))
    assert (w.model, w.peft, w.rank, w.precision, w.batch_size, w.tokens_per_step) == \
        ("qwen2.5-0.5b", "lora", 16, "bf16", 8, 1600.0)
    assert w.is_decoder and w.weight_bits_effective == 16  # a LoRA base under autocast: half
    assert w.trainable_share == pytest.approx(4 * 16 * 896 * 24 / (12 * 24 * 896 ** 2))
    q = Workload.from_any({"model": "llama", "layers": 16, "hidden": 2048, "seq_len": 90, "peft": "QLoRA"})
    assert q.peft == "qlora" and q.weight_bits_effective == 4 and q.lora_rank == 8  # PEFT's default r
    t = Workload.from_any({"model": "llama", "layers": 16, "hidden": 2048, "seq_len": 90, "peft": "lora",
                           "trainable_params": 851968})
    assert t.trainable_share == pytest.approx(851968 / (12 * 16 * 2048 ** 2))  # the count wins over a rank
    # the --workload spelling of a workload reads back to the same workload
    assert Workload.from_any(parse_workload(w.spec())).to_dict() == {**w.to_dict(), "name": "qwen2.5-0.5b-L24-H896"}


@pytest.mark.parametrize("bad, key", [
    ("peft=lorx", "peft"), ("peft=lora,rank=0", "rank"), ("peft=lora,rank=1.5", "rank"),
    ("weight_bits=6", "weight_bits"), ("precision=fp8", "precision"), ("tokens_per_step=-1", "tokens_per_step"),
    ("batch_size=x", "batch_size"), ("trainable_params=0", "trainable_params"), ("rank=16", "rank"),
    ("peft=lora,weight_bits=4", "weight_bits"), ("peft=qlora,weight_bits=16", "qlora"), ("peft=lora,peft=none", "peft"),
])
def test_bad_method_values_one_line_exit_2_on_both_front_ends(cli, board, govcore_bin, bad, key):
    spec = f"model=llama,layers=2,hidden=64,seq_len=9,{bad}"
    with pytest.raises(InvalidValueError, match=key):
        Workload.from_any(parse_workload(spec))
    for front in (lambda *a: cli(*a), lambda *a: subprocess.run([govcore_bin, *a], capture_output=True, text=True)):
        r = front("apply", "--workload", spec, "--dry-run", "--sysfs-root", str(board.root))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and key in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert board.read_hz("max_freq") == 1300500000  # nothing pinned


@pytest.mark.parametrize("method", ["", METHOD, "peft=qlora,precision=bf16,rank=64", "peft=lora,trainable_params=2162688,"
                                    "weight_bits=32,precision=fp16", "precision=bf16,batch_size=4"])
def test_pydvfs_and_govcore_give_the_same_parse_and_decision(cli, board, govcore_bin, method):
    spec = QWEN + ("," + method if method else "")
    args = ["apply", "--workload", spec, "--json", "--sysfs-root", str(board.root)]
    py = cli(*args)
    assert py.returncode == 0, py.stderr
    c = subprocess.run([govcore_bin, *args], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    a, b = json.loads(py.stdout), json.loads(c.stdout)
    assert a["freq_mhz"] == b["freq_mhz"] and a["features"] == b["features"]
    assert {k: v for k, v in a["workload"].items() if k != "name"} == b["workload"]
    assert board.read_hz("max_freq") == round(a["freq_mhz"] * 1e6)
    pydvfs.restore(sysfs_root=board.root)


def test_the_built_in_policy_picks_for_how_the_job_trains(cli, board, govcore_bin):
    """The AGX Orin's built-in policy is trained on the decoders' method rows with the method
    features: a LoRA bf16 job gets its own optimum (bf16 GEMMs: a level lower than fp32), its fp32
    twin its own, the same clock in pydvfs and govcore (the daemon: tests/govcore/test_serve.py)."""
    from pydvfs.policy.score import truth

    chosen = {}
    for method, extra in (("lora-fp32", ""), ("lora-bf16", ",precision=bf16")):
        best = truth("agx-orin", "qwen2.5-0.5b", "RTE", method=method).best_mhz("module")
        spec = f"model=qwen2.5-0.5b,layers=24,hidden=896,seq_len=70.2,peft=lora,rank=16{extra}"
        args = ["apply", "--workload", spec, "--dry-run", "--json", "--sysfs-root", str(board.root)]
        py, c = cli(*args), subprocess.run([govcore_bin, *args], capture_output=True, text=True)
        assert py.returncode == 0 and c.returncode == 0, (py.stderr, c.stderr)
        a, b = json.loads(py.stdout), json.loads(c.stdout)
        assert a["freq_mhz"] == b["freq_mhz"] == best, (method, a["freq_mhz"], b["freq_mhz"], best)
        assert a["origin"]["source"] == "built-in" and a["features"]["compute_bits"] == (16 if extra else 32)
        chosen[method] = a["freq_mhz"]
    assert chosen["lora-bf16"] < chosen["lora-fp32"]


def test_c_and_python_method_features_agree():
    import numpy as np

    cases = [Workload(model="bert", layers=12, hidden=768, seq_len=64),
             Workload(model="qwen2", layers=24, hidden=896, seq_len=200, peft="lora", rank=16, precision="bf16"),
             Workload(model="llama", layers=16, hidden=2048, seq_len=30, peft="qlora", util_pct=40.0),
             Workload(model="llama", layers=16, hidden=2048, seq_len=30, peft="qlora", weight_bits=8, precision="fp16"),
             Workload(model="phi3", layers=32, hidden=3072, seq_len=80, peft="lora", trainable_params=10 ** 10),
             Workload(model="gemma2", layers=26, hidden=2304, seq_len=50, precision="bf16", batch_size=4)]
    for w in cases:
        util = w.util_pct if w.util_pct is not None else 50.0
        py = workload_features(ALL_FEATURES, w, util)
        assert _core.features(ALL_FEATURES, w.as_core()) == tuple(float(np.float32(v)) for v in py), w
    share, wbits, cbits = (dict(zip(METHOD_FEATURES, _core.features(METHOD_FEATURES, w.as_core()))) for w in cases[:3])
    assert share["trainable_share"] == 1.0 and share["compute_bits"] == 32 and share["weight_bits"] == 32
    assert wbits["trainable_share"] < 0.01 and wbits["compute_bits"] == 16 and wbits["weight_bits"] == 16
    assert cbits["weight_bits"] == 4 and cbits["compute_bits"] == 32
    # the method names are govcore's: one list
    assert _core.PEFT_NAMES == ("none", "lora", "qlora") and _core.PRECISION_NAMES == ("fp32", "fp16", "bf16")


def test_a_real_peft_model_and_trainer_arguments():
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    import torch

    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, vocab_size=256)
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                      task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert method_of_model(model) == {"peft": "lora", "rank": 4, "trainable_params": trainable, "weight_bits": 16}
    w = Workload.from_any(model, seq_len=32)
    assert (w.model, w.layers, w.hidden, w.peft, w.rank, w.trainable_params) == ("llama", 2, 64, "lora", 4, trainable)
    # full fine-tuning: nothing to say beyond the defaults; a bitsandbytes config makes it QLoRA
    assert method_of_model(transformers.LlamaForCausalLM(cfg)) == {}
    quantised = transformers.LlamaForCausalLM(copy.deepcopy(cfg))  # the models share cfg otherwise
    quantised.config.quantization_config = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert method_of_model(quantised) == {"weight_bits": 4, "peft": "qlora"}
    args = transformers.TrainingArguments(output_dir="/nonexistent-unused", bf16=False, fp16=False, report_to=[])
    assert precision_of_args(args) is None
    assert precision_of_args(type("A", (), {"bf16": True, "fp16": False})()) == "bf16"
    assert precision_of_args(type("A", (), {"bf16": False, "fp16": True})()) == "fp16"
    # what the callbacks build: the model's adapters, the Trainer's precision and batch size, and
    # the collator's token count where the caller measured it
    from pydvfs.integrations.common import workload_from

    trainer_args = type("A", (), {"bf16": True, "fp16": False, "per_device_train_batch_size": 8})()
    w = workload_from(model, None, None, {"seq_len": 32}, args=trainer_args, tokens_per_step=211)
    assert (w.peft, w.rank, w.precision, w.batch_size, w.tokens_per_step, w.weight_bits_effective) == \
        ("lora", 4, "bf16", 8, 211.0, 16)


def test_a_real_sweep_records_how_the_workload_trains(cli, board, tmp_path):
    import sys

    from pydvfs.characterise import dataset as ds

    out = tmp_path / "d.csv"
    r = cli("sweep", "--sysfs-root", str(board.root), "--out", str(out), "--workload",
            f"{QWEN},peft=qlora,rank=32,precision=bf16,batch_size=4,tokens_per_step=777", "--freqs", "510",
            "--settle", "0", "--idle", "0.1", "--rate", "200", "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr
    rows = ds.read_rows(out)
    assert {(x["peft"], x["rank"], x["precision"], x["batch_size"], x["tokens_per_step"], x["weight_bits"])
            for x in rows} == {("qlora", 32, "bf16", 4, 777.0, None)}
    assert board.read_hz("max_freq") == 1300500000

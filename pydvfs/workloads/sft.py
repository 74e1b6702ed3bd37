"""Supervised fine-tuning of a decoder with TRL's ``SFTTrainer`` (``--trainer sft`` of
:mod:`pydvfs.workloads.finetune`), full or with a PEFT LoRA adapter, in fp32, fp16 or bf16.

The data are the GLUE task's training rows written as prompt and answer ("sentence: ...\\nlabel:
positive"), the model one of :data:`pydvfs.workloads.models.DECODERS` built from its published
config with random weights, the tokenizer a byte-level BPE trained offline on the shipped
sentences (:func:`pydvfs.workloads.models.build_tokenizer`). The Trainer counts the real tokens
of each step (its attention mask's ones: padding excluded), which go to the progress file
(``STEPS TOKENS``, :mod:`pydvfs.progress`) for ``pydvfs run``'s J/token.

QLoRA keeps the frozen weights in 4-bit NF4 through bitsandbytes, whose kernels need CUDA: on a
machine without CUDA (or without bitsandbytes) ``--peft qlora`` says so in one line and trains
the LoRA path instead (the record says ``peft: lora``, ``peft_requested: qlora`` and why); a
quantised run is never faked.
"""
from __future__ import annotations

import math
import signal
import sys
import tempfile
import time
from typing import Any

from ..errors import InvalidValueError
from . import glue, models
from .steps import write_steps

# The attention projections LoRA adapts, by family (PEFT's own defaults for these model types).
LORA_TARGETS = {"qwen2": ["q_proj", "v_proj"], "llama": ["q_proj", "v_proj"], "gemma2": ["q_proj", "v_proj"],
                "gemma3_text": ["q_proj", "v_proj"], "phi3": ["qkv_proj"], "bert": ["query", "value"],
                "pythia": ["query_key_value"]}
PRECISIONS = ("fp32", "fp16", "bf16")


def sft_texts(task: str, rows: list) -> list[str]:
    """Prompt and answer per row: the sentence(s), then the label's name (or the score)."""
    spec = glue.task_spec(task)
    out = []
    for e in rows:
        prompt = f"sentence: {e.text_a}" + (f"\nsecond: {e.text_b}" if e.text_b is not None else "")
        answer = f"{float(e.label):.1f}" if spec.is_regression else str(e.label)
        out.append(f"{prompt}\nlabel: {answer}")
    return out


def qlora_unavailable(torch) -> str | None:
    """Why a real QLoRA run cannot be had here (None: it can)."""
    if not torch.cuda.is_available():
        return "QLoRA's 4-bit NF4 kernels (bitsandbytes) need CUDA, and torch sees no CUDA device"
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        return "QLoRA needs bitsandbytes (pip install bitsandbytes), which is not installed"
    return None


def lora_config(family: str, rank: int, task_type: str):
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=LORA_TARGETS[family],
                      task_type=task_type)


def _quantised(model, torch):
    """The same random model with its frozen weights in 4-bit NF4 (bitsandbytes, CUDA): saved
    and loaded back with a quantisation config, as a QLoRA user loads a checkpoint."""
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        q = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16), local_files_only=True)
    return prepare_model_for_kbit_training(q)


def run_sft(args) -> dict:
    """Train ``args.model`` on ``args.task`` with TRL's SFTTrainer; the result record."""
    spec = models.model_spec(args.model)
    if not spec.is_causal_lm:
        raise InvalidValueError(f"--trainer sft trains a decoder as a causal LM: one of {', '.join(models.DECODERS)}")
    task = glue.task_spec(args.task)
    rows, _ = glue.train_and_heldout(task.name, 0)
    import torch
    import transformers
    from trl import SFTConfig, SFTTrainer

    transformers.logging.set_verbosity_error()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    on_cpu = args.device == "cpu" or not torch.cuda.is_available()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InvalidValueError("--device cuda: torch sees no CUDA device")
    peft_kind, note = args.peft, None
    if peft_kind == "qlora":
        note = qlora_unavailable(torch) if not on_cpu else \
            "QLoRA's 4-bit NF4 kernels (bitsandbytes) need CUDA: training on the CPU"
        if note is not None:
            print(f"finetune: {note}; running the LoRA path instead (no quantised run is faked)", file=sys.stderr,
                  flush=True)
            peft_kind = "lora"
    tokenizer = models.build_tokenizer(args.vocab_size)
    model = models.build_causal_lm(spec, tokenizer.vocab_size, int(tokenizer.pad_token_id),
                                   max_positions=max(args.max_seq_len, 128))
    if peft_kind == "qlora":
        model = _quantised(model, torch)
    if peft_kind in ("lora", "qlora"):
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(spec.family, args.rank, "CAUSAL_LM"))
    trainable = int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    total = int(sum(p.numel() for p in model.parameters()))

    class Progress(transformers.TrainerCallback):
        """After every optimiser step: the step count and the real tokens so far."""

        def on_step_end(self, a, state, control, **kw):
            write_steps(args, state.global_step, state.num_input_tokens_seen)
            if stopped["signum"] is not None:
                control.should_training_stop = True

    stopped: dict[str, Any] = {"signum": None}

    def on_signal(signum, frame):  # noqa: ARG001 - signal API
        stopped["signum"] = signum

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    with tempfile.TemporaryDirectory(prefix="pydvfs-sft-") as out_dir:  # the Trainer's; nothing is saved
        result, train_time, state = _train(trainer_args(SFTConfig, out_dir, args, on_cpu), SFTTrainer, model,
                                           tokenizer, Progress(), sft_texts(task.name, rows), args, old)
    tokens = int(state.num_input_tokens_seen)
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    steps = int(state.global_step)
    samples = steps * args.batch_size
    from ..workload import Workload

    workload = Workload.from_any(model, model=spec.family, name=spec.name, seq_len=tokens / samples if samples else 1.0, precision=args.precision,
                                 batch_size=args.batch_size,
                                 **({"tokens_per_step": tokens / steps} if steps else {}))
    return {"model": spec.name, "family": spec.family, "pretrained": False, "task": task.name, "trainer": "sft",
            "layers": spec.layers, "hidden": spec.hidden, "heads": spec.heads, "ff": spec.ff,
            "params": total, "trainable_params": trainable, "peft": peft_kind, "peft_requested": args.peft,
            "peft_note": note, "rank": args.rank if peft_kind != "none" else None, "precision": args.precision,
            "device": "cpu" if on_cpu else "cuda", "batch_size": args.batch_size, "max_seq_len": args.max_seq_len,
            "steps": steps, "steps_planned": args.max_steps, "examples": samples,
            "epochs_done": samples / len(rows), "train_rows": len(rows),
            "avg_seq_len": tokens / samples if samples else None, "avg_padded_len": None, "tokens": tokens,
            "train_time_s": train_time, "first_step_s": None, "step_time_s": train_time / steps if steps else None,
            "examples_per_s": samples / train_time if train_time > 0 else None,
            "tokens_per_s": tokens / train_time if train_time > 0 else None,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "loss_finite": all(math.isfinite(x) for x in losses) and math.isfinite(result.training_loss),
            "metric": "loss", "metric_value": result.training_loss, "heldout_examples": 0,
            "stopped_by": signal.Signals(stopped["signum"]).name if stopped["signum"] is not None else None,
            "task_note": task.note or None, "seed": args.seed, "workload": workload.to_dict(),
            "workload_spec": workload.spec()}


def trainer_args(config_cls, out_dir: str, args, on_cpu: bool):
    """The SFTConfig of a run: nothing saved, no reporter, the real tokens counted."""
    return config_cls(output_dir=out_dir, max_steps=args.max_steps or -1, num_train_epochs=args.epochs,
                      per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
                      max_length=args.max_seq_len, logging_steps=max(1, (args.max_steps or 100) // 10),
                      save_strategy="no", report_to=[], use_cpu=on_cpu, disable_tqdm=True, seed=args.seed,
                      bf16=args.precision == "bf16", fp16=args.precision == "fp16",
                      include_num_input_tokens_seen="non_padding", dataloader_num_workers=0)


def _train(config, trainer_cls, model, tokenizer, progress, texts: list[str], args, old_handlers: dict):
    """Train; (the Trainer's result, seconds, its state). The signal handlers in ``old_handlers``
    are put back whatever happens."""
    from datasets import Dataset
    from transformers import PrinterCallback

    trainer = trainer_cls(model=model, args=config, processing_class=tokenizer, callbacks=[progress],
                          train_dataset=Dataset.from_dict({"text": texts}))
    trainer.remove_callback(PrinterCallback)  # its log lines on stdout would break --json
    write_steps(args, 0, 0)
    t0 = time.perf_counter()
    try:
        result = trainer.train()
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)
    return result, time.perf_counter() - t0, trainer.state


__all__ = ["LORA_TARGETS", "PRECISIONS", "qlora_unavailable", "run_sft", "sft_texts"]

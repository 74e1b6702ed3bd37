"""Real fine-tuning on a GLUE task: the workload we sweep. A BERT / Pythia / MiniLM classifier
in a plain training loop (``--trainer loop``, the default), or supervised fine-tuning of a
decoder (Qwen2.5, Llama 3.2, SmolLM2, Gemma, Phi: ``--trainer sft``, TRL's SFTTrainer,
:mod:`pydvfs.workloads.sft`); either full, or with a LoRA adapter (``--peft lora``; ``qlora``
where CUDA and bitsandbytes are: elsewhere it says so and trains LoRA), in fp32 or with 16-bit
autocast (``--precision bf16|fp16``).

    python -m pydvfs.workloads.finetune --model bert-base --task sst2 [--max-steps N]
        [--batch-size B] [--max-seq-len S] [--device auto|cuda|cpu] [--progress-file F] [--json]
    python -m pydvfs.workloads.finetune --trainer sft --model qwen2.5-0.5b --peft lora --rank 16 \
        --precision bf16 --max-steps 200 --progress-file F

It trains with AdamW on the task's training rows, then scores a held-out slice (accuracy, or
Pearson r for STS-B) and prints steps, average sequence length (tokens without padding),
throughput and loss. ``--progress-file F`` holds the number of completed steps and the real
tokens they trained on (``STEPS TOKENS``), replaced atomically after every step, so an online
governor can measure joules per step and per token while it runs.
SIGINT/SIGTERM end the run after the current step (exit status 128 + signal number, results are
still printed). Bad arguments: one line on stderr, exit status 2. Nothing is ever downloaded.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time
from typing import Any, Optional

from ..cli.common import int_range, missing_extra_message
from ..errors import InvalidValueError, PydvfsError
from ..workload import WORKLOAD_ENV
from . import glue, models
from .steps import write_steps

EXIT_USAGE = 2
MAX_EPOCHS = 1000.0  # passes over a task's rows: more would train for weeks, not fail
MAX_SEED = 2 ** 32 - 1  # what every generator seeded here takes (torch's manual_seed takes < 2**64)
THREADS_PER_CPU = 4  # --threads beyond this many per CPU only exhausts the process limit


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m pydvfs.workloads.finetune",
        description="Fine-tune a (random-init or MiniLM) classifier on a GLUE task; no downloads.",
    )
    p.add_argument("--model", default=None,
                   help=f"one of: {', '.join(models.MODELS)} (default: the model of $PYDVFS_WORKLOAD, the "
                        "workload a sweep's cell runs, with its task, batch size and method; else bert-base)")
    p.add_argument("--trainer", default="loop", choices=("loop", "sft"),
                   help="loop: a classifier in a plain training loop (default); sft: a decoder "
                        f"({', '.join(models.DECODERS)}) with TRL's SFTTrainer")
    p.add_argument("--peft", default="none", choices=("none", "lora", "qlora"),
                   help="none: full fine-tuning (default); lora: a LoRA adapter on the attention "
                        "projections; qlora: LoRA over 4-bit NF4 weights (CUDA + bitsandbytes only: "
                        "elsewhere it says so and trains LoRA)")
    p.add_argument("--rank", type=int, default=16, metavar="R", help="the LoRA rank (default 16)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "bf16"),
                   help="compute precision: fp32 (default), or 16-bit autocast")
    p.add_argument("--vocab-size", type=int, default=2048, metavar="N",
                   help="sft: the BPE tokenizer trained on the shipped sentences (default 2048)")
    p.add_argument("--task", default=None, help=f"one of: {', '.join(glue.TASKS)} (default sst2)")
    p.add_argument("--max-steps", type=int, default=None, metavar="N",
                   help="stop after N optimiser steps (default: --epochs over the training rows)")
    p.add_argument("--epochs", type=float, default=1.0,
                   help=f"passes over the training rows, at most {MAX_EPOCHS:g} (default 1)")
    p.add_argument("--batch-size", type=int, default=None, metavar="B", help="(default 16)")
    p.add_argument("--max-seq-len", type=int, default=128, metavar="S",
                   help="truncate inputs to S tokens (default 128)")
    p.add_argument("--pad-to-max", action="store_true",
                   help="pad every batch to --max-seq-len (default: pad to the batch's longest)")
    p.add_argument("--lr", type=float, default=5e-5, help="AdamW learning rate, finite and > 0 (default 5e-5)")
    p.add_argument("--eval-examples", type=int, default=256, metavar="N",
                   help="size of the held-out slice that is scored after training (0: none)")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                   help="auto = cuda when available, else cpu")
    p.add_argument("--threads", type=int, default=None,
                   help=f"torch CPU threads, at most {THREADS_PER_CPU} per CPU of this machine (default: torch's)")
    p.add_argument("--seed", type=int_range(0, MAX_SEED), default=0, help=f"0..{MAX_SEED} (default 0)")
    p.add_argument("--progress-file", default=None, metavar="F",
                   help="after every step, atomically replace F with the completed step count")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


DEFAULTS = {"model": "bert-base", "task": "sst2", "batch_size": 16}


def from_workload_env(args: argparse.Namespace, environ=os.environ) -> str | None:
    """Without --model, a sweep's cell (``$PYDVFS_WORKLOAD``, pydvfs.characterise.sweep.workload_env) names
    what to train: the catalogue model of the spec's ``model_size`` (or of its model, layers and
    hidden), and its task, batch size, PEFT method, rank and precision where the spec gives them
    and the command does not. Fills ``args``; returns the line that says so (None: no workload,
    the defaults). InvalidValueError where the spec names no model of the catalogue."""
    text = environ.get(WORKLOAD_ENV) if args.model is None else None
    taken = {}
    if text:
        from .. import _core

        spec = _core.parse_workload(text)
        parser_defaults = vars(build_parser().parse_args([]))
        args.model = _catalogue_model(spec)
        taken["model"] = args.model
        for key in ("task", "batch_size", "peft", "rank", "precision"):  # each the option of its name
            if key in spec and getattr(args, key) in (None, parser_defaults[key]):
                value = spec[key]
                if key == "task":
                    value = value.lower().replace("-", "")
                elif key in ("batch_size", "rank"):
                    value = int(float(value))
                setattr(args, key, value)
                taken[key] = value
        if models.model_spec(args.model).is_causal_lm and args.trainer == "loop":
            args.trainer = taken["trainer"] = "sft"
    for key, value in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not taken:
        return None
    return f"from ${WORKLOAD_ENV} ({text}): " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in taken.items())


def _catalogue_model(spec: dict) -> str:
    if spec.get("model_size", "").lower() in models.MODELS:
        return spec["model_size"].lower()
    for name, m in models.MODELS.items():
        if m.family.startswith(spec["model"].lower()) and str(m.layers) == spec.get("layers") \
                and str(m.hidden) == spec.get("hidden"):
            return name
    raise InvalidValueError(f"${WORKLOAD_ENV} names no model of the catalogue (model {spec.get('model')}, layers "
                            f"{spec.get('layers')}, hidden {spec.get('hidden')}; give model_size=NAME in the spec or "
                            f"--model; known: {', '.join(models.MODELS)})")


def _validate(args: argparse.Namespace) -> None:
    if args.max_steps is not None and args.max_steps < 1:
        raise InvalidValueError("--max-steps must be >= 1")
    if not 0 < args.epochs <= MAX_EPOCHS:  # inf and nan fail too
        raise InvalidValueError(f"--epochs must be > 0 and at most {MAX_EPOCHS:g}, got {args.epochs}")
    if args.batch_size < 1:
        raise InvalidValueError("--batch-size must be >= 1")
    if not 8 <= args.max_seq_len <= 512:
        raise InvalidValueError("--max-seq-len must be in 8..512")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        raise InvalidValueError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.eval_examples < 0:
        raise InvalidValueError("--eval-examples must be >= 0")
    most = THREADS_PER_CPU * (os.cpu_count() or 1)
    if args.threads is not None and not 1 <= args.threads <= most:
        raise InvalidValueError(f"--threads must be within 1..{most} ({THREADS_PER_CPU} per CPU of this machine)")
    if args.rank < 1:
        raise InvalidValueError("--rank must be >= 1")
    if not 260 <= args.vocab_size <= 65536:
        raise InvalidValueError("--vocab-size must be in 260..65536 (the byte alphabet and the special tokens)")
    spec = models.model_spec(args.model)
    if args.trainer == "sft" and not spec.is_causal_lm:
        raise InvalidValueError(f"--trainer sft trains a decoder: one of {', '.join(models.DECODERS)}")
    if args.trainer == "loop" and spec.is_causal_lm:
        raise InvalidValueError(f"{spec.name} is a decoder for supervised fine-tuning: add --trainer sft")
    if args.trainer == "loop" and (args.peft != "none" or args.precision != "fp32"):
        raise InvalidValueError("--peft and --precision are for --trainer sft (the classifier loop trains "
                                "in full fp32, as paper A did)")
    if args.progress_file is not None:
        parent = os.path.dirname(os.path.abspath(args.progress_file))
        if not os.path.isdir(parent):
            raise InvalidValueError(f"--progress-file: folder {parent} does not exist")
        if os.path.isdir(args.progress_file):
            raise InvalidValueError(f"--progress-file {args.progress_file}: cannot write it: a folder")


class _StopFlag:
    """Set by SIGINT/SIGTERM; the training loop checks it between steps."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum, frame) -> None:  # noqa: ARG002 - signal API
        self.signum = signum

    def __enter__(self) -> "_StopFlag":
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def __exit__(self, *exc) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)


def _encode(tokenizer, examples, max_seq_len: int) -> list[dict]:
    """Token ids (+ segment ids) per example, truncated, unpadded."""
    a = [e.text_a for e in examples]
    b = [e.text_b for e in examples] if examples and examples[0].text_b is not None else None
    enc = tokenizer(a, b, truncation=True, max_length=max_seq_len, padding=False)
    out = []
    for i in range(len(examples)):
        item = {"input_ids": enc["input_ids"][i]}
        if "token_type_ids" in enc:
            item["token_type_ids"] = enc["token_type_ids"][i]
        out.append(item)
    return out


def _collate(torch, items: list[dict], labels: list, pad_id: int, pad_to: Optional[int],
             family: str, regression: bool, device):
    length = pad_to if pad_to is not None else max(len(it["input_ids"]) for it in items)
    ids, mask, types = [], [], []
    for it in items:
        n = len(it["input_ids"])
        ids.append(it["input_ids"] + [pad_id] * (length - n))
        mask.append([1] * n + [0] * (length - n))
        types.append(it.get("token_type_ids", [0] * n) + [0] * (length - n))
    batch = {
        "input_ids": torch.tensor(ids, dtype=torch.long, device=device),
        "attention_mask": torch.tensor(mask, dtype=torch.long, device=device),
    }
    if family == "bert":
        batch["token_type_ids"] = torch.tensor(types, dtype=torch.long, device=device)
    dtype = torch.float32 if regression else torch.long
    batch["labels"] = torch.tensor(labels, dtype=dtype, device=device)
    return batch, length * len(items)


def _pick_device(torch, wanted: str):
    if wanted == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if wanted == "cuda":
        raise InvalidValueError("--device cuda: torch sees no CUDA device")
    return torch.device("cpu")


def _pearson(xs: list, ys: list) -> Optional[float]:
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None  # constant predictions (or labels): r is undefined
    return sxy / math.sqrt(sxx * syy)


def run(args: argparse.Namespace) -> dict:
    """Train and score; returns the result record (also what --json prints)."""
    from_workload_env(args, {})  # the defaults of what main() did not fill
    _validate(args)
    if args.trainer == "sft":
        from .sft import run_sft

        return run_sft(args)
    spec = models.model_spec(args.model)
    task = glue.task_spec(args.task)
    train_rows, heldout_rows = glue.train_and_heldout(task.name, args.eval_examples)
    if not train_rows:
        raise InvalidValueError(f"task {task.name} has no training rows")

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = _pick_device(torch, args.device)

    tokenizer = models.load_tokenizer()
    pad_id = int(tokenizer.pad_token_id)
    model = models.build_model(spec, task.num_labels, pad_id).to(device)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr)

    encoded = _encode(tokenizer, train_rows, args.max_seq_len)
    labels = [e.label for e in train_rows]
    steps_per_epoch = math.ceil(len(train_rows) / args.batch_size)
    total_steps = args.max_steps or max(1, math.ceil(args.epochs * steps_per_epoch))
    pad_to = args.max_seq_len if args.pad_to_max else None

    rng = random.Random(args.seed)
    order: list[int] = []
    step = 0
    real_tokens = padded_tokens = examples_seen = 0
    losses: list[float] = []
    step_times: list[float] = []
    write_steps(args, 0, 0)  # (a path that cannot be written, /proc's: one line, before training)
    t_start = time.perf_counter()
    with _StopFlag() as stop:
        while step < total_steps and stop.signum is None:
            if len(order) < args.batch_size:  # refill: a new shuffled epoch
                fresh = list(range(len(train_rows)))
                rng.shuffle(fresh)
                order.extend(fresh)
            idx, order = order[: args.batch_size], order[args.batch_size:]
            t0 = time.perf_counter()
            batch, padded = _collate(
                torch, [encoded[i] for i in idx], [labels[i] for i in idx], pad_id, pad_to,
                spec.family, task.is_regression, device,
            )
            loss = model(**batch).loss
            loss.backward()
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - t0)
            losses.append(float(loss.detach().cpu()))
            step += 1
            examples_seen += len(idx)
            real_tokens += sum(len(encoded[i]["input_ids"]) for i in idx)
            padded_tokens += padded
            write_steps(args, step, real_tokens)
    train_time_s = time.perf_counter() - t_start

    metric_name = "pearson" if task.is_regression else "accuracy"
    metric_value = None
    if heldout_rows and stop.signum is None:
        metric_value = _score(torch, model, tokenizer, heldout_rows, args, spec, task, pad_id, device)

    later = step_times[1:] or step_times
    return {
        "model": spec.name,
        "family": spec.family,
        "pretrained": spec.pretrained,
        "task": task.name,
        "layers": spec.layers,
        "hidden": spec.hidden,
        "heads": spec.heads,
        "ff": spec.ff,
        "params": models.count_parameters(model),
        "device": device.type,
        "batch_size": args.batch_size,
        "max_seq_len": args.max_seq_len,
        "steps": step,
        "steps_planned": total_steps,
        "examples": examples_seen,
        "epochs_done": examples_seen / len(train_rows),
        "train_rows": len(train_rows),
        "avg_seq_len": real_tokens / examples_seen if examples_seen else None,
        "avg_padded_len": padded_tokens / examples_seen if examples_seen else None,
        "train_time_s": train_time_s,
        "first_step_s": step_times[0] if step_times else None,
        "step_time_s": sum(later) / len(later) if later else None,
        "examples_per_s": examples_seen / train_time_s if train_time_s > 0 else None,
        "tokens_per_s": real_tokens / train_time_s if train_time_s > 0 else None,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "loss_finite": all(math.isfinite(x) for x in losses),
        "metric": metric_name,
        "metric_value": metric_value,
        "heldout_examples": len(heldout_rows),
        "stopped_by": signal.Signals(stop.signum).name if stop.signum is not None else None,
        "task_note": task.note or None,
        "seed": args.seed,
        "trainer": "loop",
        "tokens": real_tokens,
    }


def _score(torch, model, tokenizer, rows, args, spec, task, pad_id, device) -> Optional[float]:
    model.eval()
    encoded = _encode(tokenizer, rows, args.max_seq_len)
    preds: list = []
    with torch.no_grad():
        for i in range(0, len(rows), args.batch_size):
            chunk = list(range(i, min(i + args.batch_size, len(rows))))
            batch, _ = _collate(
                torch, [encoded[j] for j in chunk], [rows[j].label for j in chunk], pad_id, None,
                spec.family, task.is_regression, device,
            )
            batch.pop("labels")
            logits = model(**batch).logits
            if task.is_regression:
                preds.extend(float(x) for x in logits[:, 0].cpu())
            else:
                preds.extend(int(x) for x in logits.argmax(dim=-1).cpu())
    model.train()
    gold = [r.label for r in rows]
    if task.is_regression:
        return _pearson(preds, gold)
    return sum(int(p == g) for p, g in zip(preds, gold)) / len(gold)


def _text(r: dict) -> str:
    metric = "n/a" if r["metric_value"] is None else f"{r['metric_value']:.3f}"
    how = "" if r["trainer"] == "loop" else \
        f", SFT, {r['peft'] if r['peft'] != 'none' else 'full'}{' r=' + str(r['rank']) if r['rank'] else ''} " \
        f"{r['precision']}, {r['trainable_params'] / 1e6:.2f}M trained"
    lines = [
        f"{r['model']} on {r['task']} ({r['params'] / 1e6:.1f}M params{how}, {r['device']}): "
        f"{r['steps']} steps x {r['batch_size']} in {r['train_time_s']:.2f} s",
        f"  step {r['step_time_s'] or 0:.3f} s, {r['examples_per_s'] or 0:.1f} examples/s, "
        f"avg seq len {r['avg_seq_len'] or 0:.1f} tokens",
        (f"  loss {r['first_loss']:.4f} -> {r['last_loss']:.4f}, held-out {r['metric']} {metric} "
         f"on {r['heldout_examples']}" if r["heldout_examples"] else
         f"  loss {r['first_loss']:.4f} -> {r['last_loss']:.4f}") if r["steps"] and r["first_loss"] is not None
        else "  no step completed",
    ]
    if r["stopped_by"]:
        lines.append(f"  stopped by {r['stopped_by']}")
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        said = from_workload_env(args)
        if said:
            print(f"{parser.prog}: {said}", file=sys.stderr, flush=True)
        result = run(args)
    except PydvfsError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as e:  # torch, transformers: the optional extra 'finetune'
        message = missing_extra_message(e)
        if message is None:
            raise
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result))
    else:
        print(_text(result))
    sys.stdout.flush()
    if result["stopped_by"]:
        return 128 + int(signal.Signals[result["stopped_by"]])
    return 0 if result["loss_finite"] else 1


if __name__ == "__main__":
    sys.exit(main())

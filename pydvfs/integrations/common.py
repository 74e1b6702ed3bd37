"""What the framework callbacks share: the workload read from the model and its data, and the
numbers they log."""
from __future__ import annotations

import math
import sys
from typing import Any

from ..errors import InvalidValueError
from ..governor.inprocess import OnlineGovernor

LOGGED = ("energy_j", "j_per_step", "gpu_clock_mhz")  # the keys added to the framework's logs


def average_tokens(dataset: Any, rows: int = 256) -> float | None:
    """The average number of tokens per sample over the first ``rows`` rows of a dataset whose
    rows hold ``input_ids`` (and perhaps ``attention_mask``); None if it cannot tell. It reads
    rows by index, so it draws nothing from the random number generators."""
    try:
        n = min(rows, len(dataset))
        lengths = []
        for i in range(n):
            row = dataset[i]
            mask = row.get("attention_mask") if hasattr(row, "get") else None
            ids = row.get("input_ids") if hasattr(row, "get") else None
            if mask is not None:
                lengths.append(float(sum(int(v) for v in mask)))
            elif ids is not None:
                lengths.append(float(len(ids)))
        return sum(lengths) / len(lengths) if lengths else None
    except Exception:  # noqa: BLE001 - any dataset shape we cannot read: no estimate
        return None


def workload_from(model: Any, dataset: Any, given: Any, options: dict, args: Any = None,
                  precision: str | None = None, batch_size: int | None = None,
                  tokens_per_step: float | None = None) -> Any:
    """``given`` if set; else the model's config with ``seq_len`` (from ``options`` or the
    dataset) and how it trains: a ``PeftModel``'s adapters and a quantisation config (read from
    the model: :func:`pydvfs.policy.workload.method_of_model`), the compute ``precision`` (given,
    or from a Hugging Face ``TrainingArguments`` ``args``: bf16/fp16), the ``batch_size`` (given,
    or ``args.per_device_train_batch_size``) and ``tokens_per_step`` (the collator's real token
    count of a step, padding excluded: the caller measures it). None when it cannot be built
    (the online search then starts at FFG)."""
    if given is not None:
        return given
    from ..policy.workload import Workload, precision_of_args

    seq_len = options.get("seq_len") or average_tokens(dataset)
    if model is None or seq_len is None:
        return None
    how: dict = {"seq_len": seq_len}
    precision = precision or (precision_of_args(args) if args is not None else None)
    if precision:
        how["precision"] = precision
    batch = batch_size or getattr(args, "per_device_train_batch_size", None)
    if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
        how["batch_size"] = batch
    if tokens_per_step:
        how["tokens_per_step"] = float(tokens_per_step)
    try:
        return Workload.from_any(model, **how)
    except InvalidValueError:
        return None


def steps_left(total: Any, done: Any) -> int | None:
    """What a trainer says is left of its run, in optimiser steps: its ``total`` (HF
    ``max_steps``, Lightning ``estimated_stepping_batches``) less the steps ``done`` before this
    fit (a resumed run); None where it does not know (0, -1, infinity) or none is left."""
    try:
        left = float(total) - float(done or 0)
    except (TypeError, ValueError):
        return None
    return int(left) if math.isfinite(left) and float(total) > 0 and left >= 1 else None


def make_governor(policy: str, workload: Any, options: dict, total_steps: int | None = None) -> OnlineGovernor:
    """The governor for a callback; ``total_steps`` (from the trainer) unless the options give one."""
    if policy != "online" and workload is None and policy != "maxn":
        raise InvalidValueError(f"policy {policy} needs a workload: pass workload=..., or seq_len= with a "
                                "Hugging Face model")
    opts = {k: v for k, v in options.items() if k != "seq_len"}
    if policy == "online" and total_steps is not None:
        opts.setdefault("total_steps", total_steps)
    opts.setdefault("log", sys.stderr)
    return OnlineGovernor(policy, workload, **opts)


def log_values(gov: OnlineGovernor) -> dict:
    """energy_j, j_per_step, gpu_clock_mhz so far (a key is left out while it has no value:
    loggers take numbers only; gpu_clock_mhz is absent under the board's own governor)."""
    s = gov.stats()
    return {k: float(s[k]) for k in LOGGED if s.get(k) is not None}

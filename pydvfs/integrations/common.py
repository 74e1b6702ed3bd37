"""What the framework callbacks share: the workload read from the model and its data, and the
numbers they log."""
from __future__ import annotations

import math
import sys
from typing import Any

from ..errors import InvalidValueError
from ..governor.inprocess import OnlineGovernor

# the keys added to the framework's logs (and so to its trackers: TensorBoard, MLflow, W&B, ...)
LOGGED = ("energy_j", "power_w", "j_per_step", "j_per_token", "tokens_per_j", "gpu_clock_mhz",
          "forecast_energy_j", "forecast_maxn_energy_j", "forecast_saving_vs_maxn_pct")


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
    the model: :func:`pydvfs.workload.method_of_model`), the compute ``precision`` (given,
    or from a Hugging Face ``TrainingArguments`` ``args``: bf16/fp16), the ``batch_size`` (given,
    or ``args.per_device_train_batch_size``) and ``tokens_per_step`` (the collator's real token
    count of a step, padding excluded: the caller measures it). None when it cannot be built
    (the online search then starts at FFG)."""
    if given is not None:
        return given
    from ..workload import Workload, precision_of_args

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


def batch_tokens(batch: Any) -> int | None:
    """The real tokens of a batch: its ``attention_mask``'s ones (padding excluded), else every
    ``input_ids`` entry; None for a batch that holds neither (a dict or an object with them)."""
    get = batch.get if hasattr(batch, "get") else (lambda k: getattr(batch, k, None))
    for key in ("attention_mask", "input_ids"):
        try:
            value = get(key)
        except Exception:  # noqa: BLE001 - a batch of another shape: no count
            value = None
        if value is None:
            continue
        try:
            return int(value.sum()) if key == "attention_mask" else int(value.numel())
        except (AttributeError, TypeError, ValueError):
            return None
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
    gov = OnlineGovernor(policy, workload, **opts)
    gov.front_end = "callback"  # what the board's run record says ran it (docs/store.md)
    return gov


def log_values(gov: OnlineGovernor) -> dict:
    """The LOGGED numbers so far (a key is left out while it has no value: loggers take numbers
    only; ``gpu_clock_mhz`` is absent under the board's own governor and for a joint mode,
    whose clocks are ``gpu_clock_mhz``/``emc_clock_mhz``/``cpu_clock_mhz``; J/token needs the
    tokens counted; the ``forecast_*`` keys appear once the search settled on a run of known
    length). ``energy_j`` is the governor's measure: ``energy_measure`` in its stats."""
    s = gov.stats()
    values = dict(s)
    mode = s.get("gpu_clock_mhz")
    if isinstance(mode, tuple):  # a joint mode (GPU, EMC, CPU MHz)
        values.update(gpu_clock_mhz=mode[0], emc_clock_mhz=mode[1], cpu_clock_mhz=mode[2])
    fc = s.get("forecast") or {}
    values.update(forecast_energy_j=fc.get("energy_total_j"), forecast_maxn_energy_j=fc.get("maxn_energy_total_j"),
                  forecast_saving_vs_maxn_pct=fc.get("saving_vs_maxn_pct"))
    keys = LOGGED + (("emc_clock_mhz", "cpu_clock_mhz") if isinstance(mode, tuple) else ())
    return {k: float(values[k]) for k in keys if isinstance(values.get(k), (int, float))}

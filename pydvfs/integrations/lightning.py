"""The governor as a Lightning callback (``pip install pydvfs[lightning]``).

    from pydvfs.integrations.lightning import GovernorCallback
    trainer = lightning.Trainer(callbacks=[GovernorCallback()])

As :mod:`pydvfs.integrations.hf`: it governs in-process from ``on_train_batch_end`` (one
optimiser step per ``accumulate_grad_batches`` batches), restores the board at the end of
fitting, on an exception (``on_exception``) and on SIGTERM/SIGHUP/SIGQUIT, and logs the numbers
of :data:`pydvfs.integrations.common.LOGGED` (``energy_j``, ``power_w``, ``j_per_step``,
``j_per_token``, ``tokens_per_j``, ``gpu_clock_mhz``, the forecast) with ``pl_module.log`` (to the
trainer's loggers: TensorBoard, MLflow, W&B, CSV; the energy is the module's, or CPU+GPU with
``energy="cpu-gpu"``, as for :class:`pydvfs.OnlineGovernor`). Tokens: the ones of each batch's
``attention_mask`` (padding excluded), else its ``input_ids``. ``workload``: as for :func:`pydvfs.apply`; None: the module's ``model`` attribute's
Hugging Face config (if any) with ``seq_len=``. The run's length, the model search's horizon, is
the trainer's ``estimated_stepping_batches`` (``max_steps``, or the epochs' optimiser steps) less
a restored checkpoint's ``global_step``, unless ``total_steps=`` says otherwise.
"""
from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback

from ..measure.energy import DEFAULT_MEASURE, check_measure
from .common import batch_tokens, log_values, make_governor, steps_left, workload_from


class GovernorCallback(Callback):
    def __init__(self, policy: str = "online", workload: Any = None, **options):
        check_measure(options.get("energy", DEFAULT_MEASURE))  # a bad energy= fails here, not at train start
        self.policy, self.workload, self.options = policy, workload, options
        self.governor = None
        self.report: dict | None = None
        self._batches = 0
        self._tokens = 0  # of the batches since the last optimiser step

    def on_fit_start(self, trainer, pl_module):
        dataset = None
        loader = getattr(trainer, "train_dataloader", None)
        dataset = getattr(loader, "dataset", None)
        model = getattr(pl_module, "model", None)
        precision = str(getattr(trainer, "precision", "32"))  # "bf16-mixed", "16-mixed", "32-true", ...
        precision = "bf16" if precision.startswith("bf16") else "fp16" if precision.startswith("16") else None
        workload = workload_from(model if hasattr(model, "config") else None, dataset, self.workload, self.options,
                                 precision=precision)
        self.report, self._batches, self._tokens = None, 0, 0
        self.governor = make_governor(self.policy, workload, self.options)
        self.governor.start()

    def on_train_start(self, trainer, pl_module):
        # the run's length, once a checkpoint's global_step is restored (after on_fit_start)
        if self.governor is not None and self.report is None and self.policy == "online" \
                and "total_steps" not in self.options:
            self.governor.total_steps = steps_left(trainer.estimated_stepping_batches, trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.governor is None or self.report is not None:
            return
        self._batches += 1
        self._tokens += batch_tokens(batch) or 0
        if self._batches % max(1, int(getattr(trainer, "accumulate_grad_batches", 1))) == 0:
            tokens, self._tokens = self._tokens, 0
            self.governor.step(tokens=tokens or None)
        for key, value in log_values(self.governor).items():
            pl_module.log(key, value, on_step=True, on_epoch=False, prog_bar=False)

    def on_fit_end(self, trainer, pl_module):
        self.close()

    def on_exception(self, trainer, pl_module, exception):
        self.close()

    def close(self) -> dict | None:
        """Stop governing and restore the board (idempotent); returns the report."""
        if self.governor is not None and self.report is None:
            self.report = self.governor.close()
        return self.report


__all__ = ["GovernorCallback"]

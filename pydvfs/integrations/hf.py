"""The governor as a Hugging Face ``TrainerCallback``.

    from pydvfs.integrations.hf import GovernorCallback
    cb = GovernorCallback()                       # policy="online"; or "mlg", "ffg", "rules", "maxn"
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[cb])
    trainer.train()                               # the board is restored at the end
    cb.report                                     # what pydvfs run reports, without the command

It governs in-process: ``on_step_end`` is the step count (no progress file). ``workload``: a
:class:`pydvfs.Workload` or dict as for :func:`pydvfs.apply`; None: the Trainer's model config
with the average tokens per sample of the first rows of the training set (or ``seq_len=``).
Other keyword options go to :class:`pydvfs.OnlineGovernor` (``sysfs_root``, ``search``,
``objective``, ``energy`` (``module``, the default, or ``cpu-gpu``), ``max_slowdown_pct``,
``window``, ``search_options``, ``start_mhz``, ...). The
run's length is the Trainer's ``max_steps`` (less the steps of a resumed checkpoint) unless
``total_steps=`` says otherwise: the model search weighs a probe's gain over what is left of it.

Logged at every ``on_log`` (the Trainer's ``log_history``, and every reporter of ``report_to``:
TensorBoard, MLflow, W&B, ...): ``energy_j`` (the module's, or CPU+GPU with ``energy="cpu-gpu"``),
``power_w``, ``j_per_step``, ``j_per_token`` and ``tokens_per_j`` (from the real tokens of each
step: the Trainer counts the attention mask's ones, padding excluded, once this callback turns on
``include_num_input_tokens_seen="non_padding"`` where it was off), ``gpu_clock_mhz`` (and the EMC
and CPU clocks of a joint mode) and, once the search has settled on a run of known length, the
forecast of the whole run's energy, of the same run under MAXN, and the saving
(``forecast_*``; :mod:`pydvfs.governor.forecast`). The reporters the Trainer added itself come
before user callbacks in its list: at ``on_train_begin`` this callback moves itself to the front,
so that they log its numbers with no ordering by hand (``attach(trainer)`` does the same
explicitly). The workload, when none is given, is read from the model (a ``PeftModel``'s
adapters, a quantisation config) and the Trainer's ``bf16``/``fp16`` and batch size.

Restored: at the end of training, at interpreter exit (an exception that ends the process), on
SIGTERM/SIGHUP/SIGQUIT, and when a ``with cb:`` block around ``trainer.train()`` is left.
"""
from __future__ import annotations

import inspect
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import CallbackHandler
from typing_extensions import Self

from ..measure.energy import DEFAULT_MEASURE, check_measure
from .common import log_values, make_governor, steps_left, workload_from


class GovernorCallback(TrainerCallback):
    def __init__(self, policy: str = "online", workload: Any = None, **options):
        check_measure(options.get("energy", DEFAULT_MEASURE))  # a bad energy= fails here, not at train start
        self.policy, self.workload, self.options = policy, workload, options
        self.governor = None
        self.report: dict | None = None

    def attach(self, trainer) -> GovernorCallback:
        """Put this callback first in ``trainer``'s callbacks (before the reporters)."""
        handler = trainer.callback_handler
        if self in handler.callbacks:
            handler.callbacks.remove(self)
        handler.callbacks.insert(0, self)
        return self

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        if self.governor is not None and self.governor.started and self.report is None:
            return
        self._go_first(inspect.currentframe())
        if args is not None and str(getattr(args, "include_num_input_tokens_seen", "no")).lower() in ("no", "false"):
            args.include_num_input_tokens_seen = "non_padding"  # the real tokens of each step, for J/token
        self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        dataset = getattr(train_dataloader, "dataset", None)
        batch = getattr(args, "per_device_train_batch_size", None)  # a step's samples: x accumulation
        batch = batch * max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1)) if batch else None
        workload = workload_from(model, dataset, self.workload, self.options, args=args, batch_size=batch)
        self.report = None
        # the run's length (max_steps less what a resumed run has done): the search's horizon
        self.governor = make_governor(self.policy, workload, self.options,
                                      steps_left(state.max_steps, state.global_step))
        self.governor.start()

    def _go_first(self, frame) -> None:
        """Put this callback first in the handler that called it (the Trainer's), so that the
        reporters after it log its numbers; the handler's list is replaced, not changed in place,
        so the event being dispatched goes on over the old one."""
        caller = frame.f_back.f_locals.get("self") if frame is not None and frame.f_back is not None else None
        del frame
        if isinstance(caller, CallbackHandler) and caller.callbacks and caller.callbacks[0] is not self:
            caller.callbacks = [self] + [c for c in caller.callbacks if c is not self]

    def on_step_end(self, args, state, control, **kwargs):
        if self.governor is not None and self.report is None:
            seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
            tokens, self._tokens_seen = seen - self._tokens_seen, seen
            self.governor.step(tokens=tokens if tokens > 0 else None)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.governor is None or self.report is not None or logs is None:
            return
        values = log_values(self.governor)
        logs.update(values)
        if state.log_history:  # the Trainer appended a copy of logs before calling us
            state.log_history[-1].update(values)

    def on_train_end(self, args, state, control, **kwargs):
        self.close()

    def close(self) -> dict | None:
        """Stop governing and restore the board (idempotent); returns the report."""
        if self.governor is not None and self.report is None:
            self.report = self.governor.close()
        return self.report

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["GovernorCallback"]

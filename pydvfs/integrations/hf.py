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

``energy_j`` (the module's, or CPU+GPU with ``energy="cpu-gpu"``), ``j_per_step`` and
``gpu_clock_mhz`` are added to every ``on_log`` (the Trainer's
``log_history`` and the callbacks after this one). Reporters that the Trainer added itself
(``report_to``: TensorBoard, W&B) come before user callbacks, so to reach them too, use
``GovernorCallback(...).attach(trainer)``, which puts the callback first.

Restored: at the end of training, at interpreter exit (an exception that ends the process), on
SIGTERM/SIGHUP/SIGQUIT, and when a ``with cb:`` block around ``trainer.train()`` is left.
"""
from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from typing_extensions import Self

from ..energy import DEFAULT_MEASURE, check_measure
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
        dataset = getattr(train_dataloader, "dataset", None)
        workload = workload_from(model, dataset, self.workload, self.options, args=args)
        self.report = None
        # the run's length (max_steps less what a resumed run has done): the search's horizon
        self.governor = make_governor(self.policy, workload, self.options,
                                      steps_left(state.max_steps, state.global_step))
        self.governor.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.governor is not None and self.report is None:
            self.governor.step()

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

"""The governor inside the training process: a plain loop calls ``gov.step()`` after each
training step; the Hugging Face and Lightning callbacks do it from their hooks.

    gov = pydvfs.OnlineGovernor(sysfs_root=...)      # policy="online" by default
    for batch in data:
        train_step(batch)
        gov.step()
    report = gov.close()                             # restores the board

It drives the same :class:`~pydvfs.governor.engine.OnlineEngine` as ``pydvfs run``; the step
count comes from ``step()`` instead of a progress file. Static policies (mlg, ffg, rules, maxn)
pin once at the start and only measure.

The board is restored by :meth:`close` (also ``with``-exit), at interpreter exit (an uncaught
exception ends the process), and on SIGTERM/SIGHUP/SIGQUIT (handlers installed while it
governs, main thread only): the board is restored first, then the signal does what it did
before (the default: the process ends with 128+N).
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ..device import open_device
from ..errors import InvalidValueError
from ..measure.energy import DEFAULT_MEASURE
from ..measure.energy import LABEL as ENERGY_LABEL
from ..measure.energy import report_fields as energy_report_fields
from ..measure.energy import require as require_energy
from ..measure.sampler import Sampler
from ..policy.objective import Objective
from ..signals import SIGNALS
from .engine import OnlineEngine, WindowParams, checked_total_steps, window_energy_j
from .forecast import describe as describe_forecast
from .forecast import forecast, per_work
from .loop import (
    POLICIES,
    default_search,
    joint_start,
    needs_workload,
    new_search,
    online_outcome,
    plan_online,
    search_params,
    start_policy,
)

if TYPE_CHECKING:  # annotations only: the base install has no typing_extensions
    from typing_extensions import Self


class OnlineGovernor:
    """Govern the GPU clock from inside a training loop; see the module docstring.

    ``policy``: ``online`` (search while training) or a static one (``mlg``, ``ffg``,
    ``rules``, ``maxn``). ``workload``: a :class:`pydvfs.Workload`, a dict or a Hugging Face
    model/config (with ``seq_len``), as for :func:`pydvfs.apply`; the online search uses it for
    its start clock only (None: FFG). ``search``: ``model`` or ``hill``; ``objective``:
    ``energy``, ``edp`` or ``ed2p``; ``energy``: which energy, ``module`` (what the module
    draws, the default) or ``cpu-gpu`` (the CPU and GPU rails, the papers' measure; see
    :mod:`pydvfs.measure.energy`); ``max_slowdown_pct`` (a static policy takes them as
    :func:`pydvfs.apply` does, and refuses at :meth:`start` what it cannot); ``window``: a
    :class:`WindowParams`, a dict of its fields, or seconds (the shortest window, as ``pydvfs run
    --window``); ``search_options``: ``margin_pct``,
    ``samples``, ``reprobe_s``. ``total_steps``: how many times ``step()`` will count a step
    in this run, if known (the model search then weighs a probe's gain over what is left of the
    run; settable until the first window closes: the framework callbacks set it from the
    trainer). ``model_dir``: a folder from ``pydvfs train``; its ``roofline.txt`` gives the
    model search the board's V/f curve. ``prior``: what this board recorded of past runs, data
    for the online search (a :class:`pydvfs.governor.mode_search.SearchPrior`, or a list of
    (clock or mode, J/step, s/step) observations, or a dict with ``observations`` and ``start``):
    the fit starts from it and the design skips what it covers; the search still settles only
    on what it measured in this run. ``log``: where status lines go (None: nowhere).
    ``data_dir``: the board's store of run records (docs/store.md; None: ``PYDVFS_DATA_DIR`` or
    the default); an online run starts from the clock this board learned for the workload
    (``use_runs``) and is recorded there at :meth:`close` (``record=False``: not).
    """

    def __init__(self, policy: str = "online", workload: Any = None, *, sysfs_root=None, state_dir=None,
                 model_dir=None, rate_hz: float | None = None, start_mhz: float | None = None,
                 search: str | None = None, objective: str = "energy", max_slowdown_pct: float | None = None,
                 energy: str = DEFAULT_MEASURE,
                 window: WindowParams | dict | float | None = None, search_options: dict | None = None,
                 total_steps: int | None = None, log=sys.stderr, clock: Callable[[], float] = time.monotonic,
                 above_power_mode: bool = False, knobs="gpu", pin_mode: Callable | None = None,
                 restore_mode: Callable | None = None, modes=None, prior=None, data_dir=None, record: bool = True,
                 use_runs: bool = True):
        if policy not in POLICIES:
            raise InvalidValueError(f"unknown policy {policy!r}: expected {', '.join(POLICIES)}")
        if workload is None and needs_workload(policy):
            raise InvalidValueError(f"policy {policy} needs a workload (a pydvfs.Workload, a dict, or a "
                                    "Hugging Face model with seq_len)")
        if policy != "online" and (start_mhz is not None or search is not None or search_options
                                   or total_steps is not None or prior is not None):
            raise InvalidValueError("start_mhz, search, search_options, total_steps and prior are for policy 'online'")
        from .mode_search import SearchPrior

        self.prior = SearchPrior.of(prior)  # what the board recorded before: data for the search
        from .joint_search import parse_knobs

        self.knobs = parse_knobs(knobs) if isinstance(knobs, str) else parse_knobs(",".join(knobs))
        if self.knobs != ("gpu",) and policy != "online":
            raise InvalidValueError("knobs beyond gpu are for policy 'online'")
        self._pin_mode, self._restore_mode, self._modes = pin_mode, restore_mode, modes
        self._total_steps = checked_total_steps(total_steps)
        self.policy, self.workload, self.model_dir = policy, workload, model_dir
        self.objective = Objective(objective, max_slowdown_pct, energy)  # a static policy's: checked by apply at start
        self.search_kind = search or default_search()
        self.search_params = search_params(self.search_kind, **(search_options or {})) \
            if policy == "online" else None
        self.window = WindowParams.of(window)
        self.start_mhz = start_mhz
        self.data_dir, self.record, self.use_runs = data_dir, record, use_runs
        self.front_end = "OnlineGovernor"  # the callbacks name themselves (the record says who ran)
        self.log, self.clock = log, clock
        self.dev = open_device(sysfs_root, state_dir, above_power_mode)
        self.sampler = Sampler(rate_hz=rate_hz, sysfs_root=self.dev.sysfs_root)  # fails before any change
        if policy == "online":  # a search cannot minimise an energy the board's rails do not give
            require_energy(self.dev.board, self.objective.energy, self.dev.model, self.sampler.rails)
        self.steps = 0
        self.tokens: int | None = None  # counted by step(tokens=...); None: never given
        self._forecast_made: dict | None = None  # the rest of the run, predicted when the search settled
        self.engine: OnlineEngine | None = None
        self.report: dict | None = None
        self._t0: float | None = None
        self._plan: dict = {}
        self._decision: dict | None = None
        self._fallback: str | None = None  # a static policy's clock the board refused
        self._old_handlers: dict = {}
        self._lock = threading.RLock()

    # -- life cycle ------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._t0 is not None

    def start(self) -> OnlineGovernor:
        """Pin the start clock (online) or the policy's clock, start measuring. Called by the
        first :meth:`step` if not before."""
        with self._lock:
            if self.started:
                return self
            if self.report is not None:
                raise InvalidValueError("this governor was closed; make a new one")
            if self.policy == "online":
                self._plan = plan_online(self.dev, self.workload, self.model_dir, self.start_mhz, self.log,
                                         "pydvfs", self.search_kind, self.objective, self.data_dir, self.use_runs)
                searcher = new_search(self.search_kind, self._plan["search_levels_mhz"],
                                      self._plan["centre_mhz"], self.search_params, self.objective,
                                      self._plan["maxn_anchor"], self.model_dir,
                                      self.prior if self.prior is not None else self._plan["prior"]) \
                    if self.knobs == ("gpu",) \
                    else self._joint_search()
            self._install_handlers()
            atexit.register(self.close)
            try:
                engine = None
                if self.policy == "online":
                    engine = OnlineEngine(self.dev if self.knobs == ("gpu",) else self._mode_dev, self.sampler,
                                          searcher, self.window, "the training loop",
                                          self.log, self.objective, say_prefix="pydvfs",
                                          total_steps=self._total_steps)
                self._decision, self._fallback = start_policy(self.dev, self.policy, self.workload, self.model_dir,
                                                              self.objective, engine, self.log, "pydvfs",
                                                              data_dir=self.data_dir, use_runs=self.use_runs)
                self.sampler.start()
                self._t0_ns = time.monotonic_ns()
                self.sampler.begin_window("run")
                self._t0 = self.clock()
                self.engine = engine
            except BaseException:
                self._teardown()
                raise
            return self

    def step(self, n: int = 1, tokens: int | None = None) -> None:
        """``n`` more training steps are done (call it after each optimiser step); ``tokens``:
        the tokens those steps trained on (real ones: padding excluded where the data says which
        are padding), for J/token."""
        count = None if tokens is None else int(tokens)
        if count is not None and count < 0:
            raise InvalidValueError(f"tokens must be >= 0, got {tokens!r}")
        with self._lock:
            if not self.started:
                self.start()
            self.steps += int(n)
            if count is not None:
                self.tokens = (self.tokens or 0) + count
            if self.engine is not None:
                if self.tokens:
                    self.engine.tokens_per_step = self.tokens / self.steps
                self.engine.tick(self.clock() - self._t0, self.steps)
                if self._forecast_made is None and self.engine.search.converged:
                    self._forecast_made = self._forecast()
                    if self._forecast_made is not None and self.log is not None:
                        print(f"pydvfs: {describe_forecast(self._forecast_made, ENERGY_LABEL[self.objective.energy])}",
                              file=self.log, flush=True)

    def stats(self) -> dict:
        """So far: ``energy_j`` (the objective's: module or CPU+GPU; None where the board's rails
        do not give it), ``power_w``, ``j_per_step``, ``j_per_token`` and ``tokens_per_j``
        (None until ``step(tokens=)`` counted tokens), ``gpu_clock_mhz`` (None: the board's
        own governor), ``steps``, ``tokens``, ``duration_s``, ``energy_measure``, and, once the
        search settled, ``forecast`` (:mod:`pydvfs.governor.forecast`)."""
        with self._lock:
            if not self.started:
                return {"energy_j": 0.0, "power_w": None, "j_per_step": None, "j_per_token": None,
                        "tokens_per_j": None, "gpu_clock_mhz": self.current_mhz, "steps": 0,
                        "tokens": self.tokens, "duration_s": 0.0, "energy_measure": self.objective.energy,
                        "forecast": None}
            m = self.sampler.peek_window("run")
            e = window_energy_j(m, self.objective.energy)
            return {"energy_j": e, **per_work(e, m.duration_s, self.steps, self.tokens),
                    "gpu_clock_mhz": self.current_mhz, "steps": self.steps, "tokens": self.tokens,
                    "duration_s": m.duration_s, "energy_measure": self.objective.energy,
                    "forecast": self._forecast()}

    def _forecast(self) -> dict | None:
        """The rest of the run at the settled clock, and what MAXN would have cost (None while
        the search has not settled, or the run's length is unknown)."""
        if self.engine is None or not self.engine.search.converged:
            return None
        spent = window_energy_j(self.sampler.peek_window("run"), self.objective.energy)
        return forecast(self.engine.trajectory, self.engine.search.best_mhz, self.steps, self._total_steps,
                        self.tokens, spent)

    @property
    def total_steps(self) -> int | None:
        """How many steps this run will count (None: unknown); see the class docstring."""
        return self._total_steps

    @total_steps.setter
    def total_steps(self, value: int | None) -> None:
        with self._lock:
            if self.policy != "online" and value is not None:
                raise InvalidValueError("total_steps is for policy 'online'")
            self._total_steps = checked_total_steps(value)
            if self.engine is not None:
                self.engine.total_steps = self._total_steps

    @property
    def current_mhz(self) -> float | None:
        if self.engine is not None:
            return self.engine.pinned_mhz
        return None if self._decision is None or self._fallback else self._decision["freq_mhz"]

    def close(self) -> dict | None:
        """Stop measuring, restore the board, return the report (the same fields as ``pydvfs
        run``'s, without the command's). Safe to call twice (the same report)."""
        with self._lock:
            if self.report is not None or not self.started:
                if not self.started and self.report is None:
                    self._remove_handlers()
                return self.report
            try:
                engine_part = self.engine.report() if self.engine is not None else None
                m = self.sampler.end_window("run")
                self._t1_ns = time.monotonic_ns()
            finally:
                self._teardown()
            report = self._report(m, engine_part)
            self.report = report
            if self.engine is not None:
                self.engine.say_outcome()
                if self.record:  # what this board measured (docs/store.md)
                    from ..policy.record import record_run

                    record_run(report, self.dev, self.workload, self.front_end, self.data_dir, self.log, "pydvfs")
            return report

    def _joint_search(self):
        """The joint search over the modes (docs/power-modes.md), from the top mode."""
        from .joint_search import joint_setup

        search, self._mode_dev, plan = joint_setup(self.dev, self._plan["search_levels_mhz"], self.objective,
                                                   self._pin_mode, self._restore_mode, self._modes, self.dev.board,
                                                   self.prior, **joint_start(self._plan))
        self._plan.update(plan)
        return search

    def _teardown(self) -> None:
        try:
            self.sampler.stop()
            if self._restore_mode is not None:  # the domains beside the GPU's, first
                self._restore_mode()
        finally:
            self._restored = self.dev.restore()
            self._remove_handlers()
            atexit.unregister(self.close)

    def _report(self, m, engine_part: dict | None) -> dict:
        energy = window_energy_j(m, self.objective.energy)
        report = {"policy": self.policy, "steps": self.steps, "tokens": self.tokens, "duration_s": m.duration_s,
                  "energy_j": dict(m.energy_j),
                  **energy_report_fields(m, self.objective.energy),
                  **per_work(energy, m.duration_s, self.steps, self.tokens),
                  "workload": _workload_dict(self.workload),
                  "restored": self._restored, "measurement": m.to_dict(),
                  "monotonic_ns": [self._t0_ns, self._t1_ns]}  # brackets the measured span
        if engine_part is None:
            report.update(decision=self._decision, fallback=self._fallback,
                          chosen_mhz=None if self._fallback else self._decision["freq_mhz"],
                          objective=self.objective.to_dict(), trade=self._decision.get("trade"))
        else:
            report.update(self._plan, search_kind=self.search_kind, decision=None, **engine_part)
            report.update(online_outcome(report, energy))
            report["forecast"] = self._forecast_made
        return report

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- signals ---------------------------------------------------------------------------
    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for s in SIGNALS:
            self._old_handlers[s] = signal.signal(s, self._on_signal)

    def _remove_handlers(self) -> None:
        old, self._old_handlers = self._old_handlers, {}
        for s, h in old.items():
            signal.signal(s, h)

    def _on_signal(self, signum, frame) -> None:
        """Restore the board first, then let the signal do what it did before."""
        old = self._old_handlers.get(signum, signal.SIG_DFL)
        try:
            self.dev.restore()
            self.sampler.stop()
        finally:
            self._remove_handlers()
            atexit.unregister(self.close)
            self.report = {"policy": self.policy, "steps": self.steps, "restored": True,
                           "ended_by": signal.Signals(signum).name}
        if self.log is not None:
            print(f"pydvfs: {signal.Signals(signum).name}: the GPU clock was restored", file=self.log, flush=True)
        if callable(old):
            old(signum, frame)
        elif old == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


def _workload_dict(workload) -> dict | None:
    """The workload as the report keeps it (its fields, how it trains included), or None."""
    if workload is None:
        return None
    from ..workload import Workload

    try:
        return Workload.from_any(workload).to_dict()
    except (InvalidValueError, TypeError):
        return None


__all__ = ["OnlineGovernor"]

"""Run a training command under a governor: pin, measure, (search), restore.

    report = run_governed(["python", "train.py"], policy="online", progress_file="steps.txt")

Static policies (mlg, ffg, rules, maxn) choose one clock with :func:`pydvfs.apply` before the
command starts. ``online`` starts at a proposed clock and lets :class:`HillClimb` move it while
the command runs, from energy per training step: the module's energy (or CPU+GPU with
``Objective(energy="cpu-gpu")``; pydvfs/measure/energy.py) the C sampler integrates over a window
divided by the steps the command completed in it (the integer it writes, atomically, into the
progress file). The board is restored when the command ends, on Ctrl-C,
on SIGTERM (see cli/run.py) and on any error.

Once the command runs, nothing the board does stops it: the search covers only the levels up to
the board's max_freq at the start (a power mode caps it), a level the board still refuses is
dropped from the search, and if the board refuses even the clock that held before, the loop
falls back to the board's own state and lets the command run to its end.
"""
from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

from .. import _core
from ..command import exit_status, start_command, stop_command
from ..device import open_device
from ..device.levels import check_near_table
from ..errors import ClockVerifyError, InvalidValueError, PydvfsError
from ..measure.energy import DEFAULT_MEASURE
from ..measure.energy import report_fields as energy_report_fields
from ..measure.energy import require as require_energy
from ..measure.sampler import Sampler
from ..policy.objective import Objective
from ..progress import StepsSeen, check_progress_file, read_progress, read_progress_tokens
from ..signals import Terminated
from .engine import OnlineEngine, WindowParams, checked_total_steps, window_energy_j
from .forecast import per_work
from .mode_search import CurveParams, CurveSearch
from .search import HillClimb, SearchParams

STATIC_POLICIES = _core.POLICY_NAMES  # govcore's list: mlg, ffg, rules, maxn, roofline
SEARCHES = ("model", "hill")  # the online searches; the first is the default
POLICIES = ("online",) + STATIC_POLICIES
STATIC_POLL_S = 0.1  # how often a static policy's run reads the progress file


def needs_workload(policy: str) -> bool:
    """A static policy decides from a workload, unless its entry in govcore's table pins
    nothing (maxn: the board's own governor)."""
    return policy != "online" and "pins_nothing" not in _core.POLICY_FLAGS[policy]


MIDDLE = "middle of the table"  # choose_start's last resort


def choose_start(dev, workload: dict | None, model_dir=None, start_mhz: float | None = None,
                 learned=None, measure: str = DEFAULT_MEASURE) -> tuple[float, str, bool]:
    """Where the online search starts: ``start_mhz``, else the clock this board learned for the
    workload from its own runs (``learned``: a :class:`pydvfs.policy.learned.Learned`), else the
    policy's clock for the workload (mlg), else the policy's fixed clock (ffg), each decided as
    ``pydvfs apply`` decides it (the board's built-in policy for ``measure``, or ``model_dir``'s
    tree mapped by govcore's one rule), else the middle of the table. The third value: the
    policy keeps this workload at MAXN (its class, or a saving it does not clearly expect: then
    the model search measures MAXN first and keeps it unless a level is proven better; the clock
    returned is where its initial design is centred, the level the policy would have pinned)."""
    from ..policy.apply import decide

    if start_mhz is not None:  # pin's rule: far outside the table is a typo, not a clock to snap
        check_near_table(dev.available_frequencies_mhz, start_mhz, "--start")
        return dev.snap_mhz(start_mhz), "--start", False
    if learned is not None:
        return dev.snap_mhz(learned.freq_mhz), learned.note(), False
    keeps_maxn = False
    if workload is not None:
        d = decide(workload, "mlg", model_dir, dev.sysfs_root, dev.state_dir, energy=measure,
                   use_runs=False)  # the policy's own (the board's runs were asked above)
        if d.freq_mhz is not None:
            return d.freq_mhz, "mlg", False
        keeps_maxn = True
        if d.kept_from_mhz is not None:
            return d.kept_from_mhz, "mlg", True
    d = decide(None, "ffg", model_dir, dev.sysfs_root, dev.state_dir, energy=measure)  # as `apply --policy ffg`
    if d.freq_mhz is not None:
        return d.freq_mhz, "ffg", keeps_maxn
    if d.kept_from_mhz is not None:
        return d.kept_from_mhz, "ffg", True
    levels = dev.available_frequencies_mhz
    return levels[len(levels) // 2], MIDDLE, keeps_maxn


def board_cap_mhz(dev) -> float:
    """The power mode's GPU cap (MHz), by govcore's one rule (govcore/powermode.h): the highest
    level at or under the max_freq found before the first pin (the saved state's, if an earlier
    run left one, else the live one) and nvpmodel's cap; the top level where the device lifts
    the cap (above_power_mode) or none is known."""
    cap = dev.power_cap_mhz()
    return cap if cap is not None else max(dev.available_frequencies_mhz)


def capped_levels(levels_mhz, cap_mhz: float) -> tuple[float, ...]:
    """The levels at or below ``cap_mhz`` (half a MHz of rounding allowed); the lowest level
    alone if none is."""
    levels = sorted(levels_mhz)
    return tuple(f for f in levels if f <= cap_mhz + 0.5) or (levels[0],)


def plan_online(dev, workload: dict | None, model_dir=None, start_mhz: float | None = None,
                log=None, prefix: str = "pydvfs run", search_kind: str = "model",
                objective: Objective | None = None, data_dir=None, use_runs: bool = True) -> dict:
    """Where an online search starts and which levels it covers, read before anything is
    pinned (levels above the board's own max_freq cannot take): ``start_mhz`` (None: MAXN, the
    board's own governor, where the model keeps the workload there and the model search runs),
    ``start_source``, ``centre_mhz`` (the level the search's design starts from),
    ``maxn_anchor``, ``board_max_mhz``, ``search_levels_mhz``."""
    cap = board_cap_mhz(dev)
    levels = capped_levels(dev.available_frequencies_mhz, cap)
    learned = None
    if use_runs and start_mhz is None and workload is not None and model_dir is None:
        learned = board_start(dev, workload, levels, objective, data_dir, log, prefix)
    measure = objective.energy if objective is not None else DEFAULT_MEASURE
    calibrated = None
    if use_runs and learned is None and start_mhz is None and workload is not None and model_dir is None:
        from ..policy.board_calibration import calibrated_start  # the board calibrated from a run (docs/boards.md)

        calibrated = calibrated_start(dev, workload, levels, measure, data_dir, log, prefix)
    start, source, keeps_maxn = calibrated + (False,) if calibrated else \
        choose_start(dev, workload, model_dir, start_mhz, learned, measure)
    spread = None if calibrated else family_spread(dev, workload, measure)
    if start > levels[-1]:
        start, source = levels[-1], f"{source}, capped at the power mode's GPU cap {cap:g} MHz"
    if len(levels) < len(dev.available_frequencies_mhz) and log is not None:
        print(f"{prefix}: the power mode caps the GPU at {cap:g} MHz: searching {levels[0]:g}..{levels[-1]:g} "
              "MHz (--above-power-mode lifts the cap)", file=log, flush=True)
    maxn_anchor = keeps_maxn and search_kind == "model"  # the hill climb compares levels only
    if maxn_anchor:
        source = f"the policy keeps this workload at MAXN; the levels are searched from {start:g} MHz ({source})"
    elif keeps_maxn:
        source += " (the policy keeps this workload at MAXN)"
    return {"start_mhz": None if maxn_anchor else start, "start_source": source, "centre_mhz": start,
            "maxn_anchor": maxn_anchor, "board_max_mhz": cap, "search_levels_mhz": list(levels),
            "learned": None if learned is None else learned.to_dict(),
            # where the board is not calibrated: how far its optimum may be (the family's spread)
            "family_spread_mhz": spread,
            # the board's record as data for the model search (the hill climb takes none), and
            # on a board whose profile is an estimate the family's spread its design reaches
            "prior": search_prior(dev, learned, spread, search_kind)}


def search_prior(dev, learned, spread, search_kind: str) -> dict | None:
    """What the model search is given (a SearchPrior's fields): the board's record
    (``learned``), and ``spread`` (the family's [lowest, highest] best clock) where the board's
    simulator profile is an estimate: the round-0 design reaches its ends (docs/online.md). None
    for the hill climb, and where neither is given: a calibrated profile (the AGX Orin) or a
    board calibrated from a run searches as before."""
    if search_kind != "model":
        return None
    prior = learned.prior() if learned is not None else None
    if spread is not None and not _profile_calibrated(dev.board_id):
        prior = {**(prior or {}), "spread": list(spread)}
    return prior


def _profile_calibrated(board_id: str) -> bool:
    from ..sim.profiles import board_ids, profile

    return board_id not in board_ids() or profile(board_id).calibrated


def family_spread(dev, workload, measure: str) -> list | None:
    """[lowest, highest] best GPU clock of ``workload`` across the uncertainty family of the
    board's simulator profile (pydvfs.sim.uncertainty.optimum_spread); None without a workload
    or a profile."""
    from ..sim.profiles import board_ids

    if workload is None or dev.board_id not in board_ids():
        return None
    from ..policy.board_calibration import sim_run_for
    from ..sim.uncertainty import optimum_spread
    from ..workload import Workload

    return list(optimum_spread(dev.board_id, sim_run_for(Workload.from_any(workload)), measure))


def joint_start(plan: dict) -> dict:
    """What a joint search takes of the online plan: the GPU clock the plan starts from (the
    board's record, the built-in policy, --start), probed right after the top mode; none where
    the plan only fell back to the middle of the table (a guess, not worth a window)."""
    if MIDDLE in plan["start_source"]:
        return {}
    return {"start_gpu_mhz": plan["centre_mhz"], "start_source": plan["start_source"]}


def board_start(dev, workload, levels, objective: Objective | None, data_dir, log, prefix: str):
    """The clock this board learned for ``workload`` from its own runs (the store under
    ``data_dir``; docs/store.md), said on ``log``; None where it has none near."""
    from ..policy.learned import board_learned

    learned = board_learned(dev.board_id, workload, levels, objective, data_dir, log, prefix)
    if learned is not None and log is not None:
        print(f"{prefix}: starting at {learned.freq_mhz:g} MHz, {learned.note()}", file=log, flush=True)
    return learned


def start_policy(dev, policy: str, workload, model_dir, objective: Objective, engine: OnlineEngine | None = None,
                 log=None, prefix: str = "pydvfs run", data_dir=None, use_runs: bool = True
                 ) -> tuple[dict | None, str | None]:
    """Put the board where ``policy`` starts, the one start of both front ends (``pydvfs run``
    and :class:`~pydvfs.governor.inprocess.OnlineGovernor`). Returns (the decision, None for
    online; the fallback, None where the clock took).

    ``online``: the engine pins the search's start clock by the path of every later move, so a
    start the board refuses is dropped from the search as a refused later level is. A static
    policy is decided, then pinned by the same rule: a clock the board refuses (govcore has put
    its own state back) leaves the board at its own state, said on ``log`` and returned as the
    fallback; the command still runs. A board that cannot be written at all is an error. The pin
    stays at or under the power mode's GPU cap unless the device was opened above it; a choice
    mapped from another board's table or lowered to the cap is said on ``log``."""
    if policy == "online":
        engine.start(0.0)
        return None, engine.fallback
    decision, fallback = _start_static(dev, policy, workload, model_dir, objective, log, prefix, data_dir, use_runs)
    _publish_static(dev, policy, objective, decision, fallback)
    return decision, fallback


def _publish_static(dev, policy: str, objective: Objective, decision: dict | None, fallback: str | None) -> None:
    """A static policy's state for ``pydvfs exporter``, where $PYDVFS_GOVERNOR_STATUS asks for it
    (pydvfs/governor/status.py; the record goes stale when this process ends)."""
    from . import status as governor_status

    path = governor_status.status_path()
    if not path:
        return
    try:
        governor_status.write_status(path, {
            "sysfs_root": dev.sysfs_root, "board": dev.board_id, "policy": policy, "objective": objective.kind,
            "phase": "fallback" if fallback else "static",
            "freq_mhz": None if fallback or not decision else decision.get("freq_mhz"), "fallback": fallback})
    except OSError as e:
        print(f"pydvfs: warning: cannot write the status file {path}: {e.strerror or e}", file=sys.stderr, flush=True)


def _start_static(dev, policy, workload, model_dir, objective, log, prefix, data_dir=None, use_runs=True):
    """A static policy's start (see :func:`start_policy`): (the decision, the fallback)."""
    if "pins_nothing" in _core.POLICY_FLAGS[policy] and workload is None:  # maxn: nothing to decide
        dev.restore()
        return {"freq_mhz": None, "policy": policy}, None
    from ..policy.apply import decide, mapping_notice

    decision = decide(workload, policy, model_dir, dev.sysfs_root, dev.state_dir, objective=objective.kind,
                      max_slowdown_pct=objective.max_slowdown_pct, energy=objective.energy,
                      data_dir=data_dir, use_runs=use_runs).to_dict()  # the board's runs first (store.md)
    if decision.get("kept_reason") and log is not None:
        print(f"{prefix}: {decision['kept_reason']}", file=log, flush=True)
    if decision.get("outside_training") and log is not None:  # as `pydvfs apply` says it
        print(f"{prefix}: note: {decision['outside_training']}", file=log, flush=True)
    if decision["freq_mhz"] is None:  # maxn, or a tree that keeps the workload there
        dev.restore()
        return decision, None
    if decision.get("mapped_from_mhz") is not None and log is not None:
        print(f"{prefix}: {mapping_notice(decision['trained_on'] or {}, decision['mapped_from_mhz'], decision['policy_mhz'], dev.model)}",
              file=log, flush=True)
    try:
        pinned = dev.pin(decision["freq_mhz"])
    except ClockVerifyError as e:
        why = f"the board refused {decision['freq_mhz']:g} MHz ({e})"
        if log is not None:
            print(f"{prefix}: {why}: the board stays at its own clock state", file=log, flush=True)
        return decision, why
    decision.update(freq_mhz=pinned.freq_mhz, power_cap_mhz=pinned.power_cap_mhz,
                    clamped_from_mhz=pinned.clamped_from_mhz)
    if pinned.clamped_from_mhz is not None and log is not None:
        print(f"{prefix}: {clamp_notice(decision)}", file=log, flush=True)
    return decision, None


def search_vf(model_dir) -> tuple:
    """The V/f curve the model search fits P = p0 + c f V(f)^2 with, and where it comes from:
    the board's own, from a model folder's ``roofline.txt`` (``pydvfs train`` fits it with the
    roofline constants); else None (the curve model's default Orin table, stretched to another
    table's top clock), with why. A damaged roofline.txt is bad input, as for the roofline policy."""
    from .mode_search import DEFAULT_VF_SOURCE

    if model_dir is None:
        return None, DEFAULT_VF_SOURCE
    path = Path(model_dir) / "roofline.txt"
    if not path.is_file():
        return None, f"{DEFAULT_VF_SOURCE} (the model folder {model_dir} has no roofline.txt)"
    from ..policy.roofline_curve import read_roofline

    try:
        board = read_roofline(path)
    except OSError as e:
        raise InvalidValueError(f"cannot read {path}: {e.strerror}") from None
    return board.vf, f"model folder roofline.txt ({path})"


def new_search(kind: str, levels_mhz, start_mhz: float, params=None, objective: Objective | None = None,
               maxn_anchor: bool = False, model_dir=None, prior=None):
    """The search of kind ``kind`` (see SEARCHES) over ``levels_mhz`` from ``start_mhz``;
    ``maxn_anchor``: the model search measures MAXN first and keeps it unless a level is
    proven better (the hill climb compares levels only: it starts at ``start_mhz``); the model
    search fits with the V/f curve of ``model_dir`` if it has one (:func:`search_vf`); ``prior``:
    what the board recorded before (:class:`~pydvfs.governor.mode_search.SearchPrior`, or what
    ``SearchPrior.of`` takes), for the model search (the hill climb takes none)."""
    objective = objective or Objective()
    if kind == "hill":
        if objective.max_slowdown_pct is not None:
            raise InvalidValueError("--max-slowdown needs the model search (--search model): "
                                    "the hill climb does not fit step times")
        if params is not None and not isinstance(params, SearchParams):
            params = SearchParams(**{k: v for k, v in params.to_dict().items() if k in SearchParams.__dataclass_fields__})
        if prior is not None:
            raise InvalidValueError("a prior is for the model search (--search model): the hill climb takes none")
        return HillClimb(levels_mhz, start_mhz, params, 0.0)
    if kind == "model":
        if params is not None and not isinstance(params, CurveParams):
            params = search_params("model", **{k: v for k, v in params.to_dict().items()
                                               if k in ("samples", "reprobe_s", "margin_pct")})
        vf, vf_source = search_vf(model_dir)
        return CurveSearch(levels_mhz, start_mhz, params, 0.0, objective, vf=vf, vf_source=vf_source,
                           maxn_anchor=maxn_anchor, prior=prior)
    raise InvalidValueError(f"unknown search {kind!r}: expected {', '.join(SEARCHES)}")


def default_search() -> str:
    """The model search where numpy and scipy are installed (its curve fit needs them), else
    the hill climb (the on-board path needs nothing beyond the C extension)."""
    import importlib.util

    if all(importlib.util.find_spec(m) is not None for m in ("numpy", "scipy")):
        return "model"
    return "hill"


def search_params(kind: str, **given):
    """The search's tunables from the CLI's ``margin_pct``, ``samples``, ``reprobe_s``."""
    if kind == "hill":
        if "samples" in given:
            given["max_samples"] = max(given["samples"], SearchParams.max_samples, 2 * given["samples"] - 1)
        return SearchParams(**given)
    if kind == "model":
        if "samples" in given:
            n = given["samples"]
            given["max_samples"] = max(n, CurveParams.max_samples, 2 * n - 1)
            given["max_windows"] = max(given["max_samples"], CurveParams.max_windows, 3 * n)
            given["design_samples"] = min(n, CurveParams.design_samples)
        return CurveParams(**given)
    raise InvalidValueError(f"unknown search {kind!r}: expected {', '.join(SEARCHES)}")


def _trade(trajectory: list[dict], chosen: float | None) -> dict | None:
    """What the chosen clock trades against the fastest clock measured: the change of J/step
    and of s/step, from the medians of their windows (None without both)."""
    by: dict = {}
    for w in trajectory:
        by.setdefault(w["freq_mhz"], []).append(w)
    if chosen is None or chosen not in by or not by:
        return None
    fastest = max(f for f in by if f is not None) if any(f is not None for f in by) else None
    if fastest is None:
        return None

    def med(f, key):
        v = sorted(w[key] for w in by[f])
        return v[len(v) // 2]

    return {"vs_mhz": fastest,
            "j_per_step_pct": 100.0 * (med(chosen, "j_per_step") / med(fastest, "j_per_step") - 1.0),
            "s_per_step_pct": 100.0 * (med(chosen, "s_per_step") / med(fastest, "s_per_step") - 1.0)}


def online_outcome(report: dict, energy_j: float) -> dict:
    """The search's verdict for the report: ``chosen_mhz`` (None when no probe finished: a
    best never measured is not reported) and the saving against the start clock.

    Like with like: the start clock's J/step was measured over steps, so it is compared with
    the span of counted steps only (first count seen .. last advance seen), never with the
    start-up before the first step or the tail after the last one."""
    if report["fallback"]:
        chosen = report["final_mhz"]
    else:
        chosen = report["search"]["best_mhz"] if report["probed"] else None
    out = {"chosen_mhz": chosen, "energy_at_start_clock_j": None, "saving_vs_start_pct": None,
           "objective_text": Objective(**report["objective"]).describe()}
    out["trade"] = _trade(report["trajectory"], chosen)
    est = report["search"]["start_estimate_j_per_step"]
    span = report["counted_span"]
    if est is not None and span is not None and span["steps"] > 0:
        at_start_j = est * span["steps"]
        out["energy_at_start_clock_j"] = energy_j - span["energy_j"] + at_start_j
        out["saving_vs_start_pct"] = 100.0 * (1.0 - span["energy_j"] / at_start_j)
    return out


def clamp_notice(decision: dict) -> str:
    """The one-line notice of a decision the power mode's cap lowered."""
    return (f"note: {decision['clamped_from_mhz']:g} MHz is above the power mode's GPU cap: pinned "
            f"{decision['freq_mhz']:g} MHz (--above-power-mode lifts the cap)")


def _checked_run(cmd, policy: str, workload, progress_file, start_mhz, search, total_steps) -> tuple:
    """``run_governed``'s arguments checked before anything is opened: (the command as a list,
    the total steps checked)."""
    cmd = list(cmd)
    if not cmd:
        raise InvalidValueError("no training command given (put it after --)")
    if policy not in POLICIES:
        raise InvalidValueError(f"unknown policy {policy!r}: expected {', '.join(POLICIES)}")
    online = policy == "online"
    if online and not progress_file:
        raise InvalidValueError("--policy online needs --progress-file F: the step count CMD writes")
    if workload is None and needs_workload(policy):
        raise InvalidValueError(f"--policy {policy} needs --workload model=...,layers=...,hidden=...,seq_len=...")
    if not online and (start_mhz is not None or search is not None or total_steps is not None):
        raise InvalidValueError("the search options (--start, --margin, --steps, ...) are for --policy online")
    return cmd, checked_total_steps(total_steps)


def _report_measured(report: dict, m, seen, progress, objective, status, restored, restore_error,
                     interrupted) -> float:
    """What a governed run measured (``m``: the sampler's measurement; ``seen``: the steps it
    saw), its exit and the board's restore, into ``report``; returns the energy of the objective."""
    steps = tokens = None
    if seen is not None:
        seen.see(*read_progress_tokens(progress))  # the count CMD left at its end
        steps, tokens = seen.steps, seen.tokens
    energy = window_energy_j(m, objective.energy)
    report.update(
        exit_status=status,
        duration_s=m.duration_s,
        energy_j=dict(m.energy_j),
        **energy_report_fields(m, objective.energy),
        steps=steps,  # the steps this run saw the count advance by (progress.StepsSeen)
        steps_at_start=None if seen is None else seen.start[0],
        tokens=tokens,
        **per_work(energy, m.duration_s, steps, tokens),
        restored=restored,
        restore_error=restore_error,
        measurement=m.to_dict(),
        warnings=[],
        partial=interrupted is not None,
        stopped_by=None if interrupted is None else _stopped_by(interrupted),
    )
    return energy


def run_governed(cmd: Sequence[str], policy: str = "online", workload: dict | None = None,
                 progress_file: str | Path | None = None, rate_hz: float | None = None,
                 model_dir=None, start_mhz: float | None = None,
                 search: SearchParams | None = None, window: WindowParams | None = None,
                 sysfs_root=None, state_dir=None, log=None,
                 clock: Callable[[], float] = time.monotonic,
                 *, objective: Objective | None = None, search_kind: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, total_steps: int | None = None,
                 knobs=("gpu",), above_power_mode: bool = False,
                 data_dir=None, record: bool = True, use_runs: bool = True) -> dict:
    """Run ``cmd`` under ``policy``; returns the report (see docs/online.md). ``total_steps``:
    the count the progress file will reach at the end, if known (the online search's horizon).
    The clock stays at or under the power mode's GPU cap unless ``above_power_mode``. An online
    run starts from the clock this board learned for the workload (``use_runs``) and is recorded
    in the board's store under ``data_dir`` (``record``; docs/store.md)."""
    from ..device import remote

    cmd, total_steps = _checked_run(cmd, policy, workload, progress_file, start_mhz, search, total_steps)
    online = policy == "online"
    objective = objective or Objective()
    search_kind = search_kind or default_search()
    window = window or WindowParams()
    log = log or sys.stderr
    progress = Path(progress_file) if progress_file else None
    if progress is not None:  # a count there is where the run counts from; anything else is not taken
        check_progress_file(progress)
    dev = open_device(sysfs_root, state_dir, above_power_mode)
    reconnects = remote.reconnects()

    report: dict = {"command": cmd, "policy": policy, "progress_file": None if progress is None else str(progress)}
    if online:
        plan = plan_online(dev, workload, model_dir, start_mhz, log, search_kind=search_kind,
                           objective=objective, data_dir=data_dir, use_runs=use_runs)
        report.update(plan, search_kind=search_kind)
        if tuple(knobs) == ("gpu",):
            searcher = new_search(search_kind, plan["search_levels_mhz"], plan["centre_mhz"], search, objective,
                                  plan["maxn_anchor"], model_dir, plan["prior"])  # the board's record: data
            search_dev = dev
        else:  # the whole mode (docs/power-modes.md): through the board's joint pin
            from .joint_search import joint_setup

            searcher, search_dev, joint_plan = joint_setup(dev, plan["search_levels_mhz"], objective,
                                                           **joint_start(plan))
            report.update(joint_plan, search_kind="joint")
    sampler = Sampler(rate_hz=rate_hz, sysfs_root=dev.sysfs_root)  # fails before any change
    if online:  # a search cannot minimise an energy the board's rails do not give
        require_energy(dev.board, objective.energy, dev.model, sampler.rails)
    finished = False
    interrupted: BaseException | None = None  # Ctrl-C or a termination signal during the run
    proc = engine = seen = None
    try:
        try:
            if online:
                engine = OnlineEngine(search_dev, sampler, searcher, window, f"the progress file {progress}",
                                      log, objective, total_steps=total_steps)
            report["decision"], fallback = start_policy(dev, policy, workload, model_dir, objective, engine, log,
                                                        data_dir=data_dir, use_runs=use_runs)
            if not online:
                report["fallback"] = fallback
            with sampler:
                # the count there now (a writer already running, a count left before) is not this run's
                seen = StepsSeen(read_progress_tokens(progress)) if progress is not None else None
                t0 = clock()
                proc = start_command(cmd, {"PYDVFS_POLICY": policy})
                try:
                    if online:
                        _poll(engine, progress, seen, proc, clock, t0, sleep)
                        report.update(engine.report())
                    elif seen is not None:
                        while proc.poll() is None:
                            sleep(STATIC_POLL_S)
                            seen.see(*read_progress_tokens(progress))
                    else:
                        proc.wait()
                except BaseException as e:
                    stop_command(proc)
                    if engine is not None and isinstance(e, (KeyboardInterrupt, Terminated)):
                        report.update(engine.report())  # the search so far, while the sampler runs
                    raise
            status = exit_status(proc.returncode)
            finished = True
        except (KeyboardInterrupt, Terminated) as e:
            if proc is None or (online and "trajectory" not in report):
                raise  # stopped before the command ran: nothing measured, nothing to report
            interrupted = e  # the command is stopped and measured: a partial report below
            status = exit_status(proc.returncode)
    finally:
        try:
            restored, restore_error = dev.restore(), None
        except PydvfsError as e:
            if not finished and interrupted is None:
                raise
            # the run is over and measured: its report is still given, with what is left pinned
            restored, restore_error = False, str(e)
    energy = _report_measured(report, sampler.measurement, seen, progress, objective, status, restored,
                              restore_error, interrupted)
    if remote.reconnects() > reconnects:
        # the daemon restarted: the client connected again, pinned again and began its windows again
        report["warnings"].append(
            "the connection to the govcore daemon was lost during the run (it restarted?): the clock "
            "was pinned again on a new connection, and energy and time count only from then on")
        print(f"pydvfs run: warning: {report['warnings'][-1]}", file=log, flush=True)
    if online:
        report.update(online_outcome(report, energy))
        engine.say_outcome()
        if record:  # what this board measured, for apply and the next run's start (docs/store.md)
            from ..policy.record import record_run

            record_run(report, dev, workload, "pydvfs run", data_dir, log, "pydvfs run")
    else:
        report.update(chosen_mhz=None if report["fallback"] else report["decision"]["freq_mhz"],
                      objective=objective.to_dict(),
                      trade=report["decision"].get("trade"))
    if interrupted is not None:
        # the caller still unwinds as on any Ctrl-C/SIGTERM, with what was measured until then
        interrupted.partial_report = report
        raise interrupted
    return report


def _stopped_by(e: BaseException) -> str:
    return "SIGINT" if isinstance(e, KeyboardInterrupt) else signal.Signals(e.signum).name


def _poll(engine: OnlineEngine, progress: Path, seen: StepsSeen, proc, clock, t0: float, sleep) -> None:
    """Drive the engine from the progress file until the command ends: the count reaches the
    engine once it has moved from the one the file held at the start (not this run's)."""
    poll_s = engine.w.poll_interval_s
    while proc.poll() is None:
        sleep(poll_s)
        steps, tokens = read_progress_tokens(progress)
        seen.see(steps, tokens)
        if steps and tokens:
            engine.tokens_per_step = tokens / steps
        engine.tick(clock() - t0, steps if seen.moved else None)


__all__ = ["POLICIES", "STATIC_POLICIES", "WindowParams", "board_cap_mhz", "capped_levels", "choose_start", "read_progress",
           "run_governed", "start_policy"]

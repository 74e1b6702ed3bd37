"""The built-in policies scored on their own board's simulator (docs/policy.md, "Built-in
policies"): each board's policy, as compiled into govcore, decides on a fake layout of the board
(the production path of ``pydvfs apply``), and the simulator says, without noise, what the
chosen clock costs against MAXN and against the board's best clock.

The truth is the steady state of :func:`pydvfs.sim.model.operating_point` on the board's
profile: energy per step of the measure at every GPU level, and at MAXN (the board's own
governor, podgov over the whole table at the top CPU and EMC clocks: the setting of the
board's characterisation sweep, :func:`pydvfs.sim.sweep.maxn_setting`).
"""
from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..device import table as boards
from ..measure.energy import ROLE, check_measure
from ..sim.catalogue import EVALUATION_TASKS, PAPER_MODELS, get_workload
from ..sim.model import default_params, operating_point
from ..sim.sweep import maxn_setting


@dataclass(frozen=True)
class Truth:
    """A workload's noise-free energy per step (J) on a board, per GPU level and at MAXN."""

    name: str
    workload: dict  # as pydvfs.apply takes it (util_pct: the GPU load at MAXN, as a sweep records)
    energy_j: dict  # measure -> {level MHz: J/step}
    maxn_j: dict  # measure -> J/step

    def best_mhz(self, measure: str) -> float:
        e = self.energy_j[measure]
        return min(e, key=e.__getitem__)

    def vs_maxn_pct(self, measure: str, mhz: float | None) -> float:
        """Energy at ``mhz`` (None: MAXN) against MAXN's, %: negative is a saving."""
        e = self.maxn_j[measure] if mhz is None else self.energy_j[measure][mhz]
        return 100.0 * (e / self.maxn_j[measure] - 1.0)


def truth(board_id: str, model: str, task: str, p=None, method: str = "full-fp32") -> Truth:
    """The simulated truth of ``model`` on ``task`` on ``board_id``, both measures; ``method``:
    how it trains (a tag of pydvfs.sim.catalogue.METHODS), in the workload as `--workload` says it."""
    p = p or default_params()
    w = get_workload(model, task, method=method)
    levels = boards.board(board_id).gpu_levels_mhz
    maxn = operating_point(w, maxn_setting(board_id), None, p, board=board_id)
    ops = {f: operating_point(w, "fixed", f, p, board=board_id) for f in levels}

    def per_step(op, measure):
        return op.role_power_w[ROLE[measure]] * op.t_step_s

    measures = tuple(ROLE)
    a = w.arch
    return Truth(w.name, {"model": a.family, "layers": a.layers, "hidden": a.hidden,
                          "seq_len": w.task.avg_tokens, "util_pct": round(100.0 * maxn.load, 2),
                          **{k: v for k, v in w.workload().method_columns().items() if v is not None}},
                 {m: {f: per_step(op, m) for f, op in ops.items()} for m in measures},
                 {m: per_step(maxn, m) for m in measures})


def held_out(models=PAPER_MODELS, tasks=EVALUATION_TASKS) -> list[tuple[str, str]]:
    """The workloads the built-in policies were not trained on: every catalogue model on the
    evaluation tasks."""
    return [(m, t) for m in models for t in tasks]


def score(truths, chosen_mhz, measure: str) -> dict:
    """Scores of the clocks chosen (None: MAXN) for ``truths``: mean saving vs MAXN, its share of
    the best clock's, mean and max regret against the best clock, the worst against MAXN."""
    check_measure(measure)
    saving = [-t.vs_maxn_pct(measure, f) for t, f in zip(truths, chosen_mhz)]
    best = [-t.vs_maxn_pct(measure, t.best_mhz(measure)) for t in truths]
    regret = [100.0 * ((t.maxn_j[measure] if f is None else t.energy_j[measure][f])
                       / t.energy_j[measure][t.best_mhz(measure)] - 1.0) for t, f in zip(truths, chosen_mhz)]
    mean_best = statistics.fmean(best)
    return {"n": len(truths), "saving_pct": statistics.fmean(saving), "best_saving_pct": mean_best,
            "share_of_best_pct": 100.0 * statistics.fmean(saving) / mean_best if mean_best > 0 else float("nan"),
            "regret_pct": statistics.fmean(regret), "max_regret_pct": max(regret),
            "worst_vs_maxn_pct": max(-s for s in saving), "left_at_maxn": sum(f is None for f in chosen_mhz)}


def builtin_choices(board_id: str, measure: str, truths) -> list:
    """The built-in policy of ``board_id`` for ``measure``, deciding (dry run, the host's runs left
    out) on a fake layout of the board for each of ``truths``' workloads: its clocks (None: MAXN)."""
    from ..device.fake import build_fake_board
    from .apply import decide

    with tempfile.TemporaryDirectory() as tmp:
        fake = build_fake_board(Path(tmp) / board_id, board=board_id)
        # the policy alone: runs the host's store holds (PYDVFS_DATA_DIR) would make it board-learned
        return [decide(t.workload, "mlg", sysfs_root=fake.root, energy=measure, use_runs=False).freq_mhz
                for t in truths]


def evaluate_builtin(board_id: str, measure: str, workloads=None, p=None) -> dict:
    """The built-in policy of ``board_id`` for ``measure`` (:func:`builtin_choices`), scored on the
    board's simulator (``p``: its parameters, e.g. a family member's; default the profile's) by
    :func:`score` over ``workloads`` (default :func:`held_out`)."""
    truths = [truth(board_id, m, t, p) for m, t in (workloads or held_out())]
    return {"board": board_id, "measure": measure, **score(truths, builtin_choices(board_id, measure, truths), measure)}


# ---- decisions that hold across a board's uncertainty family (pydvfs/sim/uncertainty.py) -------
MAX_LOSS_PCT = 0.5  # a robust clock costs no training workload more than this against MAXN, on any member
# (half of the 1 % a decision may cost on a workload it was not trained on: docs/policy.md)


def run_of(name: str) -> tuple[str, str, str]:
    """(model, task, method) of a simulated run's name ``model/task[@method]``."""
    model, _, rest = name.partition("/")
    task, _, method = rest.partition("@")
    return model, task, method or "full-fp32"


def family_truths(board_id: str, names, members) -> dict:
    """member name -> the noise-free :class:`Truth` of each run named in ``names`` on that member."""
    return {m.name: [truth(board_id, *run_of(n)[:2], m.params(), run_of(n)[2]) for n in names] for m in members}


def robust_clock(truths: dict, measure: str, max_loss_pct: float = MAX_LOSS_PCT) -> dict:
    """The clock for a class of workloads that holds across a family (``truths``: member name ->
    the class's workloads' :class:`Truth`, the same workloads on each): of the levels that cost no
    workload more than ``max_loss_pct`` against MAXN on any member, the one whose mean saving on
    the family's worst member is largest; MAXN (``mhz`` None) unless that worst case saves.

    Returns ``mhz``, ``candidate_mhz`` (the best level, kept or not), ``range_pct`` ([worst,
    best] member's mean saving against MAXN at ``mhz``: [0, 0] at MAXN) and ``worst_pct`` (the
    candidate's worst member's mean saving)."""
    members = list(truths.values())
    levels = sorted(members[0][0].energy_j[measure])

    def means(f):
        return [statistics.fmean(-t.vs_maxn_pct(measure, f) for t in ts) for ts in members]

    def loss(f):
        return max(t.vs_maxn_pct(measure, f) for ts in members for t in ts)

    ok = [f for f in levels if loss(f) <= max_loss_pct] or levels
    cand = max(ok, key=lambda f: (min(means(f)), -abs(f - levels[-1])))
    worst = min(means(cand))
    keep = worst > 0 and loss(cand) <= max_loss_pct
    m = means(cand)
    return {"mhz": cand if keep else None, "candidate_mhz": cand, "worst_pct": worst,
            "range_pct": [min(m), max(m)] if keep else [0.0, 0.0]}


def evaluate_family(board_id: str, measure: str, members=None, workloads=None) -> dict:
    """The built-in policy of ``board_id`` for ``measure`` scored (:func:`score`) on every member of
    the board's uncertainty family (default :func:`pydvfs.sim.uncertainty.family`) over the
    held-out workloads: {"default": the default member's scores, "worst": the scores on the member
    where it saves least (with its ``member``), "max_vs_maxn_pct": the most any decision costs
    against MAXN on any member}."""
    from ..sim.uncertainty import family

    rows = {}
    for m in members or family(board_id):
        truths = [truth(board_id, mo, t, m.params()) for mo, t in (workloads or held_out())]
        rows[m.name] = score(truths, builtin_choices(board_id, measure, truths), measure) | {"member": m.name}
    worst = min(rows.values(), key=lambda r: r["saving_pct"])
    return {"board": board_id, "measure": measure, "default": rows.get("default", worst), "worst": worst,
            "max_vs_maxn_pct": max(r["worst_vs_maxn_pct"] for r in rows.values())}

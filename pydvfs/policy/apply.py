"""``pydvfs.apply``: choose the energy-optimal clock for a workload and pin it.

The choice is made in C (govcore/policy.c), by the tree built into the extension or by one that
``pydvfs train`` compiled into a model folder, so Python and the ``govcore`` binary decide alike.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from .. import _core
from ..device import hz_to_mhz, open_device, ownership, resolve_sysfs_root
from ..energy import DEFAULT_MEASURE
from ..errors import InvalidValueError
from ..signals import terminate_as_exception
from .manifest import load_model_dir
from .workload import Workload

DEFAULT_POLICY = "mlg"  # the learned tree (policy=None means it too)
_trees: dict[str | None, "_core.Tree"] = {}
_boards: dict[str, "_core.Board"] = {}


def load_tree(model_dir: str | os.PathLike | None = None) -> "_core.Tree":
    """The built-in tree (None) or a trained one; loaded once per process."""
    key = None if model_dir is None else os.path.realpath(model_dir)
    if key not in _trees:
        _trees[key] = _core.Tree(None) if key is None else load_model_dir(key)
    return _trees[key]


def load_roofline(model_dir: str | os.PathLike | None) -> "_core.Roofline":
    """The roofline policy's constants from a model folder (model_dir/roofline.txt)."""

    if model_dir is None:
        raise InvalidValueError("the roofline policy needs --model-dir (a folder from `pydvfs train`)")
    return _core.Roofline(os.path.join(os.path.realpath(model_dir), "roofline.txt"))


def _board(sysfs_root) -> "_core.Board":
    """The board under a root, discovered once per process (a board does not change while a
    process governs it; the clock state is read afresh on every call)."""
    root = resolve_sysfs_root(sysfs_root)
    if root not in _boards:
        _boards[root] = open_device(root)._board
    return _boards[root]


def describe_trade(d: dict) -> list[str]:
    """The goal, the bound's move and the predicted trade of a decision record (``to_dict``),
    as text lines (none for a plain minimum-energy decision without a model's curve)."""
    from ..objective import Objective

    lines = []
    goal = Objective(**d.get("objective") or {})
    if goal != Objective():
        lines.append(f"objective {goal.describe()}")
    if goal.max_slowdown_pct is not None and d.get("policy_mhz") not in (None, d["freq_mhz"]):
        lines.append(f"bound     {d['policy']} chose {d['policy_mhz']:g} MHz; {d['freq_mhz']:g} MHz meets the "
                     f"{goal.max_slowdown_pct:g} % slowdown bound")
    t = d.get("trade")
    if t and t["vs_mhz"] != d["freq_mhz"]:
        lines.append(f"trade     {d['freq_mhz']:g} MHz against {t['vs_mhz']:g} MHz (the top level), predicted by "
                     f"the roofline model: J/step {t['j_per_step_pct']:+.1f} %, s/step {t['s_per_step_pct']:+.1f} %")
    return lines


@dataclass(frozen=True)
class Decision:
    """What a policy chose. ``freq_mhz`` is the board level set (None: MAXN, the board's own
    governor); ``proposed_mhz`` what the policy asked for before the clamp to the table;
    ``policy_mhz`` the policy's level before the slowdown bound of ``objective`` (see
    :class:`pydvfs.objective.Objective`); ``trade`` the predicted J/step and s/step at
    the level against the top level, in % (``vs_mhz``; from the model folder's roofline.txt;
    None without one); ``warning``: set when the pin saved an original that is itself a pin
    (min == max, as jetson_clocks leaves it), as :attr:`pydvfs.PinResult.warning`."""

    freq_mhz: float | None
    proposed_mhz: float | None
    policy: str
    features: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    model: str = ""
    policy_mhz: float | None = None
    objective: dict = field(default_factory=lambda: {"kind": "energy", "max_slowdown_pct": None})
    trade: dict | None = None
    power_cap_mhz: float | None = None
    clamped_from_mhz: float | None = None
    mapped_from_mhz: float | None = None
    trained_on: dict | None = None
    warning: str | None = None
    learned: dict | None = None  # the board's own runs that chose it (docs/store.md), None: the tree

    def to_dict(self) -> dict:
        return {"freq_mhz": self.freq_mhz, "proposed_mhz": self.proposed_mhz, "policy": self.policy,
                "policy_mhz": self.policy_mhz, "objective": self.objective, "trade": self.trade,
                "features": self.features, "workload": self.workload, "model": self.model,
                "power_cap_mhz": self.power_cap_mhz, "clamped_from_mhz": self.clamped_from_mhz,
                "mapped_from_mhz": self.mapped_from_mhz, "trained_on": self.trained_on,
                **({"warning": self.warning} if self.warning else {}),  # as govcore's: only where set
                **({"origin": learned_origin(self.learned), "learned": self.learned} if self.learned else {})}

    def learned_notice(self) -> str | None:
        """The one line saying the clock was learned on this board (None: the tree chose it)."""
        if not self.learned:
            return None
        return f"{self.freq_mhz:g} MHz {learned_note(self.learned)}"

    def mapping_notice(self, board_model: str = "") -> str | None:
        """The one-line notice of a choice mapped from the tree's training table onto this
        board's (docs/policy.md, "On another board"); None where it was not mapped."""
        if self.mapped_from_mhz is None or self.freq_mhz is None:
            return None
        return mapping_notice(self.trained_on or {}, self.mapped_from_mhz, self.policy_mhz or self.freq_mhz,
                              board_model)

    def describe(self, note: str = "") -> str:
        """Text: the clock (with ``note`` after it), then the goal and the trade, if any."""
        if self.freq_mhz is None:
            return f"policy {self.policy}: MAXN (the board's own governor){note}"
        if self.learned:
            note = f" ({learned_note(self.learned)}){note}"
        return "\n".join([f"policy {self.policy}: GPU clock {self.freq_mhz:g} MHz{note}",
                          *describe_trade(self.to_dict())])


def learned_origin(learned: dict) -> dict:
    """The decision's origin where the board's own runs chose the clock."""
    from ..runs.learned import ORIGIN

    return {"kind": ORIGIN, "board": learned["board"], "measure": learned["measure"], "runs": learned["runs"]}


def learned_note(learned: dict) -> str:
    from ..runs.learned import Learned

    return Learned(**{**learned, "neighbours": tuple(learned["neighbours"])}).note()


def _learned_decision(board, wl: Workload, goal, policy: str, sysfs_root, state_dir, pin: bool,
                      above_power_mode: bool, data_dir) -> Decision | None:
    """The default policy on a board that learned from its own runs (docs/store.md): the clock
    its runs voted for this workload, pinned as any pin (the power mode's cap obeyed); None
    where the store has no workload near this one (the tree decides)."""
    from ..runs.learned import board_learned

    levels = [hz_to_mhz(f) for f in board.freqs_hz]
    learned = board_learned(board.board_id or None, wl, levels, goal, data_dir, prefix="pydvfs apply")
    if learned is None:
        return None
    tree = load_tree(None)
    dev = open_device(sysfs_root, state_dir, above_power_mode)
    freq, cap, clamped, warning = learned.freq_mhz, None, None, None
    if pin:
        r = dev.pin(learned.freq_mhz)
        freq, cap, clamped, warning = r.freq_mhz, r.power_cap_mhz, r.clamped_from_mhz, r.warning
    else:
        cap = None if above_power_mode else dev.power_cap_mhz()
        if cap is not None and freq > cap + 0.5:  # as the pin would: the highest level under the cap
            below = [f for f in dev.available_frequencies_mhz if f <= cap + 0.5]
            clamped, freq = freq, max(below) if below else min(dev.available_frequencies_mhz)
    return Decision(freq_mhz=freq, proposed_mhz=learned.freq_mhz, policy=policy,
                    features=dict(zip(tree.feature_names, tree.features(wl.as_core()))), workload=wl.to_dict(),
                    model=learned.origin()["kind"], policy_mhz=learned.freq_mhz, objective=goal.to_dict(),
                    power_cap_mhz=cap, clamped_from_mhz=clamped, warning=warning, learned=learned.to_dict())


def _board_name(board_id: str | None, model: str = "") -> str:
    from ..boards import boards, identify

    if board_id and board_id in boards():
        return boards()[board_id].name
    found = identify(model) if model else None
    return found.name if found else (board_id or "another board")


def mapping_notice(trained_on: dict, from_mhz: float, to_mhz: float, board_model: str = "") -> str:
    levels = trained_on.get("levels_mhz") or []
    table = f" ({levels[0]:g}..{levels[-1]:g} MHz)" if levels else ""
    here = _board_name(None, board_model) if board_model else "this board"
    return (f"note: the policy was trained on {_board_name(trained_on.get('board'))}'s clock table{table}; "
            f"on {here} its {from_mhz:g} MHz maps to {to_mhz:g} MHz (the same fraction of the top level, "
            "snapped to this board's table); `pydvfs run --policy online` measures this board's own best clock")


def _trained_on(tree) -> dict:
    return {"board": tree.board_id, "levels_mhz": list(tree.levels_mhz)}


def _mhz(hz: int) -> float | None:
    return None if hz == 0 else hz_to_mhz(hz)


def _decide(workload: Any, policy: str, model_dir, sysfs_root, state_dir, pin: bool,
            objective: str = "energy", max_slowdown_pct: float | None = None,
            above_power_mode: bool = False, energy: str = DEFAULT_MEASURE, data_dir=None, use_runs: bool = True,
            **overrides) -> Decision:
    from ..objective import Objective

    if policy is None:  # as if not given: the default policy
        policy = DEFAULT_POLICY
    if not isinstance(policy, str) or policy not in _core.POLICY_NAMES:
        raise InvalidValueError(f"unknown policy {policy!r}: expected one of {', '.join(_core.POLICY_NAMES)} "
                                f"(None: {DEFAULT_POLICY})")
    goal = Objective(objective, max_slowdown_pct, energy)
    wl = Workload.from_any(workload, **overrides)
    board = _board(sysfs_root)
    if use_runs and policy == DEFAULT_POLICY and model_dir is None:  # what this board measured first
        learned = _learned_decision(board, wl, goal, policy, sysfs_root, state_dir, pin, above_power_mode, data_dir)
        if learned is not None:
            return learned
    if not isinstance(board, _core.Board):  # the govcore daemon's board (device/remote.py)
        # the goal travels too; a curve (roofline policy, slowdown bound) comes from the
        # installed model folder's roofline.txt
        if above_power_mode and pin:
            raise InvalidValueError("--above-power-mode is not available through the govcore daemon: run as root")
        d = board.apply(policy, wl.as_core(), wl.model, model_dir, dry_run=not pin,
                        objective=goal.kind, max_slowdown_pct=goal.max_slowdown_pct)
        return Decision(freq_mhz=d["freq_mhz"], proposed_mhz=d["proposed_mhz"], policy=policy,
                        features=d["features"], workload=wl.to_dict(), model=d["model"],
                        policy_mhz=d.get("policy_mhz"), objective=d.get("objective") or goal.to_dict(),
                        trade=d.get("trade"),
                        power_cap_mhz=d.get("power_cap_mhz"), clamped_from_mhz=d.get("clamped_from_mhz"),
                        mapped_from_mhz=d.get("mapped_from_mhz"), trained_on=d.get("trained_on"),
                        warning=d.get("warning") or None)
    # the curve: the roofline policy's, and a slowdown bound's where a model folder is given
    # (without one, govcore says what is missing)
    flags = _core.POLICY_FLAGS[policy]  # the policy's entry in govcore's table
    bound = goal.max_slowdown_pct is not None and "pins_nothing" not in flags and model_dir is not None
    roofline = load_roofline(model_dir) if "needs_model_dir" in flags or bound else None
    tree = load_tree(model_dir)
    core_goal = {"roofline": roofline, "objective": goal.kind, "max_slowdown_pct": goal.max_slowdown_pct}
    if pin:
        with ownership.changing(), ownership.governing(board) as owner:
            r = _core.apply(board, tree, policy, wl.as_core(), state_dir, **core_goal,
                            above_power_mode=above_power_mode)
            owner.pinned = r["level_hz"] != 0  # maxn restored the board
            warning = (board.pin_warning or None) if owner.pinned else None
    else:
        r = _core.decide(board, tree, policy, wl.as_core(), **core_goal)
        warning = None
    maxn = r["level_hz"] == 0  # the maxn policy, or a tree that keeps a spiky workload at MAXN
    trade = None if r["trade_vs_hz"] == 0 else {
        "vs_mhz": hz_to_mhz(r["trade_vs_hz"]), "j_per_step_pct": r["trade_j_pct"],
        "s_per_step_pct": r["trade_s_pct"], "basis": "roofline"}
    return Decision(
        freq_mhz=_mhz(r["level_hz"]),
        proposed_mhz=None if maxn else r["proposed_mhz"],
        policy=policy,
        features=dict(zip(tree.feature_names, tree.features(wl.as_core()))),
        workload=wl.to_dict(),
        model=tree.name,
        policy_mhz=_mhz(r["policy_level_hz"]),
        objective={"kind": goal.kind, "max_slowdown_pct": goal.max_slowdown_pct},  # no energy measure: nothing is measured
        trade=trade,
        power_cap_mhz=_mhz(r["cap_hz"]),
        clamped_from_mhz=_mhz(r["clamped_from_hz"]),
        mapped_from_mhz=r["mapped_from_mhz"],
        trained_on=_trained_on(tree),
        warning=warning,
    )


def decide(workload: Any, policy: str | None = DEFAULT_POLICY, model_dir=None, sysfs_root=None, state_dir=None,
           **overrides) -> Decision:
    """The clock a policy would set on this board, without touching it (the options as
    :func:`apply`)."""
    return _decide(workload, policy, model_dir, sysfs_root, state_dir, False, **overrides)


def apply(workload: Any, policy: str | None = DEFAULT_POLICY, model_dir=None, sysfs_root=None, state_dir=None,
          above_power_mode: bool = False, **overrides) -> Decision:
    """Choose the clock for ``workload`` and pin it (``maxn``: restore the board's default).

    ``workload``: a :class:`pydvfs.Workload`, a dict, or a Hugging Face config or model (then give
    ``seq_len=`` and optionally ``util_pct=``). ``objective=`` ("energy", "edp", "ed2p") and
    ``max_slowdown_pct=``: as ``pydvfs apply --objective --max-slowdown`` (docs/policy.md); a
    bound needs a ``model_dir`` with roofline.txt, edp/ed2p the roofline policy. The default
    policy prefers what this board measured: where the board's store (``data_dir=``,
    docs/store.md) holds online runs of workloads near this one, for the ``energy=`` measure
    ("module" or "cpu-gpu"), their best clock is pinned and the decision says so
    (``learned``, ``origin``); ``use_runs=False`` asks the tree only. The clock
    stays at or under the power mode's GPU cap (``clamped_from_mhz`` says where it lowered the
    choice) unless ``above_power_mode``. The original clock state is saved first; call
    :func:`pydvfs.restore` (or use :func:`governed`) to put it back."""
    return _decide(workload, policy, model_dir, sysfs_root, state_dir, True,
                   above_power_mode=above_power_mode, **overrides)


@contextlib.contextmanager
def governed(workload: Any, policy: str | None = DEFAULT_POLICY, model_dir=None, sysfs_root=None, state_dir=None,
             above_power_mode: bool = False, **overrides) -> Iterator[Decision]:
    """``with pydvfs.governed(w): train()`` - apply, and restore on exit whatever happens: an
    exception, Ctrl-C, or (in the main thread) SIGTERM/SIGHUP/SIGQUIT, which raise
    :class:`pydvfs.signals.Terminated` inside the block. Nested in another governing block of
    this process (an outer ``governed``, ``pydvfs run``), the inner block applies its clock but
    leaves the board to the outer one: its exit does not restore."""
    dev = open_device(sysfs_root, state_dir)
    nested = dev.governed_outside
    with terminate_as_exception(), dev.governing():
        try:
            yield apply(workload, policy, model_dir, sysfs_root, state_dir, above_power_mode, **overrides)
        finally:
            if not nested:
                dev.restore()

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
from ..signals import terminate_as_exception
from .manifest import load_model_dir
from .workload import Workload

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
    from ..errors import InvalidValueError

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


@dataclass(frozen=True)
class Decision:
    """What a policy chose. ``freq_mhz`` is the board level set (None: MAXN, the board's own
    governor); ``proposed_mhz`` what the policy asked for before the clamp to the table."""

    freq_mhz: float | None
    proposed_mhz: float | None
    policy: str
    features: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    model: str = ""

    def to_dict(self) -> dict:
        return {"freq_mhz": self.freq_mhz, "proposed_mhz": self.proposed_mhz, "policy": self.policy,
                "features": self.features, "workload": self.workload, "model": self.model}

    def describe(self) -> str:
        if self.freq_mhz is None:
            return f"policy {self.policy}: MAXN (the board's own governor)"
        return f"policy {self.policy}: GPU clock {self.freq_mhz:g} MHz"


def _decide(workload: Any, policy: str, model_dir, sysfs_root, state_dir, pin: bool, **overrides) -> Decision:
    wl = Workload.from_any(workload, **overrides)
    board = _board(sysfs_root)
    if not isinstance(board, _core.Board):  # the govcore daemon's board (device/remote.py)
        d = board.apply(policy, wl.as_core(), wl.model, model_dir, dry_run=not pin)
        return Decision(freq_mhz=d["freq_mhz"], proposed_mhz=d["proposed_mhz"], policy=policy,
                        features=d["features"], workload=wl.to_dict(), model=d["model"])
    roofline = load_roofline(model_dir) if policy == "roofline" else None
    tree = load_tree(model_dir)
    if pin:
        with ownership.governing(board, state_dir) as owner:
            proposed, level_hz = _core.apply(board, tree, policy, wl.as_core(), state_dir, roofline=roofline)
            owner.pinned = level_hz != 0  # maxn restored the board
    else:
        proposed, level_hz = _core.decide(board, tree, policy, wl.as_core(), roofline=roofline)
    maxn = level_hz == 0  # the maxn policy, or a tree that keeps a spiky workload at MAXN
    return Decision(
        freq_mhz=None if maxn else hz_to_mhz(level_hz),
        proposed_mhz=None if maxn else proposed,
        policy=policy,
        features=dict(zip(tree.feature_names, tree.features(wl.as_core()))),
        workload=wl.to_dict(),
        model=tree.name,
    )


def decide(workload: Any, policy: str = "mlg", model_dir=None, sysfs_root=None, state_dir=None,
           **overrides) -> Decision:
    """The clock a policy would set on this board, without touching it."""
    return _decide(workload, policy, model_dir, sysfs_root, state_dir, False, **overrides)


def apply(workload: Any, policy: str = "mlg", model_dir=None, sysfs_root=None, state_dir=None,
          **overrides) -> Decision:
    """Choose the clock for ``workload`` and pin it (``maxn``: restore the board's default).

    ``workload``: a :class:`pydvfs.Workload`, a dict, or a Hugging Face config or model (then give
    ``seq_len=`` and optionally ``util_pct=``). The original clock state is saved first; call
    :func:`pydvfs.restore` (or use :func:`governed`) to put it back."""
    return _decide(workload, policy, model_dir, sysfs_root, state_dir, True, **overrides)


@contextlib.contextmanager
def governed(workload: Any, policy: str = "mlg", model_dir=None, sysfs_root=None, state_dir=None,
             **overrides) -> Iterator[Decision]:
    """``with pydvfs.governed(w): train()`` - apply, and restore on exit whatever happens: an
    exception, Ctrl-C, or (in the main thread) SIGTERM/SIGHUP/SIGQUIT, which raise
    :class:`pydvfs.signals.Terminated` inside the block."""
    dev = open_device(sysfs_root, state_dir)
    with terminate_as_exception(), dev.governing():
        try:
            yield apply(workload, policy, model_dir, sysfs_root, state_dir, **overrides)
        finally:
            dev.restore()

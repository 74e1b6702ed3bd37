"""What the simulator does not know about a board: a family of simulators per board.

Every board but the AGX Orin is a scaled estimate (docs/sim.md, "Boards"); even the AGX Orin's
calibration leaves a range. What decides the GPU clock's optimum on module energy is moved here,
each knob over the range the public facts allow (docs/sim.md, "Uncertainty family", gives each
range's source):

- ``static``: the static share of the module's power: SoC, CPU, DRAM and system bases and a busy
  CPU thread, x a factor (the larger it is, the more a slower step costs: the optimum rises);
- ``vf_exp`` / ``vf_knee``: the V/f curve above its floor: the rise's exponent (absolute) and the
  knee's clock (x a factor); a flat curve leaves little to save at low clocks;
- ``compute``: the compute-bound share of a step: ``eff_max`` (x a factor), how fast the
  clock-scaled GEMMs run against the clock-independent memory and host time;
- ``maxn``: MAXN's clock behaviour: podgov's load target (absolute), which sets the clock the
  board's own governor holds for a load, hence what MAXN costs.

A member (:class:`Member`) changes simulator parameters as :class:`pydvfs.sim.perturbed.Perturbation`
does (``updates()``), so :func:`pydvfs.sim.perturbed.perturbed_params` and the joint replay
(:mod:`pydvfs.governor.replay`) take it too. :func:`family` is a board's training family: the default, every knob to either edge of
its range, and two corners (the optimum pushed up: much static power on a flat V/f curve; and
down). :func:`held_out` draws a member inside the ranges that no policy was trained on (tests,
benches: "a board the project has never seen"). :func:`optimum_spread` is the range of the best
clock across the family (the online search's start can widen with it).
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from ..errors import InvalidValueError
from .model import SimParams, default_params
from .profiles import profile

# Parameters the ``static`` knob scales together (what the module draws whatever the GPU clock).
STATIC_PARAMS = ("soc_base_w", "cpu_base_w", "cpu_thread_w", "dram_base_w", "sys_base_w")
# knob -> (kind, parameters): "scale" multiplies the default's value, "set" replaces it
KNOBS = {
    "static": ("scale", STATIC_PARAMS),
    "vf_exp": ("set", ("v_curve_exp",)),
    "vf_knee": ("scale", ("v_knee_mhz",)),
    "compute": ("scale", ("eff_max",)),
    "maxn": ("set", ("podgov_load_target",)),
}
# knob -> (low, high) for a board whose profile is an estimate; sources in docs/sim.md
ESTIMATE_RANGES = {
    "static": (0.6, 1.8),
    "vf_exp": (0.8, 1.6),
    "vf_knee": (0.7, 1.3),
    "compute": (0.8, 1.25),
    "maxn": (0.5, 0.85),
}
# the calibrated AGX Orin: what its fit to paper A leaves (docs/sim-calibration.md: rms 2 %)
CALIBRATED_RANGES = {
    "static": (0.93, 1.07),
    "vf_exp": (1.0, 1.2),
    "vf_knee": (0.95, 1.05),
    "compute": (0.97, 1.03),
    "maxn": (0.65, 0.75),
}


@dataclass(frozen=True)
class Member:
    """One simulator of a board's family: knob -> value (absent: the default's)."""

    name: str
    knobs: tuple = ()  # ((knob, value), ...)
    mode_spread_pct: float = 0.0  # as Perturbation's (none: the family moves physics, not modes)
    seed: int = 0

    def updates(self, base: SimParams | None = None) -> dict:
        """The simulator parameters this member changes (scaled knobs from ``base``'s values)."""
        base = base or default_params()
        out = {}
        for knob, value in self.knobs:
            kind, names = KNOBS[knob]
            for n in names:
                out[n] = getattr(base, n) * value if kind == "scale" else value
        return out

    def params(self, base: SimParams | None = None) -> SimParams:
        """``base`` (default: the calibrated parameters) with this member's changes."""
        base = base or default_params()
        return base.with_updates(**self.updates(base))

    def to_dict(self) -> dict:
        return {"name": self.name, "knobs": dict(self.knobs)}


DEFAULT = Member("default")


def ranges(board: str) -> dict:
    """knob -> (low, high) for ``board``: narrow where its profile is calibrated."""
    return dict(CALIBRATED_RANGES if profile(board).calibrated else ESTIMATE_RANGES)


def family(board: str) -> list[Member]:
    """The board's training family: the default, each knob at either edge, and two corners."""
    r = ranges(board)
    out = [DEFAULT]
    for knob, (lo, hi) in r.items():
        out += [Member(f"{knob}-low", ((knob, lo),)), Member(f"{knob}-high", ((knob, hi),))]
    out.append(Member("corner-up", (("static", r["static"][1]), ("vf_exp", r["vf_exp"][0]),
                                    ("vf_knee", r["vf_knee"][0]))))
    out.append(Member("corner-down", (("static", r["static"][0]), ("vf_exp", r["vf_exp"][1]),
                                      ("vf_knee", r["vf_knee"][1]))))
    return out


def member(board: str, name: str) -> Member:
    """A member of ``board``'s family by name, or a held-out one (``held-out-SEED``)."""
    if name.startswith("held-out-") and name[len("held-out-"):].isdigit():
        return held_out(board, int(name[len("held-out-"):]))
    for m in family(board):
        if m.name == name:
            return m
    raise InvalidValueError(f"no member {name!r} in the {board} family: one of "
                            f"{', '.join(m.name for m in family(board))} or held-out-SEED")


def held_out(board: str, seed: int) -> Member:
    """A member no policy was trained on: every knob drawn uniformly inside its range, from a
    hash of ``board`` and ``seed`` (no global random state)."""
    h = hashlib.sha256(f"held-out:{board}:{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(h[:8], "big"))
    knobs = tuple((k, round(rng.uniform(lo, hi), 4)) for k, (lo, hi) in ranges(board).items())
    return Member(f"held-out-{seed}", knobs, seed=seed)


def optimum_spread(board: str, run=None, measure: str = "module") -> tuple[float, float]:
    """(lowest, highest) best GPU clock of a simulated run (:class:`pydvfs.sim.catalogue.SimRun`;
    default bert-base on QNLI) across ``board``'s family (MHz): how far the board's optimum may be
    from the default simulator's. The online search's start and prior can widen with it where the
    board is not calibrated (``pydvfs run``'s plan carries it: ``family_spread_mhz``)."""
    from ..measure.energy import ROLE
    from .catalogue import get_workload
    from .model import operating_point

    run = run or get_workload("bert-base", "QNLI")
    levels = profile(board).levels_mhz
    best = []
    for m in family(board):
        p = m.params()
        e = {f: operating_point(run, "fixed", f, p, board=board) for f in levels}
        best.append(min(levels, key=lambda f: e[f].role_power_w[ROLE[measure]] * e[f].t_step_s))
    return min(best), max(best)


__all__ = ["CALIBRATED_RANGES", "DEFAULT", "ESTIMATE_RANGES", "KNOBS", "Member", "family", "held_out",
           "member", "optimum_spread", "ranges"]

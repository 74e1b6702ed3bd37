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
  board's own governor holds for a load, hence what MAXN costs;
- ``cpu``: the CPU rail's power while a step runs (the busy thread, x a factor), apart from the
  static bases: within the CPU+GPU measure, what a slower GPU step costs on the CPU's side;
- ``vf_top``: the GPU's voltage at the board's top clock (x a factor): a top clock reached at a
  lower voltage leaves less to save by going down the table.

``cpu`` and ``vf_top`` (:data:`UNFITTED_KNOBS`, issue 51 item 4) came after the first five: the
held-out members (:func:`held_out`) draw them only with ``unfitted``, and a calibration fitted
them only from its format 2 on (:mod:`pydvfs.policy.board_calibration` fits :data:`ALL_KNOBS`
within :data:`ESTIMATE_RANGES` and :data:`UNFITTED_ESTIMATE_RANGES`; a format-1 calibration
holds them at the default's); the calibrated AGX Orin does not move them (its fit holds its V/f
top and CPU rail).

A member (:class:`Member`) changes simulator parameters as :class:`pydvfs.sim.perturbed.Perturbation`
does (``updates()``), so :func:`pydvfs.sim.perturbed.perturbed_params` and the joint replay
(:mod:`pydvfs.governor.replay`) take it too. :func:`family` is a board's training family: the default, every knob to either edge of
its range, and corners (the optimum pushed up: much static power on a flat V/f curve; and
down; on an estimate board also the CPU+GPU optimum pushed up, and MAXN settled low where low
clocks save nothing). :func:`held_out` draws a member inside the ranges that no policy was trained on (tests,
benches: "a board the project has never seen"; ``unfitted=True`` draws the unfitted knobs too). :func:`optimum_spread` is the range of the best
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
# Knobs the family moves that no calibration fits (issue 51 item 4: an independent Orin Nano
# Super whose CPU rail weighs more within CPU+GPU energy than any member's had 408 MHz cost
# 4.4 % more than MAXN; docs/sim.md "Uncertainty family" gives the sources):
# - cpu: the busy thread's power. An estimate board's default is the AGX Orin's calibrated core
#   (1.3 W at 2201.6 MHz) scaled by the module budgets (x 0.47 on the Orin Nano Super: 0.61 W);
#   the same kind of core at the board's top CPU clock draws 0.90 W by the AGX Orin's own
#   exponent (x 1.5), CUDA's default schedule spins through every synchronisation where the
#   default counts half of the GPU phase (x 2), and a DataLoader's workers keep more cores busy:
#   x 3 is the high edge; a thread that blocks in its synchronisations draws less (x 0.8).
# - vf_top: the voltage at the top clock. The estimate boards reach the AGX Orin's top voltage
#   (958 mV at 1300.5 MHz) at their own top clock; the Orin Nano and NX Super have the same GA10B
#   GPU, whose calibrated curve (docs/sim-calibration.md) gives 828 mV at the Nano Super's top
#   (1020 MHz) and about 900 mV at the NX's (1173 MHz): x 0.86 .. 0.94; the low edge (x 0.83,
#   about 800 mV) leaves room for the curve's own spread. The other estimate boards' GPUs
#   (Volta, Maxwell, Blackwell) are other silicon: the same range, a judgement.
UNFITTED_KNOBS = {
    "cpu": ("scale", ("cpu_thread_w",)),
    "vf_top": ("scale", ("v_max_mv",)),
}
UNFITTED_ESTIMATE_RANGES = {"cpu": (0.8, 3.0), "vf_top": (0.83, 1.0)}


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
            kind, names = ALL_KNOBS[knob]
            for n in names:
                out[n] = getattr(base, n) * value if kind == "scale" else value
        return out

    def params(self, base: SimParams | None = None) -> SimParams:
        """``base`` (default: the calibrated parameters) with this member's changes."""
        base = base or default_params()
        return base.with_updates(**self.updates(base))

    def to_dict(self) -> dict:
        return {"name": self.name, "knobs": dict(self.knobs)}


ALL_KNOBS = {**KNOBS, **UNFITTED_KNOBS}
DEFAULT = Member("default")


def ranges(board: str, unfitted: bool = False) -> dict:
    """knob -> (low, high) for ``board``: narrow where its profile is calibrated. The knobs a
    calibration fits (:data:`KNOBS`); with ``unfitted``, on an estimate board the family's others
    too (:data:`UNFITTED_KNOBS`; the calibrated board does not move them)."""
    if profile(board).calibrated:
        return dict(CALIBRATED_RANGES)
    return {**ESTIMATE_RANGES, **(UNFITTED_ESTIMATE_RANGES if unfitted else {})}


def family(board: str) -> list[Member]:
    """The board's training family: the default, each knob at either edge (an edge at the
    default's value is the default), and its :func:`corners`."""
    r = ranges(board, unfitted=True)
    out = [DEFAULT]
    for knob, (lo, hi) in r.items():
        for edge, value in (("low", lo), ("high", hi)):
            if ALL_KNOBS[knob][0] == "scale" and value == 1.0:
                continue
            out.append(Member(f"{knob}-{edge}", ((knob, value),)))
    return out + corners(board)


def corners(board: str) -> list[Member]:
    """The family's corners (several knobs at once): ``corner-up`` (much static power on a flat,
    early V/f curve) and ``corner-down``; on an estimate board also ``corner-cpu`` (the CPU rail's
    busy power high beside a GPU that reaches its top at a low voltage: the CPU+GPU optimum
    pushed up) and ``corner-host`` (MAXN's podgov settled at a high load, the voltage at its floor
    through the lower half of the table: where MAXN already runs a host-bound job low, a lower
    clock saves nothing). A calibration's fit starts from each too (its error has several basins)."""
    r = ranges(board, unfitted=True)
    out = [Member("corner-up", (("static", r["static"][1]), ("vf_exp", r["vf_exp"][0]), ("vf_knee", r["vf_knee"][0]))),
           Member("corner-down", (("static", r["static"][0]), ("vf_exp", r["vf_exp"][1]), ("vf_knee", r["vf_knee"][1])))]
    if not profile(board).calibrated:
        out.append(Member("corner-cpu", (("cpu", r["cpu"][1]), ("vf_top", r["vf_top"][0]))))
        out.append(Member("corner-host", (("maxn", r["maxn"][1]), ("vf_knee", r["vf_knee"][1]))))
    return out


def member(board: str, name: str) -> Member:
    """A member of ``board``'s family by name, or a held-out one (``held-out-SEED``)."""
    for prefix, unfitted in (("held-out-", False), ("held-out-wide-", True)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return held_out(board, int(name[len(prefix):]), unfitted)
    for m in family(board):
        if m.name == name:
            return m
    raise InvalidValueError(f"no member {name!r} in the {board} family: one of "
                            f"{', '.join(m.name for m in family(board))}, held-out-SEED or held-out-wide-SEED")


def held_out(board: str, seed: int, unfitted: bool = False) -> Member:
    """A member no policy was trained on: every knob a calibration fits drawn uniformly inside
    its range, from a hash of ``board`` and ``seed`` (no global random state); with ``unfitted``
    (``held-out-wide-SEED``) the family's unfitted knobs too, drawn after the others (which keep
    their values): a board a calibration cannot represent whole."""
    h = hashlib.sha256(f"held-out:{board}:{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(h[:8], "big"))
    knobs = tuple((k, round(rng.uniform(lo, hi), 4)) for k, (lo, hi) in ranges(board, unfitted).items())
    return Member(f"held-out-{'wide-' * unfitted}{seed}", knobs, seed=seed)


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


__all__ = ["ALL_KNOBS", "CALIBRATED_RANGES", "DEFAULT", "ESTIMATE_RANGES", "KNOBS", "Member",
           "UNFITTED_ESTIMATE_RANGES", "UNFITTED_KNOBS", "corners", "family", "held_out", "member", "optimum_spread", "ranges"]

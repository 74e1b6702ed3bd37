"""What the online search minimises: energy per step, or energy x time (EDP), or energy x
time^2 (ED2P), optionally under a slowdown bound (zeus's ``MaxSlowdownConstraint``); and which
energy: the module's (default) or CPU+GPU (``energy``, :mod:`pydvfs.measure.energy`).

Both numbers come from the same window: J/step (energy / steps) and s/step (duration / steps).

    energy  cost = J/step
    edp     cost = J/step x s/step
    ed2p    cost = J/step x s/step^2

``max_slowdown_pct``: a level is admissible only if its step time is within that many percent
of the fastest step time measured (or, for the model search, predicted) at any level. The cost
of an inadmissible level is infinite: the search never settles there.

The static policies take the same objective where a whole curve is known (govcore's
``gc_decide_goal``: the bound for every policy that pins a clock, edp/ed2p for the roofline
policy only), from the step times the board's roofline model predicts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import _core
from ..errors import InvalidValueError
from ..measure.energy import DEFAULT_MEASURE, check_measure

OBJECTIVES = _core.OBJECTIVE_NAMES  # govcore's list: energy, edp, ed2p
_TIME_POWER = {kind: k for k, kind in enumerate(OBJECTIVES)}  # govcore's order is the power of t


@dataclass(frozen=True)
class Objective:
    kind: str = "energy"
    max_slowdown_pct: float | None = None
    energy: str = DEFAULT_MEASURE  # which energy: "module" or "cpu-gpu" (pydvfs.measure.energy.MEASURES)

    def __post_init__(self):
        check_measure(self.energy)
        if self.kind not in OBJECTIVES:
            raise InvalidValueError(f"unknown objective {self.kind!r}: expected {', '.join(OBJECTIVES)}")
        if self.max_slowdown_pct is not None and not (math.isfinite(self.max_slowdown_pct)
                                                      and self.max_slowdown_pct >= 0):
            raise InvalidValueError("the maximum slowdown must be a finite % >= 0")

    @property
    def needs_time(self) -> bool:
        return self.kind != "energy" or self.max_slowdown_pct is not None

    def cost(self, j_per_step: float, s_per_step: float | None) -> float:
        """The number to minimise for one window (or one level's estimate)."""
        k = _TIME_POWER[self.kind]
        if k == 0:
            return j_per_step
        if s_per_step is None:
            raise InvalidValueError(f"the {self.kind} objective needs the step time")
        return j_per_step * s_per_step ** k

    def admissible(self, s_per_step: float, fastest_s_per_step: float) -> bool:
        """Within the slowdown bound of the fastest step time (always, without a bound)."""
        if self.max_slowdown_pct is None:
            return True
        return s_per_step <= fastest_s_per_step * (1.0 + self.max_slowdown_pct / 100.0)

    def describe(self) -> str:
        """In words, as govcore says it (gc_goal_text)."""
        return _core.goal_text(self.kind, self.max_slowdown_pct, self.energy)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "max_slowdown_pct": self.max_slowdown_pct, "energy": self.energy}


__all__ = ["OBJECTIVES", "Objective"]

"""The board's clock table: which level a requested clock becomes.

One rule, the one govcore's ``gc_snap_hz`` applies on the board: the nearest level, a tie going
to the lower one. Every Python caller (the simulator, the sweep, the search, the curves of a
dataset) snaps through :func:`nearest_level` so that they cannot disagree with the board.
"""
from __future__ import annotations

from typing import Iterable, TypeVar

L = TypeVar("L", int, float)


def nearest_level(levels: Iterable[L], value: float) -> L:
    """The level nearest ``value``; of two equally near, the lower. Units: whatever ``levels``
    and ``value`` share (MHz or Hz)."""
    return min(levels, key=lambda lv: (abs(lv - value), lv))


def nearest_index(levels: list, value: float) -> int:
    """Index of :func:`nearest_level` in ``levels``."""
    return min(range(len(levels)), key=lambda i: (abs(levels[i] - value), levels[i]))


def near_table(levels: list, value: float) -> bool:
    """Whether ``value`` lies within one level's step of the table's ends (``levels`` ascending),
    as govcore's ``gc_check_near_table`` asks before ``pin`` without ``--nearest``: further out
    it is a typo (99999 for 999), not a clock to snap."""
    if len(levels) < 2:
        return True
    lo, hi = levels[0], levels[-1]
    return lo - (levels[1] - lo) <= value <= hi + (hi - levels[-2])


def check_near_table(levels: list, value: float, what: str) -> None:
    """InvalidValueError naming ``what`` (``--freqs``, ``--start``) for a clock
    :func:`near_table` refuses, in the words ``pin`` refuses it with (gc_check_near_table)."""
    if not near_table(levels, value):
        from ..errors import InvalidValueError

        raise InvalidValueError(f"{what}: {value:g} MHz is outside the board's table ({levels[0]:g}.."
                                f"{levels[-1]:g} MHz) by more than one level")

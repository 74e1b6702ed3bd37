"""The space an online search moves in (:mod:`pydvfs.governor.mode_search`): GPU levels (one
axis) or whole power modes (GPU level x EMC rate x CPU clock), how a mode is named, and the
space's geometry (the mode nearest a request, a mode's neighbours, the GPU line through a mode).
"""
from __future__ import annotations

from ..errors import InvalidValueError

KNOBS = ("gpu", "emc", "cpu")
MAXN = None  # the target that leaves the clock to the board's own governor (not a mode)


class Mode(tuple):
    """A mode (gpu_mhz, emc_mhz, cpu_mhz): a tuple that formats as "612/3199/1113.6", so that
    the engine's reports and status lines show it where they show a GPU clock (JSON: a list)."""

    def __new__(cls, clocks):
        return tuple.__new__(cls, (float(x) for x in clocks))

    def __format__(self, spec: str) -> str:
        return "/".join(format(x, spec or "g") for x in self)

    def __str__(self) -> str:
        return format(self, "g")


def level_name(mode) -> str:
    """A search target in words: "714 MHz", "612/3199/1113.6", or "MAXN" (the board's own governor)."""
    if mode is MAXN:
        return "MAXN"
    return f"{mode:g}" if isinstance(mode, tuple) else f"{mode:g} MHz"


def mode_name(mode) -> str:
    return "/".join(f"{x:g}" for x in mode)


def within_caps(modes, caps) -> list:
    """The modes at or below every cap of ``caps`` = (gpu, emc, cpu) maxima (None: no cap)."""
    caps = tuple(caps or (None, None, None))
    if len(caps) != 3:
        raise InvalidValueError("caps are (gpu, emc, cpu) maxima")
    return [m for m in modes if all(cap is None or x <= cap + 1e-6 for x, cap in zip(m, caps))]


def within(x: float, lo: float, hi: float) -> bool:
    return lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)


def coords(m) -> tuple:
    """A mode's clocks as a tuple (a GPU level: a 1-tuple)."""
    return tuple(m) if isinstance(m, tuple) else (m,)


class ModeSpace:
    """The modes a search may propose: GPU levels (MHz, ``axes`` 1) or :class:`Mode` tuples
    (``axes`` 3, those within ``caps``). A mode the board refuses is dropped from it for good."""

    def __init__(self, modes, caps=None):
        modes = list(modes)
        self.axes = 3 if modes and isinstance(modes[0], tuple) else 1
        if self.axes == 1:
            self.caps = None
            space = sorted({float(f) for f in modes})
            if not space:
                raise InvalidValueError("the clock table is empty")
        else:
            self.caps = tuple(caps) if caps is not None else (None, None, None)
            space = sorted({Mode(m) for m in within_caps(modes, self.caps)})
            if not space:
                raise InvalidValueError("no mode of the grid is within the power mode's caps")
        self.modes = tuple(space)

    def drop(self, m) -> None:
        self.modes = tuple(x for x in self.modes if x != m)

    def snap(self, mode):
        """The mode of the space nearest ``mode`` (relative distance, clock by clock)."""
        if self.axes == 1:
            f = float(mode[0] if isinstance(mode, tuple) else mode)
            return min(self.modes, key=lambda x: (abs(x - f), x))
        g, e, c = (float(x) for x in mode)
        return min(self.modes, key=lambda m: (abs(m[0] - g) / max(g, 1.0) + abs(m[1] - e) / max(e, 1.0)
                                              + abs(m[2] - c) / max(c, 1.0), m))

    def neighbours(self, m) -> list:
        """The modes one step away along one axis."""
        if self.axes == 1:
            i = self.modes.index(m)
            return [self.modes[k] for k in (i - 1, i + 1) if 0 <= k < len(self.modes)]
        out = []
        for d in range(3):
            axis = sorted({x[d] for x in self.modes if all(x[o] == m[o] for o in range(3) if o != d)})
            i = axis.index(m[d])
            out += [Mode(axis[k] if o == d else m[o] for o in range(3)) for k in (i - 1, i + 1) if 0 <= k < len(axis)]
        return out

    def line(self, center) -> list:
        """The modes along the GPU axis through ``center`` (one axis: the table)."""
        if self.axes == 1:
            return list(self.modes)
        rest = tuple(center[1:])
        return [m for m in self.modes if tuple(m[1:]) == rest]

    def gpu_only(self, m, start) -> bool:
        """A mode the GPU-only search could choose: every other clock at the ``start``'s."""
        return m is MAXN or self.axes == 1 or tuple(m[1:]) == tuple(start[1:])


__all__ = ["KNOBS", "MAXN", "Mode", "ModeSpace", "coords", "level_name", "mode_name", "within", "within_caps"]

"""Measure the energy of a block or of every call of a function (as zeus's measurement windows).

    with pydvfs.measured("eval") as m:
        evaluate()
    print(m.energies["module"], m.energies["cpu-gpu"], m.measurement.duration_s)

    @pydvfs.measured(name="train_epoch")
    def train_epoch(): ...
    train_epoch(); train_epoch.measurements[-1]   # one Measurement per call

It never touches the clock: it only samples the rails (the C sampler, as ``pydvfs measure``).
Each window's line gives the module's energy and CPU+GPU beside it, summed by the rails' roles in
the board table (pydvfs/measure/energy.py); on a board the table does not know, both are "unknown".
"""
from __future__ import annotations

import functools
import sys
import threading
from typing import TYPE_CHECKING

from ..device import open_device
from ..errors import InvalidValueError
from .energy import DEFAULT_MEASURE, MEASURES, describe, report_fields
from .energy import of as energy_of
from .sampler import Measurement, Sampler

if TYPE_CHECKING:  # annotations only: the base install has no typing_extensions
    from typing_extensions import Self


class measured:
    """A measurement window named ``name`` on the board at ``sysfs_root``; one line per
    window to ``log`` (None: silent)."""

    def __init__(self, name: str | None = None, *, sysfs_root=None, rate_hz: float | None = None,
                 log=sys.stderr):
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidValueError(f"a measurement needs a non-empty name, got {name!r}")
        self.name = name
        self.log = log
        self._sampler = Sampler(rate_hz=rate_hz, sysfs_root=sysfs_root)  # fails at once without rails
        self.board = open_device(sysfs_root).board  # the board table's row (None: unknown)
        self._lock = threading.Lock()
        self._depth = 0
        self.measurements: list[Measurement] = []

    @property
    def energies(self) -> dict:
        """The last window's {"module": J, "cpu-gpu": J} by rail role (None: unknown; both None
        before the first window closes)."""
        m = self.measurement
        return {k: (energy_of(m, k) if m is not None else None) for k in MEASURES}

    @property
    def measurement(self) -> Measurement | None:
        """The last finished window."""
        return self.measurements[-1] if self.measurements else None

    def __enter__(self) -> Self:
        with self._lock:
            if self._depth:
                raise InvalidValueError(f"measurement {self.name or 'window'!r} is already open "
                                        "(recursive or concurrent use)")
            self._depth = 1
        self._sampler.begin_window("measured")
        return self

    def __exit__(self, *exc) -> None:
        try:
            m = self._sampler.end_window("measured")
        finally:
            self._sampler.stop()
            with self._lock:
                self._depth = 0
        self.measurements.append(m)
        if self.log is not None:
            fields = report_fields(m, DEFAULT_MEASURE)
            print(f"pydvfs: {self.name or 'measured'}: {describe(fields)} in {m.duration_s:.3f} s",
                  file=self.log, flush=True)

    def __call__(self, fn):
        if self.name is None:
            self.name = getattr(fn, "__qualname__", None) or "measured"

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        wrapper.measurements = self.measurements
        return wrapper


__all__ = ["measured"]

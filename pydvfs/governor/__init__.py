"""Governing a whole training command: a static policy, or the online search of the clock.

:mod:`.search` is the pure search (fed J/step, proposes clocks); :mod:`.loop` pins, measures
and runs the command. See docs/online.md.

Imports: the root modules, ``device``, ``measure``, ``model``, ``sim``, ``policy``.
"""
from .search import HillClimb, Probe, SearchParams

__all__ = ["HillClimb", "Probe", "SearchParams"]

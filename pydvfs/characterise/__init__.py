"""Characterise: sweeps over the clocks (a training command at each), the sweep dataset, and the
U-curve analysis of a sweep (sweet spots, savings, shape flags, plots; pandas/matplotlib only
here, never at ``import pydvfs``).

Imports: the root modules, ``device``, ``measure``.
"""

"""Decide: the frequency model and the policies (training, evaluation, the built-ins' scores, a
board's calibration and its store of runs), and ``apply``, which chooses a clock and pins it.

Imports: the root modules, ``device``, ``measure``, ``characterise``, ``model``, ``roofline``, ``sim``.
"""

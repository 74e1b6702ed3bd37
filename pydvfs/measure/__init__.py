"""Measure: energy on the board's rails (a C sampler thread, windows, immutable results) and
which energy counts (the module's or CPU+GPU).

Imports: the root modules, ``device``.
"""

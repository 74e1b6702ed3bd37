"""Analysis of clock sweeps: U-curves, sweet spots, savings, shape flags, plots.

``ucurve`` (numbers), ``adapters`` (real data sets -> analysis frame), ``plots`` (matplotlib),
``cli`` (the ``pydvfs analyse`` verb). pandas/numpy/matplotlib are imported only by those
modules, never at ``import pydvfs`` time.
"""

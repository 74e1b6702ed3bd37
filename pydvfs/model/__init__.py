"""Model: the physical U-curve model of a workload, the joint model over whole power modes, and
the feature vectors of the frequency model (the Python twin of govcore's features).

Imports: the root modules, ``device``, ``roofline``.
"""

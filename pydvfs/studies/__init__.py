"""Studies: the simulator studies, the replication of the two papers (analyses and ledger), and
the demo that runs the whole pipeline on a simulated AGX Orin.

Imports: the root modules, ``device``, ``measure``, ``characterise``, ``model``, ``roofline``, ``sim``, ``policy``, ``governor``.
"""

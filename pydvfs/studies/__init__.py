"""Studies: the simulator studies, the replication of the two papers (analyses and ledger), and
the demo that runs the whole pipeline on a simulated AGX Orin.

Imports: any room below it (``sim``, ``policy``, ``governor``, ``characterise``, ``model``, ``roofline``).
"""

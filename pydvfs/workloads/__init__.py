"""Real workloads for characterisation sweeps (``python -m pydvfs.workloads.finetune``).

Imports: the root modules, ``sim``, ``cli`` (each workload is a command line of its own).
"""

"""Real workloads for characterisation sweeps (``python -m pydvfs.workloads.finetune``)."""

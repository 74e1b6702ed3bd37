"""A simulated Jetson AGX Orin fine-tuning transformers: physical model, calibration, sweeps.

- :mod:`.workloads`: architectures and GLUE tasks (numbers stored here);
- :mod:`.model`: step time and rail power at a clock, podgov/power modes, virtual-time runs;
- :mod:`.podgov`: the load-following governor of MAXN;
- :mod:`.calibration`: published targets and residuals;
- :mod:`.train_process`: animates a fake sysfs tree in scaled real time;
- :mod:`.sweep`, :mod:`.cli`: the characterisation sweep and its plots.

Nothing here is imported by ``import pydvfs``.
"""

"""A simulated Jetson AGX Orin fine-tuning transformers: physical model, calibration, sweeps.

- :mod:`.catalogue`: architectures and GLUE tasks (numbers stored here);
- :mod:`.model`: step time and rail power at a clock, podgov/power modes, virtual-time runs;
- :mod:`.podgov`: the load-following governor of MAXN;
- :mod:`.paper_fit` (+ ``paper_fit_params``): the simulator fitted to the papers' published
  numbers, its targets and residuals (a user's board is calibrated by ``policy.board_calibration``);
- :mod:`.train_process`: animates a fake sysfs tree in scaled real time;
- :mod:`.sweep`, :mod:`.cli`: the characterisation sweep and its plots.

Nothing here is imported by ``import pydvfs``.

Imports: the root modules, ``device``, ``measure``, ``characterise``, ``model``.
"""

"""pydvfs: an energy-optimal GPU clock governor for fine-tuning small language models on Jetson.

Names are loaded on first use, so ``import pydvfs`` stays cheap and never pulls in training or
plotting libraries.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "open_device": "pydvfs.device",
    "Device": "pydvfs.device",
    "ClockState": "pydvfs.device",
    "PinResult": "pydvfs.device",
    "pin": "pydvfs.device",
    "restore": "pydvfs.device",
    "Workload": "pydvfs.workload",
    "Decision": "pydvfs.policy.apply",
    "apply": "pydvfs.policy.apply",
    "decide": "pydvfs.policy.apply",
    "governed": "pydvfs.policy.apply",
    "Sampler": "pydvfs.measure.sampler",
    "OnlineGovernor": "pydvfs.governor.inprocess",
    "measured": "pydvfs.measure.windows",
    "Measurement": "pydvfs.measure.sampler",
    "PydvfsError": "pydvfs.errors",
    "DeviceNotFoundError": "pydvfs.errors",
    "BoardPermissionError": "pydvfs.errors",
    "InvalidValueError": "pydvfs.errors",
    "ClockVerifyError": "pydvfs.errors",
    "BoardBusyError": "pydvfs.errors",
    "BoardIOError": "pydvfs.errors",
    "BoardDataError": "pydvfs.errors",
    "StateFileError": "pydvfs.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pydvfs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

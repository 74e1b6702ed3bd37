"""Turn real measured data sets into the analysis DataFrame (see ``ucurve.prepare``).

- Perseus (SOSP'24) stage profiles: ``stage,instruction,frequency,time,energy`` per pipeline
  stage, instruction (forward/backward) and SM clock (MHz). Each row is one measurement.
- Zeus (NSDI'23) power traces: ``dataset,network,batch_size,optimizer,power_limit,
  time_per_epoch,average_power``. The knob is the GPU power limit (W), not a clock; energy per
  epoch = time_per_epoch x average_power.
- native: our own sweep CSV (``workload, freq_mhz, setting, repeat, duration_s, energy_*``).
"""
from __future__ import annotations

import os
import re

import pandas as pd

from ..errors import InvalidValueError
from .dataset import check_frame, check_regular, check_row_lengths

PERSEUS_COLUMNS = {"stage", "instruction", "frequency", "time", "energy"}
ZEUS_COLUMNS = {"dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch",
                "average_power"}
FORMATS = ("native", "perseus", "zeus")
PERSEUS_GROUPINGS = ("stage", "instruction", "total")

# The knob each format sweeps (the column the analysis groups by).
KNOB = {"native": "freq_mhz", "perseus": "freq_mhz", "zeus": "power_limit_w"}


def detect_format(df: pd.DataFrame) -> str:
    cols = set(df.columns)
    if PERSEUS_COLUMNS <= cols:
        return "perseus"
    if ZEUS_COLUMNS <= cols:
        return "zeus"
    return "native"


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def from_perseus(df: pd.DataFrame, name: str = "perseus", by: str = "stage") -> pd.DataFrame:
    """Perseus stage profile -> one workload per stage (forward + backward summed per clock).

    ``by="instruction"``: one workload per (stage, instruction); ``by="total"``: all stages and
    instructions summed per clock (one workload, the whole pipeline's sequential work).
    """
    missing = PERSEUS_COLUMNS - set(df.columns)
    if missing:
        raise InvalidValueError(f"not a Perseus stage profile: lacks {', '.join(sorted(missing))}")
    if by not in PERSEUS_GROUPINGS:
        raise InvalidValueError(f"Perseus grouping must be one of {', '.join(PERSEUS_GROUPINGS)}")
    d = df.copy()
    if by == "stage":
        keys = ["stage", "frequency"]
        d["workload"] = name + "/stage" + d["stage"].astype(str)
    elif by == "instruction":
        keys = ["stage", "instruction", "frequency"]
        d["workload"] = name + "/stage" + d["stage"].astype(str) + "/" + d["instruction"].astype(str)
    else:
        keys = ["frequency"]
        d["workload"] = name + "/total"
    g = d.groupby(["workload"] + keys, sort=True)[["time", "energy"]].sum().reset_index()
    return pd.DataFrame(
        {
            "workload": g["workload"],
            "freq_mhz": g["frequency"].astype(float),
            "setting": "fixed",
            "repeat": 0,
            "duration_s": g["time"].astype(float),
            "energy_j": g["energy"].astype(float),
            "avg_power_w": g["energy"] / g["time"],
            "source": "perseus_sosp24:" + name,
        }
    )


def from_zeus(df: pd.DataFrame, gpu: str = "gpu") -> pd.DataFrame:
    """Zeus power trace -> one workload per (gpu, dataset, network, batch size, optimizer)."""
    missing = ZEUS_COLUMNS - set(df.columns)
    if missing:
        raise InvalidValueError(f"not a Zeus power trace: lacks {', '.join(sorted(missing))}")
    d = df.copy()
    workload = (
        gpu + "/" + d["dataset"].astype(str) + "/" + d["network"].astype(str) + "/bs"
        + d["batch_size"].astype(str) + "/" + d["optimizer"].astype(str)
    )
    time_s = d["time_per_epoch"].astype(float)
    power_w = d["average_power"].astype(float)
    return pd.DataFrame(
        {
            "workload": workload,
            "power_limit_w": d["power_limit"].astype(float),
            "setting": "fixed",
            "repeat": 0,
            "duration_s": time_s,
            "energy_j": time_s * power_w,
            "avg_power_w": power_w,
            "source": "zeus_nsdi23:" + gpu,
        }
    )


def zeus_gpu_from_path(path: str) -> str:
    m = re.match(r"summary_power_(.+)$", _stem(path))
    return m.group(1) if m else _stem(path)


def load(paths: list[str], fmt: str = "auto", perseus_by: str = "stage") -> tuple[pd.DataFrame, str]:
    """Read one or more CSV files of one format; returns (analysis frame, format)."""
    frames, formats = [], set()
    for path in paths:
        check_regular(path)  # pandas would wait on a FIFO
        try:
            raw = pd.read_csv(path)
        except FileNotFoundError:
            raise InvalidValueError(f"no such file: {path}") from None
        except (OSError, ValueError) as e:  # pandas raises ValueError subclasses on bad CSV
            raise InvalidValueError(f"cannot read {path} as CSV: {e}") from e
        check_row_lengths(path)  # pandas pads a short row with empty cells: refuse it here
        f = detect_format(raw) if fmt == "auto" else fmt
        if f not in FORMATS:
            raise InvalidValueError(f"unknown format {fmt!r}; use auto, {', '.join(FORMATS)}")
        formats.add(f)
        if f == "perseus":
            frames.append(from_perseus(raw, name=_stem(path), by=perseus_by))
        elif f == "zeus":
            frames.append(from_zeus(raw, gpu=zeus_gpu_from_path(path)))
        else:
            frames.append(check_frame(raw, path))
    if len(formats) > 1:
        raise InvalidValueError(f"files mix formats ({', '.join(sorted(formats))}); analyse them apart")
    return pd.concat(frames, ignore_index=True), formats.pop()

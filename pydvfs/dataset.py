"""The sweep dataset: one row per measured run. The single source of truth for its columns.

Both the simulated sweep (``pydvfs sweep --sim``) and the board sweep write this schema, so
training, evaluation and plotting read one format. The file is CSV (comma, header row, UTF-8,
``\\n`` line ends); empty cells mean "not applicable / unknown". It loads with
``pandas.read_csv(path)``. docs/dataset.md describes every column.

Writing appends one row at a time and flushes, so a sweep interrupted half-way leaves every
finished run on disk; appending to an existing file checks its header first.
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from .errors import InvalidValueError
from .rails import ORIN_RAILS

# Rails whose energies are recorded (INA3221 labels on the AGX Orin devkit, SPEC section 5).
RAILS = ORIN_RAILS
SETTINGS = ("fixed", "maxn", "15w", "30w", "50w")
SOURCES = ("sim", "board")
MODELS = ("bert", "pythia", "gemma")


@dataclass(frozen=True)
class Column:
    name: str
    kind: type  # str, int or float
    unit: str  # "" when unitless
    required: bool  # must be non-empty in every row
    doc: str


COLUMNS: tuple[Column, ...] = (
    Column("workload", str, "", True, "workload name, e.g. bert-base/QNLI"),
    Column("model", str, "", True, "model family: bert | pythia (gemma: calibration only)"),
    Column("model_size", str, "", False, "size tag: tiny..xlarge (BERT), 31m..1b (Pythia)"),
    Column("task", str, "", False, "GLUE task, e.g. SST-2 (empty if the workload is not one)"),
    Column("layers", int, "", True, "transformer layers"),
    Column("hidden", int, "", True, "hidden size"),
    Column("heads", int, "", False, "attention heads"),
    Column("params", int, "", False, "parameter count"),
    Column("seq_len", float, "tokens", True, "average tokens per example (the paper's feature)"),
    Column("batch_size", int, "", False, "examples per optimizer step"),
    Column("gpu_util_pct", float, "%", False,
           "the workload's GPU utilisation feature: mean GPU load of its MAXN run"),
    Column("freq_mhz", float, "MHz", False, "pinned GPU clock; empty for maxn and power modes"),
    Column("setting", str, "", True, "fixed | maxn | 15w | 30w | 50w (nvpmodel modes)"),
    Column("repeat", int, "", True, "repeat index, 0-based"),
    Column("duration_s", float, "s", True, "wall time of the run"),
    *(Column(f"energy_j_{r}", float, "J", False, f"energy on rail {r}") for r in RAILS),
    Column("energy_cpu_gpu_j", float, "J", True, "VDD_CPU_CV + VDD_GPU_SOC energy (the paper's)"),
    Column("avg_power_w", float, "W", True, "energy_cpu_gpu_j / duration_s"),
    Column("avg_gpu_load_pct", float, "%", False, "mean GPU load during the run"),
    Column("samples", int, "", True, "sensor samples behind the energies (0 for virtual time)"),
    Column("sampler_errors", int, "", True, "failed sensor reads during the run"),
    Column("exit_status", int, "", True, "the training command's exit status"),
    Column("source", str, "", True, "sim | board"),
    Column("idle_power_w", float, "W", False, "idle CPU+GPU power measured before the sweep"),
)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)
_BY_NAME = {c.name: c for c in COLUMNS}


def _format(col: Column, value) -> str:
    if value is None or value == "":
        if col.required:
            raise InvalidValueError(f"dataset column {col.name!r} needs a value")
        return ""
    if col.kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise InvalidValueError(f"dataset column {col.name!r} wants an integer, got {value!r}")
        return str(int(value))
    if col.kind is float:
        v = float(value)
        if math.isnan(v):
            if col.required:
                raise InvalidValueError(f"dataset column {col.name!r} needs a value")
            return ""
        return repr(round(v, 6))
    return str(value)


def validate_row(row: dict) -> dict:
    """Check one row against the schema; return it with every column as the CSV text."""
    extra = set(row) - set(COLUMN_NAMES)
    if extra:
        raise InvalidValueError(f"unknown dataset column(s): {', '.join(sorted(extra))}")
    if row.get("setting") not in SETTINGS:
        raise InvalidValueError(f"setting must be one of {', '.join(SETTINGS)}, got {row.get('setting')!r}")
    if row.get("source") not in SOURCES:
        raise InvalidValueError(f"source must be one of {', '.join(SOURCES)}, got {row.get('source')!r}")
    if row.get("setting") == "fixed" and row.get("freq_mhz") in (None, ""):
        raise InvalidValueError("a fixed-clock row needs freq_mhz")
    return {c.name: _format(c, row.get(c.name)) for c in COLUMNS}


class DatasetWriter:
    """Append rows to a dataset CSV, flushing after each. Use as a context manager."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        exists = self.path.exists() and self.path.stat().st_size > 0
        self.repaired_bytes = _drop_partial_line(self.path) if exists else 0
        if exists:
            with open(self.path, newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), [])
            if tuple(header) != COLUMN_NAMES:
                raise InvalidValueError(f"{self.path} has another header; will not append to it")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", newline="", encoding="utf-8")
        self._w = csv.DictWriter(self._f, fieldnames=COLUMN_NAMES, lineterminator="\n")
        if not exists:
            self._w.writeheader()
            self._f.flush()
        self.rows_written = 0

    def write(self, row: dict) -> None:
        self._w.writerow(validate_row(row))
        self._f.flush()
        self.rows_written += 1

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drop_partial_line(path: Path) -> int:
    """A crash mid-write leaves a last line without its newline: cut it off (it is re-measured
    on resume). Returns the number of bytes dropped."""
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)
        return len(data) - keep


def write_rows(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    with DatasetWriter(path) as w:
        for r in rows:
            w.write(r)
        return w.rows_written


def iter_rows(path: str | os.PathLike) -> Iterator[dict]:
    """Rows as dicts with typed values (None for empty cells). Needs no pandas."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMN_NAMES:
            raise InvalidValueError(f"{path} is not a pydvfs dataset (header differs)")
        for line, raw in enumerate(reader, start=2):
            out = {}
            for name, text in raw.items():
                col = _BY_NAME[name]
                try:
                    out[name] = None if text == "" else col.kind(float(text)) if col.kind is int else col.kind(text)
                except (TypeError, ValueError, OverflowError):
                    raise InvalidValueError(f"{path}:{line}: column {name}: {text!r} is not a "
                                            f"{col.kind.__name__}") from None
            yield out


def read_rows(path: str | os.PathLike) -> list[dict]:
    return list(iter_rows(path))


def read_dataframe(path: str | os.PathLike):
    """The dataset as a pandas DataFrame (pandas imported here, not at import time)."""
    import pandas as pd

    df = pd.read_csv(path, dtype={"model_size": str, "task": str})
    missing = [c for c in COLUMN_NAMES if c not in df.columns]
    if missing:
        raise InvalidValueError(f"{path} lacks dataset column(s): {', '.join(missing)}")
    return df


def schema_markdown() -> str:
    """The column table of docs/dataset.md (tests check the doc matches)."""
    lines = ["| column | type | unit | required | meaning |", "|---|---|---|---|---|"]
    for c in COLUMNS:
        lines.append(f"| `{c.name}` | {c.kind.__name__} | {c.unit} | {'yes' if c.required else 'no'} | {c.doc} |")
    return "\n".join(lines) + "\n"

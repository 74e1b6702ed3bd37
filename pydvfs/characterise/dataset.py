"""The sweep dataset: one row per measured run. The single source of truth for its columns.

Both the simulated sweep (``pydvfs sweep --sim``) and the board sweep write this schema, so
training, evaluation and plotting read one format. The file is CSV (comma, header row, UTF-8,
``\\n`` line ends); empty cells mean "not applicable / unknown". It loads with
``pandas.read_csv(path)``. docs/dataset.md describes every column.

Writing appends one row at a time and flushes, so a sweep interrupted half-way leaves every
finished run on disk; appending to an existing file checks its header first.

Energy: ``energy_module_j`` (what the module draws) and ``energy_cpu_gpu_j`` (the CPU and GPU
rails, the papers' measure), each summed by the rails' roles on ``board`` (pydvfs/measure/energy.py,
the board table). A dataset written before pydvfs recorded them (no ``energy_module_j`` and
``board`` columns) still loads, with those empty and a warning that says so; new rows are not
appended to it.
"""
from __future__ import annotations

import csv
import io
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..device.table import board as _table_board
from ..errors import InvalidValueError

# Rails whose energies are recorded one by one: the AGX Orin devkit's (the board table's). Other
# boards' rails are recorded as their role sums only (energy_module_j, energy_cpu_gpu_j).
RAILS = _table_board("agx-orin").rails
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
    Column("energy_module_j", float, "J", False,
           "what the module draws: its input rail, or the sum of its rails, each once (AGX Orin: all four "
           "above); by the board table's roles"),
    Column("energy_cpu_gpu_j", float, "J", False,
           "the CPU and GPU rails (AGX Orin VDD_CPU_CV + VDD_GPU_SOC; the paper's measure); by the board "
           "table's roles"),
    Column("avg_power_w", float, "W", False, "energy_cpu_gpu_j / duration_s"),
    Column("avg_gpu_load_pct", float, "%", False, "mean GPU load during the run"),
    Column("samples", int, "", True, "sensor samples behind the energies (0 for virtual time)"),
    Column("sampler_errors", int, "", True, "failed sensor reads during the run"),
    Column("exit_status", int, "", True, "the training command's exit status"),
    Column("source", str, "", True, "sim | board"),
    Column("board", str, "", False, "the board table's id (agx-orin, orin-nano-super, ...); empty in a dataset "
           "from before pydvfs recorded it"),
    Column("emc_mhz", float, "MHz", False, "pinned EMC (memory) rate; empty: the board's own (the stock mode's), "
           "as in every dataset from before modes were swept"),
    Column("cpu_mhz", float, "MHz", False, "pinned CPU clock; empty: the board's own (the stock mode's)"),
    Column("idle_power_w", float, "W", False, "idle CPU+GPU power measured before the sweep"),
    # how the workload trained (issue 28; pydvfs.Workload's keys); empty: full fine-tuning in fp32
    Column("peft", str, "", False, "none, lora or qlora; empty: none (full fine-tuning)"),
    Column("rank", int, "", False, "LoRA rank (peft lora/qlora)"),
    Column("trainable_params", int, "", False, "parameters the optimizer updates"),
    Column("weight_bits", int, "", False, "bits of the (frozen) weights the GEMMs read: 32, 16, 8 or 4"),
    Column("precision", str, "", False, "compute precision: fp32, fp16 or bf16 (autocast); empty: fp32"),
    Column("tokens_per_step", float, "tokens", False, "real tokens per optimizer step (padding excluded)"),
)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)
_BY_NAME = {c.name: c for c in COLUMNS}
ENERGY_COLUMNS = ("energy_module_j", "energy_cpu_gpu_j")
# Columns a dataset written before module energy was recorded lacks: it loads with them empty.
ADDED_COLUMNS = ("energy_module_j", "board")
# The mode a row ran at beyond the GPU clock (sweep --knobs gpu,emc,cpu); a dataset written before
# them loads with them empty: the stock mode.
MODE_COLUMNS = ("emc_mhz", "cpu_mhz")
# How the workload trained; a dataset written before them loads with them empty: full fp32.
METHOD_COLUMNS = ("peft", "rank", "trainable_params", "weight_bits", "precision", "tokens_per_step")
PRE_METHOD_COLUMN_NAMES = tuple(c for c in COLUMN_NAMES if c not in METHOD_COLUMNS)
PRE_MODE_COLUMN_NAMES = tuple(c for c in PRE_METHOD_COLUMN_NAMES if c not in MODE_COLUMNS)
LEGACY_COLUMN_NAMES = tuple(c for c in PRE_MODE_COLUMN_NAMES if c not in ADDED_COLUMNS)


def legacy_warning(path) -> str:
    return (f"{path}: a dataset from before pydvfs recorded module energy: energy_module_j and board are "
            f"empty (CPU+GPU energy only; choose it with --energy cpu-gpu, or sweep again)")


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
    if all(row.get(c) in (None, "") or (isinstance(row.get(c), float) and math.isnan(row[c]))
           for c in ENERGY_COLUMNS):
        raise InvalidValueError("a dataset row needs energy_module_j or energy_cpu_gpu_j (the board's rail "
                                "roles are unknown?)")
    return {c.name: _format(c, row.get(c.name)) for c in COLUMNS}


class DatasetWriter:
    """Append rows to a dataset CSV, flushing after each. Use as a context manager."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        exists = self.path.exists() or self.path.is_symlink()
        if exists:
            _check_ours(self.path)  # before anything is changed: never touch a file not ours
            exists = self.path.stat().st_size > 0
        # our header is on the first line: only a torn row after it can be cut
        self.repaired_bytes = _drop_partial_line(self.path) if exists else 0
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


HEADER_LINE = (",".join(COLUMN_NAMES) + "\n").encode()


def _check_ours(path: Path) -> None:
    """Refuse (InvalidValueError, nothing changed) a path that is not a dataset we wrote: not a
    regular file, or a file whose first line is not our header."""
    import stat

    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise InvalidValueError(f"{path} exists and is not a regular file; will not write to it")
    if st.st_size == 0:
        return  # an empty file: the header is written first
    with open(path, "rb") as f:
        head = f.read(len(HEADER_LINE))
    if head != HEADER_LINE:
        if head.startswith((",".join(LEGACY_COLUMN_NAMES) + "\n").encode()):
            raise InvalidValueError(f"{path} is a dataset from before pydvfs recorded module energy; new rows "
                                    f"would lack columns there: write them to a new file")
        if head.startswith((",".join(PRE_METHOD_COLUMN_NAMES) + "\n").encode()):
            raise InvalidValueError(f"{path} is a dataset from before pydvfs recorded how a workload trains "
                                    f"(peft, precision, ...); new rows would lack them there: write them to a new file")
        if head.startswith((",".join(PRE_MODE_COLUMN_NAMES) + "\n").encode()):
            raise InvalidValueError(f"{path} is a dataset from before pydvfs recorded the EMC and CPU clocks "
                                    f"(emc_mhz, cpu_mhz); new rows would lack them there: write them to a new file")
        raise InvalidValueError(f"{path} exists and is not a pydvfs dataset (its first line is not "
                                f"the dataset header); will not append to it or change it")


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


def iter_rows(path: str | os.PathLike, torn_tail: bool = False) -> Iterator[dict]:
    """Rows as dicts with typed values (None for empty cells). Needs no pandas. ``torn_tail``: a
    last line without its newline (a writer killed mid-row) is not read (the next writer cuts it)."""
    with open(path, newline="", encoding="utf-8") as f:
        if torn_tail:
            text = f.read()
            f = io.StringIO(text[:text.rfind("\n") + 1])
        reader = csv.DictReader(f)
        header = tuple(reader.fieldnames or ())
        if header == LEGACY_COLUMN_NAMES:
            warnings.warn(legacy_warning(path), stacklevel=2)
        elif header not in (COLUMN_NAMES, PRE_METHOD_COLUMN_NAMES, PRE_MODE_COLUMN_NAMES):
            raise InvalidValueError(f"{path} is not a pydvfs dataset (header differs)")
        for line, raw in enumerate(reader, start=2):
            out = dict.fromkeys(ADDED_COLUMNS + MODE_COLUMNS + METHOD_COLUMNS)
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

    check_row_lengths(path)
    df = pd.read_csv(path, dtype={"model_size": str, "task": str, "board": str})
    if tuple(df.columns) == LEGACY_COLUMN_NAMES:
        warnings.warn(legacy_warning(path), stacklevel=2)
        df = df.assign(**{c: pd.Series(dtype=object if c == "board" else float, index=df.index)
                          for c in ADDED_COLUMNS + MODE_COLUMNS})[list(PRE_METHOD_COLUMN_NAMES)]
    if tuple(df.columns) == PRE_MODE_COLUMN_NAMES:  # before modes were swept: the stock mode
        df = df.assign(**{c: pd.Series(dtype=float, index=df.index) for c in MODE_COLUMNS})[list(PRE_METHOD_COLUMN_NAMES)]
    if tuple(df.columns) == PRE_METHOD_COLUMN_NAMES:  # before methods were recorded: full fp32
        df = df.assign(**{c: pd.Series(dtype=object if _BY_NAME[c].kind is str else float, index=df.index)
                          for c in METHOD_COLUMNS})[list(COLUMN_NAMES)]
    missing = [c for c in COLUMN_NAMES if c not in df.columns]
    if missing:
        raise InvalidValueError(f"{path} lacks dataset column(s): {', '.join(missing)}")
    return check_frame(df, path)


# Plausible ranges per unit, for the dataset's numeric columns: a value outside is a damaged or
# hand-edited file, not a measurement (1e308 MHz would overflow every sum it enters). Loose on
# purpose: a load a little above 100 % (the simulator's noise) is data, 1e308 is not.
MAX_FREQ_MHZ = 100000.0
UNIT_BOUNDS = {"MHz": (0.0, MAX_FREQ_MHZ), "J": (0.0, 1e15), "W": (0.0, 1e6), "s": (0.0, 1e9),
               "%": (0.0, 1000.0), "tokens": (0.0, 1e9)}
# lower bounds that are exclusive (a clock or a duration of 0 is no measurement)
_POSITIVE_UNITS = ("MHz", "s", "tokens")


def check_regular(path: str | os.PathLike) -> None:
    """InvalidValueError where something other than a regular file is at ``path`` (a FIFO, a
    device, a folder): an input file is never waited on. A missing path passes (its reader says so)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise InvalidValueError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InvalidValueError(f"{path} is not a regular file (a folder, a FIFO or a device): not read")


def check_row_lengths(path: str | os.PathLike) -> None:
    """Refuse a CSV with a row of fewer fields than its header (a truncated or short row, which
    pandas would silently pad with empty cells). InvalidValueError naming the line, or saying
    that ``path`` is not a regular file (a FIFO is never waited on)."""
    check_regular(path)
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                return
            for row in reader:
                if row and len(row) < len(header):
                    raise InvalidValueError(f"{path}:{reader.line_num}: {len(row)} fields, the header "
                                            f"has {len(header)} (a truncated row?)")
    except csv.Error as e:
        raise InvalidValueError(f"{path} is not a readable CSV: {e}") from None


def check_frame(df, source) -> "object":
    """Refuse a frame whose rows are not whole, finite, plausible dataset rows.

    Checks the dataset columns the frame has (other columns pass through): a number must be a
    finite number within its unit's range (UNIT_BOUNDS), an int column must hold whole numbers.
    Columns named energy*/``*_j`` outside the schema must be finite and >= 0 too. An empty cell
    (or "nan") is a missing value, which readers leave out; a row cut short is found by
    check_row_lengths, before pandas pads it with empty cells.
    Raises InvalidValueError naming the first bad line (the header is line 1)."""
    import numpy as np
    import pandas as pd

    def bad(i, name, text):
        raise InvalidValueError(f"{source}:{int(i) + 2}: column {name}: {text}")

    for name in df.columns:
        col = _BY_NAME.get(name)
        extra_energy = col is None and (str(name).startswith("energy") or str(name).endswith("_j"))
        if col is None and not extra_energy:
            continue
        series = df[name]
        empty = series.isna() | (series.astype(str).str.strip() == "")
        if col is not None and col.kind is str:
            continue
        values = pd.to_numeric(series.where(~empty), errors="coerce")
        not_number = values.isna() & ~empty
        if not_number.any():
            i = np.flatnonzero(not_number.to_numpy())[0]
            bad(i, name, f"{str(series.iloc[i])[:40]!r} is not a number")
        v = values.to_numpy(dtype=float)
        present = ~np.isnan(v)
        lo, hi = UNIT_BOUNDS.get(col.unit if col else "J", (-np.inf, np.inf))
        positive = col is not None and col.unit in _POSITIVE_UNITS
        with np.errstate(invalid="ignore"):
            out = present & (~np.isfinite(v) | (v < lo) | (v > hi) | ((v <= lo) if positive else False))
            if col is not None and col.kind is int:
                out |= present & np.isfinite(v) & ((v != np.floor(v)) | (v < 0) | (np.abs(v) > 2**53))
        if out.any():
            i = np.flatnonzero(out)[0]
            unit = col.unit if col else "J"
            span = f"{'>' if positive else '>='} {lo:g} and <= {hi:g} {unit}".strip()
            want = "a whole number >= 0" if col is not None and col.kind is int else f"a finite number {span}"
            bad(i, name, f"{str(series.iloc[i])[:40]!r} is not {want}")
    return df


def schema_markdown() -> str:
    """The column table of docs/dataset.md (tests check the doc matches)."""
    lines = ["| column | type | unit | required | meaning |", "|---|---|---|---|---|"]
    for c in COLUMNS:
        lines.append(f"| `{c.name}` | {c.kind.__name__} | {c.unit} | {'yes' if c.required else 'no'} | {c.doc} |")
    return "\n".join(lines) + "\n"

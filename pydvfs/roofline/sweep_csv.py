"""Read an energy-sweep CSV, recognise its format, validate it, and add the proxies.

Two formats are recognised from their columns:

- ``pydvfs``: our schema (``SCHEMA_COLUMNS``), written by ``roofline simulate`` and
  ``roofline collect``. One row per run: a configuration, a strategy on ``n_devices`` devices,
  the measured time, and the measured energy (NaN where no sensor exists).
- ``mlenergy``: the ML-energy A100 file (``RawDataForTransformer.csv``, see
  ``pydvfs/roofline/data/README.md``): single-GPU training runs of BERT and GPT variants.

Every problem with the input raises ``InvalidValueError`` with a one-line message.
"""
from __future__ import annotations

import os
from typing import Optional

from ..errors import InvalidValueError
from . import proxies

# Our CSV schema, in column order. Units in names; counts are plain integers.
SCHEMA_COLUMNS = [
    "family",       # model family: bert, gpt, ...
    "arch",         # architecture id: family-L{layers}-d{hidden}-h{heads}-ff{ff}
    "strategy",     # single | tp | fsdp
    "n_devices",    # devices the run used
    "layers", "hidden", "heads", "ff", "seq_len", "batch", "steps",
    "time_s",       # wall time of the measured steps
    "speedup",      # time of the single-device run / time_s (NaN: derive it from the rows)
    "energy_j",     # energy of all devices over the measured steps; NaN when no sensor
    "hardware",     # what ran it (e.g. rtx2080ti-sim, a100, cpu-gloo)
    "campaign",     # measurement campaign (a constant offset per campaign is allowed)
]
REQUIRED_NATIVE = ["strategy", "n_devices", "layers", "hidden", "seq_len", "batch", "time_s",
                   "energy_j"]
STRATEGIES = ("single", "tp", "fsdp")
_POSITIVE = ["n_devices", "layers", "hidden", "heads", "ff", "seq_len", "batch", "steps", "time_s"]

# Column map of the ML-energy A100 file (MansMayaki/MLEnergyConsumption).
_MLENERGY = {
    "model": "family", "num_layers": "layers", "d_model": "hidden",
    "num_attention_heads": "heads", "seq_length": "seq_len", "batch_size": "batch",
    "duration": "time_s", "energy_joules": "energy_j", "source": "hardware",
}


def load(path: str):
    """Read ``path`` and return ``(frame, format_name)``, the frame in our schema plus proxies."""
    import pandas as pd

    if not os.path.isfile(path):
        raise InvalidValueError(f"no such data file: {path}")
    try:
        raw = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise InvalidValueError(f"{path}: not a readable CSV ({str(e).splitlines()[0]})") from e
    fmt = detect_format(raw.columns, path)
    frame = from_mlenergy(raw) if fmt == "mlenergy" else from_native(raw)
    return add_proxies(validate(frame, path)), fmt


def detect_format(columns, path: str = "data") -> str:
    cols = set(columns)
    if set(_MLENERGY) <= cols:
        return "mlenergy"
    missing = [c for c in REQUIRED_NATIVE if c not in cols]
    if not missing:
        return "pydvfs"
    raise InvalidValueError(
        f"{path}: unrecognised columns; a pydvfs sweep needs {', '.join(missing)} "
        f"(or use the ML-energy A100 file's columns)")


def from_native(raw):
    """Fill the optional columns of our schema with their defaults."""
    df = raw.copy()
    defaults = {"family": "bert", "steps": 1, "speedup": float("nan"), "hardware": "unknown",
                "campaign": "main"}
    for col, val in defaults.items():
        if col not in df.columns:
            df[col] = val
    if "heads" not in df.columns:
        df["heads"] = (_num(df["hidden"]) // 64).clip(lower=1)
    if "ff" not in df.columns:
        df["ff"] = 4 * _num(df["hidden"])
    return df


def from_mlenergy(raw):
    """The A100 file in our schema: single-GPU runs, ff = 4d, duplicated rows averaged.

    ``campaign``: every A100 BERT row with S = 256 comes from one separate measurement block
    (source index >= 72831, mean power 89.6 W against 98.3 W elsewhere, other rounding); the file
    gives no other way to tell campaigns apart, so the block is named by its sequence length.
    """
    import pandas as pd

    df = raw.rename(columns=_MLENERGY)[list(_MLENERGY.values())].copy()
    df["strategy"], df["n_devices"], df["steps"] = "single", 1, 1
    df["ff"] = 4 * _num(df["hidden"])
    df["speedup"] = 1.0
    df["campaign"] = "main"
    block = (_num(df["seq_len"]) == 256) & (df["family"] == "bert") & (df["hardware"] == "a100")
    df.loc[block, "campaign"] = "s256-block"
    keys = ["family", "hardware", "campaign", "strategy", "n_devices", "layers", "hidden",
            "heads", "ff", "seq_len", "batch", "steps"]
    # The file repeats identical runs (num_repeats); repeated rows would fake precision.
    out = df.groupby(keys, as_index=False)[["time_s", "energy_j", "speedup"]].mean()
    return pd.DataFrame(out)


def validate(df, path: str = "data"):
    """Types and ranges; raises InvalidValueError naming the first bad column and row."""
    import numpy as np

    if len(df) == 0:
        raise InvalidValueError(f"{path}: no rows")
    df = df.copy()
    for col in _POSITIVE + ["energy_j", "speedup"]:
        vals = _num(df[col])
        bad = vals.isna() & df[col].notna() & (df[col].astype(str).str.strip() != "")
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InvalidValueError(f"{path}: column {col}, row {i + 1}: not a number: {df[col].iloc[i]!r}")
        df[col] = vals
    for col in _POSITIVE:
        v = df[col]
        bad = ~(np.isfinite(v) & (v > 0))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InvalidValueError(f"{path}: column {col}, row {i + 1}: must be a positive number, got {v.iloc[i]}")
    for col in ["energy_j", "speedup"]:
        v = df[col]
        bad = v.notna() & ~(np.isfinite(v) & (v > 0))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InvalidValueError(f"{path}: column {col}, row {i + 1}: must be positive or empty, got {v.iloc[i]}")
    df["strategy"] = df["strategy"].astype(str).str.strip().str.lower()
    unknown = sorted(set(df["strategy"]) - set(STRATEGIES))
    if unknown:
        raise InvalidValueError(f"{path}: unknown strategy {unknown[0]!r} (use {', '.join(STRATEGIES)})")
    for col in ["n_devices", "layers", "hidden", "heads", "ff", "seq_len", "batch", "steps"]:
        df[col] = df[col].astype(int)
    for col in ["family", "hardware", "campaign"]:
        df[col] = df[col].fillna("unknown").astype(str)
    if "arch" not in df.columns or df["arch"].isna().any():
        df["arch"] = [arch_id(*r) for r in df[["family", "layers", "hidden", "heads", "ff"]].itertuples(index=False)]
    return df


def arch_id(family, layers, hidden, heads, ff) -> str:
    return f"{family}-L{int(layers)}-d{int(hidden)}-h{int(heads)}-ff{int(ff)}"


def add_proxies(df, tile: Optional[int] = proxies.GEMM_TILE):
    """Add C, M, A (attention traffic), their tile-padded versions, N and the intensity."""
    df = df.copy()
    L, d, S, B, st = (df[c].astype(float) for c in ["layers", "hidden", "seq_len", "batch", "steps"])
    df["n_params"] = proxies.params_n(L, d, df["ff"].astype(float))
    df["c_tok"] = proxies.compute_per_token(L, d, S)
    df["compute"] = proxies.total_compute(L, d, S, B, st)
    df["memory"] = proxies.memory_traffic(B, S, d, L, st)
    df["attention"] = proxies.attention_traffic(B, S, L, st)
    dt = proxies.tile_width(d, tile)
    df["compute_tiled"] = proxies.total_compute(L, dt, S, B, st)
    df["memory_tiled"] = proxies.memory_traffic(B, S, dt, L, st)
    df["intensity"] = proxies.arithmetic_intensity(df["compute"], df["memory"])
    df["eta"] = efficiency(df)
    return df


def efficiency(df):
    """eta_h = S(N) / N per row.

    S(N) is the ``speedup`` column where given, else the time of the matching single-device run
    (same architecture, S, B, steps, hardware, campaign) divided by this run's time. A multi-device
    row without either is an error: its efficiency is unknown, and guessing it would bias the fit.
    """
    import numpy as np

    keys = ["arch", "seq_len", "batch", "steps", "hardware", "campaign"]
    single = df[df["n_devices"] == 1].groupby(keys)["time_s"].median()
    sp = df["speedup"].astype(float).copy()
    need = sp.isna()
    if need.any():
        idx = df.loc[need, keys].apply(tuple, axis=1)
        base = idx.map(lambda k: single.get(k, np.nan)).astype(float)
        sp.loc[need] = base.to_numpy() / df.loc[need, "time_s"].to_numpy()
    one = df["n_devices"] == 1
    sp.loc[one & sp.isna()] = 1.0
    if sp.isna().any():
        i = int(np.flatnonzero(sp.isna().to_numpy())[0])
        raise InvalidValueError(
            f"row {i + 1} ({df['arch'].iloc[i]}, {df['strategy'].iloc[i]} x{df['n_devices'].iloc[i]}): "
            "no speedup and no single-device run of the same configuration to derive it from")
    return sp / df["n_devices"]


def _num(series):
    import pandas as pd

    return pd.to_numeric(series, errors="coerce")

"""The progress file: how a training command tells ``pydvfs run``/``sweep`` how far it got.

The format (a public contract, documented here and in docs/online.md): one line holding the
number of training steps completed so far, a whole number >= 0 in decimal, e.g. ``1200\\n``.
The writer replaces the file atomically (it writes a temporary file in the same folder, then
renames it over the old one), so a reader sees either the old count or the new one, never a
partial line. A reader floors a decimal and treats a missing, empty or unreadable file as
"no count yet".

:func:`write_progress` is the one writer (used by ``pydvfs.workloads.finetune`` and the
simulated ``pydvfs.sim.train_process``); :func:`read_progress` the one reader.
"""
from __future__ import annotations

import math
import os
from pathlib import Path


def write_progress(path: str | os.PathLike, steps: float) -> None:
    """Replace ``path`` with ``int(steps)``, atomically (readers never see a partial file)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(f"{int(steps)}\n")
    os.replace(tmp, path)


def read_progress(path: str | os.PathLike) -> int | None:
    """The step count in ``path`` (an integer; a decimal is floored), or None while it is
    missing, empty or unreadable."""
    try:
        text = Path(path).read_text().strip()
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError):
        return None
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None

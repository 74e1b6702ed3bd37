"""Rail names by role, for code that predates the board table: a thin view of ``pydvfs.boards``.

Every rail fact lives in ``pydvfs/data/boards.json``; new code should call
``boards.energies(per_rail, board)`` with the board it measured (``Device.board``,
``Measurement.board``). These names are the AGX Orin devkit's, the board the simulator models.
"""
from __future__ import annotations

from typing import Mapping

from . import boards

ORIN_RAILS = boards.board("agx-orin").rails                    # a dataset's rail columns
CPU_GPU_RAILS = boards.board("agx-orin").role_rails("cpu_gpu")  # what the papers call CPU+GPU


def cpu_gpu_sum(per_rail: Mapping[str, float]) -> float | None:
    """CPU+GPU total of a per-rail mapping (energy J or power W) of a board of the table, named
    by its rails (``boards.by_rails``); None where no board of the table has these rails."""
    return boards.energies(per_rail, boards.by_rails(per_rail))["cpu_gpu"]

"""Recording an online run: the record appended to the board's run store
(:mod:`pydvfs.policy.store`), then a calibrated board's calibration refitted with it
(:mod:`pydvfs.policy.calibrated`); the one place the two meet."""
from __future__ import annotations

import sys

from ..errors import StoreError
from .calibrated import refit_from_runs
from .store import RunStore, make_record


def record_run(report: dict, dev, workload, front_end: str, data_dir=None, log=None, prefix: str = "pydvfs") -> str | None:
    """Append an online run's record to the board's store; returns the file written (None:
    nothing to record, or the store refused it, said in one line on ``log``). A store that
    cannot be written never fails the run: the run is over and its report stands. A board
    calibrated with `pydvfs calibrate` then has its calibration refitted with the store's runs
    (:func:`pydvfs.policy.calibrated.refit_from_runs`; a failure there is a warning too)."""
    if dev.board_id is None:
        return None  # a board outside the table: no measure is known, nothing to learn per board
    try:
        record = make_record(report, dev.board_id, dev.model, dev.available_frequencies_mhz, workload, front_end)
        if record is None:
            return None
        path = RunStore(data_dir).append(record)
    except (StoreError, OSError, ValueError) as e:
        print(f"{prefix}: warning: the run was not recorded for this board: "
              f"{e.strerror if isinstance(e, OSError) and e.strerror else e}", file=log or sys.stderr, flush=True)
        return None
    report["recorded_to"] = path
    if record.get("workload"):  # a calibrated board's simulator learns from it too (docs/store.md)
        refit_from_runs(dev.board_id, data_dir, log, prefix)
    return path


__all__ = ["record_run"]

"""Recording an online run: the record appended to the board's run store
(:mod:`pydvfs.policy.store`), then a calibrated board's calibration refitted with it
(:mod:`pydvfs.policy.board_calibration`); the one place the two meet."""
from __future__ import annotations

import sys

from ..errors import StoreError
from .board_calibration import board_calibration, refit_from_runs
from .store import RunStore, make_record


def gpu_line(report: dict) -> dict | None:
    """A joint (``--knobs``) run's report seen as a GPU-only run's: its windows at the top mode's
    EMC rate and CPU clock (the joint search probes that GPU line first:
    :mod:`pydvfs.governor.joint_search`), each at its GPU clock, which is what a GPU-only pin
    measures (the simulator's fixed clock is at the top EMC and CPU too); the settled mode's GPU
    clock where it lies on that line. None where no window lies there."""
    def mode(x):
        return tuple(float(v) for v in x) if isinstance(x, (list, tuple)) and len(x) == 3 else None

    modes = [m for m in (mode(w.get("freq_mhz")) for w in report.get("trajectory") or ()) if m is not None]
    if not modes:
        return None
    rest = (max(m[1] for m in modes), max(m[2] for m in modes))
    line = [{**w, "freq_mhz": mode(w["freq_mhz"])[0]} for w in report["trajectory"]
            if mode(w.get("freq_mhz")) is not None and mode(w["freq_mhz"])[1:] == rest]
    if not line:
        return None
    chosen = mode(report.get("chosen_mhz"))
    return {**report, "search_kind": "joint: its GPU line", "trajectory": line, "start_mhz": None,
            "chosen_mhz": chosen[0] if chosen is not None and chosen[1:] == rest else None}


def record_run(report: dict, dev, workload, front_end: str, data_dir=None, log=None, prefix: str = "pydvfs") -> str | None:
    """Append an online run's record to the board's store; returns the file written (None:
    nothing to record, or the store refused it, said in one line on ``log``). A store that
    cannot be written never fails the run: the run is over and its report stands. A board
    calibrated with `pydvfs calibrate` then has its calibration refitted with the store's runs, and
    one that is not is calibrated from them (:func:`pydvfs.policy.board_calibration.refit_from_runs`; a
    failure there is a warning too). A joint (``--knobs``) run is recorded as its GPU line
    (:func:`gpu_line`)."""
    if dev.board_id is None:
        return None  # a board outside the table: no measure is known, nothing to learn per board
    try:
        joint = report.get("search_kind") == "joint"
        view = gpu_line(report) if joint else report
        record = None if view is None else \
            make_record(view, dev.board_id, dev.model, dev.available_frequencies_mhz, workload, front_end)
        if record is None:
            if joint and board_calibration(dev.board_id, data_dir, log, prefix) is None:
                print(f"{prefix}: this joint (--knobs) run did not calibrate the board (no window at the top "
                      "mode's EMC and CPU clocks): a GPU-only `pydvfs run` or `pydvfs calibrate` (about a "
                      "minute) does", file=log or sys.stderr, flush=True)
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


__all__ = ["gpu_line", "record_run"]

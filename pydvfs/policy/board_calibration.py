"""A board calibrated from one run (docs/boards.md, "Calibrating a board"): the simulator's free
parameters fitted to what one training job measured on this board, stored in the board's data
folder, and the decisions made from it.

The free parameters are the knobs of the board's uncertainty family
(:mod:`pydvfs.sim.uncertainty`: static power share, the V/f curve, the compute-bound share,
MAXN's podgov): the physics every workload shares, so one job calibrates every workload.

- :func:`design`: the few clocks (and MAXN) at which the family's members disagree most on the
  job's J/step and s/step shape: where a measurement tells them apart;
- :func:`fit`: the knob values whose simulator gives the measured shape (J/step and s/step
  relative to the top level's, and MAXN's), by coordinate search inside the estimate ranges;
  :func:`fit_groups` the same over several workloads' measurements at once;
- :func:`refit`, :func:`refit_from_runs`: the calibration refitted from its own job's
  measurements and the online runs recorded in the board's store (the physics is shared): each
  recorded run refits it (:func:`pydvfs.policy.record.record_run`);
- :class:`CalibrationStore`: ``calibration-<board>.json`` beside the run records, as private and
  checked as they are (the folder and file checks of :class:`pydvfs.policy.store.RunStore`);
- :func:`calibrated_choice`: the clock of least energy for a workload on the calibrated
  simulator (the workload mapped onto the simulator's catalogue: :func:`sim_run_for`), or the
  clock the calibration's own job measured least where the simulator cannot tell them apart;
- :func:`gated_fit`: every fit (calibrate's, the first run's, each refit) earns its place or is
  rejected (:class:`FitRejected`, one line): its rms error, no knob pinned at the edge of its
  range by a loose fit, enough distinct clocks; one vote per distinct record, and a record the
  fit cannot follow is left out rather than let it pull the rest (docs/boards.md).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
from dataclasses import dataclass, replace

from ..errors import InvalidValueError, StoreError
from ..measure.energy import ROLE, check_measure
from ..workload import Workload
from .store import RunStore

# /2: the seven knobs of the family (pydvfs.sim.uncertainty.ALL_KNOBS); /1 (read still): the five
# of KNOBS, the CPU rail's busy power and the V/f top at the default's (issue 51: on the CPU+GPU
# measure an independent Orin Nano Super's fit with them at the default chose 510 MHz where 612
# was least, +2.6 %; fitted, 612, within 0.0 %)
FORMAT = "pydvfs-calibration/2"
FORMAT_V1 = "pydvfs-calibration/1"
MAX_BYTES = 64 * 1024
ORIGIN = "calibrated on this board"  # a decision's origin kind
GRID = 9  # values per knob and pass of the coordinate search
PASSES = 3
# A refit reads the newest this many online runs of the store (each a few clocks): it stays
# seconds at the end of a run whatever the store holds (MAX_RUNS records): the calibration's own
# job and nine runs of other workloads, 7.0 s on an idle core (docs/boards.md); runs of one
# workload share their predictions.
MAX_REFIT_RUNS = 10
# The gate (gated_fit). Fits of the family's held-out members from 5 clocks with 2 % noise on
# each point: rms 1.0-1.6 %; a command whose steps do not follow the clock (flat, or energy
# following power alone): 25-48 % (issue 51). A fit above MAX_RMS is not this board's curve.
MAX_RMS = 0.06
BOUND_RMS = 0.03  # a knob at an edge of its range is believed only where the fit is this tight
BOUND_TOL = 0.01  # ...at an edge: within this share of the range's width
MIN_CLOCKS = 3  # distinct fixed clocks a fit needs (MAXN besides)
VOTE_TOL = 0.001  # a group votes for new knobs where its rms log error is this much lower on them


class FitRejected(InvalidValueError):
    """A fit that did not earn its place (:func:`gated_fit`); its message is the one line why."""


def _sim():
    from ..sim import uncertainty

    return uncertainty


def fit_ranges() -> dict:
    """knob -> (low, high) a calibration fits within: every knob of the estimate boards' family."""
    return {**_sim().ESTIMATE_RANGES, **_sim().UNFITTED_ESTIMATE_RANGES}


def default_knobs() -> dict:
    """The default simulator's value of every fitted knob (the fit's start)."""
    from ..sim.model import default_params

    p0 = default_params()
    return {k: 1.0 if kind == "scale" else getattr(p0, names[0]) for k, (kind, names) in _sim().ALL_KNOBS.items()}


def sim_run_for(workload: Workload):
    """The simulator's run nearest to ``workload``: the catalogue architecture of the same kind
    (encoder / decoder) nearest in layers and hidden size, the task nearest in tokens per sample,
    the workload's training method, batch size (16 where unknown)."""
    from ..sim.catalogue import ARCHITECTURES, TASKS, Method, SimRun

    def far(a):
        return (math.log2(a.layers / workload.layers) ** 2 + math.log2(a.hidden / workload.hidden) ** 2
                + (0.0 if (a.family != "bert") == workload.is_decoder else 4.0))

    arch = min(ARCHITECTURES.values(), key=far)
    task = min(TASKS.values(), key=lambda t: abs(math.log(t.avg_tokens / workload.seq_len)))
    try:
        method = Method(workload.peft, rank=workload.rank or 16, weight_bits=workload.weight_bits,
                        precision=workload.precision)
    except (TypeError, InvalidValueError):
        method = Method()
    return SimRun(arch, task, workload.batch_size or 16, method=method)


def predict(board: str, knobs: dict, run, clocks, measure: str = "module") -> dict:
    """clock (None: MAXN) -> (J/step of ``measure``, s/step) of ``run`` on the member ``knobs``."""
    from ..sim.model import operating_point
    from ..sim.sweep import maxn_setting

    p = _sim().Member("fit", tuple(sorted(knobs.items()))).params()
    out = {}
    for f in clocks:
        op = operating_point(run, maxn_setting(board), None, p, board=board) if f is None else \
            operating_point(run, "fixed", f, p, board=board)
        out[f] = (op.role_power_w[ROLE[measure]] * op.t_step_s, op.t_step_s)
    return out


def _shape(points: dict, ref: float) -> dict:
    """Each point relative to the reference clock's (J and s)."""
    j0, s0 = points[ref]
    return {f: (j / j0, s / s0) for f, (j, s) in points.items()}


def _cost(pred: dict, meas: dict) -> float:
    """The squared log errors of J/step and of s/step, each less its mean over the points: the
    measured curve's shape is fitted, not its scale, and no one point is the reference of the
    others (a noisy window at the reference clock once moved every point of the shape by its 4 %)."""
    out = 0.0
    for i in (0, 1):
        d = [math.log(pred[f][i] / m[i]) for f, m in meas.items()]
        mu = sum(d) / len(d)
        out += sum((x - mu) ** 2 for x in d)
    return out


def design(board: str, run, n_clocks: int = 4, measure: str = "module") -> list:
    """The clocks to measure: the top level (the reference of the shape), MAXN, and the
    ``n_clocks - 1`` levels where the family's members disagree most on the shape's J/step
    (greedy, each new level the one of largest spread across the members)."""
    from ..device import table as boards

    levels = boards.board(board).gpu_levels_mhz
    top = levels[-1]
    members = _sim().family(board)
    shapes = [_shape(predict(board, dict(m.knobs), run, (*levels, None), measure), top) for m in members]

    def spread(f):
        v = [math.log(s[f][0]) for s in shapes]
        mu = sum(v) / len(v)
        return sum((x - mu) ** 2 for x in v)

    chosen = [top, None]
    rest = [f for f in levels if f != top]
    for _ in range(max(0, n_clocks - 1)):
        f = max(rest, key=lambda x: (spread(x), -x))
        chosen.append(f)
        rest.remove(f)
        rest = [x for x in rest if abs(levels.index(x) - levels.index(f)) > 1] or rest
    return chosen


def fit(board: str, run, measured: dict, measure: str = "module") -> tuple[dict, float]:
    """The knob values (:data:`pydvfs.sim.uncertainty.ALL_KNOBS`) that best give ``measured``
    (clock, None for MAXN -> (J/step, s/step), the top level among them), as the curve's shape
    (:func:`_cost`), gated (:func:`gated_fit`: :class:`FitRejected` says why it is not the
    board's curve); returns (knobs, rms log error)."""
    from ..device import table as boards

    top = boards.board(board).gpu_levels_mhz[-1]
    if top not in measured:
        raise FitRejected("a calibration needs the top level measured")
    knobs, rms, _, _ = gated_fit(board, [(run, measured, measure)])
    return knobs, rms


def fit_groups(board: str, groups: list, ranges: dict | None = None) -> tuple[dict, float]:
    """:func:`fit` over several workloads' measurements at once: ``groups`` of (simulator run,
    clock -> (J/step, s/step), measure), each group's shape fitted apart (:func:`_cost`: runs at
    different scales are not read as one curve), each group's mean squared log error summed (one
    vote per group, however many points it has); returns (knobs, rms log error: the root of the
    groups' mean). ``ranges``: the knobs to fit and their bounds (default :func:`fit_ranges`). The runs' predictions are made once per distinct run and measure.

    A coordinate search: one pass from the default and from each of the family's corners
    (:func:`pydvfs.sim.uncertainty.corners`), then :data:`PASSES` from the best of them. The error
    has several basins within tenths of a % rms of each other whose decisions differ: from the
    default alone, the independent nominal Orin Nano Super's CPU+GPU fit put 510 MHz above 612
    where it is 2.7 % below (issue 51; bench/bench_fit.py: from the points of nine first runs of
    every board, decisions above 2 % of the least 10 of 720 from the default alone, 1 from the five)."""
    meas = [m for _, m, _ in groups]
    clocks: dict = {}  # (run, measure) -> (run, the clocks of every group of it)
    for run, m, measure in groups:
        key = (repr(run), measure)
        clocks[key] = (run, measure, {*clocks.get(key, (None, None, set()))[2], *m})
    bounds = ranges or fit_ranges()
    seen: dict = {}

    def cost(kn):  # one vote per group: each group's mean squared error, whatever its points
        key = tuple(sorted(kn.items()))
        if key not in seen:
            pred = {k: predict(board, kn, run, tuple(cs), measure) for k, (run, measure, cs) in clocks.items()}
            seen[key] = sum(_cost(pred[(repr(run), measure)], m) / len(m) for run, m, measure in groups)
        return seen[key]

    def search(knobs, passes):  # coordinate search, each pass on a grid half as wide as the last
        best = cost(knobs)
        for rnd in range(passes):
            for k, (lo, hi) in bounds.items():
                width = (hi - lo) / (2 ** rnd)
                c = knobs[k]
                for v in (min(hi, max(lo, c + width * (i / (GRID - 1) - 0.5))) for i in range(GRID)):
                    trial = {**knobs, k: v}
                    e = cost(trial)
                    if e < best - 1e-12:
                        best, knobs = e, trial
        return best, knobs

    default = {k: v for k, v in default_knobs().items() if k in bounds}
    starts = [default, *({**default, **{k: v for k, v in m.knobs if k in bounds}} for m in _sim().corners(board))]
    _, start = min((search(s, 1) for s in starts), key=lambda x: x[0])
    best, knobs = search(start, PASSES)
    return {k: round(v, 5) for k, v in knobs.items()}, math.sqrt(best / (2 * len(meas)))


def _at_bound(knob: str, v: float) -> bool:
    """At an edge of its range, where the fit pushed it (the default's own value, an edge of
    ``vf_top``'s range, is where the fit starts: not pushed)."""
    lo, hi = fit_ranges()[knob]
    return v != default_knobs()[knob] and min(v - lo, hi - v) <= BOUND_TOL * (hi - lo)


def group_rms(board: str, knobs: dict, groups: list) -> list:
    """Each group's own rms log error (J/step and s/step shape, :func:`_cost`) on ``knobs``."""
    return [math.sqrt(_cost(predict(board, knobs, run, tuple(m), measure), m) / (2 * len(m)))
            for run, m, measure in groups]


def distinct_groups(groups: list) -> list:
    """``groups`` with each distinct one once (the same record given N times is one vote)."""
    seen, out = set(), []
    for run, m, measure in groups:
        key = (repr(run), measure, tuple(sorted(m.items(), key=lambda kv: (kv[0] is None, kv[0] or 0.0))))
        if key not in seen:
            seen.add(key)
            out.append((run, m, measure))
    return out


def fit_rejection(groups: list, knobs: dict, rms: float) -> str | None:
    """Why a fit of ``groups`` (knobs, rms) is not this board's curve; None where it earns its
    place: at least :data:`MIN_CLOCKS` distinct clocks measured, an rms error of at most
    :data:`MAX_RMS`, and no knob at an edge of its range unless the fit is within :data:`BOUND_RMS`
    (a loose fit pushed there says the measured curve is none of the board's family)."""
    clocks = {f for _, m, _ in groups for f in m if f is not None}
    if len(clocks) < MIN_CLOCKS:
        return (f"only {len(clocks)} distinct GPU clock{'s' * (len(clocks) != 1)} measured "
                f"(a fit needs {MIN_CLOCKS})")
    return quality_rejection(knobs, rms)


def quality_rejection(knobs: dict, rms: float) -> str | None:
    """:func:`fit_rejection`'s rms and bound checks alone (a stored calibration's clocks are not
    all kept: :func:`board_calibration` checks these)."""
    if not rms <= MAX_RMS:
        return (f"the board's simulator follows the measured curve only to {100 * rms:.1f} % rms error "
                f"(at most {100 * MAX_RMS:g} %): the steps do not follow the GPU clock as training does")
    pinned = [k for k, v in knobs.items() if _at_bound(k, v)]
    if pinned and rms > BOUND_RMS:
        return (f"{', '.join(pinned)} pinned at the edge of {'its' if len(pinned) == 1 else 'their'} range by a "
                f"loose fit ({100 * rms:.1f} % rms error, at most {100 * BOUND_RMS:g} % there)")
    return None


def gated_fit(board: str, groups: list) -> tuple[dict, float, list, int]:
    """:func:`fit_groups` of the distinct ``groups``, gated (:func:`fit_rejection`: a
    :class:`FitRejected` where it fails). Where groups disagree, a group after the first that the
    joint fit follows only beyond :data:`MAX_RMS` is left out and the rest refitted, the worst
    first and one at a time: one record cannot pull the others' curve. Returns (knobs, rms, the groups fitted, how many were left out)."""
    groups = distinct_groups(groups)
    if not groups:
        raise FitRejected("no run measured enough clocks to fit")
    if not all(_positive(j) and _positive(t) for _, m, _ in groups for j, t in m.values()):
        raise FitRejected("a clock measured no energy or no time per step: the rails did not see the work")
    knobs, rms = fit_groups(board, groups)
    left = 0
    while len(groups) > 1 and rms > 0:  # the worst first: a wild record can pull a good one past MAX_RMS
        res = group_rms(board, knobs, groups)
        worst = max(range(1, len(groups)), key=lambda i: res[i])
        if res[worst] <= MAX_RMS:
            break
        groups = groups[:worst] + groups[worst + 1:]
        left += 1
        knobs, rms = fit_groups(board, groups)
    why = fit_rejection(groups, knobs, rms)
    if why:
        raise FitRejected(why)
    return knobs, rms, groups, left


# ---- the stored calibration ----------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    board: str
    knobs: dict
    measurements: int
    rms_log_error: float
    workload: dict
    points: list  # [{"freq_mhz": f or None, "j_per_step": J, "s_per_step": s}]
    measure: str
    created_utc: str
    # refitted with the online runs of the board's store (refit): how many runs and points, when
    online_runs: int = 0
    online_points: int = 0  # measurements = len(points) + online_points
    refit_utc: str = ""

    def to_dict(self) -> dict:
        return {"format": FORMAT, "board": self.board, "knobs": self.knobs, "measurements": self.measurements,
                "rms_log_error": self.rms_log_error, "workload": self.workload, "points": self.points,
                "measure": self.measure, "created_utc": self.created_utc, "online_runs": self.online_runs,
                "online_points": self.online_points, "refit_utc": self.refit_utc}

    def note(self) -> str:
        return f"calibrated on this board from {self.measurements} measurements"


def check_calibration(d) -> Calibration:
    """A stored calibration, checked (ValueError says what is wrong)."""
    if not isinstance(d, dict) or d.get("format") not in (FORMAT, FORMAT_V1):
        raise ValueError(f"not a {FORMAT} record")
    ranges = fit_ranges()
    knobs = d.get("knobs")
    if not isinstance(knobs, dict) or set(knobs) != set(_sim().KNOBS if d["format"] == FORMAT_V1 else ranges):
        raise ValueError(f"knobs missing or unknown (a {d['format']} record has {', '.join(ranges if d['format'] == FORMAT else _sim().KNOBS)})")
    knobs = {**default_knobs(), **knobs}  # /1 (the five of KNOBS): the two it did not fit at the default's
    for k, v in knobs.items():
        lo, hi = ranges[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo - 1e-9 <= v <= hi + 1e-9:
            raise ValueError(f"knob {k} outside {lo}..{hi}")

    def count(key, least):
        v = d.get(key, least)
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise ValueError(f"{key} must be a whole number >= {least}")
        return v

    n, online_runs, online_points = count("measurements", 1), count("online_runs", 0), count("online_points", 0)
    points = d.get("points")
    if not isinstance(points, list) or not points:
        raise ValueError("no measured points")
    for p in points:
        if not isinstance(p, dict) or (p.get("freq_mhz") is not None and not _positive(p["freq_mhz"])) \
                or not _positive(p.get("j_per_step")) or not _positive(p.get("s_per_step")):
            raise ValueError("a measured point is not a clock (or MAXN) with positive J/step and s/step")
    if len({p["freq_mhz"] for p in points}) != len(points):
        raise ValueError("a clock measured twice")
    if n != len(points) + online_points:
        raise ValueError(f"measurements {n} is not the {len(points)} points plus the {online_points} online ones")
    if not isinstance(d.get("board"), str):
        raise ValueError("no board")
    check_measure(d.get("measure"))
    return Calibration(d["board"], dict(knobs), n, float(d.get("rms_log_error", float("nan"))),
                       dict(d.get("workload") or {}), list(points), d["measure"],
                       str(d.get("created_utc", "")), online_runs, online_points, str(d.get("refit_utc", "")))


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


class CalibrationStore(RunStore):
    """``calibration-<board>.json`` in the run store's folder, with its checks (a private folder
    owned by this user, no symbolic links, a 0600 regular file)."""

    def file_name(self, board_id: str) -> str:
        return "calibration-" + super().file_name(board_id)[len("runs-"):-len(".jsonl")] + ".json"

    def save(self, cal: Calibration) -> str:
        check_calibration(cal.to_dict())
        return self.write(cal.board, self.file_name(cal.board), json.dumps(cal.to_dict(), indent=1) + "\n")

    def write(self, board_id: str, name: str, text: str) -> str:
        """Replace ``name`` in the folder by ``text``: a new 0600 file beside it (O_EXCL,
        O_NOFOLLOW, relative to the checked folder), renamed over it. Returns its path."""
        self.file_name(board_id)  # a board of the table: nothing else names a file here
        path = os.path.join(self.path, name)
        dfd = self._open_dir(create=True)
        tmp = f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e.strerror}") from None
        finally:
            os.close(dfd)
        return path

    @contextlib.contextmanager
    def locked(self, board_id: str):
        """The board's calibration held by this process alone (an exclusive ``flock`` on a 0600
        ``.calibration-<board>.json.lock`` in the checked folder): a calibrate and a refit, or two
        refits, each read, fit and write in turn, and none writes over the other's newer data."""
        name = "." + self.file_name(board_id) + ".lock"
        dfd = self._open_dir(create=True)
        try:
            try:
                fd = self._open_file(dfd, name, os.O_RDWR | os.O_CREAT)
            except OSError as e:
                raise StoreError(f"cannot lock {os.path.join(self.path, name)}: {e.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)
        finally:
            os.close(dfd)

    def rejection_name(self, board_id: str) -> str:
        return self.file_name(board_id)[:-len(".json")] + ".rejected.json"

    def note_rejection(self, board_id: str, why: str, source: str) -> str:
        """Keep the newest rejected fit's one line (status shows it) beside the calibration."""
        note = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "why": why, "source": source}
        return self.write(board_id, self.rejection_name(board_id), json.dumps(note) + "\n")

    def clear_rejection(self, board_id: str) -> None:
        """An accepted fit: the rejected one's note is history (removed; it is this store's file)."""
        dfd = self._open_dir(create=False)
        if dfd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.rejection_name(board_id), dir_fd=dfd)
        finally:
            os.close(dfd)

    def rejection(self, board_id: str) -> dict | None:
        """The newest rejected fit's note ({"utc", "why", "source"}); None where there is none
        (or it cannot be read: it is only a note)."""
        dfd = self._open_dir(create=False)
        if dfd is None:
            return None
        try:
            fd = self._open_file(dfd, self.rejection_name(board_id), os.O_RDONLY)
            with os.fdopen(fd, "rb") as fh:
                note = json.loads(fh.read(MAX_BYTES).decode("utf-8"))
        except (OSError, ValueError, StoreError):
            return None
        finally:
            os.close(dfd)
        ok = isinstance(note, dict) and all(isinstance(note.get(k), str) for k in ("utc", "why", "source"))
        return note if ok else None

    def record_names(self, board_id: str) -> tuple[str, str]:
        """The shareable record's files (JSON, Markdown) beside the calibration."""
        stem = self.file_name(board_id)[:-len(".json")]
        return f"{stem}.record.json", f"{stem}.record.md"

    def read(self, board_id: str) -> Calibration | None:
        """The board's calibration; None where there is none. A damaged one is a StoreError."""
        name = self.file_name(board_id)
        path = os.path.join(self.path, name)
        dfd = self._open_dir(create=False)
        if dfd is None:
            return None
        try:
            try:
                fd = self._open_file(dfd, name, os.O_RDONLY)
            except FileNotFoundError:
                return None
            except OSError as e:
                raise StoreError(f"cannot read {path}: {e.strerror}") from None
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_BYTES + 1)
        finally:
            os.close(dfd)
        try:
            if len(data) > MAX_BYTES:
                raise ValueError(f"longer than {MAX_BYTES} bytes")
            cal = check_calibration(json.loads(data.decode("utf-8")))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise StoreError(f"the board's calibration {path} is damaged ({e}): run `pydvfs calibrate` again "
                             "or remove it") from None
        if cal.board != board_id:
            raise StoreError(f"the calibration {path} is of board {cal.board!r}, not {board_id!r}")
        return cal


def board_calibration(board_id: str | None, data_dir=None, log=None, prefix: str = "pydvfs") -> Calibration | None:
    """This board's stored calibration; None where there is none, it cannot be read, or it fails
    the gate's rms and bound checks (:func:`quality_rejection`: one stored before fits were
    gated), said in one line on ``log``: the built-in policy decides then."""
    import sys

    if not board_id:
        return None
    try:
        store = CalibrationStore(data_dir)
        cal = store.read(board_id)
    except (StoreError, OSError) as e:
        print(f"{prefix}: warning: the board's calibration was not read: {e}", file=log or sys.stderr, flush=True)
        return None
    why = None if cal is None else quality_rejection(cal.knobs, cal.rms_log_error)
    if why:  # stored before fits were gated (issue 51): never decided from
        print(f"{prefix}: warning: the board's calibration {store.file_path(board_id)} is not used: {why}; "
              "run `pydvfs calibrate` again or remove it", file=log or sys.stderr, flush=True)
        return None
    return cal


def run_group(record: dict, levels_mhz) -> tuple | None:
    """An online run's record (pydvfs.policy.store, checked) as a :func:`fit_groups` group: its
    workload's simulator run, its probes at clocks of the board's table (``levels_mhz``) and MAXN,
    and its measure; None where it cannot calibrate: no workload, a partial run, or fewer than two
    such probes with a clock among them."""
    from .store import workload_of

    if not record.get("workload") or record.get("partial"):
        return None  # a run stopped part-way (Ctrl-C, a crash) measured what it reached, not a curve
    measured = {}
    for p in record["probes"]:
        f = p["freq_mhz"]
        if f is not None:
            f = next((x for x in levels_mhz if abs(x - f) < 0.5), None)
            if f is None:
                continue  # a clock of another table (another JetPack): not this board's
        measured[f] = (float(p["j_per_step"]), float(p["s_per_step"]))
    clocks = [f for f in measured if f is not None]
    if len(measured) < 2 or not clocks:
        return None
    return sim_run_for(workload_of(record["workload"])), measured, record["measure"]


def _groups_of(records: list, levels) -> list:
    """The newest :data:`MAX_REFIT_RUNS` records that can calibrate, as groups, newest first."""
    return [g for g in (run_group(r, levels) for r in reversed(records[-MAX_REFIT_RUNS:])) if g is not None]


def refit(cal: Calibration, records: list) -> tuple[Calibration, int]:
    """``cal`` refitted from its own job's points and the online runs ``records`` (checked
    records of its board, oldest first: the newest :data:`MAX_REFIT_RUNS` are read), the same
    physics fitted to every workload, gated (:func:`gated_fit`: :class:`FitRejected`);
    ``measurements`` counts every point fitted. Its own points, workload and creation time stay:
    a refit never compounds an earlier one's. A refit that would change a decision with fewer
    than two of its groups voting for it (:func:`moved_alone`) is rejected: no record moves a
    calibrated decision by itself. Returns (the calibration, how many records the fit left out)."""

    from ..device import table as boards

    levels = list(boards.board(cal.board).gpu_levels_mhz)
    own = (sim_run_for(Workload.from_any(cal.workload)), {p["freq_mhz"]: (p["j_per_step"], p["s_per_step"])
                                                          for p in cal.points}, cal.measure)
    groups = _groups_of(records, levels)
    if not groups and not cal.online_points:
        return cal, 0  # nothing to add to its own job's fit
    knobs, rms, fitted, left = gated_fit(cal.board, [own, *groups])
    why = moved_alone(cal.board, cal.knobs, knobs, fitted, cal.measure)
    if why:
        raise FitRejected(why)
    n = sum(len(g[1]) for g in fitted[1:])
    return replace(cal, knobs=knobs, rms_log_error=rms, measurements=len(own[1]) + n, online_runs=len(fitted) - 1,
                   online_points=n, refit_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), left


def moved_alone(board: str, old: dict, new: dict, groups: list, measure: str) -> str | None:
    """Why the knobs ``new`` may not replace ``old``: they change the calibrated clock of a
    workload (:data:`RECORD_WORKLOADS` and the fitted groups' own) while fewer than two of the
    fitted ``groups`` (the calibration's own job, each distinct record) fit better on ``new``
    than on ``old`` (by :data:`VOTE_TOL`): one record cannot move a calibrated decision by
    itself; a second that agrees with it can. None where the decisions stay or enough vote."""
    from ..sim.catalogue import get_workload
    from ..sim.profiles import profile

    levels = tuple(profile(board).levels_mhz)
    runs = {repr(r): r for r in [get_workload(m, t) for m, t in RECORD_WORKLOADS] + [g[0] for g in groups]}

    def choice(kn, run):
        pts = predict(board, kn, run, levels, measure)
        return min(levels, key=lambda f: pts[f][0])

    moved = [(r, choice(old, r), choice(new, r)) for r in runs.values()]
    moved = [m for m in moved if m[1] != m[2]]
    if not moved:
        return None
    votes = sum(n < o - VOTE_TOL for n, o in zip(group_rms(board, new, groups), group_rms(board, old, groups)))
    if votes >= 2:
        return None
    run, a, b = moved[0]
    return (f"one run alone would move the calibrated clock of {getattr(run, 'name', 'a workload')} from {a:g} to "
            f"{b:g} MHz ({votes} of {len(groups)} fitted run{'s' * (len(groups) != 1)} fit better so): kept until "
            "another run agrees")


def first_calibration(board_id: str, records: list) -> tuple[Calibration | None, int]:
    """A board calibrated from its recorded online runs alone (issue 51: every governed run
    calibrates an uncalibrated board): the newest run that can calibrate is the calibration's own
    job, the other recorded runs refine it, gated as every fit (:class:`FitRejected`). (None, 0)
    where no recorded run can calibrate (no workload, a partial run, too few probes)."""
    from ..device import table as boards
    from .store import workload_of

    levels = list(boards.board(board_id).gpu_levels_mhz)
    groups = _groups_of(records, levels)
    if not groups:
        return None, 0
    knobs, rms, fitted, left = gated_fit(board_id, groups)
    run, own, measure = fitted[0]
    newest = next(r for r in reversed(records[-MAX_REFIT_RUNS:]) if run_group(r, levels) is not None)
    n = sum(len(g[1]) for g in fitted[1:])
    cal = new_calibration(board_id, knobs, rms, workload_of(newest["workload"]), own, measure)
    return replace(cal, measurements=len(own) + n, online_runs=len(fitted) - 1, online_points=n,
                   refit_utc=cal.created_utc if n else ""), left


def refit_from_runs(board_id: str | None, data_dir=None, log=None, prefix: str = "pydvfs") -> Calibration | None:
    """Fit the board's calibration from the online runs of the board's store: refit the stored
    one from its points and the runs (:func:`refit`), or, where the board has none, calibrate it
    from the runs (:func:`first_calibration`); under the calibration's lock, and store it (as
    private and checked as calibrate's). A fit that does not earn its place
    (:class:`FitRejected`) keeps the last good calibration (or none), says why in one line on
    ``log`` and in a note status shows. Damaged records and records of another board are skipped
    (the store's checks); a calibration or store that cannot be read or written is one warning on
    ``log``, never an error: the run is over and its record stands. Returns the new calibration."""
    import sys

    log = log or sys.stderr
    if not board_id:
        return None
    cal = False  # not read yet (a damaged one is not refitted); None: the board has none
    try:
        store = CalibrationStore(data_dir)
        records = RunStore(data_dir).load(board_id).records
        with store.locked(board_id):
            cal = store.read(board_id)  # as it is now that no one else writes it
            try:
                new, left = refit(cal, records) if cal is not None else first_calibration(board_id, records)
            except FitRejected as e:
                store.note_rejection(board_id, str(e), "the online runs")
                kept = "kept as it was" if cal is not None else "not calibrated"
                print(f"{prefix}: the board's calibration was {kept}: the fit with this run was rejected: {e}",
                      file=log, flush=True)
                return None
            if new is None or new is cal:
                return None
            store.save(new)
            store.clear_rejection(board_id)
    except (StoreError, OSError, InvalidValueError, ValueError) as e:
        print(f"{prefix}: warning: the board's calibration was not {'fitted' if cal is None else 'refitted'} with the "
              f"recorded runs: {e.strerror if isinstance(e, OSError) and e.strerror else e}", file=log, flush=True)
        return None
    out = f" ({left} record{'s' * (left != 1)} the fit could not follow left out)" if left else ""
    if cal is None:
        print(f"{prefix}: the board is now {new.note()} of {new.online_runs + 1} online "
              f"run{'s' * (new.online_runs != 0)} (rms error {100 * new.rms_log_error:.1f} %){out}: apply decides "
              "from it for every workload", file=log, flush=True)
    else:
        print(f"{prefix}: {new.note()} (its own {len(new.points)} and {new.online_points} of {new.online_runs} "
              f"online run{'s' * (new.online_runs != 1)} in the store; rms error {100 * new.rms_log_error:.1f} %)"
              + out, file=log, flush=True)
    return new


def calibrated_points(cal: Calibration, workload: Workload, levels_mhz, measure: str = "module") -> tuple:
    """(the level chosen for ``workload``: the calibrated simulator's least ``measure`` energy per
    step, {clock (None: MAXN): (J/step, s/step)} of every level and MAXN on it), from one
    simulator run."""
    from ..sim.profiles import profile

    levels = [f for f in profile(cal.board).levels_mhz if any(abs(f - x) < 0.5 for x in levels_mhz)] \
        or list(profile(cal.board).levels_mhz)
    pts = predict(cal.board, cal.knobs, sim_run_for(workload), [*levels, None], measure)
    return min(levels, key=lambda f: pts[f][0]), pts


def calibrated_choice(cal: Calibration, workload: Workload, levels_mhz, measure: str = "module") -> float:
    """The level :func:`calibrated_points` chooses for ``workload``."""
    return calibrated_points(cal, workload, levels_mhz, measure)[0]


def calibrated_start(dev, workload, levels_mhz, measure: str, data_dir=None, log=None,
                     prefix: str = "pydvfs run") -> tuple[float, str] | None:
    """Where an online search starts on a calibrated board: (the calibrated simulator's clock for
    ``workload``, the note saying so); None where the board is not calibrated."""
    cal = board_calibration(dev.board_id, data_dir, log, prefix)
    if cal is None:
        return None
    mhz = calibrated_choice(cal, Workload.from_any(workload), levels_mhz, measure)
    if log is not None:
        print(f"{prefix}: starting at {mhz:g} MHz, {cal.note()}", file=log, flush=True)
    return mhz, cal.note()


# The workloads whose decisions a shareable record shows before and after (held-out tasks).
RECORD_WORKLOADS = (("bert-small", "RTE"), ("bert-base", "MNLI"), ("bert-large", "QQP"), ("pythia-160m", "CoLA"),
                    ("pythia-1b", "STS-B"))


def share_record(cal: Calibration, capture: dict, before: dict) -> dict:
    """What a user can publish (docs/boards.md, "Publishing a calibration"): the board's capture
    (pydvfs.device.capture: no serial number, host name, MAC address or user name is ever read),
    the measured curve beside the simulator's prediction before (the default profile) and after
    the calibration (each relative to the top level's), and the decisions for
    :data:`RECORD_WORKLOADS` before (``before``: name -> the built-in's clock, None: MAXN) and
    after, with the calibrated simulator's J/step at each."""
    from ..sim.catalogue import get_workload
    from ..sim.profiles import profile

    top = max(p["freq_mhz"] for p in cal.points if p["freq_mhz"] is not None)
    measured = {p["freq_mhz"]: (p["j_per_step"], p["s_per_step"]) for p in cal.points}
    run = sim_run_for(Workload.from_any(cal.workload))
    prior = _shape(predict(cal.board, {}, run, tuple(measured), cal.measure), top)
    fitted = _shape(predict(cal.board, cal.knobs, run, tuple(measured), cal.measure), top)
    meas = _shape(measured, top)
    curve = [{"freq_mhz": f, "measured_j_rel": meas[f][0], "before_j_rel": prior[f][0], "after_j_rel": fitted[f][0],
              "measured_s_rel": meas[f][1], "before_s_rel": prior[f][1], "after_s_rel": fitted[f][1]} for f in measured]
    decisions = []
    for model, task in RECORD_WORKLOADS:
        w = get_workload(model, task)
        after = calibrated_choice(cal, w.workload(), profile(cal.board).levels_mhz, cal.measure)
        b = before.get(w.name)
        pts = predict(cal.board, cal.knobs, w, tuple({after, b}), cal.measure)
        decisions.append({"workload": w.name, "before_mhz": b, "after_mhz": after,
                          "after_vs_before_pct": 100.0 * (pts[after][0] / pts[b][0] - 1.0)})
    return {"format": FORMAT + "-record", "board": cal.board, "calibration": cal.to_dict(), "capture": capture,
            "curve": curve, "decisions": decisions}


def record_markdown(rec: dict) -> str:
    """The record as Markdown, to paste into an issue."""
    from ..markdown import table

    cal = rec["calibration"]
    name = (rec["capture"].get("meta") or {}).get("model") or rec["board"]

    def mhz(f):
        return "MAXN" if f is None else f"{f:g} MHz"

    out = [f"# pydvfs calibration of a {name} ({rec['board']})", "",
           f"Calibrated on this board from {cal['measurements']} measurements of one job "
           f"({cal['workload'].get('model')}, {cal['workload'].get('layers')} layers, hidden "
           f"{cal['workload'].get('hidden')}), {cal['measure']} energy, rms error {100 * cal['rms_log_error']:.1f} %; "
           f"{cal['created_utc']}.", "",
           "Fitted: " + ", ".join(f"`{k}` {v:g}" for k, v in cal["knobs"].items()) + " (docs/sim.md, "
           "\"Uncertainty family\").", "", "## Measured curve against the simulator (relative to the top level)", ""]
    out += table(["setting", "J/step measured", "before", "after", "s/step measured", "before", "after"],
                 [[mhz(c["freq_mhz"]), f"{c['measured_j_rel']:.3f}", f"{c['before_j_rel']:.3f}",
                   f"{c['after_j_rel']:.3f}", f"{c['measured_s_rel']:.3f}", f"{c['before_s_rel']:.3f}",
                   f"{c['after_s_rel']:.3f}"] for c in rec["curve"]])
    out += ["", "## Decisions before (the built-in policy) and after (the calibrated simulator)", ""]
    out += table(["workload", "before", "after", "after vs before (calibrated simulator)"],
                 [[d["workload"], mhz(d["before_mhz"]), mhz(d["after_mhz"]), f"{d['after_vs_before_pct']:+.1f} %"]
                  for d in rec["decisions"]])
    out += ["", "The board's capture (no serial number, host name, MAC address or user name: "
            "`pydvfs capture-board`) is in the JSON record beside this file."]
    return "\n".join(out) + "\n"


def new_calibration(board: str, knobs: dict, rms: float, workload: Workload, measured: dict,
                    measure: str) -> Calibration:
    return Calibration(board, knobs, len(measured), rms, workload.to_dict(),
                       [{"freq_mhz": f, "j_per_step": j, "s_per_step": s} for f, (j, s) in measured.items()],
                       measure, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


__all__ = ["Calibration", "CalibrationStore", "FORMAT", "FitRejected", "ORIGIN", "first_calibration", "gated_fit", "moved_alone", "board_calibration", "calibrated_choice",
           "calibrated_start", "record_markdown", "share_record",
           "check_calibration", "design", "fit", "fit_groups", "new_calibration", "predict", "refit",
           "refit_from_runs", "run_group", "sim_run_for"]

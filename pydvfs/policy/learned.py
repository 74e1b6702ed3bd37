"""The board-learned policy: the clock this board measured best for the workloads nearest the
one asked about, refit from the store (:mod:`pydvfs.policy.store`) on every read.

The fit (docs/store.md):

1. Runs of one workload shape (model family, layers, hidden, sequence length) on this board and
   for this energy measure are merged (:meth:`Shape.curve`): the reference is the clock most
   runs measured; a clock counts where more than half as many runs measured it; its J/step
   and s/step are the reference's medians times the median of each run's ratio to its own
   reference reading (clocks compared over the runs that measured both). A shape with fewer
   than two such clocks says nothing about its best clock and is left out.
2. Each shape's best clock is the argmin of the objective's cost over its measured clocks
   (energy: J/step; EDP: J/step x s/step; ED2P: x s/step^2; with a slowdown bound, among the
   clocks within the bound of the fastest measured).
3. A workload asks the shapes within :data:`MAX_DISTANCE` of it (the distance: log2 ratios of
   layers, hidden and sequence length, and 1 for another model family): the :data:`K` nearest
   vote for their best clocks, each by its runs / (distance + 0.25)^2; the clock with the most weight
   wins (a tie: the nearest shape's). No shape that near: no learned clock (the built-in
   policy decides).

The learned clock is snapped to this board's table (a store copied from a board with another
JetPack table still speaks of clocks near this one's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median

from ..device.levels import nearest_level
from ..workload import Workload
from .objective import Objective
from .store import workload_of

K = 3  # shapes that vote
MAX_DISTANCE = 2.0  # farther shapes are not "of similar shape" (2.0: a factor of 4 in one dimension)
ORIGIN = "board-learned"


def distance(a: Workload, b: Workload) -> float:
    """How far two workload shapes are: log2 ratios of layers, hidden size and sequence length,
    and 1 for another model family (encoder/decoder)."""
    d2 = sum(math.log2(x / y) ** 2 for x, y in ((a.layers, b.layers), (a.hidden, b.hidden), (a.seq_len, b.seq_len)))
    return math.sqrt(d2 + (0.0 if a.is_decoder == b.is_decoder else 1.0))


@dataclass
class Shape:
    """A workload shape's runs: each run's measured clocks (None: MAXN) -> (J/step, s/step).

    Merged robustly (docs/store.md): a clock counts only where more than half as many runs
    measured it as measured the shape's best-supported clock (the reference); each run's
    clocks are taken relative to its own reference's, and a clock's value is the median of
    those ratios over the runs that measured both, times the reference's median. One run
    cannot add a clock the others never measured, nor move one the others did."""

    workload: Workload
    runs: int = 0
    measured: list = field(default_factory=list)  # per run: {freq_mhz: (j, s)}

    def support(self) -> dict:
        """Clock -> how many runs measured it."""
        out: dict = {}
        for run in self.measured:
            for f in run:
                out[f] = out.get(f, 0) + 1
        return out

    def curve(self) -> dict:
        """Clock -> (J/step, s/step): the clocks enough runs measured, compared over the runs that
        measured both them and the reference clock."""
        n = self.support()
        levels = [f for f in n if f is not None] or list(n)
        if not levels:
            return {}
        ref = max(levels, key=lambda f: (n[f], f or 0.0))
        base = [run[ref] for run in self.measured if ref in run]
        j_ref, s_ref = median(j for j, _ in base), median(s for _, s in base)
        out = {}
        for f in n:
            if 2 * n[f] <= n[ref]:
                continue  # measured by too few runs to stand against the others
            pairs = [(run[f][0] / run[ref][0], run[f][1] / run[ref][1]) for run in self.measured
                     if f in run and ref in run]
            if pairs:
                out[f] = (j_ref * median(j for j, _ in pairs), s_ref * median(s for _, s in pairs))
        return out

    def set_aside(self) -> list:
        """The clocks measured but not compared (too few runs, or none with the reference)."""
        kept = self.curve()
        return sorted((f for f in self.support() if f not in kept), key=lambda f: (f is None, f or 0.0))

    def best(self, objective: Objective) -> float | None:
        """The clock of least cost among those measured (MAXN never: a clock is learned); None
        where fewer than two clocks were measured or the bound leaves none."""
        c = {f: v for f, v in self.curve().items() if f is not None}
        if len(c) < 2:
            return None
        fastest = min(s for _, s in c.values())
        ok = {f: v for f, v in c.items() if objective.admissible(v[1], fastest)}
        if not ok:
            return None
        return min(ok, key=lambda f: (objective.cost(*ok[f]), f))


def shape_key(w: Workload) -> tuple:
    return (w.is_decoder, w.layers, w.hidden, round(w.seq_len, 1))


def shapes(records: list[dict], measure: str) -> tuple[list[Shape], int]:
    """The records of ``measure`` merged by workload shape; and how many runs they hold."""
    by: dict = {}
    n = 0
    for r in records:
        if r.get("measure") != measure or r.get("workload") is None:
            continue
        w = workload_of(r["workload"])
        s = by.setdefault(shape_key(w), Shape(w))
        s.runs += 1
        n += 1
        s.measured.append({p["freq_mhz"]: (p["j_per_step"], p["s_per_step"]) for p in r["probes"]})
    return list(by.values()), n


@dataclass(frozen=True)
class Learned:
    """A clock learned on this board: ``freq_mhz`` (on this board's table), from ``runs`` runs
    of the store (of ``shapes`` workload shapes), voted by ``neighbours`` (nearest first:
    workload, distance, best_mhz, runs)."""

    freq_mhz: float
    runs: int
    shapes: int
    measure: str
    neighbours: tuple = ()
    board: str | None = None
    data_dir: str | None = None
    curve: tuple = ()  # the nearest shape's measured clocks: (MHz, J/step, s/step), MAXN left out

    def prior(self) -> dict:
        """What the online search is given of it (a SearchPrior's fields): the nearest shape's
        measured clocks as observations (the search rescales them to this run where both measured
        a clock, and settles only on what this run measured)."""
        return {"observations": [list(c) for c in self.curve], "source": self.note()}

    def note(self) -> str:
        """What the one-line notices say after the clock."""
        near = self.neighbours[0]
        return (f"learned on this board from {self.runs} run{'s' * (self.runs != 1)} "
                f"(nearest: {describe_shape(near['workload'])} at {near['best_mhz']:g} MHz)")

    def origin(self) -> dict:
        return {"kind": ORIGIN, "board": self.board, "measure": self.measure, "runs": self.runs,
                "shapes": self.shapes, "data_dir": self.data_dir}

    def to_dict(self) -> dict:
        return {"freq_mhz": self.freq_mhz, "runs": self.runs, "shapes": self.shapes, "measure": self.measure,
                "board": self.board, "data_dir": self.data_dir, "neighbours": list(self.neighbours),
                "curve": [list(c) for c in self.curve]}


def describe_shape(w: dict) -> str:
    name = w.get("name") or w["model"]
    return f"{name} {w['layers']}x{w['hidden']} seq {w['seq_len']:g}"


def learn(records: list[dict], workload, levels_mhz, objective: Objective | None = None,
          k: int = K, max_distance: float = MAX_DISTANCE) -> Learned | None:
    """The clock the store's runs vote for ``workload`` (None: no shape near enough)."""
    objective = objective or Objective()
    wl = Workload.from_any(workload)
    all_shapes, runs = shapes(records, objective.energy)
    near, known = [], 0
    for s in all_shapes:
        best = s.best(objective)
        if best is None:
            continue
        known += 1
        d = distance(wl, s.workload)
        if d <= max_distance:
            near.append((d, s, best))
    if not near:
        return None
    near.sort(key=lambda x: (x[0], x[2]))
    near = near[:k]
    votes: dict = {}
    for d, shape, best in near:
        votes[best] = votes.get(best, 0.0) + shape.runs / (d + 0.25) ** 2  # each run a vote, by its distance
    top = max(votes.values())
    winner = next(best for _, _, best in near if votes[best] == top)  # a tie: the nearest's
    nearest = near[0][1].curve()
    return Learned(freq_mhz=nearest_level(sorted(levels_mhz), winner), runs=runs,
                   shapes=known, measure=objective.energy,
                   curve=tuple((f, j, t) for f, (j, t) in sorted(nearest.items(), key=lambda kv: kv[0] or 0)
                               if f is not None),
                   neighbours=tuple({"workload": s.workload.to_dict(), "distance": round(d, 3), "best_mhz": best,
                                     "runs": s.runs} for d, s, best in near))


def learned_table(records: list[dict], objective: Objective | None = None) -> list[dict]:
    """Every shape the store knows, with its runs, measured clocks and best clock: what
    ``pydvfs train --from-runs`` shows."""
    objective = objective or Objective()
    all_shapes, _ = shapes(records, objective.energy)
    out = []
    for s in sorted(all_shapes, key=lambda s: shape_key(s.workload)):
        c = s.curve()
        n = s.support()
        out.append({"workload": s.workload.to_dict(), "runs": s.runs, "best_mhz": s.best(objective),
                    "clocks": [{"freq_mhz": f, "j_per_step": j, "s_per_step": t, "runs": n[f]}
                               for f, (j, t) in sorted(c.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))],
                    "set_aside_mhz": s.set_aside()})
    return out


def board_learned(board_id: str | None, workload, levels_mhz, objective: Objective | None = None,
                  data_dir=None, log=None, prefix: str = "pydvfs") -> Learned | None:
    """The learned clock for ``workload`` on this board from the store under ``data_dir``;
    None where the store has nothing near (or cannot be read: said in one line on ``log``; the
    built-in policy decides then). A damaged record is skipped, said in one line."""
    import sys
    from dataclasses import replace

    from ..errors import StoreError
    from .store import RunStore

    if board_id is None or workload is None:
        return None
    from ..errors import InvalidValueError

    try:
        workload = Workload.from_any(workload)
    except InvalidValueError:
        return None  # the built-in policy's path says what is wrong with it
    log = log or sys.stderr
    try:
        store = RunStore(data_dir)
        loaded = store.load(board_id)
    except (StoreError, OSError) as e:
        print(f"{prefix}: warning: the board's run records were not read: {e}", file=log, flush=True)
        return None
    if loaded.warning():
        print(f"{prefix}: warning: {loaded.warning()}", file=log, flush=True)
    found = learn(loaded.records, workload, levels_mhz, objective)
    return None if found is None else replace(found, board=board_id, data_dir=store.path)


def runs_count(board_id: str | None, data_dir=None) -> dict:
    """How many runs the store holds for this board, per measure, and where (``status``)."""
    from ..errors import StoreError
    from .store import RunStore

    out = {"data_dir": None, "runs": 0, "by_measure": {}, "shapes": 0, "warning": None}
    if board_id is None:
        return out
    try:
        store = RunStore(data_dir)
        out["data_dir"] = store.path
        loaded = store.load(board_id)
    except (StoreError, OSError) as e:
        out["warning"] = f"the board's run records were not read: {e}"
        return out
    out["warning"] = loaded.warning()
    out["runs"] = len(loaded.records)
    for r in loaded.records:
        out["by_measure"][r["measure"]] = out["by_measure"].get(r["measure"], 0) + 1
    out["shapes"] = len({shape_key(workload_of(r["workload"])) for r in loaded.records if r.get("workload")})
    return out


__all__ = ["K", "MAX_DISTANCE", "ORIGIN", "Learned", "board_learned", "distance", "learn", "learned_table",
           "runs_count"]

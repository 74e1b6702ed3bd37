"""The board that learns from its own runs (issue 26 item 3, docs/store.md), replayed window by
window on the simulator (no board time): online runs of the catalogue's workloads are recorded
in a real store (pydvfs.policy.store, a temp folder) from the replayed windows, and ``apply``'s
board-learned choice (pydvfs.policy.learned) is scored on the simulator's true module energy.

Per board of the table (its simulator profile and clock table):

1. **Runs until apply is within 2 %**: the catalogue's workloads (the paper's models x SST-2,
   MRPC, RTE, CoLA) in a seeded random order; after each recorded 10-minute online run, ``apply``
   decides every workload not run yet. Reported per count of runs: the share of those that get a
   board-learned clock, the share of all of them whose pinned clock (learned, else the built-in
   tree's, as ``apply`` does) is within 2 % of the least module energy, and the mean regret; and
   the first count from which every later count keeps >= 95 % within 2 %. The built-in tree's own
   share (the store empty) is the baseline of the same run.
2. **What a 10-minute run keeps of the oracle's saving**, with and without the board's record:
   each workload replayed as a 10-minute online run (the model search, the run's length known)
   from the built-in start (``pydvfs run``'s start without a store: the tree's clock, or MAXN
   first where the tree keeps the workload there) and from the board-learned start (the store
   holding every *other* workload's run: leave-one-out), over ``--seeds`` noise seeds. Kept
   share = (MAXN's module energy - the run's) / (MAXN's - the best clock's from the first step).

Window noise as bench_online_search (pydvfs.governor.replay.window_noise): 0.5 % time, 1 %
power, 5 % spikes; 10-s windows, 2-s settling.

    PYTHONPATH=. python bench/bench_store.py [--boards orin-nano-super orin-nx thor agx-orin] [--seeds 3]

Writes bench/results/store.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.device.fake import build_fake_board  # noqa: E402
from pydvfs.governor.mode_search import MAXN, CurveParams, CurveSearch  # noqa: E402
from pydvfs.governor.replay import window_noise  # noqa: E402
from pydvfs.policy.apply import decide, load_tree  # noqa: E402
from pydvfs.policy.learned import learn  # noqa: E402
from pydvfs.policy.objective import Objective  # noqa: E402
from pydvfs.policy.store import RunStore, make_record  # noqa: E402
from pydvfs.sim.catalogue import PAPER_MODELS, get_workload  # noqa: E402
from pydvfs.sim.model import default_params, operating_point, power_modes  # noqa: E402
from pydvfs.sim.profiles import profile  # noqa: E402

TASKS = ("SST-2", "MRPC", "RTE", "CoLA")
WINDOW_S, SETTLE_S, MINUTES = 10.0, 2.0, 10.0
WITHIN = 1.02


class Truth:
    """A workload's true module J/step and s/step per level on a board, and under MAXN."""

    def __init__(self, board: str, model: str, task: str):
        p, w = default_params(), get_workload(model, task)
        self.name = f"{model}/{task}"
        self.levels = tuple(profile(board).levels_mhz)
        self.j, self.s = {}, {}
        for f in self.levels:
            op = operating_point(w, "fixed", f, p, board=board)
            self.j[f], self.s[f] = op.role_power_w["module"] * op.t_step_s, op.t_step_s
        modes = power_modes(board)  # MAXN: the board's top power mode, its own governor (podgov)
        self.maxn_mode = max(modes, key=lambda k: (modes[k].gpu_max_mhz, k))
        op = operating_point(w, self.maxn_mode, None, p, board=board)
        self.j[MAXN], self.s[MAXN] = op.role_power_w["module"] * op.t_step_s, op.t_step_s
        self.best = min(self.levels, key=self.j.get)
        self.workload = {"model": w.arch.family, "layers": w.arch.layers, "hidden": w.arch.hidden,
                         "seq_len": w.task.avg_tokens, "name": self.name}


def replay(t: Truth, start, maxn_anchor: bool, seed: int) -> dict:
    """One 10-minute online run (the model search told the windows left, as the engine does
    with the run's length known): its windows as the engine's trajectory, and its energy."""
    search = CurveSearch(t.levels, start, CurveParams(reprobe_s=math.inf), maxn_anchor=maxn_anchor)
    n_steps = MINUTES * 60.0 / t.s[t.best]
    rng = random.Random(seed)
    steps = energy = now = 0.0
    f = search.target_mhz
    trajectory = []
    while steps < n_steps:
        n = min(WINDOW_S / t.s[f], n_steps - steps)
        steps += n
        energy += n * t.j[f]
        now += WINDOW_S
        tf, pf = window_noise(rng)
        search.remaining_windows = int((n_steps - steps) * t.s[f] / WINDOW_S)
        j_meas, s_meas = t.j[f] * tf * pf, t.s[f] * tf
        trajectory.append({"freq_mhz": f, "j_per_step": j_meas, "s_per_step": s_meas, "steps": max(1, round(n))})
        nxt = search.observe(f, j_meas, now, s_meas)
        if nxt != f and steps < n_steps:
            f = nxt
            n = min(SETTLE_S / t.s[f], n_steps - steps)
            steps += n
            energy += n * t.j[f]
            now += SETTLE_S
    maxn_e, best_e = n_steps * t.j[MAXN], n_steps * t.j[t.best]
    return {"trajectory": trajectory, "chosen_mhz": search.best_mhz, "search_kind": "model",
            "objective": Objective().to_dict(), "converged": search.converged, "start_mhz": start,
            "kept_pct": 100 * (maxn_e - energy) / (maxn_e - best_e) if maxn_e > best_e else None,
            "saving_pct": 100 * (1 - energy / maxn_e), "oracle_pct": 100 * (1 - best_e / maxn_e)}


def builtin(root, t: Truth) -> tuple:
    """``pydvfs run``'s start without a store, and apply's clock: the tree's (None: MAXN)."""
    d = decide(t.workload, "mlg", sysfs_root=root, use_runs=False)
    if d.freq_mhz is not None:
        return d.freq_mhz, False, d.freq_mhz
    ffg = load_tree().ffg_mhz
    from pydvfs.device.levels import nearest_level

    return nearest_level(t.levels, ffg), True, None


def regret(t: Truth, f) -> float:
    return t.j[f if f is not None else MAXN] / t.j[t.best] - 1


def learning_curve(board: str, root, truths: list[Truth], order_seed: int, tmp: Path) -> dict:
    order = list(range(len(truths)))
    random.Random(order_seed).shuffle(order)
    store = RunStore(tmp / f"curve-{board}-{order_seed}")
    tree = {t.name: builtin(root, t)[2] for t in truths}
    rows = []
    for n in range(len(order) + 1):
        if n:
            t = truths[order[n - 1]]
            start, anchor, _ = builtin(root, t)
            records = store.load(board).records
            got = learn(records, t.workload, t.levels)
            if got is not None:
                start, anchor = got.freq_mhz, False
            store.append(make_record(replay(t, start, anchor, seed=n), board, "", t.levels, t.workload, "bench"))
        records = store.load(board).records
        rest = [truths[i] for i in order[n:]]
        if not rest:
            break
        chosen, learned = [], 0
        for t in rest:
            got = learn(records, t.workload, t.levels)
            learned += got is not None
            chosen.append(got.freq_mhz if got is not None else tree[t.name])
        regrets = [regret(t, f) for t, f in zip(rest, chosen)]
        rows.append({"runs": n, "held_out": len(rest), "learned_share": learned / len(rest),
                     "within_2pct_share": sum(r <= WITHIN - 1 + 1e-12 for r in regrets) / len(rest),
                     "mean_regret_pct": 100 * statistics.mean(regrets), "worst_regret_pct": 100 * max(regrets)})
    first = next((r["runs"] for i, r in enumerate(rows)
                  if all(x["within_2pct_share"] >= 0.95 for x in rows[i:])), None)
    return {"order_seed": order_seed, "rows": rows, "runs_until_95pct_within_2pct": first,
            "builtin_within_2pct_share": rows[0]["within_2pct_share"],
            "builtin_mean_regret_pct": rows[0]["mean_regret_pct"]}


def ten_minutes(board: str, root, truths: list[Truth], seeds: int, tmp: Path) -> dict:
    """Leave-one-out: every other workload's run recorded, then this one's run from each start."""
    store = RunStore(tmp / f"all-{board}")
    for i, t in enumerate(truths):
        start, anchor, _ = builtin(root, t)
        store.append(make_record(replay(t, start, anchor, seed=100 + i), board, "", t.levels, t.workload, "bench"))
    records = store.load(board).records
    rows = []
    for i, t in enumerate(truths):
        others = records[:i] + records[i + 1:]
        got = learn(others, t.workload, t.levels)
        b_start, b_anchor, _ = builtin(root, t)
        row = {"workload": t.name, "best_mhz": t.best, "oracle_pct": 100 * (1 - t.j[t.best] / t.j[MAXN]),
               "builtin_start": "MAXN" if b_anchor else b_start,
               "learned_start": None if got is None else got.freq_mhz}
        for label, start, anchor in (("without", b_start, b_anchor),
                                     ("with", got.freq_mhz if got else b_start, False if got else b_anchor)):
            runs = [replay(t, start, anchor, seed) for seed in range(seeds)]
            kept = [r["kept_pct"] for r in runs if r["kept_pct"] is not None]  # none: MAXN is the best already
            row[label] = {"kept_pct": statistics.mean(kept) if kept else None,
                          "saving_pct": statistics.mean(r["saving_pct"] for r in runs),
                          "settled_within_2pct": sum(regret(t, r["chosen_mhz"]) <= 0.02 for r in runs) / seeds}
        rows.append(row)
    big = [r for r in rows if r["oracle_pct"] >= 5.0 and r["with"]["kept_pct"] is not None
           and r["without"]["kept_pct"] is not None]  # as bench_online_search: a ratio of tiny savings says nothing
    return {"rows": rows, "workloads_scored": len(big),
            "kept_without_pct": statistics.mean(r["without"]["kept_pct"] for r in big) if big else None,
            "kept_with_pct": statistics.mean(r["with"]["kept_pct"] for r in big) if big else None,
            "kept_without_min_pct": min(r["without"]["kept_pct"] for r in big) if big else None,
            "kept_with_min_pct": min(r["with"]["kept_pct"] for r in big) if big else None,
            "learned_start_share": sum(r["learned_start"] is not None for r in rows) / len(rows)}


CURVE_AT = (0, 2, 4, 8, 16, 32)  # runs recorded, for the learning-curve table


def curve_table(out: dict) -> str:
    """The learning curves as one Markdown table: per board and count of runs, over the orders,
    the mean share of the workloads not run yet whose apply clock is within 2 %, the mean and
    worst regret, and the share that got a board-learned clock."""
    lines = ["| board | runs recorded | apply within 2 % (not-yet-run workloads) | mean regret | worst regret "
             "| board-learned |", "|---|---|---|---|---|---|"]
    for board, v in out["boards"].items():
        for n in CURVE_AT:
            rows = [c["rows"][n] for c in v["learning_curves"] if n < len(c["rows"])]
            if not rows:
                continue
            lines.append(f"| {board} | {n} | {100 * statistics.mean(r['within_2pct_share'] for r in rows):.0f} % "
                         f"| {statistics.mean(r['mean_regret_pct'] for r in rows):.2f} % "
                         f"| {max(r['worst_regret_pct'] for r in rows):.1f} % "
                         f"| {100 * statistics.mean(r['learned_share'] for r in rows):.0f} % |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", nargs="+", default=["orin-nano-super", "orin-nx", "thor", "agx-orin"])
    ap.add_argument("--seeds", type=int, default=3, help="noise seeds per 10-minute run")
    ap.add_argument("--orders", type=int, default=3, help="random orders of the workloads for the learning curve")
    ap.add_argument("--models", nargs="+", default=list(PAPER_MODELS))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "store.json"))
    args = ap.parse_args()
    t0 = time.monotonic()
    out = {"window_s": WINDOW_S, "settle_s": SETTLE_S, "minutes": MINUTES, "tasks": list(TASKS),
           "models": args.models, "seeds": args.seeds, "boards": {}}
    table = ["| board | workloads | apply within 2 %: built-in tree | runs until >= 95 % within 2 % (per order) "
             "| 10-min run keeps of the oracle's saving: without record | with record (min) |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        for board in args.boards:
            root = build_fake_board(tmp / f"fake-{board}", board=board).root
            truths = [Truth(board, m, task) for m in args.models for task in TASKS]
            curves = [learning_curve(board, root, truths, s, tmp) for s in range(args.orders)]
            ten = ten_minutes(board, root, truths, args.seeds, tmp)
            out["boards"][board] = {"calibrated": profile(board).calibrated, "learning_curves": curves,
                                    "ten_minute_runs": ten}
            until = ", ".join(str(c["runs_until_95pct_within_2pct"]) for c in curves)
            line = (f"| {board} | {len(truths)} | {100 * curves[0]['builtin_within_2pct_share']:.0f} % "
                    f"(mean regret {curves[0]['builtin_mean_regret_pct']:.1f} %) | {until} "
                    f"| {ten['kept_without_pct']:.0f} % (min {ten['kept_without_min_pct']:.0f} %) "
                    f"| {ten['kept_with_pct']:.0f} % (min {ten['kept_with_min_pct']:.0f} %) |")
            table.append(line)
            print(line, f"[{time.monotonic() - t0:.0f} s]", flush=True)
    out["summary_markdown"] = "\n".join(table)
    out["curve_markdown"] = curve_table(out)
    print(out["summary_markdown"])
    print(out["curve_markdown"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

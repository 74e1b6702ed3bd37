#!/usr/bin/env python3
"""Where a calibration's fit starts (pydvfs.policy.board_calibration.fit_groups), measured on the
clocks real first runs probed: the fit's coordinate search from the default alone (the baseline)
against the default and the family's corners (pydvfs.sim.uncertainty.corners: one pass from each,
then the full search from the best), each scored by the decisions it leads to.

For each row of ``--runs`` (bench_first_run results, default bench/results/first_run.json: the
clocks a real first run probed on each held-out member and on the independent Orin Nano Super,
each measure): its own points as the run measured them, whose errors are not independent draws
("measured"), and REPS times the truth of bert-base/SST-2 at those clocks with log-normal noise
(``--noise`` on J/step, half of it on s/step), each fitted (the seven knobs) by each start rule;
then the clock apply takes for each of the four other workloads of bench_first_run, scored
against the truth's least. Then ``calibrate``'s case: members of the family itself (held-out
0-2 of the Orin Nano Super and NX, which the simulator represents exactly), the clocks
``calibrate`` measures (pydvfs.policy.board_calibration.design), ``--cal-reps`` draws at
``--cal-noise`` (calibrate's 10-s windows), every third held-out workload of the catalogue. The
fits' times are a ratio against the baseline's in the same run. No pydvfs run: the fits and
decisions alone. Writes bench/results/fit.json, prints a table.

    PYTHONPATH=. python bench/bench_fit.py [--noise 0.015] [--reps 3] [--cal-noise 0.01] [--cal-reps 6]
        [--runs bench/results/first_run.json bench/results/first_run_before.json ...]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import bench_first_run as first  # noqa: E402  (puts the repo and the independent Nano on the path)

from pydvfs.device import table as boards  # noqa: E402
from pydvfs.policy.board_calibration import (  # noqa: E402
    calibrated_choice,
    design,
    fit_groups,
    new_calibration,
    predict,
    sim_run_for,
)
from pydvfs.sim import uncertainty  # noqa: E402
from pydvfs.sim.catalogue import get_workload  # noqa: E402
from pydvfs.workload import Workload  # noqa: E402

OUT = REPO / "bench" / "results" / "fit.json"
RULES = ("default alone", "default and corners")


@contextlib.contextmanager
def starts(rule: str):
    """The fit's starts for ``rule``: the baseline swaps the family's corners out of the fit."""
    corners = uncertainty.corners
    if rule == "default alone":
        uncertainty.corners = lambda board: []
    try:
        yield
    finally:
        uncertainty.corners = corners


def physics_of(row: dict) -> first.Physics:
    if row["member"] is None:
        return first.Physics(row["board"], physics=row["physics"].split("-", 1)[1])
    return first.Physics(row["board"], seed=int(row["physics"].rsplit("-", 1)[1]))


def first_truth(ph: first.Physics, clocks, measure: str) -> tuple[dict, dict]:
    """(the first workload as apply takes it, clock (None: MAXN) -> its true (J/step, s/step))."""
    w, e, maxn_j = ph.curve(*first.FIRST, measure)
    if ph.physics is not None:
        nano = first.nano
        s = {f: nano.step(ph.p, *first.FIRST, nano.maxn_clock(ph.p, *first.FIRST) if f is None else f).t_s
             for f in clocks}
    else:
        s = {f: t for f, (_, t) in predict(ph.board, dict(ph.member.knobs), get_workload(*first.FIRST), clocks).items()}
    return w, {f: (maxn_j if f is None else e[f], s[f]) for f in clocks}


def noisy(points: dict, sigma: float, rng) -> dict:
    """``points`` with log-normal noise: ``sigma`` on J/step, half of it on s/step."""
    return {f: (j * math.exp(rng.gauss(0, sigma)), t * math.exp(rng.gauss(0, sigma / 2))) for f, (j, t) in points.items()}


def fitted(rule: str, board: str, run, w0: Workload, points: dict, measure: str, secs: dict):
    """The calibration of ``points`` fitted by ``rule``'s starts; its time goes to ``secs[rule]``."""
    t = time.perf_counter()
    with starts(rule):
        knobs, rms = fit_groups(board, [(run, points, measure)])
    secs[rule].append(time.perf_counter() - t)
    return new_calibration(board, knobs, rms, w0, points, measure)


def regrets(row: dict, ph: first.Physics, points: dict, rule: str, secs: dict) -> list:
    """The four other workloads' regrets (% above the least) on the fit of ``points`` by ``rule``."""
    board, measure = row["board"], row["measure"]
    w0 = Workload.from_any(ph.curve(*first.FIRST, measure)[0])
    cal = fitted(rule, board, sim_run_for(w0), w0, points, measure, secs)
    out = []
    for w, e, maxn_j in (ph.curve(m, t, measure) for m, t in first.OTHERS):
        f = calibrated_choice(cal, Workload.from_any(w), boards.board(board).gpu_levels_mhz, measure)
        out.append(100.0 * (e[f] / min(min(e.values()), maxn_j) - 1.0))
    return out


def calibrate_case(board: str, seed: int, sigma: float, reps: int, rng, secs: dict) -> dict:
    """rule -> regrets over every third held-out workload, from ``reps`` noisy draws of a held-out
    member's truth at calibrate's clocks for bert-base/SST-2 (module energy)."""
    from pydvfs.policy.score import held_out, truth

    w0 = Workload.from_any({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3})
    run, member = sim_run_for(w0), uncertainty.held_out(board, seed)
    exact = predict(board, dict(member.knobs), get_workload(*first.FIRST), design(board, run))
    truths = [truth(board, m, t, member.params()) for m, t in held_out()[::3]]
    out = {rule: [] for rule in RULES}
    for _ in range(reps):
        pts = noisy(exact, sigma, rng)
        for rule in RULES:
            cal = fitted(rule, board, run, w0, pts, "module", secs)
            for t in truths:
                e = t.energy_j["module"]
                f = calibrated_choice(cal, Workload.from_any(t.workload), boards.board(board).gpu_levels_mhz, "module")
                out[rule].append(100.0 * (e[f] / min(e.values()) - 1.0))
    return out


def summary_of(v: list) -> dict:
    return {"mean_regret_pct": sum(v) / len(v), "max_regret_pct": max(v), "over_2_pct": sum(x > 2.0 for x in v),
            "decisions": len(v)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", nargs="+", type=float, default=[0.015], help="sigma of log J/step per point")
    ap.add_argument("--reps", type=int, default=3, help="noise draws per row")
    ap.add_argument("--cal-noise", type=float, default=0.01, help="sigma of log J/step per point, calibrate's case")
    ap.add_argument("--cal-reps", type=int, default=6, help="noise draws per member, calibrate's case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", nargs="+", default=[str(first.OUT)], help="bench_first_run results whose clocks to refit")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    rows = [r for f in args.runs for r in json.loads(Path(f).read_text())["rows"] if r["calibration"]]
    sets = ["measured", *(f"noise {100 * s:g} %" for s in args.noise)]
    reg = {(s, rule): [] for s in sets for rule in RULES}
    secs = {rule: [] for rule in RULES}
    worst = []
    rng = random.Random(args.seed)
    for r in rows:
        ph, measure = physics_of(r), r["measure"]
        measured = {p["freq_mhz"]: (p["j_per_step"], p["s_per_step"]) for p in r["calibration"]["points"]}
        _, truth = first_truth(ph, list(measured), measure)
        draws = [("measured", measured)] + [(f"noise {100 * s:g} %", noisy(truth, s, rng))
                                            for s in args.noise for _ in range(args.reps)]
        row_worst = dict.fromkeys(RULES, 0.0)
        for name, pts in draws:
            for rule in RULES:
                v = regrets(r, ph, pts, rule, secs)
                reg[(name, rule)] += v
                row_worst[rule] = max(row_worst[rule], *v)
        worst.append({"board": r["board"], "physics": r["physics"], "measure": measure,
                      "clocks": list(measured), "worst_regret_pct": row_worst})
        print(f"{r['board']:16s} {r['physics']:22s} {measure:8s} worst regret: "
              + ", ".join(f"{rule} {v:.2f} %" for rule, v in row_worst.items()), flush=True)
    cal_set = f"calibrate, noise {100 * args.cal_noise:g} %"
    sets.append(cal_set)
    for board in ("orin-nano-super", "orin-nx"):
        for seed in range(3):
            by_rule = calibrate_case(board, seed, args.cal_noise, args.cal_reps, rng, secs)
            for rule, v in by_rule.items():
                reg[(cal_set, rule)] = reg.get((cal_set, rule), []) + v
            print(f"{board:16s} held-out-{seed} (calibrate) worst regret: "
                  + ", ".join(f"{rule} {max(v):.2f} %" for rule, v in by_rule.items()), flush=True)
    summary = {s: {rule: summary_of(reg[(s, rule)]) for rule in RULES} for s in sets}
    base = sum(secs[RULES[0]])
    fit_time = {rule: {"mean_s": sum(v) / len(v), "ratio_to_default_alone": sum(v) / base} for rule, v in secs.items()}
    for s, by_rule in summary.items():
        for rule, x in by_rule.items():
            print(f"{s:26s} {rule:20s} over 2 %: {x['over_2_pct']:3d} of {x['decisions']}, mean regret "
                  f"{x['mean_regret_pct']:.3f} %, max {x['max_regret_pct']:.2f} %")
    for rule, x in fit_time.items():
        print(f"fit time, {rule}: {x['mean_s']:.3f} s per fit, x {x['ratio_to_default_alone']:.2f}")
    Path(args.out).write_text(json.dumps({"sources": args.runs, "noise": args.noise, "reps": args.reps,
                                          "summary": summary, "fit_time": fit_time, "rows": worst}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

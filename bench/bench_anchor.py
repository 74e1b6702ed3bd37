#!/usr/bin/env python3
"""The calibrated decision's anchor (pydvfs.policy.board_calibration.ANCHOR_TOL), measured on
noisy fits: where the calibration's own job measured the calibrated simulator's least and a
cheaper clock the simulator puts within TOL of it, the decision takes the measured clock.

For each row of ``--runs`` (bench_first_run results, default bench/results/first_run.json: the
clocks a real first run probed on each held-out member and the independent Orin Nano Super, each
measure), REPS times: the truth of bert-base/SST-2 at those clocks with log-normal noise
(``--noise`` on J/step, half of it on s/step), fitted (fit_groups, the seven knobs), then the
clock for each of the four other workloads of bench_first_run chosen by the simulator's least
alone (TOL none) and with the anchor at each TOL, scored against the truth's least. First, the
same decisions from each run's own calibration ("measured": its points as the run measured them,
whose errors are not independent draws). No pydvfs run: the fits and decisions alone, so many
noise draws fit in minutes. Writes bench/results/anchor.json, prints a table.

    PYTHONPATH=. python bench/bench_anchor.py [--noise 0.01 0.02] [--reps 5] [--tols 0.005 0.01 0.015]
        [--runs bench/results/first_run_before.json bench/results/first_run_before_idle.json ...]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import bench_first_run as first  # noqa: E402  (puts the repo and the independent Nano on the path)

from pydvfs.device import table as boards  # noqa: E402
from pydvfs.policy import board_calibration as bc  # noqa: E402
from pydvfs.policy.board_calibration import fit_groups, new_calibration, sim_run_for  # noqa: E402
from pydvfs.sim.catalogue import get_workload  # noqa: E402
from pydvfs.sim.model import operating_point  # noqa: E402
from pydvfs.sim.sweep import maxn_setting  # noqa: E402
from pydvfs.workload import Workload  # noqa: E402

OUT = REPO / "bench" / "results" / "anchor.json"


def physics_of(row: dict) -> first.Physics:
    if row["member"] is None:
        return first.Physics(row["board"], physics=row["physics"].split("-", 1)[1])
    return first.Physics(row["board"], seed=int(row["physics"].rsplit("-", 1)[1]))


def first_truth(ph: first.Physics, clocks, measure: str) -> tuple[dict, dict]:
    """(the first workload as apply takes it, clock (None: MAXN) -> its true (J/step, s/step))."""
    w, e, maxn_j = ph.curve(*first.FIRST, measure)
    out = {}
    for f in clocks:
        if ph.physics is not None:
            nano = first.nano
            at = nano.maxn_clock(ph.p, *first.FIRST) if f is None else f
            out[f] = (maxn_j if f is None else e[f], nano.step(ph.p, *first.FIRST, at).t_s)
        else:
            wl = get_workload(*first.FIRST)
            op = operating_point(wl, maxn_setting(ph.board), None, ph.p, board=ph.board) if f is None else \
                operating_point(wl, "fixed", f, ph.p, board=ph.board)
            out[f] = (maxn_j if f is None else e[f], op.t_step_s)
    return w, out


def decisions(cal, ph, levels, measure: str, names, rules) -> dict:
    """rule name -> the regrets (% above the least) of the four other workloads' decisions."""
    out = {}
    for name, tol in zip(names, rules):
        bc.ANCHOR_TOL = -1.0 if tol is None else tol  # -1: the simulator's least alone
        out[name] = []
        for w, e, maxn_j in (ph.curve(m, t, measure) for m, t in first.OTHERS):
            f = bc.calibrated_choice(cal, Workload.from_any(w), levels, measure)
            out[name].append(100.0 * (e[f] / min(min(e.values()), maxn_j) - 1.0))
    return out


def summary_of(regrets: dict) -> dict:
    return {n: {"mean_regret_pct": sum(v) / len(v), "max_regret_pct": max(v),
                "over_2_pct": sum(x > 2.0 for x in v), "decisions": len(v)} for n, v in regrets.items()}


def measured_decisions(rows, names, rules) -> dict:
    """The runs' own calibrations (their points as measured, the knobs fitted to them), each rule."""
    regrets = {n: [] for n in names}
    for r in rows:
        c, ph, measure = r["calibration"], physics_of(r), r["measure"]
        w0 = ph.curve(*first.FIRST, measure)[0]
        pts = {p["freq_mhz"]: (p["j_per_step"], p["s_per_step"]) for p in c["points"]}
        cal = new_calibration(r["board"], c["knobs"], c["rms_log_error"], Workload.from_any(w0), pts, measure)
        for n, v in decisions(cal, ph, boards.board(r["board"]).gpu_levels_mhz, measure, names, rules).items():
            regrets[n] += v
    out = summary_of(regrets)
    for n, s in out.items():
        print(f"measured: {n:14s} mean regret {s['mean_regret_pct']:.3f} %, max {s['max_regret_pct']:.2f} %,"
              f" over 2 %: {s['over_2_pct']} of {s['decisions']}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", nargs="+", type=float, default=[0.01, 0.02], help="sigma of log J/step per point")
    ap.add_argument("--reps", type=int, default=5, help="noise draws per row")
    ap.add_argument("--tols", nargs="+", type=float, default=[0.005, 0.01, 0.015])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", nargs="+", default=[str(first.OUT)], help="bench_first_run results whose clocks to refit")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    rows = [r for f in args.runs for r in json.loads(Path(f).read_text())["rows"] if r["calibration"]]
    rules = [None, *args.tols]
    names = ["least" if t is None else f"anchor {100 * t:g} %" for t in rules]
    measured = measured_decisions(rows, names, rules)
    results = []
    for sigma in args.noise:
        rng = random.Random(args.seed)
        regrets = {n: [] for n in names}
        per_row = []
        for r in rows:
            ph, measure = physics_of(r), r["measure"]
            levels = boards.board(r["board"]).gpu_levels_mhz
            clocks = [p["freq_mhz"] for p in r["calibration"]["points"]]
            w0, truth = first_truth(ph, clocks, measure)
            run0 = sim_run_for(Workload.from_any(w0))
            worst = dict.fromkeys(names, 0.0)
            for _ in range(args.reps):
                pts = {f: (j * math.exp(rng.gauss(0, sigma)), s * math.exp(rng.gauss(0, sigma / 2)))
                       for f, (j, s) in truth.items()}
                knobs, rms = fit_groups(r["board"], [(run0, pts, measure)])
                cal = new_calibration(r["board"], knobs, rms, Workload.from_any(w0), pts, measure)
                for name, v in decisions(cal, ph, levels, measure, names, rules).items():
                    regrets[name] += v
                    worst[name] = max(worst[name], *v)
            per_row.append({"board": r["board"], "physics": r["physics"], "measure": measure,
                            "clocks": clocks, "worst_regret_pct": worst})
            print(f"noise {100 * sigma:g} % {r['board']:16s} {r['physics']:22s} {measure:8s} "
                  + " ".join(f"{n}: {v:5.2f}" for n, v in worst.items()), flush=True)
        summary = summary_of(regrets)
        for n, s in summary.items():
            print(f"noise {100 * sigma:g} %: {n:14s} mean regret {s['mean_regret_pct']:.3f} %, max {s['max_regret_pct']:.2f} %,"
                  f" over 2 %: {s['over_2_pct']} of {s['decisions']}", flush=True)
        results.append({"noise": sigma, "reps": args.reps, "summary": summary, "rows": per_row})
    Path(args.out).write_text(json.dumps({"sources": args.runs, "measured": measured, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

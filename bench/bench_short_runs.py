"""Short runs with noisy windows (issue 39): what the model search keeps of the oracle's saving
in 60-120-window runs whose windows are 3-5 % noisy, the run's length told or not, replayed
window by window (no board, no real time).

- ``gpu-only`` on the simulated AGX Orin (11 levels): the 12 paper models (U-shaped, the
  simulator's seeded per-level noise included) from the top clock (``pydvfs run --start
  1300.5``) and from the model's clock (``pydvfs run``'s start), and two flat-bottomed curves
  (several levels within 1 % of the best: the search cannot tell them apart in the run) from the
  top and from the middle;
- ``joint`` and ``gpu-only`` on the perturbed family (:mod:`pydvfs.sim.perturbed`: each member's
  physics moved from what the joint model assumes, a 1.5 % per-mode spread fixed per run), the
  AGX Orin grid (``--board``: another's), from the stock mode; with ``--searches``, also
  ``joint-knows-physics`` and ``gpu-only-knows-physics``: a search that knows the member's smooth
  physics exactly (everything but the run's per-mode spread) and holds its best from the first
  step, the ceiling of what a search that measures can keep.

Window noise (the same draws for every search): a window's step time off by a Gaussian 1 %,
its power by what makes the J/step's noise ``--noise`` % in all, and one window in 20 stretched
5-20 % by interference. A window is 10 s of training, a change of clock 2 s unmeasured at the
new one; a run is ``--windows`` windows of training at the oracle's speed.

Reported per workload (mean over ``--seeds`` seeds, and the least seed): the whole run's saving
against the start clock (the top level / stock mode pinned) as a share of the oracle's (the best
level or mode of the search's space from the first step), and the settled level's true cost over
that best (the settle gap).

    PYTHONPATH=. python bench/bench_short_runs.py [--seeds 4] [--windows 60 120] [--noise 3 5]

Writes bench/results/short_runs.json (or --out) and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_online_search import Curve, sim_curves  # noqa: E402
from bench_online_search import replay as curve_replay  # noqa: E402

from pydvfs.governor.mode_search import CurveParams, CurveSearch  # noqa: E402
from pydvfs.governor.replay import Grid, make  # noqa: E402
from pydvfs.governor.replay import replay as grid_replay  # noqa: E402
from pydvfs.sim.catalogue import PAPER_MODELS, get_workload  # noqa: E402
from pydvfs.sim.model import ORIN_LEVELS_MHZ  # noqa: E402
from pydvfs.sim.perturbed import family  # noqa: E402

WINDOW_S, SETTLE_S = 10.0, 2.0
FAMILY_WORKLOADS = ("bert-base/SST-2", "bert-tiny/SST-2")
KNOWS = "-knows-physics"
FAMILY_SEARCHES = ("joint", "gpu-only", "joint" + KNOWS, "gpu-only" + KNOWS)


def noisy(pct: float):
    """``noise(rng)`` -> a window's (time, power) factors: 1 % time, the power's share of a
    ``pct`` % J/step noise, and one window in 20 stretched 5-20 % (interference only adds)."""
    p_cv = max(0.0, pct * pct - 1.0) ** 0.5 / 100.0

    def noise(rng: random.Random) -> tuple:
        tf = 1 + 0.01 * rng.gauss(0, 1)
        pf = 1 + p_cv * rng.gauss(0, 1)
        if rng.random() < 0.05:
            tf *= 1 + rng.uniform(0.05, 0.20)
        return tf, pf
    return noise


def flat_curve(name: str, lo: float, hi: float, a: float = 0.06, b: float = 0.02) -> Curve:
    """A curve flat between ``lo`` and ``hi`` MHz (within 0.6 %: per-level offsets fixed by the
    name), rising on either side; s/step = a/f + b (f in GHz)."""
    rng = random.Random(name)
    j, s = {}, {}
    for f in ORIN_LEVELS_MHZ:
        rise = 0.35 * max(0.0, (f - hi) / 500.0) ** 2 * 4 + 0.6 * max(0.0, (lo - f) / 300.0) ** 2
        j[f] = 1.0 + rise + 0.003 * rng.uniform(-1, 1)
        s[f] = a / (f / 1000.0) + b
    top = ORIN_LEVELS_MHZ[-1]
    return Curve(name, "flat", tuple(ORIN_LEVELS_MHZ), j, s, j[top], {"top": top, "middle": 714.0}, s[top])


def gpu_runs(curves, windows, noise_pct, seeds, told) -> list[dict]:
    rows = []
    for c in curves:
        best = min(c.levels, key=c.j.get)
        minutes = windows * WINDOW_S / 60.0
        for label, start in c.starts.items():
            maxn = label in c.maxn_starts
            runs = []
            for seed in range(seeds):
                search = CurveSearch(c.levels, start, CurveParams(reprobe_s=float("inf")), maxn_anchor=maxn)
                r = curve_replay(c, search, minutes, WINDOW_S, SETTLE_S, seed, told=told, noise=noisy(noise_pct),
                                 baseline=c.levels[-1])
                r["gap_pct"] = 100 * (c.at(search.best_mhz)[0] / c.j[best] - 1)
                r["share_pct"] = 100 * r["saving_pct"] / r["oracle_saving_pct"]
                r["converged"] = search.converged
                runs.append(r)
            rows.append(_row("gpu-only", c.source, c.name, label, windows, noise_pct, told, runs))
    return rows


def family_runs(workloads, windows, noise_pct, seeds, told, members=None, board="agx-orin",
                kinds=("joint", "gpu-only")) -> list[dict]:
    rows = []
    source = "family" if board == "agx-orin" else f"{board} family"
    minutes = windows * WINDOW_S / 60.0
    for wname in workloads:
        model, task = wname.split("/")
        w = get_workload(model, task)
        for pert in family():
            if members and pert.name not in members:
                continue
            res: dict = {k: [] for k in kinds}
            for seed in range(seeds):
                grid = Grid(board, w, pert, run_seed=seed)
                for kind in res:
                    gpu = kind.startswith("gpu-only")
                    if kind.endswith(KNOWS):
                        r = knows_the_physics(grid, gpu)
                    else:
                        search = make(kind, grid)
                        r = grid_replay(grid, search, gpu, minutes, WINDOW_S, SETTLE_S, seed, noise=noisy(noise_pct),
                                        told=told)
                        r["converged"] = search.converged
                    best = grid.gpu_best if gpu else grid.best
                    base = grid.j[grid.stock]
                    r["gap_pct"] = 100 * (grid.j[tuple(r["settled"])] / grid.j[best] - 1)
                    r["oracle_saving_pct"] = 100 * (1 - grid.j[best] / base)
                    r["share_pct"] = 100 * r["saving_pct"] / r["oracle_saving_pct"]
                    res[kind].append(r)
            for kind, runs in res.items():
                rows.append(_row(kind, source, f"{wname} {pert.name}", "stock", windows, noise_pct, told, runs))
    return rows


def knows_the_physics(grid: Grid, gpu: bool) -> dict:
    """A run held from its first step at the best of the member's smooth physics (``Grid.smooth_best``;
    along the GPU-only search's line where ``gpu``): what a search keeps that knows everything but
    the run's per-mode spread, and measures nothing."""
    held = min(((x,) + grid.stock[1:] for x in grid.levels), key=grid.smooth.get) if gpu else grid.smooth_best
    return {"settled": held, "probes": 0, "converged": True,
            "saving_pct": 100 * (1 - grid.j[held] / grid.j[grid.stock])}


def _row(search, source, name, start, windows, noise_pct, told, runs) -> dict:
    return {"search": search, "source": source, "workload": name, "start": start, "windows": windows,
            "noise_pct": noise_pct, "length": "told" if told else "unknown",
            "share_pct_mean": statistics.mean(r["share_pct"] for r in runs),
            "share_pct_min": min(r["share_pct"] for r in runs),
            "saving_pct_mean": statistics.mean(r["saving_pct"] for r in runs),
            "gap_pct_mean": statistics.mean(r["gap_pct"] for r in runs),
            "gap_pct_worst": max(r["gap_pct"] for r in runs),
            "probes_mean": statistics.mean(r["probes"] for r in runs),
            "unconverged": sum(not r["converged"] for r in runs), "runs": len(runs)}


def summary(rows: list[dict]) -> str:
    """Per search, curve set, start, run length (windows), noise and whether the length is told:
    the least per-workload mean share, the least single run's, the mean share, the gaps, and the
    whole run's saving against the start (joint and GPU-only on one footing)."""
    out = ["| search | curves | start | windows | noise | length | workloads >= 90 % (mean share) "
           "| least mean share | least run | mean share | mean gap | worst mean gap | worst run's gap | unsettled runs | whole run's saving (mean) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["search"], r["source"], r["start"], r["windows"], r["noise_pct"], r["length"]), []).append(r)
    for (search, source, start, windows, noise, length), g in groups.items():
        out.append(f"| {search} | {source} ({len(g)}) | {start} | {windows} | {noise:g} % | {length} "
                   f"| {sum(r['share_pct_mean'] >= 90 for r in g)}/{len(g)} "
                   f"| {min(r['share_pct_mean'] for r in g):.0f} % | {min(r['share_pct_min'] for r in g):.0f} % "
                   f"| {statistics.mean(r['share_pct_mean'] for r in g):.0f} % "
                   f"| {statistics.mean(r['gap_pct_mean'] for r in g):.2f} % "
                   f"| {max(r['gap_pct_mean'] for r in g):.2f} % | {max(r['gap_pct_worst'] for r in g):.2f} % "
                   f"| {sum(r['unconverged'] for r in g)}/{sum(r['runs'] for r in g)} "
                   f"| {statistics.mean(r['saving_pct_mean'] for r in g):.1f} % |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--windows", type=int, nargs="+", default=[60, 120])
    ap.add_argument("--noise", type=float, nargs="+", default=[3.0, 5.0], help="window noise, %% of J/step")
    ap.add_argument("--length", nargs="+", choices=("unknown", "told"), default=["unknown", "told"])
    ap.add_argument("--models", nargs="+", default=list(PAPER_MODELS))
    ap.add_argument("--family-workloads", nargs="+", default=list(FAMILY_WORKLOADS))
    ap.add_argument("--members", nargs="+", help="only these members of the family")
    ap.add_argument("--no-family", action="store_true")
    ap.add_argument("--no-curves", action="store_true", help="only the family (no GPU-only curves)")
    ap.add_argument("--board", default="agx-orin", help="the family's board (its mode grid)")
    ap.add_argument("--searches", nargs="+", choices=FAMILY_SEARCHES, default=list(FAMILY_SEARCHES[:2]),
                    help="the family's searches (the two ending in -knows-physics: the ceiling, see above)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "short_runs.json"))
    args = ap.parse_args(argv)
    curves = sim_curves(args.models) + [flat_curve("flat 408-816", 408.0, 816.0),
                                        flat_curve("flat 306-612", 306.0, 612.0)]
    rows = []
    for windows in args.windows:
        for noise in args.noise:
            for length in args.length:
                told = length == "told"
                new = [] if args.no_curves else gpu_runs(curves, windows, noise, args.seeds, told)
                if not args.no_family:
                    new += family_runs(args.family_workloads, windows, noise, args.seeds, told, args.members,
                                       args.board, args.searches)
                for r in new:
                    print(f"{r['search']:8s} {r['workload']:30s} {r['start']:6s} {windows:3d} w {noise:g} % {length:7s} "
                          f"share {r['share_pct_mean']:5.1f} % (min {r['share_pct_min']:5.1f}) "
                          f"gap {r['gap_pct_mean']:.2f} % (worst {r['gap_pct_worst']:.2f}) probes {r['probes_mean']:.1f} "
                          f"unsettled {r['unconverged']}", flush=True)
                rows += new
    table = summary(rows)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"window_s": WINDOW_S, "settle_s": SETTLE_S, "seeds": args.seeds,
                               "noise": {"time_cv": 0.01, "spike_prob": 0.05, "spike_time": [0.05, 0.20]},
                               "summary_markdown": table, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

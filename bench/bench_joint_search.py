"""The joint online search (GPU x EMC x CPU) replayed against the simulator's full mode grid,
beside the GPU-only model search (EMC and CPU left at the stock mode's), window by window (no
board, no real time).

Per board (AGX Orin, Orin Nano Super) and workload: the steady-state module J/step and s/step of
every mode of the grid (every GPU level x EMC rate x the profile's CPU clocks:
:func:`pydvfs.sim.joint.full_sweep`). The stock mode is the top one (MAXN: every clock at its
top, pinned); the oracle runs the grid's best mode from the first step.

Window noise as bench/bench_online_search.py (the same draws for both searches): a window's
step time is off by a Gaussian 0.5 %, its power by 1 %, and with probability 5 % a spike
stretches its time by 5-15 % at the same power. A window is ``--window`` s of training, a mode
change costs ``--settle`` s unmeasured at the new mode; a run is ``--minutes`` of training at
the oracle's speed (its step count is fixed).

Reported per workload and search (over ``--seeds`` seeds): the settled mode's true J/step over
the grid's best (within 1 %?), distinct modes probed, and the whole-run saving against the
stock mode as a share of the oracle's (exploration included). Ratios within one run only.

    PYTHONPATH=. python bench/bench_joint_search.py            # ~30 s: 6 workloads per board
    PYTHONPATH=. python bench/bench_joint_search.py --all --seeds 5   # every study workload
    PYTHONPATH=. python bench/bench_joint_search.py --family --warm --jobs 2 --doc docs/online.md  # the family

``--family``: the same replays on every simulator of :func:`pydvfs.sim.perturbed.family` (the
CPU power law's exponent, CUDA's spin share, memory time hidden under compute, the EMC's power
split, a per-mode spread fixed per run), 10-min runs of the default workloads and 4-min runs of
the host-bound one; the summary puts the family's worst case beside the default simulator's,
and counts the runs where the joint search ended on a mode worse than the GPU-only search's,
and, as yardsticks, how far the best mode of the member's physics without the run's per-mode
spread is from the run's best, and what a search that knows that physics exactly
(:class:`KnowsPhysics`: the six modes it puts best, a window each, the best three confirmed) keeps
in the same windows. ``--warm`` replays each run also given what a run has in
production (the built-in policy's GPU clock for the workload on that board, decided on a fake
layout of the board by :func:`pydvfs.governor.loop.choose_start`: the joint search's prior
start, the GPU-only search's centre). ``--workloads`` with ``--family``: only those (10-min
runs; 4-min runs of the host-bound ones). Writes bench/results/joint_search_family.json.

Writes bench/results/joint_search.json (or --out), prints a Markdown table, and with
``--doc docs/power-modes.md`` writes the per-workload table between its markers.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.governor.replay import Grid, make, replay  # noqa: E402
from pydvfs.sim.perturbed import family  # noqa: E402

BOARDS = ("agx-orin", "orin-nano-super")
DEFAULT_WORKLOADS = ("bert-tiny/SST-2", "bert-base/SST-2", "bert-large/QNLI", "pythia-160m/MRPC",
                     "pythia-1b/SST-2", "bert-base/SST-2+host")
FAMILY_RUNS = (("bert-tiny/SST-2", 10.0), ("bert-base/SST-2", 10.0), ("bert-large/QNLI", 10.0),
               ("pythia-160m/MRPC", 10.0), ("pythia-1b/SST-2", 10.0), ("bert-base/SST-2+host", 10.0),
               ("bert-base/SST-2+host", 4.0))
__all__ = ["Grid", "make", "replay", "run", "run_family", "family_summary", "summary", "doc_table", "main"]
MARK = ("<!-- BEGIN generated:joint-search -->", "<!-- END generated:joint-search -->")
FAMILY_MARK = ("<!-- BEGIN generated:joint-family -->", "<!-- END generated:joint-family -->")


def _workload(wname: str):
    from pydvfs.sim.catalogue import HOST_BOUND, get_workload

    host = wname.endswith("+host")
    model, task = (wname[:-5] if host else wname).split("/")
    return get_workload(model, task, host=HOST_BOUND) if host else get_workload(model, task)


class KnowsPhysics:
    """A yardstick, not a search for a board: it knows the member's exact physics without the
    run's per-mode spread (``Grid.smooth``), measures the stock mode and then the ``k`` modes that
    physics puts best, a window each, brings the ``top`` best measured to ``1 + confirm`` windows
    and settles on the least mean. What a run's windows allow when the model is exactly right:
    the rest of the gap is the per-mode spread and the window noise. Replayed by :func:`replay`
    like the searches (the same windows, noise and settle time)."""

    def __init__(self, grid, k=6, top=3, confirm=2):
        self.plan = [grid.stock] + sorted(grid.modes, key=grid.smooth.get)[:k]
        self.top, self.confirm = top, confirm
        self.win: dict = {}
        self.remaining_windows = None
        self.target_mode = self.plan[0]

    @property
    def best_mode(self):
        return min(self.win, key=lambda m: statistics.fmean(self.win[m]))

    @property
    def probed_modes(self) -> int:
        return len(self.win)

    def observe(self, mode, j, t, s):
        self.win.setdefault(tuple(mode), []).append(j)
        todo = [m for m in self.plan if m not in self.win]
        if not todo:
            top = sorted(self.plan[1:], key=lambda m: self.win[m][0])[:self.top]
            todo = [m for m in top if len(self.win[m]) < 1 + self.confirm]
        self.target_mode = todo[0] if todo else self.best_mode
        return self.target_mode


def _family_row(task) -> dict:
    """One row of :func:`run_family`: both searches on ``seeds`` runs of one member, from the
    stock mode alone ("joint", "gpu-only") and, with ``warm``, also given the built-in policy's
    GPU clock as production gives it ("joint (warm)", "gpu-only (warm)")."""
    b, wname, minutes, pert, seeds, window_s, settle_s, warm = task
    w = _workload(wname)
    names = [("joint", False), ("gpu-only", False)] + ([("joint (warm)", True), ("gpu-only (warm)", True)] if warm else [])
    res: dict = {name: [] for name, _ in names} | {"knows the physics": []}
    grids = []
    for seed in range(seeds):
        grid = Grid(b, w, pert, run_seed=seed)
        grids.append(grid)
        for name, hot in names:
            kind = name.split(" ")[0]
            r = replay(grid, make(kind, grid, hot), kind == "gpu-only", minutes, window_s, settle_s, seed)
            r["j_settled"] = grid.j[tuple(r["settled"])]
            res[name].append(r)
        res["knows the physics"].append(replay(grid, KnowsPhysics(grid), False, minutes, window_s, settle_s, seed))

    def worse(a, b):
        return sum(j["j_settled"] > g["j_settled"] * (1 + 1e-9) for j, g in zip(res[a], res[b]))

    row = {"board": b, "workload": wname, "minutes": minutes, "member": pert.name, "seeds": seeds,
           "joint_worse_than_gpu_only": worse("joint", "gpu-only"),
           # the gap of the best mode of the member's physics without the run's spread (a yardstick)
           "smooth_best_gap_pct_worst": max(100 * (g.j[g.smooth_best] / g.j[g.best] - 1) for g in grids),
           "searches": {}}
    if warm:
        row["policy_mhz"] = grids[0].policy_mhz
        row["joint_worse_than_gpu_only_warm"] = worse("joint (warm)", "gpu-only (warm)")
    for name, rs in res.items():
        row["searches"][name] = {"gap_pct_worst": max(r["gap_pct"] for r in rs),
                                 "share_pct_min": min(r["share_pct"] for r in rs),
                                 "share_pct_mean": statistics.mean(r["share_pct"] for r in rs),
                                 "probes_max": max(r["probes"] for r in rs),
                                 "settled": sorted({tuple(r["settled"]) for r in rs})}
    return row


def run_family(boards, runs=FAMILY_RUNS, seeds=3, members=None, window_s=10.0, settle_s=2.0, progress=True,
               jobs=1, warm=False) -> dict:
    """Both searches on every simulator of the family (``members``: their names; default all),
    each seed a run with its own per-mode spread and window noise. One row per board, workload,
    run length and member: the worst seed's gap and share, and how often the joint search
    ended on a mode truly worse than the GPU-only search's on the same run. ``jobs``: worker
    processes (the rows are independent); ``warm``: also from the built-in policy's clock."""
    tasks = [(b, wname, minutes, pert, seeds, window_s, settle_s, warm) for b in boards for wname, minutes in runs
             for pert in family() if not members or pert.name in members]
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.imap(_family_row, tasks)
            rows = [_say_row(r, progress) for r in results]
    else:
        rows = [_say_row(_family_row(t), progress) for t in tasks]
    return {"window_s": window_s, "settle_s": settle_s, "seeds": seeds, "warm": warm,
            "members": [m.to_dict() for m in family() if not members or m.name in members], "rows": rows}


def _say_row(row: dict, progress: bool) -> dict:
    if progress:
        for suffix in ("", " (warm)"):
            if "joint" + suffix not in row["searches"]:
                continue
            j, g = row["searches"]["joint" + suffix], row["searches"]["gpu-only" + suffix]
            worse = row["joint_worse_than_gpu_only" + suffix.replace(" (warm)", "_warm")]
            print(f"{row['board']:16s} {row['workload']:22s} {row['minutes']:4g} min {row['member']:15s}{suffix[1:-1]:>5s} "
                  f"joint gap {j['gap_pct_worst']:5.2f} % share {j['share_pct_min']:5.1f} % probes {j['probes_max']:2d} "
                  f"| gpu-only gap {g['gap_pct_worst']:5.2f} % share {g['share_pct_min']:5.1f} % | joint worse "
                  f"{worse}/{row['seeds']}", flush=True)
    return row


def family_summary(res: dict) -> str:
    """Per board and run (10-min: the default workloads; 4-min: the host-bound one): the default
    simulator's worst seed beside the family's worst case, from the stock mode alone and (where
    replayed) given the built-in policy's GPU clock too (a warm start, as production has it)."""
    out = ["| board | runs | simulator | start | joint: worst gap to the joint best | joint: least share of the "
           "oracle's saving | GPU-only: least share | joint ended worse than GPU-only | the physics' best without "
           "the run's spread: worst gap | a search that knows the physics: worst gap / least share |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in res["rows"]:
        kind = f"{r['minutes']:g} min" + (" host-bound" if r["minutes"] < 10 else "")
        groups.setdefault((r["board"], kind), []).append(r)
    starts = [("", "stock mode")] + ([(" (warm)", "+ policy's clock")] if res.get("warm") else [])
    for (b, kind), rows in groups.items():
        for label, sel in (("default", [r for r in rows if r["member"] == "default"]),
                           (f"worst of {len({r['member'] for r in rows})}", rows)):
            if not sel:
                continue
            for suffix, start in starts:
                j = [r["searches"]["joint" + suffix] for r in sel]
                g = [r["searches"]["gpu-only" + suffix] for r in sel]
                worse = sum(r["joint_worse_than_gpu_only" + ("_warm" if suffix else "")] for r in sel)
                out.append(f"| {b} | {kind} | {label} | {start} | {max(x['gap_pct_worst'] for x in j):.2f} % "
                           f"| {min(x['share_pct_min'] for x in j):.0f} % | {min(x['share_pct_min'] for x in g):.0f} % "
                           f"| {worse}/{sum(r['seeds'] for r in sel)} "
                           f"| {max(r.get('smooth_best_gap_pct_worst', 0.0) for r in sel):.2f} % "
                           f"| {_knows(sel)} |")
    return "\n".join(out)


def _knows(rows) -> str:
    k = [r["searches"]["knows the physics"] for r in rows]
    return f"{max(x['gap_pct_worst'] for x in k):.2f} % / {min(x['share_pct_min'] for x in k):.0f} %"


def run(boards, workloads, minutes_list, seeds, window_s=10.0, settle_s=2.0, progress=True) -> dict:
    rows = []
    for b in boards:
        for wname in workloads:
            grid = Grid(b, _workload(wname))
            for minutes in minutes_list:
                row = {"board": b, "workload": grid.name, "minutes": minutes, "modes": len(grid.modes),
                       "best_mode": list(grid.best), "gpu_only_best": list(grid.gpu_best),
                       "best_j_rel": grid.j[grid.best] / grid.j[grid.stock],
                       "best_t_rel": grid.s[grid.best] / grid.s[grid.stock],
                       "gpu_best_j_rel": grid.j[grid.gpu_best] / grid.j[grid.stock],
                       "gpu_best_t_rel": grid.s[grid.gpu_best] / grid.s[grid.stock],
                       "nvpmodel": {k: {"j_rel": v["module_j"] / grid.j[grid.stock],
                                        "t_rel": v["t_s"] / grid.s[grid.stock]} for k, v in grid.nvpmodel.items()},
                       "calibrated": grid.calibrated, "searches": {}}
                for name in ("joint", "gpu-only"):
                    runs = [replay(grid, make(name, grid), name == "gpu-only", minutes, window_s, settle_s, seed)
                            for seed in range(seeds)]
                    shares = [r["share_pct"] for r in runs if r["share_pct"] is not None]
                    row["searches"][name] = {
                        "within_1pct": sum(r["gap_pct"] <= 1.0 for r in runs), "runs": len(runs),
                        "gap_pct_worst": max(r["gap_pct"] for r in runs),
                        "gap_pct_mean": statistics.mean(r["gap_pct"] for r in runs),
                        "probes_mean": statistics.mean(r["probes"] for r in runs),
                        "probes_max": max(r["probes"] for r in runs),
                        "share_pct_mean": statistics.mean(shares) if shares else None,
                        "share_pct_min": min(shares) if shares else None,
                        "j_rel_mean": statistics.mean(r["j_rel"] for r in runs),
                        "t_rel_mean": statistics.mean(r["t_rel"] for r in runs),
                        "settled": sorted({tuple(r["settled"]) for r in runs}),
                    }
                rows.append(row)
                if progress:
                    print(f"{b:16s} {grid.name:24s} {minutes:g} min best {grid.best}: " + " | ".join(
                        f"{n} {v['within_1pct']}/{v['runs']} within 1 % (worst {v['gap_pct_worst']:.1f} %), "
                        f"probes {v['probes_mean']:.1f} (max {v['probes_max']}), "
                        f"share {v['share_pct_mean']:.0f} % (min {v['share_pct_min']:.0f} %)"
                        for n, v in row["searches"].items()), flush=True)
    return {"window_s": window_s, "settle_s": settle_s, "seeds": seeds, "minutes": list(minutes_list),
            "noise": {"time_cv": 0.005, "power_cv": 0.01, "spike_prob": 0.05, "spike_time": [0.05, 0.15]},
            "rows": rows}


def summary(res: dict) -> str:
    """Per board and run length: within-1 % counts, probes and share of the oracle's saving."""
    out = ["| board | run | search | settled within 1 % of the best mode | probes (mean / max) "
           "| share of the oracle's saving (mean / min) |", "|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in res["rows"]:
        groups.setdefault((r["board"], r["minutes"]), []).append(r)
    for (b, minutes), rows in groups.items():
        for name in ("joint", "gpu-only"):
            v = [r["searches"][name] for r in rows]
            shares = [x["share_pct_mean"] for x in v if x["share_pct_mean"] is not None]
            mins = [x["share_pct_min"] for x in v if x["share_pct_min"] is not None]
            out.append(f"| {b} | {minutes:g} min | {name} | {sum(x['within_1pct'] for x in v)}/{sum(x['runs'] for x in v)} "
                       f"| {statistics.mean(x['probes_mean'] for x in v):.1f} / {max(x['probes_max'] for x in v)} "
                       f"| {statistics.mean(shares):.0f} % / {min(mins):.0f} % |")
    return "\n".join(out)


def doc_table(res: dict) -> str:
    """docs/power-modes.md's table: per workload (the longest run), module energy / time per step
    against the stock top mode of nvpmodel's modes, GPU-only, the joint search and the full sweep."""
    longest = max(res["minutes"])
    out = []
    for b in dict.fromkeys(r["board"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["board"] == b and r["minutes"] == longest]
        modes = list(rows[0]["nvpmodel"])
        out += [f"### {b} ({'GPU clock calibrated, EMC/CPU priors' if rows[0]['calibrated'] else 'scaled estimate'})",
                "", f"Cells: module energy % / time % per step against the top mode pinned; the searches' settled "
                f"mode (mean of {res['seeds']} seeds of a {longest:g}-min replay) with the modes they probed; "
                f"nvpmodel's modes under podgov.", "",
                "| workload | " + " | ".join(modes) + " | GPU-only search | joint search | full sweep (offline) |",
                "|---|" + "---|" * (len(modes) + 3)]

        def cell(j, t):
            return f"{100 * (j - 1):+.1f} / {100 * (t - 1):+.1f}"

        for r in rows:
            g, jn = r["searches"]["gpu-only"], r["searches"]["joint"]
            out.append(f"| {r['workload']} | " + " | ".join(cell(v["j_rel"], v["t_rel"]) for v in r["nvpmodel"].values())
                       + f" | {cell(g['j_rel_mean'], g['t_rel_mean'])}, {g['probes_mean']:.1f} probes"
                       + f" | {cell(jn['j_rel_mean'], jn['t_rel_mean'])}, {jn['probes_mean']:.1f} probes"
                       + f" | {cell(r['best_j_rel'], r['best_t_rel'])}, {r['modes']} modes |")
        out.append("")
    out += ["Over every run length replayed:", "", summary(res)]
    return "\n".join(out)


def write_doc(path: Path, text: str, mark=MARK) -> None:
    doc = path.read_text()
    if mark[0] not in doc or mark[1] not in doc:
        raise SystemExit(f"bench_joint_search: {path} has no {mark[0]} ... {mark[1]} markers")
    head, rest = doc.split(mark[0], 1)
    _, tail = rest.split(mark[1], 1)
    path.write_text(head + mark[0] + "\n" + text + "\n" + mark[1] + tail)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--minutes", type=float, nargs="+", default=[10.0, 60.0])
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--boards", nargs="+", default=list(BOARDS))
    ap.add_argument("--workloads", nargs="+", default=list(DEFAULT_WORKLOADS),
                    help="model/task (append +host for the host-bound variant)")
    ap.add_argument("--all", action="store_true", help="every study workload (36, slow)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "joint_search.json"))
    ap.add_argument("--doc", help="write the table into this Markdown file between its markers")
    ap.add_argument("--family", action="store_true",
                    help="replay on every simulator of the perturbed family (10-min runs, 4-min host-bound)")
    ap.add_argument("--members", nargs="+", help="with --family: only these members (names of sim.perturbed.family)")
    ap.add_argument("--jobs", type=int, default=1, help="with --family: worker processes")
    ap.add_argument("--warm", action="store_true",
                    help="with --family: also replay each run given the built-in policy's GPU clock (production's start)")
    args = ap.parse_args(argv)
    if args.family:
        runs = FAMILY_RUNS
        if args.workloads != ap.get_default("workloads"):  # a part of the family: 10-min runs, 4-min host-bound
            runs = tuple((w, 4.0 if w.endswith("+host") else 10.0) for w in args.workloads)
        res = run_family(args.boards, runs, args.seeds, args.members, args.window, args.settle, jobs=args.jobs,
                         warm=args.warm)
        res["summary_markdown"] = family_summary(res)
        print(res["summary_markdown"])
        out = Path(args.out if args.out != ap.get_default("out") else REPO / "bench" / "results" / "joint_search_family.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out}")
        if args.doc:  # (docs/online.md)
            write_doc(Path(args.doc), res["summary_markdown"], FAMILY_MARK)
            print(f"wrote {args.doc}")
        return 0
    workloads = args.workloads
    if args.all:
        from pydvfs.studies.sim_studies import study_workloads
        workloads = [w.name for w in study_workloads()]
    res = run(args.boards, workloads, args.minutes, args.seeds, args.window, args.settle)
    res["summary_markdown"] = summary(res)
    print(res["summary_markdown"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    if args.doc:
        write_doc(Path(args.doc), doc_table(res))
        print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

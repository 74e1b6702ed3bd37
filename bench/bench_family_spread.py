"""The family's spread in the model search (issue 35, item 5): does widening the round-0 design
to the uncertainty family's spread of the best clock help on a board whose profile is an
estimate? Replayed window by window (no board, no real time) on held-out members of the family
(:func:`pydvfs.sim.uncertainty.held_out`: physics no policy was trained on) of the Orin Nano
Super and the Orin NX, module energy.

Each run starts where production starts (:func:`pydvfs.governor.loop.plan_online` on a fake
layout of the board, the workload described by its GPU load at MAXN on the member, no record of
its own runs: on these boards the built-in policy mostly keeps MAXN, and the search is anchored
there, its design centred on the level the policy would have pinned) and runs the GPU-only
model search twice on the same window noise (:func:`pydvfs.governor.replay.window_noise`):
with the plan's prior (the family's spread, ``SearchPrior.spread``) and without it (the design
as before: ``bracket_frac`` of the table either side of the centre). A window is 10 s, a change
of clock 2 s unmeasured; a run is ``--minutes`` of training at the best clock's speed, its
length told or not.

Reported per board, run length and length told or not: the whole run's saving against MAXN as
a share of the best level's (the mean saving over the mean best saving, as the policy's score
gives it), the mean and worst gap of the settled level (its true J/step over the best of the
levels and MAXN), and the runs that end worse than MAXN.

    PYTHONPATH=. python bench/bench_family_spread.py [--seeds 3] [--minutes 10 60]

Writes bench/results/family_spread.json (or --out) and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_online_search import Curve  # noqa: E402
from bench_online_search import replay as curve_replay  # noqa: E402

from pydvfs.device import open_device  # noqa: E402
from pydvfs.device.fake import build_fake_board  # noqa: E402
from pydvfs.governor.loop import plan_online  # noqa: E402
from pydvfs.governor.mode_search import CurveParams, CurveSearch, SearchPrior  # noqa: E402
from pydvfs.governor.replay import window_noise  # noqa: E402
from pydvfs.policy.objective import Objective  # noqa: E402
from pydvfs.policy.score import truth  # noqa: E402
from pydvfs.sim.catalogue import get_workload  # noqa: E402
from pydvfs.sim.model import operating_point  # noqa: E402
from pydvfs.sim.sweep import maxn_setting  # noqa: E402
from pydvfs.sim.uncertainty import held_out  # noqa: E402

WINDOW_S, SETTLE_S = 10.0, 2.0
BOARDS = ("orin-nano-super", "orin-nx")
WORKLOADS = ("bert-base/QQP", "bert-tiny/CoLA", "pythia-160m/RTE", "bert-small/MNLI", "qwen2.5-0.5b/STS-B",
             "pythia-31m/QQP", "pythia-70m/CoLA")
MEMBERS = (1, 2, 3)


def member_curve(board: str, model: str, task: str, params) -> tuple[Curve, dict]:
    """The member's true module J/step and s/step per level and under MAXN, and the workload
    as `--workload` describes it (its GPU load at MAXN measured on the member)."""
    w = get_workload(model, task)
    levels = truth(board, model, task, params).energy_j["module"]
    j, s = {}, {}
    for f in levels:
        op = operating_point(w, "fixed", f, params, board=board)
        j[f], s[f] = op.role_power_w["module"] * op.t_step_s, op.t_step_s
    mx = operating_point(w, maxn_setting(board), None, params, board=board)
    a = w.arch
    desc = {"model": a.family, "layers": a.layers, "hidden": a.hidden, "seq_len": w.task.avg_tokens,
            "util_pct": round(100.0 * mx.load, 2)}
    curve = Curve(f"{model}/{task}", board, tuple(sorted(levels)), j, s,
                  mx.role_power_w["module"] * mx.t_step_s, {}, mx.t_step_s)
    return curve, desc


def run_pair(curve: Curve, plan: dict, minutes: float, seed: int, told: bool) -> dict:
    """The same run with the plan's prior (the spread) and without its spread."""
    out = {}
    full = SearchPrior.of(plan["prior"])
    for label, prior in (("spread", full), ("no spread", None if full is None else
                                            SearchPrior(full.observations, full.start, full.source))):
        search = CurveSearch(plan["search_levels_mhz"], plan["centre_mhz"], CurveParams(reprobe_s=float("inf")),
                             maxn_anchor=plan["maxn_anchor"], prior=prior)
        r = curve_replay(curve, search, minutes, WINDOW_S, SETTLE_S, seed, told=told, noise=window_noise)
        r["design"] = [p.freq_mhz for p in search.probes][:4]
        out[label] = r
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--minutes", type=float, nargs="+", default=[10.0, 60.0])
    ap.add_argument("--length", nargs="+", choices=("unknown", "told"), default=["unknown", "told"])
    ap.add_argument("--boards", nargs="+", default=list(BOARDS))
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "family_spread.json"))
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pydvfs-spread-") as tmp:
        for board in args.boards:
            fake = build_fake_board(Path(tmp) / board, board=board)
            dev = open_device(fake.root, str(Path(tmp) / f"{board}-state"))
            for wname in args.workloads:
                model, task = wname.split("/")
                for k in MEMBERS:
                    mem = held_out(board, k)
                    curve, desc = member_curve(board, model, task, mem.params())
                    plan = plan_online(dev, desc, objective=Objective(), use_runs=False)
                    for minutes in args.minutes:
                        for length in args.length:
                            for seed in range(args.seeds):
                                pair = run_pair(curve, plan, minutes, seed, length == "told")
                                a, b = pair["no spread"], pair["spread"]
                                a["design_changed"] = b["design_changed"] = a["design"] != b["design"]
                                for label, r in pair.items():
                                    rows.append({"board": board, "workload": wname, "member": mem.name,
                                                 "minutes": minutes, "length": length, "seed": seed,
                                                 "search": label, "centre_mhz": plan["centre_mhz"],
                                                 "maxn_anchor": plan["maxn_anchor"],
                                                 "spread_mhz": plan["family_spread_mhz"], **r})
                                print(f"{board:15s} {wname:20s} {mem.name:11s} {minutes:3g} min {length:7s} s{seed} "
                                      f"gap {a['gap_pct']:5.2f} -> {b['gap_pct']:5.2f} %  saving {a['saving_pct']:5.2f} -> "
                                      f"{b['saving_pct']:5.2f} % (best {a['oracle_saving_pct']:5.2f})  design "
                                      f"{a['design']} -> {b['design']}", flush=True)
    table = summary(rows)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"window_s": WINDOW_S, "settle_s": SETTLE_S, "seeds": args.seeds,
                       "members": [f"held-out-{k}" for k in MEMBERS], "summary_markdown": table}, indent=1)
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)  # one run a line
    out.write_text(head[:-2] + ',\n "rows": [\n' + body + "\n ]\n}\n")
    print(f"wrote {out}")
    return 0


def summary(rows: list[dict]) -> str:
    out = ["| board | minutes | length | search | runs | runs whose design the spread changes "
           "| share of the best level's saving | mean gap | worst gap | runs worse than MAXN |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["board"], r["minutes"], r["length"], r["search"]), []).append(r)
    for (board, minutes, length, search), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2],
                                                                                       kv[0][3] != "no spread")):
        share = 100 * statistics.fmean(r["saving_pct"] for r in g) / statistics.fmean(r["oracle_saving_pct"] for r in g)
        out.append(f"| {board} | {minutes:g} | {length} | {search} | {len(g)} | {sum(r['design_changed'] for r in g)} "
                   f"| {share:.1f} % "
                   f"| {statistics.fmean(r['gap_pct'] for r in g):.2f} % | {max(r['gap_pct'] for r in g):.2f} % "
                   f"| {sum(r['saving_pct'] < 0 for r in g)} |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())

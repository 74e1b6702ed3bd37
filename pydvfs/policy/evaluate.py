"""Evaluate policies on measured curves (paper A, step 5): the clock each policy picks for each
workload, the energy measured at that clock, and the saving against MAXN; plus the oracle."""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Sequence

from .. import _core
from ..eta import track
from .curves import Curve

# govcore's policies (mlg, ffg, rules, maxn); those that need a model folder's roofline.txt
# (roofline) join when the model folder has one
POLICIES = tuple(p for p in _core.POLICY_NAMES if "needs_model_dir" not in _core.POLICY_FLAGS[p])


def choices_for(curve: Curve, tree, roofline=None) -> dict[str, float | None]:
    """What each policy picks for one workload, through the C policies (as on the board);
    with a roofline model (``_core.Roofline``), its pick over the workload's measured levels."""
    from .. import _core

    wl = curve.workload.as_core()
    mlg = tree.propose(wl)
    out = {"mlg": mlg or None,  # 0 MHz: the tree says "leave it at MAXN"
           "ffg": tree.ffg_mhz, "rules": _core.propose_rules(wl), "maxn": None}
    if roofline is not None:
        out["roofline"] = roofline.propose(wl, curve.freqs_mhz)
    return out


def evaluate(curves: Sequence[Curve], tree, roofline=None) -> dict:
    policies = POLICIES + (("roofline",) if roofline is not None else ())
    rows = []
    for c in track(curves, "evaluate: workloads"):
        picks = choices_for(c, tree, roofline)
        oracle = c.oracle_mhz
        row = {"workload": c.name, "task": c.task, "model": c.workload.model, "params": c.params,
               "maxn_energy_j": c.maxn_energy_j, "oracle_mhz": oracle,
               "oracle_saving_pct": 100 * c.saving_vs_maxn(oracle), "policies": {}}
        for name, mhz in picks.items():
            row["policies"][name] = {
                "freq_mhz": None if mhz is None else c.nearest_mhz(mhz),
                "energy_j": c.energy_at(mhz),
                "saving_pct": 100 * c.saving_vs_maxn(mhz),
                "regret_pct": 100 * c.regret(mhz),
            }
        rows.append(row)
    oracle = [r["oracle_saving_pct"] for r in rows]
    summary = {}
    for name in policies:
        s = [r["policies"][name]["saving_pct"] for r in rows]
        summary[name] = {
            "mean_saving_pct": statistics.fmean(s),
            "max_saving_pct": max(s),
            "min_saving_pct": min(s),
            "oracle_mean_saving_pct": statistics.fmean(oracle),
            "share_of_oracle": statistics.fmean(s) / statistics.fmean(oracle) if statistics.fmean(oracle) else None,
            "worse_than_maxn": sum(1 for v in s if v < 0),
            "mean_regret_pct": statistics.fmean(r["policies"][name]["regret_pct"] for r in rows),
        }
    return {"model": tree.name, "n_workloads": len(rows), "workloads": rows, "summary": summary,
            "policies": list(policies)}


LOSS_MARK = "!"  # a saving below 0: the pick uses more energy than MAXN (text output; reports: markdown.LOSES_MARK)

# The paper's published evaluation (SPEC section 2), for the side-by-side table.
PAPER = {"mlg_mean_saving_pct": 13.11, "mlg_max_saving_pct": 26.73, "ffg_behind_mlg_pct": 0.9}


def format_report(result: dict) -> str:
    from ..measure.energy import COLUMN, column_label

    policies = result.get("policies", POLICIES)
    column = result.get("energy_column")
    lines = [f"energy: {column_label(column).replace('`', '')}; each policy's clock and its saving vs MAXN "
             f"({LOSS_MARK}: it loses against MAXN)",
             f"{'workload':28s} {'oracle':>7s} " + " ".join(f"{p:>15s}" for p in policies)]
    losses = 0
    for r in result["workloads"]:
        cells = []
        for p in policies:
            d = r["policies"][p]
            f = "maxn" if d["freq_mhz"] is None else f"{d['freq_mhz']:g}"
            loses = d["saving_pct"] < 0
            losses += loses and p == "mlg"
            cells.append(f"{f:>6s} {d['saving_pct']:6.1f}%{LOSS_MARK if loses else ' '}")
        lines.append(f"{r['workload'][:28]:28s} {'MAXN' if r['oracle_mhz'] is None else format(r['oracle_mhz'], 'g'):>7s} " + " ".join(f"{c:>15s}" for c in cells))
    if losses:
        lines.append(f"{LOSS_MARK} mlg loses against MAXN on {losses} of {len(result['workloads'])} workloads: there, "
                     "the board's own governor uses less energy than the tree's clock")
    lines.append("")
    lines.append(f"{'saving vs MAXN':18s} {'mean':>7s} {'max':>7s} {'min':>7s} {'of oracle':>9s}")
    for p in policies:
        s = result["summary"][p]
        share = "" if s["share_of_oracle"] is None else f"{100 * s['share_of_oracle']:8.1f}%"
        lines.append(f"{p:18s} {s['mean_saving_pct']:6.2f}% {s['max_saving_pct']:6.2f}% "
                     f"{s['min_saving_pct']:6.2f}% {share:>9s}")
    o = result["summary"]["mlg"]["oracle_mean_saving_pct"]
    lines.append(f"{'oracle':18s} {o:6.2f}%")
    lines += [f"left out: the {p} policy: {why}" for p, why in result.get("left_out", {}).items()]
    m, f = result["summary"]["mlg"], result["summary"]["ffg"]
    lines.append("")
    if column is not None and column != COLUMN["cpu-gpu"]:  # paper A's figures are CPU+GPU energy
        lines.append("paper A's figures are CPU+GPU energy: compare with --energy cpu-gpu")
        return "\n".join(lines)
    lines.append("paper A (real Orin, CPU+GPU) MLG mean {:.2f} %, max {:.2f} %, FFG {:.1f} % behind".format(
        PAPER["mlg_mean_saving_pct"], PAPER["mlg_max_saving_pct"], PAPER["ffg_behind_mlg_pct"]))
    lines.append("this run                     MLG mean {:.2f} %, max {:.2f} %, FFG {:.2f} % behind".format(
        m["mean_saving_pct"], m["max_saving_pct"], m["mean_saving_pct"] - f["mean_saving_pct"]))
    return "\n".join(lines)


def write(result: dict, out: Path) -> None:
    out.write_text(json.dumps(result, indent=2))

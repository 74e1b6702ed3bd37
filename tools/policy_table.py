#!/usr/bin/env python3
"""Regenerate the policy comparison of docs/policy.md: every candidate policy by leave-one-
workload-out and leave-one-model-out CV, on the simulated board's characterisation and on the
real Perseus A100/A40 curves. Writes docs/policy-table.json and prints the Markdown table.

    python tools/policy_table.py [--repeats 3] [--seed 0] [--out docs/policy-table.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.policy.curves import curves_from_frame, noise_summary, read_dataset  # noqa: E402
from pydvfs.policy.perseus import GPUS, model_of, perseus_curves  # noqa: E402
from pydvfs.policy.train import compare, ship_decision  # noqa: E402
from pydvfs.sim.catalogue import CHARACTERISATION_TASKS  # noqa: E402
from pydvfs.sim.sweep import write_sweep  # noqa: E402

ROWS = ("ffg", "rules", "tree (paper", "tree (roofline", "curve regression (random forest",
        "curve regression (gradient", "roofline model", "oracle")


def block(name: str, curves, noise: str, **kw) -> dict:
    tree, rows = compare(curves, **kw)
    decision = ship_decision(curves, tree, rows)
    return {"dataset": name, "n_workloads": len(curves), "noise": noise, "shipped": decision["shipped"],
            "ship_reason": decision["reason"], "rows": [r.to_dict() for r in rows]}


def markdown(blocks: list[dict]) -> str:
    out = ["| data | policy | LOOCV regret | LOMO regret | saving vs MAXN (LOOCV) | share of oracle (LOOCV / LOMO) |",
           "|---|---|---|---|---|---|"]
    for b in blocks:
        for prefix in ROWS:
            r = next(x for x in b["rows"] if x["name"].startswith(prefix))
            lomo_share = r.get("lomo_share_of_oracle")
            out.append(f"| {b['dataset']} | {r['name']} | {r['mean_regret_pct']:.2f} % | "
                       f"{r.get('lomo_mean_regret_pct', float('nan')):.2f} % | {r['mean_saving_vs_maxn_pct']:.2f} % | "
                       f"{100 * (r['share_of_oracle'] or 0):.1f} % / {100 * (lomo_share or 0):.1f} % |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "docs" / "policy-table.json"))
    args = ap.parse_args(argv)
    blocks = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sim.csv"
        write_sweep(data, tasks=CHARACTERISATION_TASKS, repeats=args.repeats, seed=args.seed)
        curves = curves_from_frame(read_dataset(data))
    noise = noise_summary(curves)
    blocks.append(block(f"simulated Orin ({args.repeats} repeats, seed {args.seed})", curves, noise.advice()))
    for gpu in GPUS:
        curves, vf = perseus_curves(gpu)
        blocks.append(block(f"Perseus {gpu.split('_')[0].upper()}", curves,
                            "averaged stage profiles, one value per clock", vf=vf, group=model_of))
    Path(args.out).write_text(json.dumps(blocks, indent=2))
    print(markdown(blocks))
    for b in blocks:
        print(f"\n{b['dataset']}: shipped {b['shipped']} - {b['ship_reason']}\n  noise: {b['noise']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The AGX Orin's built-in policies on paper A's held-out tasks (its nine models on the six
evaluation tasks), scored on the calibrated simulator without noise: the mean saving against MAXN
per measure, for the compiled build. Run once with the policies of before (``--label before``)
and once after regenerating them (``--label after``): both land in
bench/results/robust_policy_paper_a.json with the change in points (docs/replication.md).

    PYTHONPATH=. python bench/bench_robust_policy.py --label after
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "results" / "robust_policy_paper_a.json"


def main(argv=None) -> int:
    from pydvfs.measure.energy import MEASURES
    from pydvfs.policy.score import evaluate_builtin, held_out
    from pydvfs.sim.catalogue import EVALUATION_TASKS, PAPER_A_MODELS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True, choices=("before", "after"))
    args = ap.parse_args(argv)
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    res[args.label] = {m: evaluate_builtin("agx-orin", m, held_out(PAPER_A_MODELS, EVALUATION_TASKS))
                       for m in MEASURES}
    if "before" in res and "after" in res:
        res["change_points"] = {m: res["after"][m]["saving_pct"] - res["before"][m]["saving_pct"] for m in MEASURES}
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    for m in MEASURES:
        print(f"{args.label}: agx-orin {m}: {res[args.label][m]['saving_pct']:.2f} % saving vs MAXN "
              f"(share of best {res[args.label][m]['share_of_best_pct']:.1f} %)")
    if "change_points" in res:
        print("change (points):", {m: round(v, 2) for m, v in res["change_points"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

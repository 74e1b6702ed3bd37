#!/usr/bin/env python3
"""Regenerate govcore/policy_tree.c: the default policy shipped with pydvfs.

It trains the decision tree exactly as `pydvfs train` does (leave-one-out CV over workloads,
selection by energy regret) and exports it to C with m2cgen. By default the training data is
the simulated characterisation of the paper's protocol: every model on SST-2, QNLI and MRPC
(the other GLUE tasks stay unseen, for `pydvfs evaluate`).

    python tools/export_policy.py                       # simulated characterisation, seed 0
    python tools/export_policy.py --data sweep.csv      # a real board's sweep
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.policy.curves import curves_from_frame, read_dataset  # noqa: E402
from pydvfs.policy.manifest import provenance  # noqa: E402
from pydvfs.policy.to_c import tree_to_c  # noqa: E402
from pydvfs.policy.train import (  # noqa: E402
    FEATURE_SETS,
    Classifier,
    FixedClock,
    classes_mhz,
    default_util,
    select_tree,
    tree_maker,
)
from pydvfs.sim.catalogue import CHARACTERISATION_TASKS  # noqa: E402

REPEATS = 3


def simulated_dataset(path: Path, seed: int) -> None:
    from pydvfs.sim.sweep import write_sweep

    write_sweep(path, tasks=CHARACTERISATION_TASKS, repeats=REPEATS, seed=seed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="characterisation dataset (default: simulate one)")
    ap.add_argument("--tasks", default=",".join(CHARACTERISATION_TASKS), help="tasks to train on")
    ap.add_argument("--seed", type=int, default=0, help="seed of the simulated characterisation")
    ap.add_argument("--out", default=str(REPO / "govcore" / "policy_tree.c"))
    ap.add_argument("--board", default="agx-orin",
                    help="the board the data comes from (an id of pydvfs/data/boards.json; default: "
                         "agx-orin, the simulator's calibrated board)")
    args = ap.parse_args(argv)

    tasks = [t for t in args.tasks.split(",") if t]
    from pydvfs.device.table import board

    board(args.board)  # a known id, or a clear error
    with tempfile.TemporaryDirectory() as tmp:
        if args.data:
            data, source = Path(args.data), Path(args.data).name
        else:
            data, source = Path(tmp) / "sim.csv", f"simulated AGX Orin characterisation (seed {args.seed})"
            simulated_dataset(data, args.seed)
        curves = curves_from_frame(read_dataset(data), tasks=tasks)
        prov = provenance(data, source)
    best, per_set = select_tree(curves)
    params = {k: v for k, v in best.params.items() if k != "features"}
    feats = FEATURE_SETS[best.params["features"]]
    clf = Classifier("tree", tree_maker(**params), feats).fit(curves).model
    ffg = FixedClock().fit(curves).mhz
    # the board and clock table the tree is trained on (docs/policy.md, "On another board")
    levels = sorted({f for c in curves for f in c.freqs_mhz})
    code = tree_to_c(clf, feats, default_util(curves), ffg,
                     name=f"builtin: {source}, tasks {'/'.join(tasks)}", source=source, provenance=prov,
                     classes_mhz=classes_mhz(clf), board_id=args.board, levels_mhz=levels)
    Path(args.out).write_text(code)
    print(f"{args.out}: tree {params} on {best.params['features']} features, {len(curves)} workloads; "
          f"LOOCV accuracy {best.accuracy:.2f}, mean regret {best.mean_regret_pct:.2f} %; FFG {ffg:g} MHz")
    for name, s in per_set.items():
        print(f"  {name:9s} features: mean regret {s.mean_regret_pct:.2f} % ({s.params})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Generate the built-in policies: one decision tree per board of the table and energy measure.

For every board of pydvfs/data/boards.json that has a simulator profile (pydvfs/sim/profiles.py)
and every measure of pydvfs/energy.py (module, the default, and cpu-gpu), it simulates the
board's characterisation sweep (every paper model on the characterisation tasks, full fp32, and
every supervised fine-tuning decoder of issue 28 with each training method of the catalogue,
full / LoRA / QLoRA x fp32 / bf16, on one characterisation task each, in turn: sft_pairs() x
every GPU level of the board's table + MAXN, seeded noise, ``--repeats`` repeats), trains the
tree as `pydvfs train` does (the method features set of train.FEATURE_SETS, so that the tree sees
how a workload trains; hyper-parameters by leave-one-out CV, shipped only where it beats the best
fixed clock beyond the noise), and records what each decision is expected to save against MAXN (per class: the mean
and spread of the saving at the class clock of the training workloads the tree sends there).

    python tools/gen_policies.py            # or `make policies`: rewrite the C and the manifests
    python tools/gen_policies.py --docs     # docs/policy.md's table, scored by the compiled
                                            # policies (rebuild the extension first)
    python tools/gen_policies.py --check    # exit 1 where docs/policy.md's table is stale

Writes govcore/policies_builtin.c (compiled into govcore and the extension) and
docs/policy-builtin.json (each policy's manifest: board, JetPack clock table, measure, training
data, calibrated or estimate, the choice of tree and its LOOCV scores). Reproducible: the same
seed gives the same files.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUT_C = REPO / "govcore" / "policies_builtin.c"
OUT_JSON = REPO / "docs" / "policy-builtin.json"
DOC = REPO / "docs" / "policy.md"
BEGIN, END = "<!-- BEGIN generated:builtin-policies -->", "<!-- END generated:builtin-policies -->"
FALLBACK_BOARD = "agx-orin"  # a board the table does not know gets this board's policy, mapped
REPEATS = 3
SEED = 0
ORIGIN = "built-in"  # GC_ORIGIN_BUILTIN (govcore/policy.h)
# The trees see how a workload trains (pydvfs/policy/features.py METHOD_FEATURES), beside the
# paper's and the roofline features: a LoRA bf16 job and a full fp32 one may get different clocks.
FEATURE_SET = "method"


def sft_pairs(tasks) -> list[tuple[str, str]]:
    """The decoders' (model, task) pairs of the training sweep: each decoder on one of ``tasks``
    in turn, so that every decoder and every task is covered while the LOOCV, quadratic in the
    number of workloads, stays affordable (the decoders' method variants, not their tasks, are
    what moves their optimum: docs/finetune.md)."""
    from pydvfs.sim.workloads import SFT_MODELS

    return [(m, tasks[i % len(tasks)]) for i, m in enumerate(SFT_MODELS)]


def sweep(out: Path, board_id: str, tasks, repeats: int, seed: int) -> int:
    """The board's training sweep: the paper's models, full fp32, and the decoders' pairs with
    every training method of the catalogue (full / LoRA / QLoRA x fp32 / bf16)."""
    from pydvfs.dataset import write_rows
    from pydvfs.sim.sweep import sweep_rows
    from pydvfs.sim.workloads import METHODS

    kw = {"board": board_id, "repeats": repeats, "seed": seed}
    sft = (sweep_rows(models=[m], tasks=[t], methods=list(METHODS), **kw) for m, t in sft_pairs(tasks))
    return write_rows(out, itertools.chain(sweep_rows(tasks=tasks, **kw), *sft))


def train_one(board_id: str, measure: str, data: Path, source: str, tasks) -> dict:
    from pydvfs.energy import COLUMN
    from pydvfs.policy.curves import curves_from_frame, read_dataset
    from pydvfs.policy.train import (
        FEATURE_SETS,
        GATE_TREE,
        Classifier,
        FixedClock,
        classes_mhz,
        default_util,
        expected_savings,
        gate_fixed_clock,
        loocv,
        paired_test,
        score,
        select_tree,
        tree_maker,
    )

    curves = curves_from_frame(read_dataset(data), COLUMN[measure], tasks=tasks)
    best, _ = select_tree(curves, (FEATURE_SET,))
    ffg_score = score("ffg (best fixed clock)", curves, loocv(FixedClock, curves))
    test = paired_test(curves, best, ffg_score)
    params = {k: v for k, v in best.params.items() if k != "features"}
    feats = FEATURE_SETS[best.params["features"]]
    chooser = Classifier("tree", tree_maker(**params), feats).fit(curves)
    ffg = FixedClock().fit(curves).mhz
    shipped = "tree" if test["significant"] and chooser.constant is None else "ffg"
    gated = None if shipped == "tree" else gate_fixed_clock(curves, ffg, feats)
    if gated is not None:  # FFG, left at MAXN where it does not clearly save
        shipped, chooser = "ffg, gated", gated
    if shipped != "ffg":
        classes = classes_mhz(chooser.model)
        choices = [chooser.choose(c) for c in curves]
    else:
        classes = [ffg]
        choices = [ffg] * len(curves)
    knows = expected_savings(curves, choices, classes, ffg)
    chosen = best if shipped == "tree" else ffg_score
    oracle = statistics.fmean(c.saving_vs_maxn(c.best_mhz) * 100 for c in curves)
    return {"curves": curves, "chooser": chooser, "feats": feats, "ffg": ffg, "shipped": shipped,
            "classes": classes, "util": default_util(curves),
            "meta": {"features": list(feats),
                     "tree_params": params if shipped == "tree" else GATE_TREE if shipped != "ffg" else None,
                     "shipped": shipped, "ship_test": {k: test[k] for k in ("p_value", "better", "worse", "ties")},
                     "ffg_mhz": ffg, "classes_mhz": classes, **knows, "n_workloads": len(curves),
                     "loocv": {"policy": chosen.name, "mean_regret_pct": chosen.mean_regret_pct,
                               "max_regret_pct": chosen.max_regret_pct,
                               "mean_saving_pct": chosen.mean_saving_pct, "oracle_saving_pct": oracle}}}


def c_name(board_id: str, measure: str) -> str:
    return "gcp_" + f"{board_id}_{measure}".replace("-", "_") + "_"


def generate(repeats: int, seed: int, only=None) -> tuple[str, dict]:
    from pydvfs.boards import boards
    from pydvfs.energy import DEFAULT_MEASURE, LABEL, MEASURES
    from pydvfs.policy.export import CONSTANT_BODY, _c_string, _model_c, m2cgen_version, tree_body
    from pydvfs.sim.profiles import board_ids, profile
    from pydvfs.sim.workloads import CHARACTERISATION_TASKS, METHODS, PAPER_MODELS

    assert MEASURES[0] == DEFAULT_MEASURE  # gc_energy_measures[0] is the default
    table = [b for b in boards() if b in board_ids() and (not only or b in only)]
    blocks, entries, manifests = [], [], {}
    for board_id in table:
        row, prof = boards()[board_id], profile(board_id)
        kind = "calibrated" if prof.calibrated else "estimate"
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "sweep.csv"
            sweep(data, board_id, CHARACTERISATION_TASKS, repeats, seed)
            sha = hashlib.sha256(data.read_bytes()).hexdigest()
            pairs = sft_pairs(CHARACTERISATION_TASKS)
            source = (f"simulated {row.name} characterisation ({kind} profile; seed {seed}, {repeats} repeats; "
                      f"tasks {'/'.join(CHARACTERISATION_TASKS)}; {len(pairs)} decoders x "
                      f"{len(METHODS)} training methods)")
            for measure in MEASURES:
                r = train_one(board_id, measure, data, source, CHARACTERISATION_TASKS)
                m = r["meta"]
                name = (f"builtin: {row.name}, {LABEL[measure]} energy, JetPack "
                        f"{'/'.join(map(str, row.jetpack))} clock table ({kind})")
                prov = {"data_file": source, "data_sha256": sha, "trained_utc": f"seeded (seed {seed})"}
                knows = {"origin": ORIGIN, "measure": measure, "calibrated": prof.calibrated,
                         "class_saving_pct": m["class_saving_pct"], "class_spread_pct": m["class_spread_pct"],
                         "ffg_saving_pct": m["ffg_saving_pct"], "ffg_spread_pct": m["ffg_spread_pct"]}
                if r["shipped"] != "ffg":
                    body, classes = tree_body(r["chooser"].model, r["feats"], r["classes"])
                else:
                    body, classes = CONSTANT_BODY, [r["ffg"]]
                prefix = c_name(board_id, measure)
                blocks.append(_model_c(body, r["feats"], classes, r["util"], r["ffg"], name, "", prov,
                                       board_id, row.gpu_levels_mhz, prefix=prefix, knows=knows))
                entries.append(f"    {{{_c_string(board_id)}, {_c_string(measure)}, &{prefix}tree}},")
                manifests[f"{board_id}/{measure}"] = {
                    "board": board_id, "board_name": row.name, "jetpack": list(row.jetpack),
                    "levels_mhz": list(row.gpu_levels_mhz), "measure": measure, "calibrated": prof.calibrated,
                    "origin": ORIGIN, "name": name,
                    "data": {"source": source, "sha256": sha, "seed": seed, "repeats": repeats,
                             "tasks": list(CHARACTERISATION_TASKS), "models": list(PAPER_MODELS),
                             "sft_pairs": [list(p) for p in pairs], "sft_methods": list(METHODS)},
                    **m}
                print(f"{board_id:16s} {measure:8s} {m['shipped']:4s} classes {m['classes_mhz']} "
                      f"LOOCV regret {m['loocv']['mean_regret_pct']:.2f} % saving {m['loocv']['mean_saving_pct']:.2f} % "
                      f"(oracle {m['loocv']['oracle_saving_pct']:.2f} %)", flush=True)
    head = [f"/* GENERATED by tools/gen_policies.py (m2cgen {m2cgen_version()}; seed {seed}, {repeats} repeats) "
            "from pydvfs/data/boards.json, pydvfs/energy.py, pydvfs/policy/features.py and the boards'",
            " * simulator profiles. Do not edit: regenerate instead (`make policies`). */",
            "", "#include <string.h>", '#include "policy.h"', ""]
    tail = ["", "const gc_builtin_policy gc_builtin_policies[] = {", *entries, "};",
            "const int gc_n_builtin_policies = (int)(sizeof gc_builtin_policies / sizeof gc_builtin_policies[0]);",
            "const char *const gc_energy_measures[] = {" + ", ".join(_c_string(x) for x in MEASURES) + ", NULL};",
            f"const char gc_builtin_fallback_board[] = {_c_string(FALLBACK_BOARD)};", ""]
    return "\n".join(head + blocks + tail), manifests


# ------------------------------------------------------------------ the docs' table
def evaluate(manifests: dict) -> list[dict]:
    """Each built-in policy as compiled, applied (dry run) on a fake layout of its board to the
    catalogue's held-out workloads (every model on the evaluation tasks), scored on the
    board's simulator without noise: saving vs MAXN, regret vs the best level, worst case."""
    from pydvfs.sim.policy_score import evaluate_builtin

    return [evaluate_builtin(m["board"], m["measure"]) | {"calibrated": m["calibrated"],
                                                          "board_name": m["board_name"],
                                                          "shipped": m["shipped"]}
            for m in manifests.values()]


def share(r: dict) -> str:
    """The share of the best clock's saving; none where the best clock saves next to nothing."""
    if r["best_saving_pct"] < 0.5:
        return f"- (the best clock saves {r['best_saving_pct']:.2f} %)"
    return f"{r['share_of_best_pct']:.1f} %"


def markdown(rows: list[dict]) -> str:
    from pydvfs.energy import LABEL

    out = [BEGIN, "",
           "| board | measure | profile | policy | held-out workloads | saving vs MAXN | share of best | "
           "regret (mean / max) | worst vs MAXN | left at MAXN |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['board_name']} | {LABEL[r['measure']]} | {'calibrated' if r['calibrated'] else 'estimate'} | "
                   f"{r['shipped']} | {r['n']} | {r['saving_pct']:.2f} % | {share(r)} | "
                   f"{r['regret_pct']:.2f} % / {r['max_regret_pct']:.2f} % | {r['worst_vs_maxn_pct']:+.2f} % | "
                   f"{r['left_at_maxn']} |")
    out += ["", END]
    return "\n".join(out)


def doc_with(table: str) -> str:
    text = DOC.read_text()
    a, b = text.index(BEGIN), text.index(END) + len(END)
    return text[:a] + table + text[b:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--docs", action="store_true", help="rewrite docs/policy.md's table from the compiled policies")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/policy.md's table is stale")
    args = ap.parse_args(argv)
    if args.docs or args.check:
        manifests = json.loads(OUT_JSON.read_text())
        table = markdown(evaluate(manifests))
        if args.check:
            if doc_with(table) != DOC.read_text():
                print(f"{DOC} is stale: run `python tools/gen_policies.py --docs`", file=sys.stderr)
                return 1
            return 0
        DOC.write_text(doc_with(table))
        print(table)
        return 0
    t0 = time.monotonic()
    code, manifests = generate(args.repeats, args.seed)
    OUT_C.write_text(code)
    OUT_JSON.write_text(json.dumps(manifests, indent=1) + "\n")
    print(f"wrote {OUT_C.relative_to(REPO)} and {OUT_JSON.relative_to(REPO)} in {time.monotonic() - t0:.0f} s: "
          "rebuild (make ext binary), then `python tools/gen_policies.py --docs`")
    return 0


if __name__ == "__main__":
    sys.exit(main())

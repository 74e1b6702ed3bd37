#!/usr/bin/env python3
"""Generate the built-in policies: one decision tree per board of the table and energy measure.

For every board of pydvfs/data/boards.json that has a simulator profile (pydvfs/sim/profiles.py)
and every measure of pydvfs/measure/energy.py (module, the default, and cpu-gpu), it simulates the
board's characterisation sweep (every paper model on the characterisation tasks, full fp32, and
every supervised fine-tuning decoder of issue 28 with each training method of the catalogue,
full / LoRA / QLoRA x fp32 / bf16, on one characterisation task each, in turn: sft_pairs() x
every GPU level of the board's table + MAXN, seeded noise, ``--repeats`` repeats), takes each
workload's curve as the worst case of the board's uncertainty family (pydvfs/sim/uncertainty.py:
:func:`worst_case_curves`), trains the tree on them as `pydvfs train` does (the method features
set of train.FEATURE_SETS, so that the tree sees how a workload trains; hyper-parameters by
leave-one-out CV, shipped only where it beats the best fixed clock beyond the noise), re-chooses
each class's clock for the family's worst member, MAXN unless it saves there
(:func:`robust_classes`), and records what each decision is expected to save against MAXN (per
class: the mean and spread of the saving at the class clock of the training workloads the tree
sends there; and the range across the family).

    python tools/gen_policies.py            # or `make policies`: rewrite the C and the manifests
    python tools/gen_policies.py --boards B # only these boards, printed, nothing written
    python tools/gen_policies.py --docs     # docs/policy.md's tables, scored by the compiled
                                            # policies (rebuild the extension first)
    python tools/gen_policies.py --ranges-c # govcore/gen_policy_ranges.c from policy-ranges.json
    python tools/gen_policies.py --check    # exit 1 where docs/policy.md's held-out table is stale
    python tools/gen_policies.py --family-baseline  # score the compiled policies on their families
                                            # into docs/policy-family-baseline.json (the "before")

Writes govcore/gen_policies_builtin.c (compiled into govcore and the extension),
docs/policy-builtin.json (each policy's manifest: board, JetPack clock table, measure, training
data, calibrated or estimate, the choice of tree and its LOOCV scores, the classes' clocks on the
default simulator and against the family), pydvfs/data/policy-ranges.json (each class's
saving range across the family) and govcore/gen_policy_ranges.c (those ranges compiled in, what
both front ends' `apply` says: ``--ranges-c`` rewrites it from the JSON alone). Reproducible:
the same seed gives the same files.
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

OUT_C = REPO / "govcore" / "gen_policies_builtin.c"
OUT_JSON = REPO / "docs" / "policy-builtin.json"
OUT_RANGES = REPO / "pydvfs" / "data" / "policy-ranges.json"  # each class's saving range across the family
OUT_RANGES_C = REPO / "govcore" / "gen_policy_ranges.c"  # the same, compiled in: what apply --json says
DOC = REPO / "docs" / "policy.md"
BEGIN, END = "<!-- BEGIN generated:builtin-policies -->", "<!-- END generated:builtin-policies -->"
FAMILY_BEGIN, FAMILY_END = "<!-- BEGIN generated:builtin-family -->", "<!-- END generated:builtin-family -->"
# the policies of before they were trained against the family (commit 6f70544), scored by
# `--family-baseline` with that build: the "before" columns of docs/policy.md's family table
FAMILY_BASELINE = REPO / "docs" / "policy-family-baseline.json"
FALLBACK_BOARD = "agx-orin"  # a board the table does not know gets this board's policy, mapped
REPEATS = 3
SEED = 0
# A class's clock must hold for the workloads the tree sends there on any member of the family,
# and for those near them (robust_classes): utilisation and sequence length moved this much.
NEAR_UTIL_PCT = (-5.0, 0.0, 5.0)
NEAR_SEQ_FACTOR = (1 / 1.5, 1.0, 1.5)
# The trees see how a workload trains (pydvfs/model/features.py METHOD_FEATURES), beside the
# paper's and the roofline features: a LoRA bf16 job and a full fp32 one may get different clocks.
FEATURE_SET = "method"


def sft_pairs(tasks) -> list[tuple[str, str]]:
    """The decoders' (model, task) pairs of the training sweep: each decoder on one of ``tasks``
    in turn, so that every decoder and every task is covered while the LOOCV, quadratic in the
    number of workloads, stays affordable (the decoders' method variants, not their tasks, are
    what moves their optimum: docs/finetune.md)."""
    from pydvfs.sim.catalogue import SFT_MODELS

    return [(m, tasks[i % len(tasks)]) for i, m in enumerate(SFT_MODELS)]


def sweep(out: Path, board_id: str, tasks, repeats: int, seed: int) -> int:
    """The board's training sweep: the paper's models, full fp32, and the decoders' pairs with
    every training method of the catalogue (full / LoRA / QLoRA x fp32 / bf16)."""
    from pydvfs.characterise.dataset import write_rows
    from pydvfs.sim.catalogue import METHODS
    from pydvfs.sim.sweep import sweep_rows

    kw = {"board": board_id, "repeats": repeats, "seed": seed}
    sft = (sweep_rows(models=[m], tasks=[t], methods=list(METHODS), **kw) for m, t in sft_pairs(tasks))
    return write_rows(out, itertools.chain(sweep_rows(tasks=tasks, **kw), *sft))


def robust_classes(measure: str, curves, classes, choose, truths: dict) -> tuple[list, list, list]:
    """Each class's clock re-chosen against the board's uncertainty family (``truths``: member ->
    each curve's noise-free truth on it): the clock with the best mean saving on the family's
    worst member over the training workloads the tree sends to the class
    (:func:`pydvfs.policy.score.robust_clock`), MAXN unless that worst case saves. A
    workload's utilisation at MAXN differs from member to member, and with it the tree's choice:
    on each member the class holds the workloads the tree sends there with that member's
    utilisation, and with the utilisation +-5 points and the sequence length x/1.5 (the
    neighbourhood a task not trained on falls in: ``NEAR_UTIL_PCT``, ``NEAR_SEQ_FACTOR``)
    (``choose(curve)``: the tree's clock, None for MAXN). A class the tree sends no
    workload to on any member keeps MAXN. Returns the classes' clocks (0.0: MAXN), the workloads' new choices
    (the default member's utilisation) and each class's record (clock, candidate, saving range)."""
    from dataclasses import replace

    from pydvfs.policy.score import robust_clock
    from pydvfs.policy.train import class_to_mhz, mhz_to_class

    def classes_near(c, util):  # the member's utilisation, and a neighbourhood of unseen tasks
        return {mhz_to_class(choose(replace(c, workload=replace(c.workload, util_pct=min(100.0, max(0.0, util + du)),
                                                                seq_len=c.workload.seq_len * ds))))
                for du in NEAR_UTIL_PCT for ds in NEAR_SEQ_FACTOR}

    routed = {m: [classes_near(c, t.workload["util_pct"]) for c, t in zip(curves, ts)] for m, ts in truths.items()}
    new, records, moved = [], [], {}
    for k in classes:
        cls = mhz_to_class(class_to_mhz(round(float(k) * 1000.0)))
        groups = {m: [t for t, r in zip(ts, routed[m]) if cls in r] for m, ts in truths.items()}
        n = sum(map(len, groups.values()))
        if float(k) == 0.0 or not n:  # MAXN on the family's worst case already; or no training
            # workload reaches the class on any member: nothing says what its clock saves
            rec = {"mhz": None, "candidate_mhz": None, "range_pct": [0.0, 0.0], "worst_pct": 0.0}
        else:
            rec = robust_clock({m: g for m, g in groups.items() if g}, measure)
        new.append(rec["mhz"] or 0.0)
        records.append({"default_mhz": float(k) or None, **rec, "member_workloads": n})
        moved[cls] = rec["mhz"]
    return new, [moved[mhz_to_class(choose(c))] for c in curves], records


def worst_case_curves(curves, measure: str, truths: dict) -> list:
    """Each measured curve as the board's uncertainty family's worst case: at every level, the
    largest energy relative to MAXN's over the members (``truths``: member -> curve name ->
    noise-free truth), times the measured MAXN energy; MAXN's noise kept. The labels (the best
    level, MAXN where it does not clearly save) are then those of the family's worst member."""
    from dataclasses import replace

    out = []
    for c in curves:
        ts = [t[c.name] for t in truths.values()]
        rel = [max(1.0 + t.vs_maxn_pct(measure, f) / 100.0 for t in ts) for f in c.freqs_mhz]
        out.append(replace(c, energy_j=tuple(r * c.maxn_energy_j for r in rel), fit=None, time_s=None))
    return out


def train_one(board_id: str, measure: str, data: Path, source: str, tasks, truths: dict) -> dict:
    from pydvfs.measure.energy import COLUMN
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

    measured = curves_from_frame(read_dataset(data), COLUMN[measure], tasks=tasks)
    curves = worst_case_curves(measured, measure, truths)
    best, _ = select_tree(curves, (FEATURE_SET,))
    ffg_score = score("ffg (best fixed clock)", curves, loocv(FixedClock, curves))
    test = paired_test(curves, best, ffg_score)
    params = {k: v for k, v in best.params.items() if k != "features"}
    feats = FEATURE_SETS[best.params["features"]]
    chooser = Classifier("tree", tree_maker(**params), feats).fit(curves)
    # the ffg policy's clock (and the online search's centre where mlg keeps MAXN): the best fixed
    # clock of the board's own simulator; what it saves (the gate) is still the family's worst case
    ffg = FixedClock().fit(measured).mhz
    shipped = "tree" if test["significant"] and chooser.constant is None else "ffg"
    gated = None if shipped == "tree" else gate_fixed_clock(curves, ffg, feats)
    if gated is not None:  # FFG, left at MAXN where it does not clearly save
        shipped, chooser = "ffg, gated", gated
    classes = classes_mhz(chooser.model) if shipped != "ffg" else [ffg]
    default_classes = list(classes)
    choose = chooser.choose if shipped != "ffg" else (lambda c: ffg)
    classes, choices, robust = robust_classes(measure, curves, classes, choose,
                                              {m: [ts[c.name] for c in curves] for m, ts in truths.items()})
    knows = expected_savings(curves, choices, classes, ffg)
    chosen = best if shipped == "tree" else ffg_score
    oracle = statistics.fmean(c.saving_vs_maxn(c.best_mhz) * 100 for c in curves)
    return {"curves": curves, "chooser": chooser, "feats": feats, "ffg": ffg, "shipped": shipped,
            "classes": classes, "util": default_util(curves), "robust": robust,
            "meta": {"features": list(feats), "default_classes_mhz": default_classes, "robust_classes": robust,
                     "tree_params": params if shipped == "tree" else GATE_TREE if shipped != "ffg" else None,
                     "shipped": shipped, "ship_test": {k: test[k] for k in ("p_value", "better", "worse", "ties")},
                     "ffg_mhz": ffg, "classes_mhz": classes, **knows, "n_workloads": len(curves),
                     "loocv": {"policy": chosen.name, "mean_regret_pct": chosen.mean_regret_pct,
                               "max_regret_pct": chosen.max_regret_pct,
                               "mean_saving_pct": chosen.mean_saving_pct, "oracle_saving_pct": oracle}}}


def c_name(board_id: str, measure: str) -> str:
    return "gcp_" + f"{board_id}_{measure}".replace("-", "_") + "_"


def generate(repeats: int, seed: int, only=None) -> tuple[str, dict]:
    from pydvfs.device.table import boards
    from pydvfs.measure.energy import COLUMN, DEFAULT_MEASURE, LABEL, MEASURES
    from pydvfs.policy.apply import BUILTIN_ORIGIN as ORIGIN
    from pydvfs.policy.curves import curves_from_frame, read_dataset
    from pydvfs.policy.score import family_truths
    from pydvfs.policy.to_c import CONSTANT_BODY, _c_string, _model_c, m2cgen_version, tree_body
    from pydvfs.sim.catalogue import CHARACTERISATION_TASKS, METHODS, PAPER_MODELS
    from pydvfs.sim.profiles import board_ids, profile
    from pydvfs.sim.uncertainty import family

    assert MEASURES[0] == DEFAULT_MEASURE  # gc_energy_measures[0] is the default
    table = [b for b in boards() if b in board_ids() and (not only or b in only)]
    blocks, entries, manifests, ranges = [], [], {}, {}
    for board_id in table:
        row, prof = boards()[board_id], profile(board_id)
        kind = "calibrated" if prof.calibrated else "estimate"
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "sweep.csv"
            sweep(data, board_id, CHARACTERISATION_TASKS, repeats, seed)
            sha = hashlib.sha256(data.read_bytes()).hexdigest()
            pairs = sft_pairs(CHARACTERISATION_TASKS)
            members = family(board_id)
            names = [c.name for c in curves_from_frame(read_dataset(data), COLUMN[DEFAULT_MEASURE],
                                                         tasks=CHARACTERISATION_TASKS)]
            truths = {m: dict(zip(names, ts)) for m, ts in family_truths(board_id, names, members).items()}
            source = (f"simulated {row.name} characterisation ({kind} profile; seed {seed}, {repeats} repeats; "
                      f"tasks {'/'.join(CHARACTERISATION_TASKS)}; {len(pairs)} decoders x "
                      f"{len(METHODS)} training methods)")
            for measure in MEASURES:
                r = train_one(board_id, measure, data, source, CHARACTERISATION_TASKS, truths)
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
                    body, classes = CONSTANT_BODY, r["classes"]
                ranges[f"{board_id}/{measure}"] = {"profile": kind, "family": [mb.name for mb in members],
                                                   "classes": r["robust"],
                                                   "trained_util_min_pct": trained_util_min(r["curves"])}
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
                print(f"{board_id:16s} {measure:8s} {m['shipped']:4s} classes {m['default_classes_mhz']} -> "
                      f"{m['classes_mhz']} (robust) "
                      f"LOOCV regret {m['loocv']['mean_regret_pct']:.2f} % saving {m['loocv']['mean_saving_pct']:.2f} % "
                      f"(oracle {m['loocv']['oracle_saving_pct']:.2f} %)", flush=True)
    head = [f"/* GENERATED by tools/gen_policies.py (m2cgen {m2cgen_version()}; seed {seed}, {repeats} repeats) "
            "from pydvfs/data/boards.json, pydvfs/measure/energy.py, pydvfs/model/features.py and the boards'",
            " * simulator profiles. Do not edit: regenerate instead (`make policies`). */",
            "", "#include <string.h>", '#include "policy.h"', ""]
    tail = ["", "const gc_builtin_policy gc_builtin_policies[] = {", *entries, "};",
            "const int gc_n_builtin_policies = (int)(sizeof gc_builtin_policies / sizeof gc_builtin_policies[0]);",
            "const char *const gc_energy_measures[] = {" + ", ".join(_c_string(x) for x in MEASURES) + ", NULL};",
            f"const char gc_builtin_fallback_board[] = {_c_string(FALLBACK_BOARD)};", ""]
    return "\n".join(head + blocks + tail), manifests, ranges


def trained_util_min(curves) -> float:
    """The least GPU load at MAXN among the training workloads (%, to 0.01): a built-in leaves a
    workload more host-bound than that to the board's own governor (govcore/policy.h, enum gc_kept)."""
    return round(min(c.workload.util_pct for c in curves if c.workload.util_pct is not None), 2)


def ranges_c(ranges: dict) -> str:
    """govcore/gen_policy_ranges.c (gc_builtin_saving_ranges, govcore/policy.h) from the ranges
    ``generate`` computes (pydvfs/data/policy-ranges.json): per board and measure, each class
    clock (not MAXN's) with its [worst, best] member's saving, rounded to 0.01 % as `apply`
    gives it, and the least GPU load the training workloads had (:func:`trained_util_min`). Both front ends read this table (gc_saving_range); the JSON keeps the rest of the
    record (the family's members, candidates, workload counts)."""
    from pydvfs.policy.to_c import _c_double, _c_string

    blocks, entries = [], []
    for key, entry in ranges.items():
        board_id, measure = key.split("/")
        rows = [f"    {{{_c_double(c['mhz'])}, {{{_c_double(round(c['range_pct'][0], 2))}, "
                f"{_c_double(round(c['range_pct'][1], 2))}}}}}," for c in entry["classes"] if c["mhz"] is not None]
        name = "gcr_" + f"{board_id}_{measure}".replace("-", "_") + "_"
        if rows:
            blocks += [f"static const gc_builtin_range {name}[] = {{", *rows, "};"]
        entries.append(f"    {{{_c_string(board_id)}, {_c_string(measure)}, {len(rows)}, {name if rows else 'NULL'}, "
                       f"{_c_double(entry['trained_util_min_pct'])}}},")
    head = ["/* GENERATED by tools/gen_policies.py from pydvfs/data/policy-ranges.json (written by the same",
            " * run). Do not edit: `make policies`, or `python tools/gen_policies.py --ranges-c` from the JSON. */",
            "", "#include <stddef.h>", '#include "policy.h"', ""]
    tail = ["", "const gc_builtin_ranges gc_builtin_saving_ranges[] = {", *entries, "};",
            "const int gc_n_builtin_saving_ranges =",
            "    (int)(sizeof gc_builtin_saving_ranges / sizeof gc_builtin_saving_ranges[0]);", ""]
    return "\n".join(head + blocks + tail)


# ------------------------------------------------------------------ the docs' table
def evaluate(manifests: dict) -> list[dict]:
    """Each built-in policy as compiled, applied (dry run) on a fake layout of its board to the
    catalogue's held-out workloads (every model on the evaluation tasks), scored on the
    board's simulator without noise: saving vs MAXN, regret vs the best level, worst case."""
    from pydvfs.policy.score import evaluate_builtin

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
    from pydvfs.measure.energy import LABEL

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


def evaluate_families(manifests: dict) -> list[dict]:
    """Each built-in policy as compiled, scored on every member of its board's uncertainty family
    (:func:`pydvfs.policy.score.evaluate_family`)."""
    from pydvfs.policy.score import evaluate_family

    return [evaluate_family(m["board"], m["measure"]) for m in manifests.values()]


def family_markdown(rows: list[dict], before: list[dict], manifests: dict) -> str:
    from pydvfs.measure.energy import LABEL

    old = {(r["board"], r["measure"]): r for r in before}

    def cells(r):
        return (f"{share(r['default'])} | {share(r['worst'])} ({r['worst']['member']}) | "
                f"{r['max_vs_maxn_pct']:+.2f} %")

    out = [FAMILY_BEGIN, "",
           "| board | measure | profile | share of best, default member | share of best, worst member | "
           "worst vs MAXN, any member | before: default | before: worst member | before: worst vs MAXN |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = manifests[f"{r['board']}/{r['measure']}"]
        o = old.get((r["board"], r["measure"]))
        out.append(f"| {m['board_name']} | {LABEL[r['measure']]} | {'calibrated' if m['calibrated'] else 'estimate'} | "
                   f"{cells(r)} | {cells(o) if o else '- | - | -'} |")
    out += ["", FAMILY_END]
    return "\n".join(out)


def doc_with(table: str, begin: str = BEGIN, end: str = END, text: str | None = None) -> str:
    text = DOC.read_text() if text is None else text
    a, b = text.index(begin), text.index(end) + len(end)
    return text[:a] + table + text[b:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--boards", nargs="+", help="only these boards, printing what would be written (development)")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/policy.md's table from the compiled policies")
    ap.add_argument("--family-baseline", action="store_true",
                    help="score the compiled policies on their families into " + str(FAMILY_BASELINE.relative_to(REPO)))
    ap.add_argument("--ranges-c", action="store_true",
                    help="rewrite only " + str(OUT_RANGES_C.relative_to(REPO)) + " from "
                    + str(OUT_RANGES.relative_to(REPO)) + " (no training: milliseconds)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/policy.md's held-out table is stale (not the family's: minutes)")
    args = ap.parse_args(argv)
    if args.family_baseline:
        FAMILY_BASELINE.write_text(json.dumps(evaluate_families(json.loads(OUT_JSON.read_text())), indent=1) + "\n")
        print(f"wrote {FAMILY_BASELINE.relative_to(REPO)}")
        return 0
    if args.ranges_c:
        OUT_RANGES_C.write_text(ranges_c(json.loads(OUT_RANGES.read_text())))
        print(f"wrote {OUT_RANGES_C.relative_to(REPO)}: rebuild (make ext binary)")
        return 0
    if args.check:  # the held-out table (the family's takes minutes: `--docs` rewrites it)
        table = markdown(evaluate(json.loads(OUT_JSON.read_text())))
        if doc_with(table) != DOC.read_text():
            print(f"{DOC} is stale: run `python tools/gen_policies.py --docs`", file=sys.stderr)
            return 1
        return 0
    if args.docs:
        manifests = json.loads(OUT_JSON.read_text())
        table = markdown(evaluate(manifests))
        fam = family_markdown(evaluate_families(manifests), json.loads(FAMILY_BASELINE.read_text()), manifests)
        DOC.write_text(doc_with(fam, FAMILY_BEGIN, FAMILY_END, doc_with(table)))
        print(table)
        print(fam)
        return 0
    t0 = time.monotonic()
    code, manifests, ranges = generate(args.repeats, args.seed, args.boards)
    if args.boards:
        print(json.dumps(ranges, indent=1))
        print("--boards: nothing written (the files hold every board)")
        return 0
    OUT_C.write_text(code)
    OUT_JSON.write_text(json.dumps(manifests, indent=1) + "\n")
    OUT_RANGES.write_text(json.dumps(ranges, indent=1) + "\n")
    OUT_RANGES_C.write_text(ranges_c(ranges))
    print(f"wrote {OUT_C.relative_to(REPO)}, {OUT_RANGES_C.relative_to(REPO)} and {OUT_JSON.relative_to(REPO)} in {time.monotonic() - t0:.0f} s: "
          "rebuild (make ext binary), then `python tools/gen_policies.py --docs`")
    return 0


if __name__ == "__main__":
    sys.exit(main())

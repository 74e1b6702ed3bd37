"""The replication ledger: each claim of paper A and paper B beside our number (docs/replication.md).

Built only from a run's ``results.json`` (the demo writes it; its ``replication`` stage holds the
analyses of :mod:`pydvfs.studies.replication`): every number in the "ours" column is a value stored
there, formatted, never recomputed here. ``pydvfs report DIR`` writes it to DIR/replication.md
when the results have a replication stage (``make demo``: demo-out/replication.md); the committed
example docs/replication.md is refreshed by ``make replication-doc``.
"""
from __future__ import annotations

from pathlib import Path

from .replication import PAPER_A, PAPER_B

AGREE, DIFFER, NA = "agree", "differ", "not comparable"



def _rte_reason(rte: list[dict]) -> str:
    """Which RTE workloads make MLG trail FFG, and why (MAXN picks are the usual cause)."""
    worse = [x for x in rte if x["mlg_saving_pct"] < x["ffg_saving_pct"] - 0.5]
    if not worse:
        return "small differences spread over many workloads"
    said = "; ".join(f"{x['workload']}: MLG {'MAXN' if x['mlg_mhz'] is None else format(x['mlg_mhz'], 'g')} "
                     f"({x['mlg_saving_pct']:.1f} %) vs FFG {x['ffg_mhz']:g} ({x['ffg_saving_pct']:.1f} %)" for x in worse)
    why = ""
    if any(x["mlg_mhz"] is not None and x["ffg_mhz"] is not None and x["mlg_mhz"] < x["ffg_mhz"] for x in worse):
        why += (". The tree gives these small models a lower level than FFG's one clock: its splits were "
                "learned on training tasks of 13-53 tokens, and RTE's sequences (70 tokens, padded to 164 in a "
                "batch of 16) make each step more GPU-bound, which moves the best clock up to FFG's. Not a bug "
                "in the evaluation: a tree trained on shorter sequences extrapolates, and one OPP step costs "
                "a few points on a few small models")
    if any(x["mlg_mhz"] is None for x in worse):
        why += (". The tree sends the smallest models to MAXN, learned from their short-sequence training tasks, "
               "where they are launch-bound and a pinned clock saves too little to trust (the MAXN label); on "
               "RTE's long sequences the same model is GPU-bound with a clear U, and the tree has no "
               "sequence-length split to see it (training tasks span 13-53 tokens, RTE 70). A consequence of "
               "the labels and the training tasks, not a bug in the evaluation; the paper's own models (the "
               "primary table) agree with the paper")
    return "decided by " + said + why

# Why the simulated FSDP-vs-TP trend runs against the paper's (docs/roofline.md).
FSDP_REASON = ("the simulator's single-GPU time is a response surface t1 ~ C^0.20 M^0.60, calibrated so that "
               "the law's exponents come out as the paper's; so a larger model's compute time barely grows, "
               "while FSDP's parameter gathers grow with L d^2: the compute FSDP hides its communication behind "
               "is too short for large models, and its exposed communication share rises with size, while TP's "
               "activation all-reduces grow only with d. On real GPUs compute time grows ~linearly in FLOPs "
               "and FSDP's overlap keeps up; the simulator's time surface is the cause, not a finding")


def _f(v, spec=".1f", unit="") -> str:
    return "–" if v is None else f"{format(v, spec)}{unit}"


def _row(claim, paper, ours, where, verdict, reason="") -> dict:
    return {"claim": claim, "paper": paper, "ours": ours, "where": where, "verdict": verdict, "reason": reason}


def _saving(block: dict, pol: str = "mlg") -> str:
    """Saving with the time it costs: '12.3 % (+8.1 % time)'."""
    p = block[pol]
    return f"{_f(p['mean_saving_pct'], '.2f', ' %')} (time {_f(p['mean_time_penalty_pct'], '+.1f', ' %')})"


def paper_a_rows(part: dict, where_train: str, where_eval: str, summary: dict | None = None) -> list[dict]:
    """The paper-A claims for one table (the paper's protocol, or our extended catalogue)."""
    ev = part["evaluate"]
    rows = []
    if "configurations" in part:
        n = part["configurations"]
        rows.append(_row("model-task configurations", str(PAPER_A["configurations"]), str(n), where_train,
                         AGREE if n == PAPER_A["configurations"] else DIFFER,
                         "" if n == PAPER_A["configurations"] else "our catalogue's models differ"))
    if "selected" in part:
        acc = part["selected"]["loocv_accuracy"]
        rows.append(_row("LOOCV accuracy of the tree (exact optimal level)", f"{PAPER_A['loocv_accuracy']:.2f}",
                         f"{acc:.2f}", where_train, AGREE if abs(acc - PAPER_A["loocv_accuracy"]) <= 0.10 else DIFFER,
                         "" if abs(acc - PAPER_A["loocv_accuracy"]) <= 0.10 else
                         "labels from a simulated, noisy board; our tree's hyper-parameters are chosen by energy "
                         "regret, not accuracy; neighbouring levels differ by under 1 % near the bottom of the U"))
    lomo = part.get("lomo")
    rows.append(_row("leave-one-model-out CV accuracy (no task of the held-out model in training)",
                     "not reported", "not in this run" if not lomo else
                     f"{lomo['accuracy']:.2f} (regret {lomo['mean_regret_pct']:.2f} %, {lomo['groups']} models)",
                     where_train, NA, "the paper's LOOCV leaves out one model-task pair only"))
    a = ev["all"]
    mean = a["mlg"]["mean_saving_pct"]
    mod = part.get("module") or {}
    beside = ("" if mod.get("mean_saving_pct") is None else
              f"; module energy: {mod['mean_saving_pct']:.2f} % (the demo's own policy, report.md)")
    rows.append(_row("MLG mean CPU+GPU energy saving vs MAXN, unseen tasks", f"{PAPER_A['mlg_mean_saving_pct']} %",
                     _saving(a) + beside, where_eval, AGREE if abs(mean - PAPER_A["mlg_mean_saving_pct"]) <= 3 else DIFFER,
                     "" if abs(mean - PAPER_A["mlg_mean_saving_pct"]) <= 3 else
                     "the simulated small models save nearly as much as the large ones (rows below); the paper's "
                     "mean of 13.11 % with > 22 % above 70M implies its small models saved little or lost energy "
                     "(spiky curves on the real board, which the simulator's noise does not reproduce)"))
    if summary:
        mx = summary["mlg"]["max_saving_pct"]
        rows.append(_row("MLG max saving", f"{PAPER_A['mlg_max_saving_pct']} % (BERT-base, MNLI)",
                         f"{mx:.2f} % ({ev['max_workload']})", where_eval,
                         AGREE if abs(mx - PAPER_A["mlg_max_saving_pct"]) <= 3 else DIFFER,
                         "" if abs(mx - PAPER_A["mlg_max_saving_pct"]) <= 3 else
                         "the simulated savings of large models are flat (~23-25 %) across tasks"))
    big, small = ev["big"], ev["small"]
    bm = big["mlg"]["mean_saving_pct"]
    rows.append(_row("models > 70M parameters: mean saving", "> 22 %", f"{_saving(big)}, {big['n']} workloads",
                     where_eval, AGREE if bm is not None and bm > PAPER_A["big_mean_saving_pct"] else DIFFER,
                     "" if bm is not None and bm > PAPER_A["big_mean_saving_pct"] else
                     "calibrated to > 22 % for the best clock; MLG's choice is not always the best clock"))
    if small["n"]:
        neg = small["mlg"]["negative"]
        rows.append(_row("models <= 70M: variable, some negative savings", "positive mean, some < 0",
                         f"{_saving(small)}, {neg} of {small['n']} negative", where_eval,
                         AGREE if neg > 0 else DIFFER,
                         "" if neg > 0 else "the simulated small models' curves are less spiky than the paper's: "
                                            "CPU-interference spikes are the only source of spikes"))
    gap = ev["all"]["mlg_minus_ffg_pct"]
    rows.append(_row("MLG ahead of FFG (mean saving, points)", f"{PAPER_A['ffg_behind_mlg_pct']}",
                     f"{gap:+.2f} (FFG {_saving(a, 'ffg')})", where_eval,
                     AGREE if gap > 0 else DIFFER,
                     "" if gap > 0 else "one well-chosen fixed clock is near-optimal for most simulated workloads"))
    r = ev["rte"]
    if r["n"]:
        d = r["mlg_minus_ffg_pct"]
        rows.append(_row("MLG better than FFG on long sequences (RTE)", "MLG wins",
                         f"MLG {_saving(r)} vs FFG {_saving(r, 'ffg')} ({d:+.2f} points)", where_eval,
                         AGREE if d > 0 else DIFFER, "" if d > 0 else _rte_reason(ev["rte_workloads"])))
    return rows


def labels_rows(labels: list[dict]) -> list[str]:
    head = ["workload", "best clock (MHz)", "label (MHz)", "paper's class", "tree, held out (MHz)", "its class"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for x in labels:
        lab = "MAXN" if x["label_mhz"] is None else f"{x['label_mhz']:g}"
        tree = "MAXN" if x["tree_mhz"] is None else f"{x['tree_mhz']:g}"
        out.append(f"| {x['workload']} | {x['best_mhz']:g} | {lab} | {x['paper_class']} | {tree} | {x['tree_paper_class']} |")
    return out


def paper_b_rows(results: dict) -> list[dict]:
    rows = []
    rf = results.get("roofline", {})
    rep = results["replication"]
    for source, name in (("simulated", "simulated 8-GPU sweep"), ("a100", "real A100 (single GPU)")):
        if source not in rf:
            continue
        for group, g in rf[source]["groups"].items():
            dec = g["decomposition"]
            where = f"pydvfs roofline fit ({name}, {group})"
            rows.append(_row(f"additive decomposition E = eps_comp C + eps_mem M + E0 ({name})",
                             "fits; compute- or memory-bound by intensity",
                             f"R^2 {dec['r2']:.2f}, eps_mem {dec['eps_mem_j']:.3g} J, eps_comp {dec['eps_comp_j']:.3g} J, "
                             f"{dec['n_compute_bound']} compute- / {dec['n_memory_bound']} memory-bound",
                             where, AGREE if dec["r2"] >= 0.8 else DIFFER,
                             "" if dec["r2"] >= 0.8 else
                             ("the simulator's energy is a product of powers (P t1 / eta_h), not a sum: no additive "
                              "memory term exists for NNLS to find, so eps_mem = 0 and every run is compute-bound"
                              if dec["eps_mem_j"] == 0 else "C and M move together on these models")))
            laws = g["laws"]
            if "eta" in laws and "log_eta" in laws["eta"]["coefficients"]:
                eta, base = laws["eta"], laws["baseline"]
                rows.append(_row(f"adjusted R^2, law with eta_h ({name})", f"{PAPER_B['adj_r2_eta']}",
                                 f"{eta['adj_r2']:.3f}", where, DIFFER if eta["adj_r2"] > 0.95 else AGREE,
                                 "fitted to data generated from the law's own form (see the other-form check)"
                                 if eta["adj_r2"] > 0.95 else ""))
                rows.append(_row(f"adjusted R^2, plain power law ({name})", f"{PAPER_B['adj_r2_baseline']}",
                                 f"{base['adj_r2']:.3f}", where, AGREE if abs(base["adj_r2"] - PAPER_B["adj_r2_baseline"]) <= 0.1 else DIFFER,
                                 "" if abs(base["adj_r2"] - PAPER_B["adj_r2_baseline"]) <= 0.1 else
                                 "the simulator's noise levels set this, not a measurement"))
                ce = eta["coefficients"]
                rows.append(_row(f"compute elasticity aC ({name})", f"~{PAPER_B['a_C']:.2f}",
                                 f"{ce['log_C']['estimate']:.3f} [{ce['log_C']['ci_low']:.3f}, {ce['log_C']['ci_high']:.3f}]",
                                 where, AGREE if ce["log_C"]["ci_low"] <= PAPER_B["a_C"] <= ce["log_C"]["ci_high"] else DIFFER,
                                 "built into the simulator (t1 ~ C^0.20): recovering it checks the fit, not the claim"))
                rows.append(_row(f"efficiency exponent a_eta ({name})", f"~{PAPER_B['a_eta']:.2f}",
                                 f"{ce['log_eta']['estimate']:.3f} [{ce['log_eta']['ci_low']:.3f}, {ce['log_eta']['ci_high']:.3f}]",
                                 where, AGREE if abs(ce["log_eta"]["estimate"] - PAPER_B["a_eta"]) <= 0.1 else DIFFER,
                                 "built into the simulator (E = P t1 / eta_h: exactly -1)"))
                cut = rep["rmse_cut_pct"][source][group]
                rows.append(_row(f"RMSE cut by adding eta_h ({name})", f"{PAPER_B['rmse_cut_pct']:.0f} %",
                                 f"{cut:.0f} %", where, DIFFER if abs(cut - PAPER_B["rmse_cut_pct"]) > 10 else AGREE,
                                 "same-form data: eta_h explains the simulator's spread almost exactly"))
            elif source == "a100":
                c = laws["eta"]["coefficients"].get("log_C")
                rows.append(_row(f"adjusted R^2, the paper's law ({name}, {group}: no eta, single GPU)",
                                 f"{PAPER_B['adj_r2_eta']} (with eta)", f"{laws['eta']['adj_r2']:.3f}", where, NA,
                                 "single-GPU data: eta_h = 1, so the law is the C/M power law"))
                if c:
                    rows.append(_row(f"compute elasticity aC ({name}, {group})", f"~{PAPER_B['a_C']:.2f}",
                                     f"{c['estimate']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]", where,
                                     AGREE if c["ci_low"] <= PAPER_B["a_C"] <= c["ci_high"] else DIFFER,
                                     "C and M are nearly collinear on these small models; see docs/roofline.md"))
    o = rep["other_form"]
    rows.append(_row("the law on data from a generator of another form (additive roofline + communication)",
                     "not tested", f"adj R^2 {o['adj_r2_eta']:.3f} (plain {o['adj_r2_baseline']:.3f}), "
                     f"aC {o['a_C']:.3f}, a_eta {o['a_eta']:.3f}", "pydvfs.studies.replication.other_form_check",
                     NA, "the simulated sweep is generated from the law's own functional form; this check is not"))
    ft = rep["fsdp_vs_tp"]
    bins = ft["bins"]
    per_bin = "; ".join(f"{b['size']} ({b['params_m'][0]:.1f}-{b['params_m'][1]:.1f}M): FSDP/TP median "
                        f"{b['median_fsdp_over_tp']:.2f}, FSDP less in {b['fsdp_less_pct']:.0f} % of {b['pairs']}"
                        for b in bins)
    where = "pydvfs roofline simulate + pydvfs.studies.replication.fsdp_vs_tp"
    rows.append(_row("FSDP uses less energy than TP (same configuration and device count)", "FSDP less",
                     per_bin, where, AGREE if ft["fsdp_less_everywhere"] else DIFFER,
                     "" if ft["fsdp_less_everywhere"] else "TP's activation all-reduces are cheaper for some configurations"))
    comm = "; ".join(f"{b['size']}: FSDP {b['fsdp_comm_pct']:.0f} %, TP {b['tp_comm_pct']:.0f} %" for b in bins)
    rows.append(_row("FSDP's advantage grows with model size", "more so for larger models",
                     f"FSDP/TP medians {' -> '.join(format(b['median_fsdp_over_tp'], '.2f') for b in bins)} "
                     f"(small to large); communication share of step time: {comm}", where,
                     AGREE if ft["fsdp_gains_with_size"] else DIFFER, "" if ft["fsdp_gains_with_size"] else FSDP_REASON))
    return rows


def _table(rows: list[dict]) -> list[str]:
    head = ["claim", "paper", "ours", "computed by", "verdict", "why they differ / note"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join(str(r[k]).replace("|", "/") for k in
                                      ("claim", "paper", "ours", "where", "verdict", "reason")) + " |")
    return out


def all_rows(results: dict) -> dict:
    """{"A protocol": rows, "A extended": rows, "A other": rows, "B": rows} from results.json."""
    rep = results["replication"]
    pr = rep["protocol"]
    out = {"A protocol": paper_a_rows(pr, "pydvfs train (paper-protocol/)", "pydvfs evaluate (paper-protocol/)",
                                      pr["evaluate"]["summary"])}
    if "selected" in rep["extended"]:  # its own CPU+GPU tree (the demo's model/ is module energy)
        ext, where = rep["extended"], "paper-extended/model/"
        summary = ext["summary"]
    else:  # results from before the demo named its energy: the demo's model/ was CPU+GPU
        ext, where = {**rep["extended"], "selected": results["train"]["selected"]}, "model/"
        summary = results["evaluate"]["summary"]
    out["A extended"] = paper_a_rows(ext, f"pydvfs train ({where})", f"pydvfs evaluate ({where})", summary)
    other = []
    ch = results.get("characterise", {}).get("analysis")
    spots = rep.get("sweet_spot_range_mhz") or (ch or {}).get("sweet_spot_range_mhz")
    if spots:
        lo, hi = spots
        inside = lo >= PAPER_A["sweet_spot_mhz"][0] and hi <= PAPER_A["sweet_spot_mhz"][1]
        beside = ""
        if "sweet_spot_range_mhz" in rep and ch:
            beside = (f" (module energy: {ch['sweet_spot_range_mhz'][0]:g}-{ch['sweet_spot_range_mhz'][1]:g} MHz, "
                      "pydvfs analyse)")
        other.append(_row("CPU+GPU energy sweet spot", "510-816 MHz", f"{lo:g}-{hi:g} MHz{beside}",
                          "pydvfs.studies.replication.sweet_spot_range", AGREE if inside else DIFFER,
                          "" if inside else "see the sweep's per-workload optima"))
    hb = rep["host_bound"]
    other.append(_row("GPU util <= 22 % -> 1020 MHz (host-bound workloads)", "1020 MHz",
                      f"{hb['low_util']} workloads at <= {hb['util_threshold_pct']:g} %: best clocks {', '.join(f'{x:g}' for x in hb['low_util_best_mhz'])} MHz; "
                      f"tree meets the branch: {'yes' if hb['meets_1020_branch'] else 'no'}",
                      "pydvfs sweep --sim --host-bound; tree refit with the selected hyper-parameters",
                      AGREE if hb["meets_1020_branch"] else DIFFER,
                      "" if hb["meets_1020_branch"] else
                      "in the simulator a host-bound GPU's speed barely changes the run time while a high pinned "
                      "clock still costs leakage and clock power through every host gap: its best clock is low; "
                      "CUDA's spinning wait modelled too (docs/power-modes.md): the optimum moves by at most one "
                      "level, no branch to 1020 MHz"))
    lat = rep["latency"]
    for src, label in (("simulated", "simulated Orin curves"), ("real", "real A100/A40 curves (Perseus)")):
        x = lat.get(src)
        if not x:
            continue
        exp_wins = x["exp_better"] > x["inv_better"]
        other.append(_row(f"latency vs clock is nearly exponential ({label})", "nearly exponential",
                          f"median R^2: a exp(-b f) {x['median_r2_exp']:.3f}, a/f + b {x['median_r2_inv']:.3f}; "
                          f"a/f + b fits better on {x['inv_better']} of {x['curves']} curves",
                          "pydvfs.studies.replication.latency_fits_*", AGREE if exp_wins else DIFFER,
                          "" if exp_wins else "time = clock-scaled work / f + clock-independent time: a/f + b is the "
                                              "mechanistic form; an exponential only approximates it over the range"))
    cal = rep.get("calibration")
    if cal:
        for name, c in cal.items():
            ok = abs(c["maxn_rel_err_pct"]) <= 6
            other.append(_row(f"MAXN energy of the real Orin run {name} (calibration target)",
                              "measured", f"{c['maxn_rel_err_pct']:+.1f} % off (pinned clocks RMS {c['rms_pct']:.1f} %)",
                              "tools/fit_sim_to_papers.py (stored fit)", AGREE if ok else DIFFER,
                              "" if ok else "podgov model"))
    g = rep.get("governed")
    if g:
        module = "" if g.get("saving_module_pct") is None else \
            f" ({g['saving_module_pct']:.1f} % module energy, the measure its policy minimised)"
        other.append(_row("governed run vs MAXN (animated board, C sampler)", "–",
                          f"{g['saving_pct']:.1f} % CPU+GPU energy saved{module}, {g['time_penalty_pct']:+.1f} % time",
                          "pydvfs demo (governed_run)", NA, "both numbers belong together"))
    out["A other"] = other
    out["B"] = paper_b_rows(results)
    return out


def markdown(results: dict) -> str:
    rows = all_rows(results)
    rep = results["replication"]
    pr = rep["protocol"]
    L = ["# Replication ledger: both papers, number by number", "",
         "Generated by `make demo` (`pydvfs demo`, whose report step writes it) from the run's "
         "`results.json`; every number in the *ours* column is a value of that run. Paper A: energy-"
         "optimal GPU DVFS for SLM fine-tuning on a Jetson AGX Orin (SPEC 2); paper B: a roofline-"
         "inspired energy scaling law (SPEC 3). Our board is the simulated, calibrated AGX Orin "
         "(docs/sim.md), paper B's 8-GPU node is simulated too (docs/roofline.md); real data: the "
         "A100 file and Perseus curves. Savings are against MAXN, with the time they add beside them.", "",
         "Energy in paper A's rows is **CPU+GPU** energy (VDD_CPU_CV + VDD_GPU_SOC), the paper's "
         "measure: labels, training and scores use it (`--energy cpu-gpu`), not the module's energy "
         "that pydvfs minimises by default (all the module draws; docs/boards.md) and the rest of the "
         "demo's report uses. Where the demo has the module's figure for a claim it is shown beside "
         "the CPU+GPU one, named.", "",
         "## Paper A, its own protocol (primary)", "",
         f"The paper's 27 configurations: its nine models ({', '.join(pr['models'])}) on SST-2, QNLI and "
         "MRPC for training; the same models on the six unseen tasks for evaluation.", ""]
    L += _table(rows["A protocol"]) + [""]
    L += ["## Paper A, our extended catalogue (second table)", "",
          "Adds bert-tiny, bert-mini and bert-medium to the paper's models (12 models, 36 training "
          "configurations): an extension, not the paper's protocol. A CPU+GPU tree of the demo's data "
          "(paper-extended/model/); the demo's own policy (model/) minimises the module's energy.", ""]
    L += _table(rows["A extended"]) + [""]
    L += ["## Paper A, other claims", ""] + _table(rows["A other"]) + [""]
    L += ["## Labels in the paper's encoding (paper's protocol)", "",
          "Paper: classes 1-6 = 510-1122 MHz. Six classes for the seven OPPs in that range; its rules "
          "name 510, 612, 714, 816 and 1020 MHz, so we read 1-6 as 510, 612, 714, 816, 1020, 1122 "
          "(918 MHz has no class: an inference). \"none\" = outside the paper's classes; MAXN = our "
          "extra class for curves too spiky to trust their best clock.", ""]
    L += labels_rows(pr["labels"]) + [""]
    rte = pr["evaluate"]["rte_workloads"]
    if rte:
        L += ["## RTE, workload by workload (paper's protocol)", "",
              "| workload | best clock | MLG clock | MLG saving | FFG clock | FFG saving |", "|---|---|---|---|---|---|"]
        L += [f"| {x['workload']} | {'MAXN' if x['oracle_mhz'] is None else format(x['oracle_mhz'], 'g')} | {_f(x['mlg_mhz'], 'g')} | {x['mlg_saving_pct']:.2f} % | "
              f"{_f(x['ffg_mhz'], 'g')} | {x['ffg_saving_pct']:.2f} % |" for x in rte] + [""]
    L += ["## Host-bound workloads and the utilisation branch", "",
          "The tree with the selected hyper-parameters, refit on the characterisation workloads plus "
          "their host-bound runs (`sweep --sim --host-bound`):", "", "```", rep["host_bound"]["rules"].rstrip(), "```", ""]
    L += ["## Paper B", ""] + _table(rows["B"]) + [""]
    label = {"A protocol": "paper A, its protocol", "A extended": "paper A, extended catalogue",
             "A other": "paper A", "B": "paper B"}
    differ = [(label[k], r) for k, part in rows.items() for r in part if r["verdict"] == DIFFER]
    L += ["## Rows that differ", ""]
    L += [f"- **{r['claim']}** ({where}): paper {r['paper']}, ours {r['ours']}. {r['reason']}"
          for where, r in differ] or ["- none"]
    return "\n".join(L) + "\n"


def write(results_path: str | Path, out_path: str | Path) -> Path:
    import json

    from ..errors import InvalidValueError

    src = Path(results_path)
    try:
        results = json.loads(src.read_text())
        md = markdown(results)
    except FileNotFoundError:
        raise InvalidValueError(f"{src} not found: run `pydvfs demo` first") from None
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidValueError(f"{src} has no complete replication stage ({type(e).__name__}: {e})") from None
    out = Path(out_path)
    out.write_text(md)
    return out

"""``pydvfs report DIR``: the demo's results (DIR/results.json) as Markdown and HTML with plots."""
from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

from ..errors import InvalidValueError
from ..markdown import LOSES_MARK, loses_note
from ..markdown import pct as _pct
from ..markdown import saving as _saving
from ..markdown import table as _table
from ..progress import check_replaceable, replace_atomically


def _ext_time(results: dict, pol: str):
    """Mean time added vs MAXN of a policy's picks on the unseen tasks (the evaluate stage's
    workloads; results from before it kept them: the replication stage's value)."""
    per = results.get("evaluate", {}).get("per_workload")
    if per:
        v = [w[pol]["time_penalty_pct"] for w in per if w[pol].get("time_penalty_pct") is not None]
        return sum(v) / len(v) if v else None
    ev = results.get("replication", {}).get("extended", {}).get("evaluate", {})
    return ev.get("all", {}).get(pol, {}).get("mean_time_penalty_pct")


def _f(v, fmt=".2f") -> str:
    return "–" if v is None else format(v, fmt)


def _measure_label(o: dict) -> str:
    """The energy a stage of the demo used ("module" or "CPU+GPU"; results before the demo
    recorded it: CPU+GPU, the paper's measure it used throughout)."""
    from ..measure.energy import LABEL

    return LABEL[o.get("energy_measure", "cpu-gpu")]


def summary_section(results: dict) -> list[str]:
    """The decision first: the clock per workload, the energy it saves (named) and the time it
    adds against MAXN, each marked simulated or real, and each loss against MAXN flagged. Every
    number is a value of ``results``."""
    L = ["## Summary: the decision", ""]
    rows = []
    ev = results.get("evaluate", {})
    measure = _measure_label(ev)
    per = ev.get("per_workload")
    if per is None:  # results from before the evaluate stage kept them: the ledger's (CPU+GPU)
        per = results.get("replication", {}).get("extended", {}).get("evaluate", {}).get("per_workload")
    if per:
        for w in per:
            m = w["mlg"]
            rows.append([w["workload"], "MAXN" if m["mhz"] is None else f"{m['mhz']:g} MHz", measure,
                         _saving(m["saving_pct"], ".1f"), _pct(m["time_penalty_pct"]), "simulated Orin"])
    elif ev:
        for w in ev["workloads"]:
            m = w["policies"]["mlg"]
            rows.append([w["workload"], "MAXN" if m["freq_mhz"] is None else f"{m['freq_mhz']:g} MHz", measure,
                         _saving(m["saving_pct"], ".1f"), _pct(m.get("time_penalty_pct")), "simulated Orin"])
    g = results.get("replication", {}).get("governed")
    if g and "governed_run" in results:
        gr = results["governed_run"]
        clock = gr["runs"]["mlg"]["freq_mhz"]
        rows.append([f"{gr['workload']} (governed run, C sampler)", "MAXN" if clock is None else f"{clock:g} MHz",
                     _measure_label(gr), _saving(gr["saving_pct"], ".1f"), _pct(g["time_penalty_pct"]),
                     "simulated Orin, animated board"])
    for name in ("perseus_gpt3_a100", "zeus_bert_v100"):
        for w in results.get("real_data", {}).get(name, []):
            rows.append([f"{w['workload']} ({name}; vs the top setting)", f"{w['sweet_spot']:g} ({w['knob']})",
                         REAL_DATA_ENERGY, _saving(w["savings_vs_top_pct"], ".1f"), _pct(w["time_penalty_vs_top_pct"]),
                         "real, other hardware"])
    if not rows:
        return []
    L += [f"The learned policy's clock for each unseen workload, and the {measure} energy it saves and the "
          "time it adds against MAXN (the board's default); real-data rows compare the sweet spot with the "
          "top setting, in the energy those studies measured.", ""]
    L += _table(["workload", "clock", "energy", "energy saved", "time added", "data"], rows) + [""]
    losing = sum(LOSES_MARK in r[3] for r in rows)
    if losing:
        L += [f"{losing} of {len(rows)} rows are flagged. " + loses_note(measure), ""]
    return L


def _excess(curve: dict, clock) -> str:
    """How much more energy per step than the curve's least a clock costs on it ("+0.7 %")."""
    v = curve.get(f"{clock:g}")
    return "–" if v is None else f"{100 * (v / min(curve.values()) - 1):+.1f} %"


def best_clocks_section(results: dict) -> list[str]:
    """One workload (the governed, online and joint stages' bert-base/SST-2) is given a "best"
    clock by several stages: which measure, search and model each is, and how far apart they
    are on each simulator's own noiseless curve (issue 37 item 23)."""
    online, joint, gov = results.get("online", {}), results.get("joint", {}), results.get("governed_run", {})
    wl = online.get("workload") or gov.get("workload")
    if not wl:
        return []
    rows = []
    sim = online.get("simulated_j_per_step") or {}
    jrow = next((w for w in joint.get("workloads", []) if w["workload"] == wl), {})
    grid = jrow.get("gpu_only_j_per_step") or {}

    def add(stage, best, model, clock):
        rows.append([stage, best, model, clock if isinstance(clock, str) else f"{clock:g} MHz",
                     _excess(sim, clock) if sim and not isinstance(clock, str) else "–",
                     _excess(grid, clock) if grid and not isinstance(clock, str) else "–"])

    char = next((w for w in results.get("characterise", {}).get("analysis", {}).get("per_workload", [])
                 if w["workload"] == wl), None)
    if char:
        add("characterisation (`sweep --sim`)", "least mean measured energy per run over the repeats (the sweet spot)",
            "the simulator, with measurement noise", char["sweet_spot_mhz"])
    if gov:
        clock = gov["runs"]["mlg"]["freq_mhz"]
        add("the learned policy (governed run)", "the shipped model's clock for this workload's features: one clock "
            "for a region of workloads (the best fixed clock where the tree did not beat it)",
            "trained on every characterisation workload", "MAXN" if clock is None else clock)
    if online:
        add("the online search", "where the search settled, from measured windows",
            "the simulator on the animated board, window noise", online["final_mhz"])
        add("the online stage's reference", "least energy per step, no noise (\"the simulator's own optimum\")",
            "the simulator, noiseless", online["simulated_optimum_mhz"])
    if jrow:
        add("the joint stage, GPU-only", "least energy per step over the GPU clocks, EMC and CPU at the top",
            "the joint simulator (GPU x EMC x CPU) with the run's per-mode spread",
            jrow.get("gpu_only_best_mhz", jrow["gpu-only"]["settled"][0]))
        add("the joint stage, best mode", f"least energy per step over all {jrow['modes']} modes (GPU/EMC/CPU MHz)",
            "the joint simulator", "/".join(f"{x:g}" for x in jrow["best_mode"]))
    if len(rows) < 2:
        return []
    L = [f"## One workload, several best clocks: {wl}", "",
         f"Every stage below minimises **module** energy for {wl}, but each answers its own question with its own "
         "model: a noisy sweep, a tree trained on other workloads, a search on measured windows, the simulator's "
         "noiseless curve, and the joint simulator, a separate model of the same board that adds the EMC's and "
         "the CPU's power (its EMC and CPU terms are priors, not calibrated), so the two optima need not agree. "
         "The bottom of the U is flat: the last two columns give each clock's extra energy per step over the least "
         "on each simulator's own curve, without window noise (the joint one's at the top EMC and CPU clocks); "
         "noise or a neighbouring model moves the pick between levels that cost within a few per cent.", ""]
    L += _table(["stage", "\"best\" means", "model and noise", "clock", "on the simulator's curve",
                 "on the joint simulator's curve"], rows) + [""]
    return L


# What the real-data studies measured (Perseus, Zeus): the GPU's energy, not a Jetson module's.
REAL_DATA_ENERGY = "GPU (measured)"


def _characterise_section(results: dict) -> list:
    """The report's section on results["characterise"]."""
    L: list = []
    c = results["characterise"]
    a = c["analysis"]
    L += ["## Characterisation (paper A, steps 1-2)", "",
          f"Energy: **{_measure_label(c)}** (each workload's sweet spot is its clock of least "
          f"{_measure_label(c)} energy; paper A's CPU+GPU figures are in the replication ledger).", "",
          f"{c['characterisation']['rows']} simulated runs on {', '.join(c['characterisation']['tasks'])}; "
          f"{c['evaluation']['rows']} on the unseen {', '.join(c['evaluation']['tasks'])}.", "",
          f"- sweet spots: {a['sweet_spot_range_mhz'][0]:g}-{a['sweet_spot_range_mhz'][1]:g} MHz",
          f"- U-shaped curves: {a['u_shaped']} of {a['n']}; spiky: {', '.join(a['spiky']) or 'none'}",
          f"- best clock vs MAXN: {a['mean_saving_pct']:.1f} % mean {_measure_label(c)} energy saving, "
          f"{a['mean_saving_large_pct']:.1f} % for models above 70M parameters", ""]
    L += _table(["workload", "sweet spot (MHz)", f"{_measure_label(c)} energy saving vs MAXN", "time vs MAXN",
                 "flags"],
                [[w["workload"], f"{w['sweet_spot_mhz']:g}", f"{w['saving_vs_maxn_pct']:.1f} %",
                  _pct(w.get("time_penalty_vs_maxn_pct")), ", ".join(w["flags"]) or "–"]
                 for w in a["per_workload"]]) + [""]
    L += [f"![{Path(p).stem}]({p})" for p in c["plots"] if any(k in p for k in ("bert-base", "pythia-160m", "bert-tiny", "optimal"))]
    L.append("")
    return L


def _shipped_section(results: dict) -> list:
    """The report's section on the shipped policy (results["train"]["shipped"])."""
    L: list = []
    t = results["train"]
    L += ["## Noise-aware labels, honest selection, the roofline model", "",
          t["noise"]["advice"] + ".", "",
          f"Shipped policy: **{t['shipped']}** - {t['ship_reason']}.", "",
          "Regret on each workload's fitted physical curve; LOMO = every task of the held-out "
          "architecture left out of training (see docs/policy.md).", ""]
    L += _table(["policy", "LOOCV regret", "LOMO regret", "share of oracle (LOOCV / LOMO)"],
                [[r["name"], f"{r['mean_regret_pct']:.2f} %",
                  "" if r.get("lomo_mean_regret_pct") is None else f"{r['lomo_mean_regret_pct']:.2f} %",
                  f"{100 * (r.get('share_of_oracle') or 0):.1f} % / {100 * (r.get('lomo_share_of_oracle') or 0):.1f} %"]
                 for r in t["table"]])
    rf = t["roofline"]
    L += ["", f"Roofline board constants (fit {rf['mode']}, rms error {100 * (rf['rms_rel_error'] or 0):.1f} %, "
          f"V/f knee {rf['vf_knee_mhz']:g} MHz):", ""]
    L += _table(["constant", "value", "relative std"],
                [[k, f"{v:.4g}", "not identified" if rf["rel_std"][k] is None else f"{100 * rf['rel_std'][k]:.0f} %"]
                 for k, v in rf["constants"].items()]) + [""]
    return L


def _evaluate_section(results: dict) -> list:
    """The report's section on results["evaluate"]."""
    L: list = []
    e = results["evaluate"]
    s = e["summary"]
    me = _measure_label(e)
    L += ["## Evaluation on unseen tasks (paper A, step 5)", "",
          f"Energy: **{me}**, against MAXN. Paper A's published figures are CPU+GPU energy: the "
          "replication ledger sets them beside this run's CPU+GPU figures.", ""]
    L += _table(["", f"this run (simulated Orin, {me} energy)"], [
        ["MLG mean saving vs MAXN", _pct(s["mlg"]["mean_saving_pct"], ".2f")],
        *([["MLG mean time added vs MAXN", _pct(_ext_time(results, "mlg"))],
           ["FFG mean time added vs MAXN", _pct(_ext_time(results, "ffg"))]]
          if _ext_time(results, "mlg") is not None else []),
        ["MLG max saving", _pct(s["mlg"]["max_saving_pct"], ".2f")],
        ["MLG min saving", _saving(s["mlg"]["min_saving_pct"], ".2f")],
        ["workloads where MLG loses against MAXN", f"{s['mlg']['worse_than_maxn']} of {len(e['workloads'])}"],
        ["FFG behind MLG", _pct(s["mlg"]["mean_saving_pct"] - s["ffg"]["mean_saving_pct"], ".2f")],
        ["MLG share of the oracle's saving", f"{100 * s['mlg']['share_of_oracle']:.1f} %"],
        ["paper's rules, mean saving", _pct(s["rules"]["mean_saving_pct"], ".2f")],
        *([["roofline policy, mean saving", _pct(s["roofline"]["mean_saving_pct"], ".2f")]]
          if "roofline" in s else []),
    ]) + [""]
    L += [f"**Left out:** the {p} policy, not scored here: {why}" for p, why in e.get("left_out", {}).items()]
    L += [""] if e.get("left_out") else []
    if e.get("plot"):
        L += [f"![savings]({e['plot']})", ""]
    return L


def _governed_run_section(results: dict) -> list:
    """The report's section on results["governed_run"]."""
    L: list = []
    g = results["governed_run"]
    L += ["## A governed run, measured by the C sampler", "",
          f"{g['workload']}, {g['steps']} steps on the animated board (time scaled x{g['time_scale']}).", ""]
    L += _table(["policy", "clock", "module energy (J)", "CPU+GPU energy (J)", "time (s)",
                 f"{_measure_label(g)} power (W)", "samples", "rate (Hz)"],
                [[p, "MAXN" if r["freq_mhz"] is None else f"{r['freq_mhz']:g} MHz",
                  _f(r.get("energy_module_j"), ".1f"), f"{r['energy_cpu_gpu_j']:.1f}",
                  f"{r['duration_s']:.2f}", f"{r['avg_power_w']:.2f}", r["samples"], f"{r['rate_hz']:.0f}"]
                 for p, r in g["runs"].items()])
    gt = results.get("replication", {}).get("governed")
    other = "cpu_gpu" if g.get("energy_measure") == "module" else "module"
    beside = "" if g.get(f"saving_{other}_pct") is None else \
        f"; in {'CPU+GPU' if other == 'cpu_gpu' else 'module'} energy: {g[f'saving_{other}_pct']:.1f} %"
    L += ["", f"Saving of the learned policy vs MAXN in {_measure_label(g)} energy (the measure it was "
              f"trained on): **{_saving(g['saving_pct'], '.1f')}**" + beside
          + (f", taking **{gt['time_penalty_pct']:+.1f} %** time." if gt else "."), ""]
    if g.get("plot"):
        L += [f"![power trace]({g['plot']})", ""]
    return L


def _joint_section(results: dict) -> list:
    """The report's section on results["joint"]."""
    L: list = []
    jt = results["joint"]
    L += ["## The whole power mode: GPU-only vs the joint search", "",
          f"The joint online search (`run --policy online --knobs gpu,emc,cpu`) beside the GPU-only one (EMC and "
          f"CPU at the top), each replayed over a {jt['minutes']:g}-min run against every mode of the simulated "
          f"{jt['board']} (window noise, exploration included; docs/power-modes.md). Saving: module energy "
          "against the top mode; EMC/CPU terms of the simulator are priors, not calibrated.", ""]
    L += _table(["workload", "GPU-only: settled, saving, probes", "joint: settled mode, saving, modes probed",
                 "joint adds", "best of the grid"],
                [[w["workload"],
                  f"{w['gpu-only']['settled'][0]:g} MHz, {w['gpu-only']['saving_pct']:.1f} %, "
                  f"{w['gpu-only']['probes']}",
                  f"{'/'.join(f'{x:g}' for x in w['joint']['settled'])}, {w['joint']['saving_pct']:.1f} %, "
                  f"{w['joint']['probes']}",
                  f"{w['joint_adds_pct']:+.1f} %",
                  f"{'/'.join(f'{x:g}' for x in w['best_mode'])}: {w['best_saving_pct']:.1f} % of {w['modes']} modes"]
                 for w in jt["workloads"]]) + [""]
    if jt.get("heatmap"):
        L += [f"A mode sweep (`sweep --sim --knobs gpu,emc,cpu`, {jt['sweep_modes']} modes): module energy over "
              "GPU x EMC at each cell's best CPU clock.", "", f"![modes]({jt['heatmap']})", ""]
    return L


def _real_data_section(results: dict) -> list:
    """The report's section on results["real_data"]."""
    L: list = []
    r = results["real_data"]
    L += ["## The analysis on real measurements from other hardware", "",
          "Energy: the GPU's, as those studies measured it (not a Jetson module); savings against each "
          "study's top setting.", ""]
    for name in ("perseus_gpt3_a100", "zeus_bert_v100"):
        if name not in r:
            L += [f"**Left out:** {name}: {r.get('left_out', {}).get(name, 'not in results.json')}", ""]
            continue
        L += [f"### {name}", ""]
        L += _table(["workload", "knob", "sweet spot", "top", "GPU energy saving vs top", "time penalty", "flags"],
                    [[w["workload"], w["knob"], f"{w['sweet_spot']:g}", f"{w['top']:g}",
                      f"{w['savings_vs_top_pct']:.1f} %", f"{w['time_penalty_vs_top_pct']:.1f} %",
                      ", ".join(w["flags"]) or "–"] for w in r[name]]) + [""]
        L += [f"![{Path(p).stem}]({p})" for p in r.get(name + "_plots", [])[:2]] + [""]
    return L


def markdown(results: dict) -> str:
    L = ["# pydvfs report: energy-optimal GPU clocks on a simulated Jetson AGX Orin", "",
         f"Generated {time.strftime('%Y-%m-%d %H:%M')} from `results.json`. Every number below was "
         "produced by the pipeline in this run; the simulated board is calibrated to published Orin "
         "measurements (docs/sim-calibration.md).", ""]
    L += summary_section(results)
    missing = [name for name in SECTIONS if name not in results]
    if missing:
        L += [f"**Not in this report:** {', '.join(missing)}: `results.json` has no such section (a run of "
              "`pydvfs demo` that stopped before those stages, or an older one).", ""]
    if "board" in results:
        b = results["board"]
        L += ["## The board", "", f"{b['model']}: {len(b['levels_mhz'])} GPU levels "
              f"({b['levels_mhz'][0]:g}-{b['levels_mhz'][-1]:g} MHz), rails {', '.join(b['rails'])}. "
              f"Pinned {b['pinned_mhz']:g} MHz and restored.", ""]
    if "characterise" in results:
        L += _characterise_section(results)
    if "train" in results:
        t = results["train"]
        L += ["## The frequency model (paper A, steps 3-4)", "",
              f"Leave-one-out CV over the characterisation workloads, labels and scores by {_measure_label(t)} "
              "energy; regret = energy at the chosen clock / energy at the best clock - 1.", ""]
        L += _table(["policy", "LOOCV accuracy", "mean regret", "max regret",
                     f"{_measure_label(t)} energy saving vs MAXN"],
                    [[r["name"], f"{r['loocv_accuracy']:.2f}", f"{r['mean_regret_pct']:.2f} %",
                      f"{r['max_regret_pct']:.2f} %", f"{r['mean_saving_vs_maxn_pct']:.2f} %"] for r in t["table"]])
        L += ["", f"Selected: {t['selected']['name']} {t['selected']['params']}.", "", "```", t["rules"].rstrip(), "```",
              "", f"![tree]({t['tree_png']})", ""]
    if "train" in results and "shipped" in results["train"]:
        L += _shipped_section(results)
    if "evaluate" in results:
        L += _evaluate_section(results)
    if "governed_run" in results:
        L += _governed_run_section(results)
    if "online" in results:
        o = results["online"]
        moves = " -> ".join(f"{m['freq_mhz']:g}" for m in o["switches"])
        L += ["## The online governor (`pydvfs run --policy online`)", "",
              f"bert-base/SST-2 on the animated board, starting at the top clock with no model: the search "
              f"moved {moves} MHz and settled at **{o['final_mhz']:g} MHz** (the simulator's own optimum: "
              f"{o['simulated_optimum_mhz']:g} MHz; {_f(o.get('gap_to_optimum_pct'), '.1f')} % more energy per "
              "step where it settled: levels closer than the search's 2 % margin plus window noise "
              "are not told apart). Whole run, search included: "
              f"{o['saving_vs_start_pct']:.1f} % less {_measure_label(o)} energy than staying at the start clock.", ""]
        if o.get("plot"):
            L += [f"![online search]({o['plot']})", ""]
    if "joint" in results:
        L += _joint_section(results)
    L += best_clocks_section(results)
    if "real_data" in results:
        L += _real_data_section(results)
    if "roofline" in results:
        rf = results["roofline"]
        L += ["## The roofline energy law (paper B)", "",
              "Energy E: the GPUs' energy per training run, as paper B models it. "
              "Per data set and group: each law's fit (adjusted R^2, RMSE of log E) and grouped "
              "cross-validation holding out whole architectures (docs/roofline.md).", ""]
        rows = []
        for source in ("simulated", "a100"):
            for group, g in rf[source]["groups"].items():
                for law, v in g["laws"].items():
                    rows.append([source, group, law, f"{v['adj_r2']:.3f}", f"{v['rmse_log']:.3f}",
                                 f"{v['cv_r2']:.3f}", v["n"]])
        L += _table(["data", "group", "law", "adj R^2", "RMSE log E", "CV R^2", "runs"], rows) + [""]
        L += [f"![{Path(p).stem}]({p})" for p in rf["plots"][:4]] + [""]
    if "replication" in results:
        L += ["## Replication ledger", "",
              "Each claim of both papers beside this run's number, agree or differ and why: "
              "[replication.md](replication.md) (the repository keeps an example of a full demo run in "
              "docs/replication.md, refreshed by `make replication-doc`).", ""]
    L += ["## Time per stage", ""] + _table(["stage", "seconds"], [[k, v.get("seconds", "")] for k, v in results.items()])
    return "\n".join(L) + "\n"


# The sections of results.json a report is made of (markdown() renders each one present).
SECTIONS = ("board", "characterise", "train", "evaluate", "governed_run", "online", "joint", "real_data", "roofline",
            "replication")
REPORT_FILES = ("report.md", "report.html", "replication.md")


def write_report(out_dir: str | Path, force: bool = False) -> Path:
    """Write DIR/report.md and DIR/report.html (and DIR/replication.md for a demo run).

    DIR holds either a demo run (``results.json``) or a user's own outputs: sweep datasets (CSV),
    ``pydvfs analyse`` folders, ``pydvfs train`` model folders and ``pydvfs evaluate --json``
    files (see :mod:`pydvfs.report.inputs`). An existing report is never rewritten unless
    ``force``."""
    if not str(out_dir).strip():
        raise InvalidValueError("the report's folder name is empty")
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise InvalidValueError(f"{out_dir} is not a folder")
    src = out_dir / "results.json"
    if src.is_file():
        try:
            results = json.loads(src.read_text())
        except ValueError as e:
            raise InvalidValueError(f"{src} is not JSON: {e}") from None
        if not isinstance(results, dict) or not any(k in results for k in SECTIONS):
            raise InvalidValueError(f"{src} holds none of the sections a `pydvfs demo` run writes "
                                    f"({', '.join(SECTIONS)}): no report from it")
        try:
            md = markdown(results)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise InvalidValueError(f"{src} is not the results of a `pydvfs demo` run ({type(e).__name__}: {e})") from None
    else:
        from .inputs import collect, markdown_user

        results = None
        md = markdown_user(collect(out_dir), out_dir)
    existing = [n for n in REPORT_FILES if os.path.lexists(out_dir / n)]
    if existing and not force:
        raise InvalidValueError(f"{out_dir / existing[0]} exists: pass --force to rewrite the report")
    for n in existing:  # --force rewrites a report, never what a link points at, nor a FIFO or a folder
        check_replaceable(out_dir / n)
    if results is not None and "replication" in results:
        from ..studies.ledger import markdown as ledger_markdown

        replace_atomically(out_dir / "replication.md", ledger_markdown(results))
    replace_atomically(out_dir / "report.md", md)
    replace_atomically(out_dir / "report.html", html_page(md, out_dir))
    return out_dir / "report.md"


def _data_uri(path: Path) -> str | None:
    """An image as a data: URI (the HTML report is one self-contained file)."""
    import base64

    mime = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
    if path.suffix.lower() not in mime or not path.is_file():
        return None
    return f"data:{mime[path.suffix.lower()]};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def html_page(md: str, base: Path) -> str:
    """A Markdown subset (headings, tables, images, code, lists, links) as one valid HTML5 page;
    images relative to ``base`` are embedded as data: URIs."""
    out, in_code, in_table, in_list = [], False, False, False

    def close_blocks():
        nonlocal in_table, in_list
        if in_table:
            out.append("</table>")
            in_table = False
        if in_list:
            out.append("</ul>")
            in_list = False

    for line in md.splitlines():
        if line.startswith("```"):
            if not in_code:
                close_blocks()
            out.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
            continue
        if in_code:
            out.append(html.escape(line))
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-:"):
                continue
            if in_list:
                out.append("</ul>")
                in_list = False
            tag = "td"
            if not in_table:
                out.append("<table>")
                in_table, tag = True, "th"
            out.append("<tr>" + "".join(f"<{tag}>{_inline(c)}</{tag}>" for c in cells) + "</tr>")
            continue
        if line.startswith("- "):
            if in_table:
                out.append("</table>")
                in_table = False
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{_inline(line[2:])}</li>")
            continue
        close_blocks()
        if line.startswith("#"):
            n = len(line) - len(line.lstrip("#"))
            out.append(f"<h{n}>{_inline(line[n:].strip())}</h{n}>")
        elif line.startswith("!["):
            alt, src = line[2:].split("](", 1)
            src = src.rstrip(")")
            uri = _data_uri(base / src)
            if uri is None:
                out.append(f"<p>(image {html.escape(src)} not found)</p>")
            else:
                out.append(f'<figure><img src="{uri}" alt="{html.escape(alt)}"></figure>')
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    close_blocks()
    if in_code:
        out.append("</pre>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px}"
             "th{background:#f3f3f3;text-align:left}pre{background:#f6f6f6;padding:1em;overflow-x:auto}"
             "img{max-width:100%}figure{margin:1em 0}")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>pydvfs report</title>\n<style>" + style + "</style>\n</head>\n<body>\n"
            + "\n".join(out) + "\n</body>\n</html>\n")


def _inline(text: str) -> str:
    """Escape, then **bold**, `code` and [text](link) (relative .md links stay links)."""
    import re

    t = html.escape(text, quote=False)
    parts = t.split("**")
    t = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = t.split("`")
    t = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', t)

"""``pydvfs report DIR``: the demo's results (DIR/results.json) as Markdown and HTML with plots."""
from __future__ import annotations

import html
import json
import time
from pathlib import Path

from .errors import InvalidValueError


def _table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _f(v, fmt=".2f") -> str:
    return "–" if v is None else format(v, fmt)


def markdown(results: dict) -> str:
    L = ["# pydvfs report: energy-optimal GPU clocks on a simulated Jetson AGX Orin", "",
         f"Generated {time.strftime('%Y-%m-%d %H:%M')} from `results.json`. Every number below was "
         "produced by the pipeline in this run; the simulated board is calibrated to published Orin "
         "measurements (docs/sim-calibration.md).", ""]
    if "board" in results:
        b = results["board"]
        L += ["## The board", "", f"{b['model']}: {len(b['levels_mhz'])} GPU levels "
              f"({b['levels_mhz'][0]:g}-{b['levels_mhz'][-1]:g} MHz), rails {', '.join(b['rails'])}. "
              f"Pinned {b['pinned_mhz']:g} MHz and restored.", ""]
    if "characterise" in results:
        c = results["characterise"]
        a = c["analysis"]
        L += ["## Characterisation (paper A, steps 1-2)", "",
              f"{c['characterisation']['rows']} simulated runs on {', '.join(c['characterisation']['tasks'])}; "
              f"{c['evaluation']['rows']} on the unseen {', '.join(c['evaluation']['tasks'])}.", "",
              f"- sweet spots: {a['sweet_spot_range_mhz'][0]:g}-{a['sweet_spot_range_mhz'][1]:g} MHz "
              "(paper: 510-816 MHz)",
              f"- U-shaped curves: {a['u_shaped']} of {a['n']}; spiky: {', '.join(a['spiky']) or 'none'}",
              f"- best clock vs MAXN: {a['mean_saving_pct']:.1f} % mean saving, "
              f"{a['mean_saving_large_pct']:.1f} % for models above 70M parameters (paper: > 22 %)", ""]
        L += _table(["workload", "sweet spot (MHz)", "saving vs MAXN", "flags"],
                    [[w["workload"], f"{w['sweet_spot_mhz']:g}", f"{w['saving_vs_maxn_pct']:.1f} %",
                      ", ".join(w["flags"]) or "–"] for w in a["per_workload"]]) + [""]
        L += [f"![{Path(p).stem}]({p})" for p in c["plots"] if any(k in p for k in ("bert-base", "pythia-160m", "bert-tiny", "optimal"))]
        L.append("")
    if "train" in results:
        t = results["train"]
        L += ["## The frequency model (paper A, steps 3-4)", "",
              "Leave-one-out CV over the characterisation workloads; regret = energy at the chosen clock / "
              "energy at the best clock - 1.", ""]
        L += _table(["policy", "LOOCV accuracy", "mean regret", "max regret", "saving vs MAXN"],
                    [[r["name"], f"{r['loocv_accuracy']:.2f}", f"{r['mean_regret_pct']:.2f} %",
                      f"{r['max_regret_pct']:.2f} %", f"{r['mean_saving_vs_maxn_pct']:.2f} %"] for r in t["table"]])
        L += ["", f"Selected: {t['selected']['name']} {t['selected']['params']}.", "", "```", t["rules"].rstrip(), "```",
              "", f"![tree]({t['tree_png']})", ""]
    if "train" in results and "shipped" in results["train"]:
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
    if "evaluate" in results:
        e = results["evaluate"]
        s = e["summary"]
        L += ["## Evaluation on unseen tasks (paper A, step 5)", ""]
        L += _table(["", "paper A (real Orin)", "this run (simulated Orin)"], [
            ["MLG mean saving vs MAXN", "13.11 %", f"{s['mlg']['mean_saving_pct']:.2f} %"],
            ["MLG max saving", "26.73 % (BERT-base, MNLI)", f"{s['mlg']['max_saving_pct']:.2f} %"],
            ["MLG min saving", "negative for some small models", f"{s['mlg']['min_saving_pct']:.2f} %"],
            ["FFG behind MLG", "0.9 %", f"{s['mlg']['mean_saving_pct'] - s['ffg']['mean_saving_pct']:.2f} %"],
            ["MLG share of the oracle's saving", "–", f"{100 * s['mlg']['share_of_oracle']:.1f} %"],
            ["paper's rules, mean saving", "–", f"{s['rules']['mean_saving_pct']:.2f} %"],
        ]) + [""]
        if e.get("plot"):
            L += [f"![savings]({e['plot']})", ""]
    if "governed_run" in results:
        g = results["governed_run"]
        L += ["## A governed run, measured by the C sampler", "",
              f"{g['workload']}, {g['steps']} steps on the animated board (time scaled x{g['time_scale']}).", ""]
        L += _table(["policy", "clock", "CPU+GPU energy (J)", "time (s)", "avg power (W)", "samples", "rate (Hz)"],
                    [[p, "MAXN" if r["freq_mhz"] is None else f"{r['freq_mhz']:g} MHz", f"{r['energy_cpu_gpu_j']:.1f}",
                      f"{r['duration_s']:.2f}", f"{r['avg_power_w']:.2f}", r["samples"], f"{r['rate_hz']:.0f}"]
                     for p, r in g["runs"].items()])
        L += ["", f"Saving of the learned policy vs MAXN: **{g['saving_pct']:.1f} %**.", ""]
        if g.get("plot"):
            L += [f"![power trace]({g['plot']})", ""]
    if "online" in results:
        o = results["online"]
        moves = " -> ".join(f"{m['freq_mhz']:g}" for m in o["switches"])
        L += ["## The online governor (`pydvfs run --policy online`)", "",
              f"bert-base/SST-2 on the animated board, starting at the top clock with no model: the search "
              f"moved {moves} MHz and settled at **{o['final_mhz']:g} MHz** (the simulator's own optimum: "
              f"{o['simulated_optimum_mhz']:g} MHz; {_f(o.get('gap_to_optimum_pct'), '.1f')} % more energy per "
              "step where it settled: levels closer than the search's 2 % margin plus window noise "
              "are not told apart). Whole run, search included: "
              f"{o['saving_vs_start_pct']:.1f} % less CPU+GPU energy than staying at the start clock.", ""]
        if o.get("plot"):
            L += [f"![online search]({o['plot']})", ""]
    if "real_data" in results:
        r = results["real_data"]
        L += ["## The analysis on real measurements from other hardware", ""]
        for name in ("perseus_gpt3_a100", "zeus_bert_v100"):
            if name not in r:
                continue
            L += [f"### {name}", ""]
            L += _table(["workload", "knob", "sweet spot", "top", "saving vs top", "time penalty", "flags"],
                        [[w["workload"], w["knob"], f"{w['sweet_spot']:g}", f"{w['top']:g}",
                          f"{w['savings_vs_top_pct']:.1f} %", f"{w['time_penalty_vs_top_pct']:.1f} %",
                          ", ".join(w["flags"]) or "–"] for w in r[name]]) + [""]
            L += [f"![{Path(p).stem}]({p})" for p in r.get(name + "_plots", [])[:2]] + [""]
    if "roofline" in results:
        rf = results["roofline"]
        L += ["## The roofline energy law (paper B)", "",
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
    L += ["## Time per stage", ""] + _table(["stage", "seconds"], [[k, v.get("seconds", "")] for k, v in results.items()])
    return "\n".join(L) + "\n"


# The sections of results.json a report is made of (markdown() renders each one present).
SECTIONS = ("board", "characterise", "train", "evaluate", "governed_run", "online", "real_data", "roofline")


def write_report(out_dir: str | Path) -> Path:
    out_dir = Path(out_dir)
    src = out_dir / "results.json"
    if not src.is_file():
        raise InvalidValueError(f"{src} not found: run `pydvfs demo --out {out_dir}` first")
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
    (out_dir / "report.md").write_text(md)
    (out_dir / "report.html").write_text(_html(md))
    return out_dir / "report.md"


def _html(md: str) -> str:
    """A small Markdown subset (headings, tables, images, code, lists) as a standalone page."""
    out, in_code, in_table = [], False, False
    for line in md.splitlines():
        if line.startswith("```"):
            out.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
            continue
        if in_code:
            out.append(html.escape(line))
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-"):
                continue
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            n = len(line) - len(line.lstrip("#"))
            out.append(f"<h{n}>{_inline(line[n:].strip())}</h{n}>")
        elif line.startswith("!["):
            alt, src = line[2:].split("](", 1)
            out.append(f'<p><img src="{html.escape(src.rstrip(")"))}" alt="{html.escape(alt)}" style="max-width:100%"></p>')
        elif line.startswith("- "):
            out.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    if in_table:
        out.append("</table>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td{border:1px solid #ccc;padding:2px 8px}"
             "tr:first-child td{font-weight:bold;background:#f3f3f3}pre{background:#f6f6f6;padding:1em}")
    return f"<!doctype html><meta charset=utf-8><title>pydvfs report</title><style>{style}</style>\n" + "\n".join(out)


def _inline(text: str) -> str:
    t = html.escape(text)
    parts = t.split("**")
    t = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = t.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

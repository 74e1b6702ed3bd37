"""``pydvfs report DIR`` on a user's own outputs (no demo ``results.json``).

Recognised under DIR (searched three levels deep):

- sweep datasets: CSV files with the dataset columns (docs/dataset.md);
- ``pydvfs analyse --out D``: ``D/summary.json`` (and its plots);
- ``pydvfs train --out D``: ``D/metrics.json`` (and ``D/tree.png``, ``D/rules.txt``);
- ``pydvfs evaluate --json > F.json``: any JSON with per-workload policy results.

Time added against MAXN comes from the durations in a dataset that holds the evaluated workloads.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import InvalidValueError
from ..markdown import LOSES_MARK, loses_note
from ..markdown import pct as _pct
from ..markdown import saving as _saving
from ..markdown import table as _table

DATASET_COLUMNS = {"workload", "setting", "freq_mhz", "duration_s"}
MAX_DEPTH = 3


def _files(root: Path, pattern: str) -> list[Path]:
    """The regular files under ``root`` (a FIFO is never waited on) within MAX_DEPTH folders."""
    return sorted(p for p in root.rglob(pattern) if len(p.relative_to(root).parts) <= MAX_DEPTH + 1 and p.is_file())


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (ValueError, OSError, UnicodeDecodeError):
        return None


def collect(root: Path) -> dict:
    import pandas as pd

    out: dict = {"datasets": [], "analyses": [], "models": [], "evaluations": []}
    for p in _files(root, "*.csv"):
        try:
            head = pd.read_csv(p, nrows=0)
        except (ValueError, OSError, UnicodeDecodeError):
            continue
        if DATASET_COLUMNS <= set(head.columns):
            df = pd.read_csv(p)
            src = df["source"].iloc[0] if "source" in df.columns and len(df) else "board"
            out["datasets"].append({"path": p, "rows": len(df), "workloads": int(df["workload"].nunique()),
                                    "simulated": src == "sim"})
    for p in _files(root, "*.json"):
        d = _json(p)
        if not isinstance(d, dict):
            continue
        if p.name == "summary.json" and "knob" in d and isinstance(d.get("workloads"), list):
            out["analyses"].append({"dir": p.parent, "summary": d})
        elif p.name == "metrics.json" and "selected" in d and "loocv_choices" in d:
            out["models"].append({"dir": p.parent, "metrics": d})
        elif "summary" in d and isinstance(d.get("workloads"), list) and d["workloads"] \
                and isinstance(d["workloads"][0], dict) and "policies" in d["workloads"][0]:
            out["evaluations"].append({"path": p, "result": d})
    if not any(out.values()):
        raise InvalidValueError(f"{root} has no results.json and no sweep, analyse, train or evaluate "
                                "outputs (CSV datasets, summary.json, metrics.json, evaluate --json files)")
    return out


def _dataset_for(found: dict, workloads: set) -> dict | None:
    """The dataset holding the most of ``workloads`` (for their durations)."""
    import pandas as pd

    best, n = None, 0
    for d in found["datasets"]:
        have = set(pd.read_csv(d["path"], usecols=["workload"])["workload"])
        k = len(have & workloads)
        if k > n:
            best, n = d, k
    return best


def _energy_name(column: str | None) -> str:
    """What an analysis or evaluation minimised (pydvfs.measure.energy.column_label)."""
    from ..measure.energy import column_label

    return column_label(column)


def _short(column: str | None) -> str:
    """The measure's short name for a table cell: "module", "CPU+GPU", the column, or "?"."""
    from ..measure.energy import COLUMN, LABEL

    by_column = {c: LABEL[m] for m, c in COLUMN.items()}
    return "?" if column is None else by_column.get(column, column)


def markdown_user(found: dict, root: Path) -> str:
    from ..studies.replication import evaluation_breakdown

    def rel(p) -> str:
        return str(Path(p).relative_to(root))

    # `pydvfs report .`: Path(".").name is "", so the title names the folder itself
    L = [f"# pydvfs report: {root.resolve().name or root.resolve()}", "",
         "From the sweep, analyse, train and evaluate outputs found in this folder "
         f"({sum(len(v) for v in found.values())} files). Savings are against MAXN, with the time they add.", ""]
    summary, body = [], []
    for ev in found["evaluations"]:
        res = ev["result"]
        ds = _dataset_for(found, {w["workload"] for w in res["workloads"]})
        data = "–" if ds is None else ("simulated" if ds["simulated"] else "measured")
        if ds is not None:
            evaluation_breakdown(res, ds["path"])  # adds each policy's time_penalty_pct
        rows = []
        for w in res["workloads"]:
            m = w["policies"]["mlg"]
            rows.append([w["workload"], "MAXN" if m["freq_mhz"] is None else f"{m['freq_mhz']:g} MHz",
                         _short(res.get("energy_column")), _saving(m["saving_pct"], ".1f"),
                         _pct(m.get("time_penalty_pct")), data])
        if not summary:
            summary = rows
        s = res["summary"]
        body += [f"## Evaluation: {rel(ev['path'])}", "",
                 f"Energy: {_energy_name(res.get('energy_column'))}."
                 + ("" if ds is None else f" Durations from {rel(ds['path'])}."), ""]
        body += _table(["policy", "mean saving vs MAXN", "min", "max", "worse than MAXN"],
                       [[pol, _pct(v["mean_saving_pct"], ".2f"), _pct(v["min_saving_pct"], ".2f"),
                         _pct(v["max_saving_pct"], ".2f"), v["worse_than_maxn"]] for pol, v in s.items()]) + [""]
        body += _table(["workload", "MLG clock", "energy", "energy saved", "time added", "data"], rows) + [""]
    for a in found["analyses"]:
        s = a["summary"]
        rows = [[w["workload"], f"{w['sweet_spot']:g}", _saving(w.get("savings_vs_maxn_pct"), ".1f"),
                 _pct(w.get("time_penalty_vs_maxn_pct")), _pct(w.get("savings_vs_top_pct"), ".1f"),
                 _pct(w.get("time_penalty_vs_top_pct")), ", ".join(w.get("flags", [])) or "–"] for w in s["workloads"]]
        if not summary:
            summary = [[r[0], f"{r[1]} ({s['knob']})", _short(s.get("energy_column")), r[2] if r[2] != "–" else r[4],
                        r[3] if r[2] != "–" else r[5], "analysis"] for r in rows]
        body += [f"## Analysis: {rel(a['dir'])}", "", f"{s['n_workloads']} workloads, knob {s['knob']}, "
                 f"{s['n_u_shaped']} U-shaped; energy: {_energy_name(s.get('energy_column'))}.", ""]
        body += _table(["workload", "sweet spot", "saving vs MAXN", "time vs MAXN", "saving vs top",
                        "time vs top", "flags"], rows) + [""]
        plots = sorted((a["dir"] / "plots").glob("*.png"))[:4] if (a["dir"] / "plots").is_dir() else []
        body += [f"![{p.stem}]({rel(p)})" for p in plots] + [""]
    for m in found["models"]:
        met = m["metrics"]
        sel = met["selected"]
        body += [f"## Trained model: {rel(m['dir'])}", "",
                 f"{met['n_workloads']} workloads; selected {sel['name']}: LOOCV accuracy "
                 f"{sel['loocv_accuracy']:.2f}, mean regret {sel['mean_regret_pct']:.2f} %.", "",
                 "```", met["rules"].rstrip(), "```", ""]
        if (m["dir"] / "tree.png").is_file():
            body += [f"![tree]({rel(m['dir'] / 'tree.png')})", ""]
    if found["datasets"]:
        body += ["## Datasets", ""] + _table(
            ["file", "rows", "workloads", "board"],
            [[rel(d["path"]), d["rows"], d["workloads"], "simulated" if d["simulated"] else "measured"]
             for d in found["datasets"]]) + [""]
    if summary:
        L += ["## Summary: the decision", ""] + _table(["workload", "clock", "energy", "energy saved", "time added",
                                                         "data"], summary) + [""]
        losing = sum(LOSES_MARK in r[3] for r in summary)
        if losing:
            L += [f"{losing} of {len(summary)} rows are flagged. " + loses_note(summary[0][2]), ""]
    return "\n".join(L + body) + "\n"

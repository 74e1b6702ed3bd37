"""Test helpers: check that the numbers a report or the ledger shows are values of results.json,
that an HTML page is well formed, and what `pydvfs demo --quick` must leave (one demo run, in
tests/test_packaging.py from the installed sdist, serves all these checks)."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

from pydvfs.studies import ledger

NUM = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _numbers(obj, out: set) -> set:
    """Every number in a JSON value (and every number written inside its strings)."""
    if isinstance(obj, bool) or obj is None:
        return out
    if isinstance(obj, (int, float)):
        out.add(float(obj))
    elif isinstance(obj, str):
        out.update(float(x) for x in NUM.findall(obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _numbers(k, out)
            _numbers(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _numbers(v, out)
    return out


def _from_results(token: str, values: set) -> bool:
    """A displayed number is some stored value rounded to the digits shown (or its magnitude:
    a sign may be written apart, as in "+1.7 %" or "-0.00")."""
    x = float(token)
    mant = token.split("e")[0]
    digits = len(mant.split(".")[1]) if "." in mant else 0
    tol = 0.5 * 10 ** -digits * (abs(x) / abs(float(mant)) if "e" in token and float(mant) else 1.0) + 1e-12
    return any(abs(abs(v) - abs(x)) <= tol for v in values)


def _cells(md: str, section: str, column: str) -> list[str]:
    """The cells of one column of every table under a heading that starts with ``section``."""
    out, in_sec, col = [], False, None
    for line in md.splitlines():
        if line.startswith("## "):
            in_sec, col = line[3:].startswith(section), None
            continue
        if not in_sec or not line.startswith("|"):
            col = None if not line.startswith("|") else col
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if col is None:
            col = cells.index(column) if column in cells else -1
        elif col >= 0 and not set("".join(cells)) <= set("-"):
            out.append(cells[col])
    return out


class _Checker(HTMLParser):
    VOID: ClassVar[set] = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.srcs = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs).get("src", ""))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def check_html(text: str) -> _Checker:
    c = _Checker()
    c.feed(text)
    assert text.startswith("<!DOCTYPE html>")
    assert not c.errors and c.stack == [], (c.errors, c.stack)
    return c


def check_numbers_from_results(out: Path) -> int:
    """Every number in the report's summary and in the ledger's "ours" column is a value of the
    run's results.json (rounded as shown); every differing ledger row says why. Returns how many
    numbers were checked."""
    results = json.loads((out / "results.json").read_text())
    rep = results["replication"]
    gov = results.get("governed_run", {})
    values = _numbers([results["evaluate"]["per_workload"], rep.get("governed"), gov.get("runs"),
                       gov.get("saving_pct"), results.get("real_data")], set())
    md = (out / "report.md").read_text()
    led = (out / "replication.md").read_text()
    checked = 0
    for column in ("clock", "energy saved", "time added"):  # "energy" names the measure: no number
        for cell in _cells(md, "Summary", column):
            for tok in NUM.findall(cell):
                assert _from_results(tok, values), (column, cell)
                checked += 1
    pools = {  # each table's numbers must come from the part of the results it reports
        "Paper A, its own protocol": [rep["protocol"]],
        "Paper A, our extended": [rep["extended"]],
        "Paper A, other": [rep["host_bound"], rep["latency"], rep.get("calibration"), rep.get("governed"),
                           rep["sweet_spot_range_mhz"], results["characterise"]["analysis"]["sweet_spot_range_mhz"]],
        "Paper B": [[(g["decomposition"], g["laws"]["eta"]["adj_r2"], g["laws"]["baseline"]["adj_r2"],
                      g["laws"]["eta"]["coefficients"].get("log_C"), g["laws"]["eta"]["coefficients"].get("log_eta"))
                     for src in ("simulated", "a100") for g in results["roofline"][src]["groups"].values()],
                    rep["other_form"], rep["fsdp_vs_tp"], rep["rmse_cut_pct"]],
    }
    for section, parts in pools.items():
        pool = _numbers(parts, set())
        cells = _cells(led, section, "ours")
        assert cells, section
        for cell in cells:
            for tok in NUM.findall(cell):
                assert _from_results(tok, pool), (section, cell)
                checked += 1
        verdicts = _cells(led, section, "verdict")
        reasons = _cells(led, section, "why they differ / note")
        assert verdicts and set(verdicts) <= {ledger.AGREE, ledger.DIFFER, ledger.NA}
        assert all(r for v, r in zip(verdicts, reasons) if v == ledger.DIFFER)
    assert "| model-task configurations | 27 | 27 |" in led
    check_energy_named(md, led)
    assert md.index("## Summary: the decision") < md.index("## Characterisation")
    check_html((out / "report.html").read_text())
    return checked


def check_energy_named(md: str, led: str) -> None:
    """One energy per figure, named (issue 26): the report's summary names the measure of every
    row (module for the demo's own; the GPU's for the real-data studies) and flags each loss
    against MAXN with the sentence that says what it means; every section with a saving names
    its energy; the ledger keeps paper A's CPU+GPU with the module's beside it."""
    from pydvfs.markdown import LOSES_MARK
    from pydvfs.report.results import REAL_DATA_ENERGY

    energy = _cells(md, "Summary", "energy")
    saved = _cells(md, "Summary", "energy saved")
    assert energy and set(energy) <= {"module", REAL_DATA_ENERGY}, set(energy)
    assert all(e == "module" for e, r in zip(energy, _cells(md, "Summary", "data")) if "simulated" in r)
    for cell in saved:  # a loss is marked, a saving is not
        assert (LOSES_MARK in cell) == cell.lstrip().startswith("-"), cell
    if any(LOSES_MARK in c for c in saved):
        assert "rows are flagged. " + LOSES_MARK in md
    sections = md.split("\n## ")
    for sec in sections:
        if "saving" in sec.lower() and not sec.startswith(("Time per stage", "Replication ledger", "The roofline")):
            assert any(name in sec for name in ("module", "CPU+GPU", REAL_DATA_ENERGY, "the GPU's")), sec[:80]
    assert "**CPU+GPU** energy" in led and "module energy:" in led


def check_quick_demo(out: Path, summary: dict, stderr: str) -> None:
    """What `pydvfs demo --quick --out OUT --json` must leave: every stage, a report whose
    numbers are this run's, an online stage within 1 % of the simulator's optimum, pictures."""
    assert "[demo] --- evaluate ---" in stderr  # progress on stderr
    assert summary["stages"] == ["board", "characterise", "train", "evaluate", "governed_run", "online",
                                 "joint", "real_data", "roofline", "replication"]
    # the summary and the replication ledger show only numbers of this run's results.json
    assert check_numbers_from_results(out) > 100
    results = json.loads((out / "results.json").read_text())
    # the model search ends on a clock whose true (simulated) energy per step is within 1 % of
    # the optimum's (the hill climb stopped up to its 2 % margin plus the noise above it)
    o = results["online"]
    truth = o["simulated_j_per_step"]
    assert truth[f"{o['final_mhz']:g}"] <= 1.01 * truth[f"{o['simulated_optimum_mhz']:g}"], o
    ev = results["evaluate"]["summary"]
    assert ev["mlg"]["mean_saving_pct"] > 0 and ev["mlg"]["share_of_oracle"] > 0.5
    tr = results["train"]
    assert tr["shipped"] in ("tree", "ffg") and tr["ship_reason"] and tr["noise"]["n_workloads"] > 0
    assert any(r["name"].startswith("roofline model") and r["lomo_mean_regret_pct"] >= 0 for r in tr["table"])
    gov = results["governed_run"]
    assert gov["energy_measure"] == "module"  # the demo's measure throughout (issue 26)
    for stage in ("characterise", "train", "evaluate", "online", "joint"):
        assert results[stage]["energy_measure"] == "module", stage
    assert results["replication"]["extended"]["energy_measure"] == "cpu-gpu"  # paper A's, in the ledger
    assert gov["runs"]["mlg"]["energy_module_j"] < gov["runs"]["maxn"]["energy_module_j"]
    assert gov["runs"]["maxn"]["samples"] > 100
    assert results["real_data"]["perseus_gpt3_a100"] and results["real_data"]["zeus_bert_v100"]
    md = (out / "report.md").read_text()
    for section in ("Characterisation", "frequency model", "Evaluation on unseen tasks", "governed run", "online governor",
                    "real measurements", "roofline", "honest selection", "One workload, several best clocks"):
        assert section in md
    for line in md.splitlines():  # every picture the report shows exists
        if line.startswith("!["):
            assert (out / line.split("](", 1)[1].rstrip(")")).is_file(), line
    assert "](ucurves/plots/bert-base_SST-2.png)" in md and "](real/perseus_gpt3_a100/plots/" in md
    assert (out / "report.html").read_text().count("<img") >= 8

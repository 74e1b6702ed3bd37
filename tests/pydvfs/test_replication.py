"""The replication ledger and the report: numbers come from the run, the page stands alone,
a user's own outputs make a report, and an existing report is not overwritten."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pydvfs.report.results import html_page
from pydvfs.studies import ledger, replication

sys.path.insert(0, str(Path(__file__).parent))
from report_numbers import _cells, check_html


def test_paper_classes():
    assert replication.paper_class(510.0) == "1"
    assert replication.paper_class(1020.0) == "5"
    assert replication.paper_class(1122.0) == "6"
    assert replication.paper_class(918.0) == "none"
    assert replication.paper_class(306.0) == "none"
    assert replication.paper_class(None) == "MAXN"


def test_html_is_one_valid_self_contained_page(tmp_path):
    import base64

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.png").write_bytes(png)
    md = "# T\n\n- one\n- two **b** `c`\n\n| h1 | h2 |\n|---|---|\n| 1 < 2 | x |\n\n![a](p/a.png)\n\n```\nx <y>\n```\n"
    page = html_page(md, tmp_path)
    c = check_html(page)
    assert c.srcs == ["data:image/png;base64," + base64.b64encode(png).decode()]
    assert "<th>h1</th>" in page and "1 &lt; 2" in page and "x &lt;y&gt;" in page


def test_report_on_users_own_outputs_and_no_overwrite(cli, tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    r = cli("sweep", "--sim", "--out", str(d / "sweep.csv"), "--models", "bert-base", "pythia-70m",
            "--tasks", "RTE", "CoLA")
    assert r.returncode == 0, r.stderr
    r = cli("analyse", str(d / "sweep.csv"), "--out", str(d / "analysis"))
    assert r.returncode == 0, r.stderr
    r = cli("evaluate", "--data", str(d / "sweep.csv"), "--json")
    assert r.returncode == 0, r.stderr
    (d / "evaluation.json").write_text(r.stdout)
    text = cli("evaluate", "--data", str(d / "sweep.csv")).stdout  # the text names its energy, flags losses
    assert text.startswith("energy: module (energy_module_j)") and "paper A's figures are CPU+GPU" in text
    ev = json.loads(r.stdout)
    losing = sum(w["policies"]["mlg"]["saving_pct"] < 0 for w in ev["workloads"])
    assert (f"mlg loses against MAXN on {losing} of" in text) == (losing > 0)
    r = cli("report", str(d), "--json")
    assert r.returncode == 0, r.stderr
    md = (d / "report.md").read_text()
    assert md.index("## Summary: the decision") < md.index("## Evaluation")
    ev = json.loads((d / "evaluation.json").read_text())
    summary = _cells(md, "Summary", "time added")
    assert len(summary) == len(ev["workloads"]) and all(s.endswith("%") for s in summary)
    # one energy per figure, named; a loss against MAXN flagged, with what it means
    from pydvfs.markdown import LOSES_MARK

    assert set(_cells(md, "Summary", "energy")) == {"module"}
    assert "Energy: module (`energy_module_j`)." in md and "energy: module (`energy_module_j`)" in md
    saved = _cells(md, "Summary", "energy saved")
    assert [LOSES_MARK in c for c in saved] == [w["policies"]["mlg"]["saving_pct"] < 0 for w in ev["workloads"]]
    assert ("rows are flagged. " + LOSES_MARK in md) == (losing > 0)
    page = (d / "report.html").read_text()
    assert check_html(page).srcs and all(s.startswith("data:image/png;base64,") for s in check_html(page).srcs)
    # an existing report stays unless --force
    before = (d / "report.md").read_text()
    r = cli("report", str(d))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--force" in r.stderr
    assert (d / "report.md").read_text() == before
    assert cli("report", str(d), "--force").returncode == 0
    # --force rewrites a report, never what a link in its place points at
    outside = d.parent / "outside.txt"
    outside.write_text("mine\n")
    (d / "report.md").unlink()
    (d / "report.md").symlink_to(outside)
    r = cli("report", str(d), "--force")
    assert r.returncode == 2 and "not a regular file" in r.stderr and outside.read_text() == "mine\n"
    (d / "report.md").unlink()
    assert cli("report", str(d), "--force").returncode == 0


def test_report_on_a_folder_with_nothing_it_knows(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    r = cli("report", str(tmp_path))
    assert r.returncode == 2 and "no results.json" in r.stderr and "Traceback" not in r.stderr


def test_ledger_refuses_results_without_the_stage(tmp_path):
    from pydvfs.errors import InvalidValueError

    (tmp_path / "results.json").write_text(json.dumps({"train": {}}))
    with pytest.raises(InvalidValueError):
        ledger.write(tmp_path / "results.json", tmp_path / "replication.md")


def test_make_demo_writes_only_under_its_output_folder():
    """`make demo` once copied its ledger over the tracked docs/replication.md, so every later
    build called itself -dirty: its recipe (make -n: printed, not run) names no docs/ path."""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(["make", "-n", "-C", str(repo), "demo", "DEMO_OUT=some-out"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pydvfs demo --out some-out" in out.stdout and "docs/" not in out.stdout
    assert "docs/replication.md" in subprocess.run(["make", "-n", "-C", str(repo), "replication-doc"],
                                                   capture_output=True, text=True, timeout=120).stdout

"""The replication ledger and the report: numbers come from the run, the page stands alone,
a user's own outputs make a report, and an existing report is not overwritten."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import ClassVar

import pytest

from pydvfs import ledger, replication
from pydvfs.demo import STAGES, DemoContext
from pydvfs.report import html_page, write_report

NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


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
    """A displayed number is some stored value rounded to the digits shown."""
    x = float(token)
    digits = len(token.split(".")[1]) if "." in token else 0
    tol = 0.5 * 10 ** -digits + 1e-9
    return any(abs(v - x) <= tol or abs(abs(v) - abs(x)) <= tol for v in values)


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
    r = cli("report", str(d), "--json")
    assert r.returncode == 0, r.stderr
    md = (d / "report.md").read_text()
    assert md.index("## Summary: the decision") < md.index("## Evaluation")
    ev = json.loads((d / "evaluation.json").read_text())
    summary = _cells(md, "Summary", "time added")
    assert len(summary) == len(ev["workloads"]) and all(s.endswith("%") for s in summary)
    page = (d / "report.html").read_text()
    assert check_html(page).srcs and all(s.startswith("data:image/png;base64,") for s in check_html(page).srcs)
    # an existing report stays unless --force
    before = (d / "report.md").read_text()
    r = cli("report", str(d))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--force" in r.stderr
    assert (d / "report.md").read_text() == before
    assert cli("report", str(d), "--force").returncode == 0


def test_report_on_a_folder_with_nothing_it_knows(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    r = cli("report", str(tmp_path))
    assert r.returncode == 2 and "no results.json" in r.stderr and "Traceback" not in r.stderr


REDUCED = ("characterise", "train", "evaluate", "governed_run", "roofline", "replication")


@pytest.fixture(scope="module")
def reduced_demo(tmp_path_factory):
    """The demo's stages that the ledger and the summary need, quick settings."""
    out = tmp_path_factory.mktemp("demo")
    ctx = DemoContext(out_dir=out, seed=0, quick=True)
    for name, stage in STAGES:
        if name in REDUCED:
            ctx.results[name] = stage(ctx)
    (out / "results.json").write_text(json.dumps(ctx.results, default=str))
    write_report(out)
    return out


def test_summary_and_ledger_numbers_come_from_results(reduced_demo):
    out = reduced_demo
    results = json.loads((out / "results.json").read_text())
    values = _numbers(results, set())
    md = (out / "report.md").read_text()
    led = (out / "replication.md").read_text()
    checked = 0
    for column in ("clock", "energy saved", "time added"):
        for cell in _cells(md, "Summary", column):
            for tok in NUM.findall(cell):
                assert _from_results(tok, values), (column, cell)
                checked += 1
    for section in ("Paper A, its own protocol", "Paper A, our extended", "Paper A, other", "Paper B"):
        cells = _cells(led, section, "ours")
        assert cells, section
        for cell in cells:
            for tok in NUM.findall(cell):
                assert _from_results(tok, values), (section, cell)
                checked += 1
    assert checked > 100
    # every row has a verdict, and a reason where it differs
    for section in ("Paper A, its own protocol", "Paper A, our extended", "Paper A, other", "Paper B"):
        verdicts = _cells(led, section, "verdict")
        reasons = _cells(led, section, "why they differ")
        assert set(verdicts) <= {ledger.AGREE, ledger.DIFFER, ledger.NA}
        assert all(r for v, r in zip(verdicts, reasons) if v == ledger.DIFFER)
    assert "| model-task configurations | 27 | 27 |" in led
    # the summary leads the report and pairs each saving with its time
    assert md.index("## Summary: the decision") < md.index("## Characterisation")
    check_html((out / "report.html").read_text())


def test_ledger_refuses_results_without_the_stage(tmp_path):
    from pydvfs.errors import InvalidValueError

    (tmp_path / "results.json").write_text(json.dumps({"train": {}}))
    with pytest.raises(InvalidValueError):
        ledger.write(tmp_path / "results.json", tmp_path / "replication.md")

"""Markdown pieces the reports share (pydvfs/report.py, pydvfs/report_inputs.py)."""
from __future__ import annotations


def table(head: list[str], rows: list[list]) -> list[str]:
    """A markdown table's lines."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def pct(v, fmt="+.1f") -> str:
    """A percentage, or a dash where there is none."""
    return "–" if v is None else f"{format(v, fmt)} %"

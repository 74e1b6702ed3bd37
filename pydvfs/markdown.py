"""Markdown pieces the reports share (pydvfs/report/results.py, pydvfs/report/inputs.py)."""
from __future__ import annotations


def table(head: list[str], rows: list[list]) -> list[str]:
    """A markdown table's lines."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def pct(v, fmt="+.1f") -> str:
    """A percentage, or a dash where there is none."""
    return "–" if v is None else f"{format(v, fmt)} %"


# A decision that costs more energy than leaving the board to its own governor (MAXN): the one
# marker every report puts on such a row, and the sentence that says what it means.
LOSES_MARK = "⚠ loses"


def loses_note(measure_label: str) -> str:
    return (f"{LOSES_MARK}: at this clock the workload uses more {measure_label} energy than under MAXN (the "
            "board's own governor): for it, leaving the board alone would have been better.")


def saving(v, fmt="+.1f") -> str:
    """A saving against MAXN (``pct``), marked where it is a loss."""
    return pct(v, fmt) + (f" {LOSES_MARK}" if v is not None and v < 0 else "")

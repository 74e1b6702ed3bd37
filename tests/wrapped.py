"""The report of a verb that ran ``-- CMD`` (measure, run, sweep, pin/apply -- CMD, govcore
measure): CMD keeps stdout, the verb's report goes to stderr (docs/cli.md, "Commands that wrap a
command"). Test helper only."""
from __future__ import annotations

import json


def report(res) -> dict:
    """The --json report: the last JSON document on stderr (a line "{" starts it; CMD's stderr
    and the verb's notices may come before it, warnings after it)."""
    err = res.stderr if hasattr(res, "stderr") else res.err  # a CompletedProcess, or capsys's result
    err = err if isinstance(err, str) else err.decode("utf-8", "replace")
    lines = err.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == "{"]
    assert starts, f"no JSON report on stderr: {err[-2000:]!r}"
    obj, _ = json.JSONDecoder().raw_decode("".join(lines[starts[-1]:]))
    return obj

"""The shared cases of the workload grammar (tests/data/workload_grammar.json, issue 37) and how
a front end's refusal is compared: tests/pydvfs/test_workload_grammar.py runs them through
pydvfs and govcore, tests/govcore/test_serve.py through the daemon."""
from __future__ import annotations

import json
from pathlib import Path

CASES = json.loads((Path(__file__).resolve().parent / "data" / "workload_grammar.json").read_text("utf-8"))["cases"]


def reason(message: str) -> str:
    """The reason of a one-line refusal, as every front end words it: without the front end's
    prefix and the echoed input (the daemon never echoes it)."""
    message = message.strip().split("error: ", 1)[-1]
    message = message[len("apply: "):] if message.startswith("apply: ") else message
    return message.lstrip("-").split(" (got '", 1)[0]

"""The public surface does not move (docs/architecture.md): the names of ``pydvfs.__all__``, every
``pydvfs`` verb and option, govcore's verbs and options, and the file formats' versions and
columns, as tests/data/public_surface.json lists them. A name that disappears fails here; one
that is added is welcome (`python tests/test_public_surface.py --write` records it).

The daemon's requests are checked on a running daemon in tests/govcore/test_serve.py."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "data" / "public_surface.json"


def _options(parser: argparse.ArgumentParser, prefix: str, out: dict) -> None:
    opts = sorted(s for a in parser._actions for s in a.option_strings)
    out[prefix] = opts
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                _options(sub, f"{prefix} {name}".strip(), out)


def current_surface(govcore: str) -> dict:
    import pydvfs
    from pydvfs.characterise.dataset import COLUMNS
    from pydvfs.cli import build_parser
    from pydvfs.device import capture
    from pydvfs.governor import status
    from pydvfs.policy import board_calibration, roofline_curve, store

    cli: dict = {}
    _options(build_parser(), "pydvfs", cli)
    help_text = subprocess.run([govcore, "--help"], capture_output=True, text=True).stdout
    verbs = re.findall(r"^  ([a-z]+)\b", help_text.split("verbs:")[1].split("options:")[0], re.M)
    return {
        "pydvfs.__all__": sorted(pydvfs.__all__),
        "pydvfs CLI": cli,
        "govcore verbs": sorted(set(verbs)),
        "govcore options": sorted(set(re.findall(r"--[a-z][a-z-]*", help_text))),
        "formats": {
            "dataset columns": [c.name for c in COLUMNS],
            "governor status file": status.FORMAT,
            "run store": store.FORMAT,
            "board calibration": board_calibration.FORMAT,
            "roofline.txt": roofline_curve.FORMAT_VERSION,
            "board capture": [capture.FORMAT, capture.VERSION],
        },
    }


def _missing(old, new, where="") -> list[str]:
    if isinstance(old, dict):
        return [m for k, v in old.items()
                for m in ([f"{where}{k}"] if k not in new else _missing(v, new[k], f"{where}{k}: "))]
    if isinstance(old, list):
        return [f"{where}{x}" for x in old if x not in new]
    return [] if old == new else [f"{where}{old!r} is now {new!r}"]


def test_nothing_public_disappears(govcore_bin):
    import pydvfs

    for name in pydvfs.__all__:
        assert getattr(pydvfs, name) is not None
    missing = _missing(json.loads(SNAPSHOT.read_text()), current_surface(govcore_bin))
    assert not missing, "gone from the public surface:\n" + "\n".join(missing)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True)
    SNAPSHOT.write_text(json.dumps(current_surface(str(REPO / "govcore" / "govcore")), indent=1) + "\n")

"""The repository's scripts (bench/, tools/) loaded as modules, for the tests that call them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load(relpath: str):
    """The script at ``relpath`` (from the repository's root) as a module, run once per call."""
    path = REPO / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

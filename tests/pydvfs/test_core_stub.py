"""pydvfs/_core.pyi covers everything the extension exports, and nothing it does not."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from pydvfs import _core

STUB = Path(_core.__file__).with_name("_core.pyi")


def _stub_names() -> dict[str, set[str]]:
    tree = ast.parse(STUB.read_text())
    out: dict[str, set[str]] = {"": set()}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[""].add(node.name)
            out[node.name] = {n.target.id if isinstance(n, ast.AnnAssign) else n.name for n in node.body
                              if isinstance(n, (ast.FunctionDef, ast.AnnAssign)) and not getattr(n, "name", "x").startswith("__")}
        elif isinstance(node, ast.FunctionDef):
            out[""].add(node.name)
        elif isinstance(node, ast.AnnAssign):
            out[""].add(node.target.id)
    return out


def test_stub_matches_the_extension():
    stub = _stub_names()
    exported = {n for n, v in vars(_core).items() if not n.startswith("_") and not inspect.ismodule(v)
                and getattr(v, "__module__", "pydvfs._core") in ("pydvfs._core", "_core")}
    assert exported == stub[""]
    for name in exported:
        obj = getattr(_core, name)
        if inspect.isclass(obj):
            public = {m for m in dir(obj) if not m.startswith("_")}
            assert public == stub[name], name


def test_py_typed_is_shipped():
    assert STUB.with_name("py.typed").is_file()

"""A model folder's manifest (``manifest.txt``): what ``pydvfs train`` wrote, so that a folder
changed afterwards is refused before its ``policy.so`` runs.

The format is one ``key value`` per line, read by govcore's C loader (govcore/policy_load.c)
without a JSON library; that loader is the one place the manifest is *checked*, for both
``pydvfs`` (through ``pydvfs._core``) and the ``govcore`` binary. This module writes it, and
rebuilds ``policy.so`` from the ``policy_tree.c`` beside it when the one in the folder was built
for another CPU (a model trained on a laptop, applied on the board).

    format 1                      gc_tree_model layout / manifest format (GC_MODEL_FORMAT)
    features is_decoder ...       feature names, in the order the tree reads them
    classes_mhz 0.0 510.0 ...     class clocks (0 = MAXN), as the tree orders them
    tree_sha256 HEX               SHA-256 of policy_tree.c
    policy_so_sha256 HEX          SHA-256 of policy.so
    data_file NAME                provenance: the training data ...
    data_sha256 HEX               ... its SHA-256 ("-" if it was not a file) ...
    trained_utc 2026-...Z         ... and when the tree was fitted
    board agx-orin                the board the data came from (pydvfs.device.table id; - unknown)
    levels_mhz 306.0 408.0 ...    the data's GPU clock table: govcore maps the tree's clock onto
                                  another board's table by it (docs/policy.md, "On another board")
    measure module                the energy the labels minimise (module, cpu-gpu; - another column)
    class_saving_pct 0.0 12.3 ... per class: the saving against MAXN (%) its training workloads
    class_spread_pct 0.0 1.2 ...  had at its clock, and their spread: govcore leaves the board
    ffg_saving_pct 10.1           to its own governor where the saving is not clearly positive
    ffg_spread_pct 2.0            (the same of the FFG clock; all four optional)
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .. import _core
from ..errors import ForeignPolicyError
from .to_c import ModelError, compile_policy

MANIFEST_NAME = "manifest.txt"
TREE_C = "policy_tree.c"
POLICY_SO = "policy.so"


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def provenance(data_path: str | os.PathLike | None, label: str | None = None) -> dict:
    """Where a tree comes from: the training data (``label``, else the file's name) and its
    SHA-256 (``""`` when there is no file), and the time of training (UTC)."""
    path = Path(data_path) if data_path is not None else None
    is_file = path is not None and path.is_file()
    return {
        "data_file": label or (path.name if path is not None else "unknown"),
        "data_sha256": sha256_file(path) if is_file else "",
        "trained_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _format(fields: dict) -> str:
    lines = [("# pydvfs model manifest: written by `pydvfs train`, checked before policy.so is "
              "loaded. Do not edit: train again instead.")]
    for key, value in fields.items():
        text = " ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
        if "\n" in text:
            raise ModelError(f"manifest field {key} holds a line break")
        lines.append(f"{key} {text or '-'}")
    return "\n".join(lines) + "\n"


def read_manifest(model_dir: str | os.PathLike) -> dict:
    """The manifest's fields as strings (no checks: govcore's loader checks)."""
    out = {}
    for line in (Path(model_dir) / MANIFEST_NAME).read_text().splitlines():
        if line and not line.startswith("#") and " " in line:
            key, value = line.split(" ", 1)
            out[key] = value
    return out


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_manifest(model_dir: str | os.PathLike, features: Sequence[str],
                   classes_mhz: Sequence[float], prov: dict, board_id: str | None = None,
                   levels_mhz: Sequence[float] = (), measure: str | None = None,
                   knows: dict | None = None) -> dict:
    """Record the folder's policy_tree.c and policy.so (call after both are written), the
    board and clock table the tree was trained on, the energy ``measure`` it minimises, and
    ``knows`` (:func:`pydvfs.policy.train.expected_savings`)."""
    d = Path(model_dir)
    fields = {
        "format": _core.MODEL_FORMAT,
        "features": list(features),
        "classes_mhz": [repr(float(c)) for c in classes_mhz],
        "tree_sha256": sha256_file(d / TREE_C),
        "policy_so_sha256": sha256_file(d / POLICY_SO),
        "data_file": prov["data_file"],
        "data_sha256": prov["data_sha256"],
        "trained_utc": prov["trained_utc"],
        "board": board_id or "-",
        "levels_mhz": [repr(float(f)) for f in sorted(levels_mhz)],
        "measure": measure or "-",
    }
    if knows is not None:
        fields.update({k: [repr(float(x)) for x in knows[k]] for k in ("class_saving_pct", "class_spread_pct")})
        fields.update({k: repr(float(knows[k])) for k in ("ffg_saving_pct", "ffg_spread_pct")})
    _write_atomic(d / MANIFEST_NAME, _format(fields))
    return fields


def rebuild_policy(model_dir: str | os.PathLike, cc: str | None = None) -> Path:
    """Compile the folder's policy_tree.c into a policy.so for this CPU and record it in the
    manifest. Only a tree the manifest vouches for is compiled."""
    d = Path(model_dir)
    fields = read_manifest(d)
    if fields.get("tree_sha256") != sha256_file(d / TREE_C):
        raise ModelError(f"refusing to rebuild {d / POLICY_SO}: {TREE_C} does not match "
                         f"{MANIFEST_NAME}; train again")
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".policy.", suffix=".so")
    os.close(fd)
    try:
        compile_policy(d / TREE_C, Path(tmp), cc)
        os.chmod(tmp, 0o755)
        os.replace(tmp, d / POLICY_SO)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fields["policy_so_sha256"] = sha256_file(d / POLICY_SO)
    _write_atomic(d / MANIFEST_NAME, _format(fields))
    return d / POLICY_SO


def load_model_dir(model_dir: str | os.PathLike) -> _core.Tree:
    """The tree of a model folder, through govcore's checked loader. A policy.so built for
    another CPU is rebuilt here from policy_tree.c (when a C compiler is present)."""
    try:
        return _core.Tree(model_dir)
    except ForeignPolicyError as e:
        try:
            rebuild_policy(model_dir)
        except ModelError as build_error:
            raise ForeignPolicyError(f"{e}; rebuilding it here failed: {build_error}") from None
    return _core.Tree(model_dir)

"""The manifest `pydvfs train` writes: it records the folder's files, the tree's features and
class clocks and where the tree came from, in the format govcore's loader reads."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from pydvfs import _core
from pydvfs.errors import ManifestMismatchError
from pydvfs.policy.manifest import read_manifest, rebuild_policy
from pydvfs.policy.to_c import ModelError


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_manifest_records_the_folder(trained, syn_csv):
    out, _ = trained
    m = read_manifest(out)
    meta = json.loads((out / "meta.json").read_text())
    assert int(m["format"]) == _core.MODEL_FORMAT
    assert m["features"].split() == meta["features"]
    assert [float(c) for c in m["classes_mhz"].split()] == meta["classes_mhz"]
    assert m["tree_sha256"] == sha256(out / "policy_tree.c")
    assert m["policy_so_sha256"] == sha256(out / "policy.so")
    assert m["data_file"] == "synthetic" and m["data_sha256"] == sha256(syn_csv)
    tree = _core.Tree(out)
    assert tree.provenance == {"data_file": "synthetic", "data_sha256": sha256(syn_csv),
                               "trained_utc": m["trained_utc"]}


def test_rebuild_compiles_only_the_tree_the_manifest_vouches_for(trained, tmp_path):
    out = tmp_path / "model"
    shutil.copytree(trained[0], out)
    before = (out / "manifest.txt").read_text()
    rebuild_policy(out)  # same CPU: a fresh policy.so, recorded
    assert read_manifest(out)["policy_so_sha256"] == sha256(out / "policy.so")
    assert _core.Tree(out).feature_names == tuple(read_manifest(out)["features"].split())
    (out / "policy_tree.c").write_text((out / "policy_tree.c").read_text() + "/* edited */\n")
    so = sha256(out / "policy.so")
    with pytest.raises(ModelError, match="does not match manifest.txt"):
        rebuild_policy(out)
    assert sha256(out / "policy.so") == so  # nothing compiled
    with pytest.raises(ManifestMismatchError, match="policy_tree.c does not match"):
        _core.Tree(out)
    assert before.splitlines()[0].startswith("# pydvfs model manifest")

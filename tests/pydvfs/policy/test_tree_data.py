"""A model folder's tree read as data (pydvfs/policy/tree_data.py, issue 26 item 5): the same
clock as the compiled tree for every workload, and `pydvfs evaluate` never runs the folder's
code, so it works as root in a folder others can write (a checkout under /tmp)."""
from __future__ import annotations

import itertools
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from c_tree import CTree

from pydvfs import _core
from pydvfs.errors import ManifestMismatchError, PolicyLoadError
from pydvfs.policy.to_c import compile_policy, constant_to_c, govcore_include_dir, tree_to_c
from pydvfs.policy.tree_data import TreeSourceError, parse_tree_c, read_tree

REPO = Path(__file__).resolve().parents[3]
PROV = {"data_file": "x.csv", "data_sha256": "", "trained_utc": "2026-12-02T00:00:00Z"}
WORKLOADS = list(itertools.product((0, 1), (None, 5.0, 22.0, 50.0, 81.38, 99.0), (2, 4, 7, 8, 12, 24, 32),
                                   (128, 256, 512, 768, 1024, 2048), (8, 13.3, 32, 32.19, 53, 64, 128, 512)))
FIELDS = ("name", "feature_names", "classes_mhz", "ffg_mhz", "default_util_pct", "board_id", "levels_mhz",
          "provenance")


def _same(data, compiled) -> None:
    for f in FIELDS:
        assert getattr(data, f) == getattr(compiled, f), f
    for w in WORKLOADS:
        assert data.features(w) == compiled.features(w), w
        assert data.propose(w) == compiled.propose(w), w


def test_the_built_in_tree_read_from_its_c_is_the_compiled_one():
    _same(parse_tree_c((REPO / "govcore" / "policy_tree.c").read_text()), _core.Tree(None))


def test_a_trained_folder_read_as_data_is_its_policy_so(trained):
    out, _ = trained
    _same(read_tree(out), _core.Tree(str(out)))


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def test_a_deep_tree_scores_as_its_compiled_c_even_on_the_thresholds(tmp_path):
    """A deep tree (hundreds of splits) through m2cgen and the C compiler, against the parser's
    walk on random feature vectors and on each threshold itself (where <= decides)."""
    np = pytest.importorskip("numpy")
    from sklearn.tree import DecisionTreeClassifier

    names = ("is_decoder", "gpu_util_pct", "layers", "hidden", "seq_len")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, len(names))).astype(np.float32)
    y = rng.choice([0, 510, 612, 714, 816], size=400)
    clf = DecisionTreeClassifier(max_depth=14, random_state=0).fit(X, y)
    src = tree_to_c(clf, names, (90.0, 95.0), 714.0, name="deep", source="x", provenance=PROV,
                    board_id="agx-orin", levels_mhz=(510.0, 612.0))
    (tmp_path / "policy_tree.c").write_text(src)
    compile_policy(tmp_path / "policy_tree.c", tmp_path / "policy.so")
    c, data = CTree(tmp_path), parse_tree_c(src)
    rows = [[_f32(v) for v in r] for r in rng.normal(size=(1500, len(names)))]
    t = clf.tree_
    for node in range(t.node_count):  # the float32 values on and next to each split (<= decides)
        if t.children_left[node] != -1:
            at = np.float32(t.threshold[node])
            for v in (np.nextafter(at, np.float32(-np.inf)), at, np.nextafter(at, np.float32(np.inf))):
                r = list(rows[node % 1500])
                r[t.feature[node]] = float(v)
                rows.append(r)
    rows = [[_f32(v) for v in r] for r in rows]  # as gc_features hands them to the tree

    def walk(row):
        p = data.scores(row)
        return data.classes_mhz[max(range(len(p)), key=lambda i: (p[i], -i))]

    assert [walk(r) for r in rows] == c.predict_features(rows)
    assert data.board_id == "agx-orin" and data.levels_mhz == (510.0, 612.0) and data.ffg_mhz == 714.0


def test_a_fixed_clock_policy_reads_as_that_clock():
    names = ("is_decoder", "gpu_util_pct", "layers", "hidden", "seq_len")
    data = parse_tree_c(constant_to_c(816.0, names, (90.0, 95.0), "fixed", "x", PROV))
    assert {data.propose(w) for w in WORKLOADS[:50]} == {816.0} and data.ffg_mhz == 816.0


def test_text_of_another_form_is_refused():
    src = (REPO / "govcore" / "policy_tree.c").read_text()
    with pytest.raises(TreeSourceError):
        parse_tree_c(src.replace("if (input[6] <= ", "if (f(input[6]) <= ", 1))
    with pytest.raises(TreeSourceError):
        parse_tree_c(src.replace("memcpy(var0,", "system(var0,", 1))
    with pytest.raises(TreeSourceError):
        parse_tree_c("int main(void) { return 0; }")


def _copy(trained, dst: Path) -> Path:
    shutil.copytree(trained[0], dst)
    return dst


def test_a_folder_the_manifest_does_not_vouch_for_is_refused(trained, tmp_path):
    d = _copy(trained, tmp_path / "m")
    (d / "policy_tree.c").write_text((d / "policy_tree.c").read_text().replace("<= ", "<=  ", 1))
    with pytest.raises(ManifestMismatchError, match="does not match"):
        read_tree(d)
    (d / "manifest.txt").unlink()
    with pytest.raises(ManifestMismatchError, match="missing"):
        read_tree(d)
    with pytest.raises(PolicyLoadError, match="no such model folder"):
        read_tree(tmp_path / "nowhere")


MARKER_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void ran(void) { FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }
"""


def test_evaluate_runs_no_code_of_the_folder_even_where_others_can_write(cli, trained, syn_csv, tmp_path):
    """A policy.so that writes a marker when loaded, in a folder anyone can write (as /tmp): as
    root and as a user, `evaluate` scores it (the tree read as data) and its code never runs."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    d = _copy(trained, shared / "model")
    os.chmod(d, 0o1777)  # the model folder itself anyone can write (a sticky parent alone is safe)
    marker = tmp_path / "policy-code-ran"
    (tmp_path / "ctor.c").write_text(MARKER_C)
    subprocess.run(["cc", "-std=c99", "-fPIC", "-shared", "-DGC_TREE_SYMBOL=gc_tree", f'-DMARKER="{marker}"',
                    f"-I{govcore_include_dir()}", "-o", str(d / "policy.so"), str(d / "policy_tree.c"),
                    str(tmp_path / "ctor.c")], check=True, capture_output=True)
    r = cli("evaluate", "--data", str(syn_csv), "--model-dir", str(d), "--energy", "cpu-gpu", "--json")
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), "evaluate ran the folder's code"
    res = json.loads(r.stdout)
    tree = read_tree(d)
    assert res["model"] == tree.name and res["workloads"]
    if os.geteuid() == 0:  # the as-root check stays where a board is pinned
        with pytest.raises(PolicyLoadError, match="writable by group or others"):
            _core.Tree(str(d))
        assert not marker.exists()
        # the roofline curve is such a file too: left out, and the result and a report say why
        assert "writable by group or others" in res["left_out"]["roofline"] and "roofline" not in res["summary"]
        from pydvfs.report import results as report

        md = report.markdown({"evaluate": {**res, "energy_measure": "cpu-gpu"}})
        assert "**Left out:** the roofline policy, not scored here: refusing to load a policy as root" in md
        assert "**Not in this report:** board, characterise, train, governed_run" in md


def test_evaluate_scores_a_trained_folder_as_its_compiled_tree(trained, syn_csv, capsys):
    """evaluate's picks (tree read as data) are the compiled tree's, workload by workload."""
    from pydvfs.cli import main
    from pydvfs.policy.curves import curves_from_frame, read_dataset

    out, _ = trained
    assert main(["evaluate", "--data", str(syn_csv), "--model-dir", str(out), "--energy", "cpu-gpu", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    compiled = _core.Tree(str(out))
    curves = {c.name: c for c in curves_from_frame(read_dataset(syn_csv))}
    for w in res["workloads"]:
        c = curves[w["workload"]]
        mhz = compiled.propose(c.workload.as_core()) or None
        assert w["policies"]["mlg"]["freq_mhz"] == (None if mhz is None else c.nearest_mhz(mhz))

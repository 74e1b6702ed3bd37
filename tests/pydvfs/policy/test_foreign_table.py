"""The policy names the board and clock table it was trained on; on another board's table it maps
its clock by the fraction of the top level, snapped to that table, or declines and points to the
online search (issue 21 item 6; docs/policy.md "On another board"). It never writes a clock the
board does not list."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import pydvfs
from pydvfs import _core
from pydvfs.device.fake import ORIN_13_LEVELS_HZ, build_fake_board
from pydvfs.device.table import board as board_row
from pydvfs.errors import InvalidValueError
from pydvfs.policy.apply import decide
from pydvfs.policy.manifest import load_model_dir, read_manifest

BERT = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}
WORKLOADS = [BERT, {"model": "bert", "layers": 24, "hidden": 1024, "seq_len": 128},
             {"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 256, "util_pct": 90},
             {"model": "roberta", "layers": 6, "hidden": 768, "seq_len": 13}]


@pytest.fixture(scope="module")
def orin_folder(tmp_path_factory):
    """A user's model folder trained on the AGX Orin (a fixed 714 MHz of its table): on a board of
    the table the built-in policy is the board's own, so mapping is for folders like this one."""
    from pydvfs.policy.manifest import provenance, write_manifest
    from pydvfs.policy.to_c import compile_policy, constant_to_c

    d = tmp_path_factory.mktemp("orin-folder")
    feats, levels = ("is_decoder", "layers"), board_row("agx-orin").gpu_levels_mhz
    (d / "policy_tree.c").write_text(constant_to_c(714.0, feats, (50.0, 50.0), "orin 714", "test",
                                                   provenance(None, "test"), board_id="agx-orin", levels_mhz=levels))
    compile_policy(d / "policy_tree.c", d / "policy.so")
    write_manifest(d, feats, [714.0], provenance(None, "test"), "agx-orin", levels)
    return d


def fake_of(tmp_path, board_id: str):
    """A fake board with a table board's GPU table and model string (jp6 layout)."""
    row = board_row(board_id)
    return build_fake_board(tmp_path / board_id, "jp6", levels_hz=tuple(round(f * 1e6) for f in row.gpu_levels_mhz),
                            model=row.model_example)


def test_the_builtin_tree_names_the_board_and_table_it_was_trained_on():
    tree = _core.Tree(None)
    assert tree.board_id == "agx-orin"
    assert tree.levels_mhz == board_row("agx-orin").gpu_levels_mhz


@pytest.mark.parametrize("levels", [None, ORIN_13_LEVELS_HZ], ids=["orin-11", "orin-13"])
def test_same_top_level_is_not_mapped(tmp_path, levels):
    b = build_fake_board(tmp_path / "b", "jp6", levels_hz=levels)
    d = decide(BERT, "mlg", sysfs_root=b.root)
    assert d.mapped_from_mhz is None and d.trained_on["board"] == "agx-orin"


@pytest.mark.parametrize("policy", ["mlg", "ffg", "rules"])
def test_on_a_nano_the_clock_is_mapped_by_the_fraction_of_the_top_level(tmp_path, policy, govcore_bin, orin_folder):
    b = fake_of(tmp_path, "orin-nano-super")
    nano = board_row("orin-nano-super").gpu_levels_mhz
    ratio = nano[-1] / 1300.5
    assert decide(BERT, policy, sysfs_root=b.root).mapped_from_mhz is None  # the Nano's own built-in policy
    for w in WORKLOADS:
        d = decide(w, policy, orin_folder, sysfs_root=b.root)
        if d.freq_mhz is None:
            continue  # the tree keeps this workload at MAXN: nothing is pinned
        assert d.freq_mhz in nano  # never a clock the board does not list
        assert d.mapped_from_mhz is not None
        assert d.proposed_mhz == pytest.approx(d.mapped_from_mhz * ratio)
        assert d.freq_mhz == min(nano, key=lambda f: (abs(f - d.proposed_mhz), f))
        spec = ",".join(f"{k}={v}" for k, v in w.items())
        g = subprocess.run([govcore_bin, "--sysfs-root", str(b.root), "--json", "apply", "--workload", spec,
                            "--policy", policy, "--dry-run", "--model-dir", str(orin_folder)],
                           capture_output=True, text=True)
        assert g.returncode == 0, g.stderr
        gd = json.loads(g.stdout)
        assert (gd["freq_mhz"], gd["mapped_from_mhz"]) == (d.freq_mhz, d.mapped_from_mhz)  # one rule
        assert gd["trained_on"] == d.trained_on
        assert "govcore apply: note: the policy was trained on agx-orin's clock table" in g.stderr


def test_apply_on_a_nano_pins_a_listed_clock_and_says_it_was_mapped(tmp_path, cli, orin_folder):
    b = fake_of(tmp_path, "orin-nano-super")
    res = cli("apply", "--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--policy", "ffg",
              "--sysfs-root", str(b.root), "--json", "--model-dir", str(orin_folder))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["freq_mhz"] in board_row("orin-nano-super").gpu_levels_mhz
    assert b.read_hz("min_freq") == b.read_hz("max_freq") == round(d["freq_mhz"] * 1e6)
    notes = [line for line in res.stderr.splitlines() if "trained on" in line]
    assert len(notes) == 1 and "Jetson AGX Orin's clock table" in notes[0] and "Jetson Orin Nano" in notes[0]
    assert "pydvfs run --policy online" in notes[0]
    assert cli("restore", "--sysfs-root", str(b.root)).returncode == 0


def test_a_table_too_different_is_declined_pointing_to_the_online_search(tmp_path, cli, govcore_bin):
    b = build_fake_board(tmp_path / "tiny", "jp6", levels_hz=(114750000, 216750000, 318750000, 420750000,
                                                             522750000, 624750000), model="Some Jetson")
    before = (b.read_hz("min_freq"), b.read_hz("max_freq"))
    with pytest.raises(InvalidValueError, match="too different to map.*pydvfs run --policy online"):
        pydvfs.apply(BERT, sysfs_root=b.root)
    res = cli("apply", "--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--sysfs-root", str(b.root))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    g = subprocess.run([govcore_bin, "--sysfs-root", str(b.root), "apply", "--workload",
                        "model=bert,layers=12,hidden=768,seq_len=64"], capture_output=True, text=True)
    assert g.returncode == 2 and "pydvfs run --policy online" in g.stderr
    assert (b.read_hz("min_freq"), b.read_hz("max_freq")) == before  # nothing written
    # the roofline and maxn policies do not propose from a training table: not declined
    assert decide(BERT, "maxn", sysfs_root=b.root).freq_mhz is None


def test_a_trained_folder_names_its_table_and_an_old_folder_still_loads(trained, tmp_path):
    out, metrics = trained
    fields = read_manifest(out)
    assert fields["board"] == "-"  # the synthetic data's board is not known
    levels = tuple(float(f) for f in fields["levels_mhz"].split())
    assert levels == tuple(metrics["levels_mhz"]) and load_model_dir(out).levels_mhz == levels
    # a folder written before board/levels_mhz were recorded: loads, nothing to map by
    old = tmp_path / "old"
    shutil.copytree(out, old)
    text = (old / "manifest.txt").read_text()
    (old / "manifest.txt").write_text("".join(line + "\n" for line in text.splitlines()
                                              if not line.startswith(("board ", "levels_mhz "))))
    tree = _core.Tree(str(old))
    assert tree.board_id is None and tree.levels_mhz == ()
    # a damaged table is refused by govcore's loader
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    (bad / "manifest.txt").write_text(text.replace(fields["levels_mhz"], "612.0 306.0"))
    with pytest.raises(pydvfs.errors.PydvfsError, match="levels_mhz is not an ascending list"):
        _core.Tree(str(bad))


def test_two_model_folders_in_one_process_each_load_their_own_tree(tmp_path):
    """dlopen returns an object already loaded under the same name: a second folder's policy.so,
    checked into a descriptor whose number the first one had, must not be taken for the first."""
    from pydvfs.policy.manifest import provenance, write_manifest
    from pydvfs.policy.to_c import compile_policy, constant_to_c

    trees = []
    for mhz in (612.0, 714.0, 816.0):
        d = tmp_path / f"m{mhz:g}"
        d.mkdir()
        feats = ("is_decoder", "layers")
        (d / "policy_tree.c").write_text(constant_to_c(mhz, feats, (50.0, 50.0), f"const {mhz:g}", "test",
                                                       provenance(None, "test"), board_id="agx-orin",
                                                       levels_mhz=board_row("agx-orin").gpu_levels_mhz))
        compile_policy(d / "policy_tree.c", d / "policy.so")
        write_manifest(d, feats, [mhz], provenance(None, "test"), "agx-orin", board_row("agx-orin").gpu_levels_mhz)
        trees.append(_core.Tree(str(d)))  # kept alive: its policy.so stays loaded
    assert [t.classes_mhz for t in trees] == [(612.0,), (714.0,), (816.0,)]
    assert all(t.board_id == "agx-orin" for t in trees)

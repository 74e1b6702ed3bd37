"""The built-in policies trained against each board's uncertainty family (tools/gen_policies.py,
pydvfs/policy/score.py: robust_clock; docs/policy.md, "Decisions that hold on the board a
user has")."""
from __future__ import annotations

import json

import pytest

from pydvfs import _core
from pydvfs.device.fake import build_fake_board
from pydvfs.package_data import package_file
from pydvfs.policy.apply import decide
from pydvfs.policy.score import MAX_LOSS_PCT, Truth, evaluate_family, held_out, robust_clock
from pydvfs.sim.uncertainty import family

RANGES = json.loads(package_file("data", "policy-ranges.json").read_text())


def truth(name, maxn, by_level):
    return Truth(name, {}, {"module": dict(by_level)}, {"module": maxn})


def test_a_class_keeps_maxn_unless_the_worst_member_saves():
    members = {"a": [truth("w", 100.0, {500.0: 80.0, 900.0: 95.0})],
               "b": [truth("w", 100.0, {500.0: 104.0, 900.0: 100.5})]}
    r = robust_clock(members, "module")
    assert r["mhz"] is None and r["range_pct"] == [0.0, 0.0] and r["worst_pct"] <= 0


def test_a_class_takes_the_clock_of_best_worst_case_within_the_loss_bound():
    members = {"a": [truth("w", 100.0, {500.0: 70.0, 700.0: 85.0, 900.0: 95.0})],
               "b": [truth("w", 100.0, {500.0: 99.0, 700.0: 92.0, 900.0: 97.0})],
               "c": [truth("w", 100.0, {500.0: 90.0, 700.0: 90.0, 900.0: 96.0}),
                     truth("x", 100.0, {500.0: 100.0 + 2 * MAX_LOSS_PCT, 700.0: 99.0, 900.0: 99.0})]}
    r = robust_clock(members, "module")
    # 500 MHz saves most on the default-like member but costs workload x beyond the bound on c
    assert r["mhz"] == 700.0 and r["range_pct"] == pytest.approx([5.5, 15.0])


def test_every_built_in_class_clock_has_its_range_across_the_family():
    for b, measure in _core.BUILTIN_POLICIES:
        entry = RANGES[f"{b}/{measure}"]
        assert entry["family"] == [m.name for m in family(b)]
        tree = _core.Tree(None, b, measure)
        clocks = [c[0] for c in tree.expected_savings["classes"]]
        assert len(clocks) == len(entry["classes"])
        for mhz, rec in zip(clocks, entry["classes"]):
            assert (rec["mhz"] or 0.0) == mhz
            lo, hi = rec["range_pct"]
            assert (lo, hi) == (0.0, 0.0) if mhz == 0.0 else 0.0 < lo <= hi


def test_the_compiled_ranges_are_the_generators_from_the_ranges_file():
    """govcore/gen_policy_ranges.c (what both front ends' apply says) is tools/gen_policies.py's
    rendering of pydvfs/data/policy-ranges.json: one computation, two files that agree."""
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(repo / "tools"))
    from gen_policies import OUT_RANGES_C, ranges_c

    assert OUT_RANGES_C.read_text() == ranges_c(RANGES), "run `python tools/gen_policies.py --ranges-c`"


def test_apply_says_the_range_and_what_the_knowledge_is(tmp_path):
    nx = build_fake_board(tmp_path / "nx", board="orin-nx")
    d = decide({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64, "util_pct": 90},
               sysfs_root=nx.root, energy="cpu-gpu", use_runs=False)
    out = d.to_dict()
    assert out["origin"]["kind"] == "estimate" and out["origin"]["source"] == "built-in"
    lo, hi = out["saving_range_pct"]
    assert d.freq_mhz is not None and 0 < lo <= hi
    text = d.describe()
    assert "range     " in text and "trained on an estimate of this board" in text
    orin = build_fake_board(tmp_path / "orin", board="agx-orin")
    o = decide({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}, sysfs_root=orin.root,
               use_runs=False).to_dict()
    assert o["origin"]["kind"] == "calibrated"


@pytest.mark.parametrize("board", ["agx-orin", "orin-nano-super", "orin-nx", "thor", "agx-xavier", "nano"])
def test_no_built_in_decision_costs_more_than_1_percent_above_maxn_on_any_member(board):
    """docs/policy.md's family table, on a sample of its held-out workloads."""
    for measure in ("module", "cpu-gpu"):
        r = evaluate_family(board, measure, workloads=held_out()[::9])
        assert r["max_vs_maxn_pct"] <= 1.0, (measure, r["worst"]["member"], r["max_vs_maxn_pct"])


def test_a_workload_more_host_bound_than_any_trained_is_left_to_the_board(govcore_bin, cli, tmp_path):
    """bert-tiny on CoLA, on the Orin NX member whose GPU computes fastest: its GPU load at MAXN
    (the board's governor already runs the GPU at about 408 MHz) is below every training
    workload's, and the CPU+GPU tree's 510 MHz costs it more than MAXN + 1 %; both front ends
    leave it to the board and say why, and a workload inside the trained loads keeps the clock."""
    import subprocess

    from pydvfs.policy.score import truth as sim_truth
    from pydvfs.sim.uncertainty import member

    t = sim_truth("orin-nx", "bert-tiny", "CoLA", member("orin-nx", "compute-high").params())
    least = RANGES["orin-nx/cpu-gpu"]["trained_util_min_pct"]
    assert t.workload["util_pct"] < least and t.vs_maxn_pct("cpu-gpu", 510.0) > 1.0
    fake = build_fake_board(tmp_path / "nx", board="orin-nx")
    for util, kept in ((t.workload["util_pct"], True), (least + 1.0, False)):
        w = {**t.workload, "util_pct": util}
        d = decide(w, "mlg", sysfs_root=fake.root, energy="cpu-gpu", use_runs=False)
        args = ["apply", "--model", "bert", "--layers", "2", "--hidden", "128", "--seq-len", str(w["seq_len"]),
                "--util", str(util), "--energy", "cpu-gpu", "--dry-run", "--sysfs-root", str(fake.root)]
        c = json.loads(subprocess.run([govcore_bin, "--json", *args], capture_output=True, text=True,
                                      check=True).stdout)
        if kept:
            assert d.freq_mhz is None and d.kept_from_mhz == 510.0 and "below every workload" in d.kept_reason
            assert c["freq_mhz"] is None and c["kept_reason"] == d.kept_reason
            assert d.saving_range_pct == c["saving_range_pct"] == [0.0, 0.0]
            text = cli(*args)  # the text form: the reason in one line, MAXN on stdout
            assert text.returncode == 0 and f"pydvfs apply: {d.kept_reason}\n" in text.stderr
            assert "policy mlg: MAXN" in text.stdout and "MAXN kept: no clock saves" not in text.stdout
            # the saving the tree expected is said to be of a clock not applied (issue 50 item 13)
            assert "saving against MAXN at 510 MHz, the tree's clock, not applied (MAXN kept)" in text.stdout
        else:
            assert d.freq_mhz == c["freq_mhz"] == 510.0 and d.kept_reason is None


def test_a_built_in_that_keeps_maxn_for_lack_of_knowledge_says_so_and_the_way_to_the_saving(govcore_bin, cli,
                                                                                              tmp_path):
    """Issue 51: on an estimate board the built-in keeps MAXN where no clock saves on every board of
    its family; apply said nothing of why, nor what gets the saving. Both front ends, text and JSON,
    now say it in one line (gc_kept_reason), and no clock was pinned."""
    import subprocess

    fake = build_fake_board(tmp_path / "nano", board="orin-nano-super")
    w = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3}
    d = decide(w, sysfs_root=fake.root, data_dir=tmp_path / "none", energy="module")
    assert d.freq_mhz is None and d.kept_from_mhz is None and d.kept_reason.startswith("kept MAXN for lack of knowledge")
    assert "one governed run (`pydvfs run --policy online -- CMD`" in d.kept_reason and "`pydvfs calibrate` (about a minute)" in d.kept_reason
    args = ["apply", "--model", "bert", "--layers", "12", "--hidden", "768", "--seq-len", "13.3", "--dry-run",
            "--sysfs-root", str(fake.root), "--data-dir", str(tmp_path / "none")]
    assert json.loads(cli("--json", *args).stdout)["kept_reason"] == d.kept_reason
    text = cli(*args)
    assert text.returncode == 0 and f"pydvfs apply: {d.kept_reason}\n" in text.stderr and "MAXN" in text.stdout
    c = subprocess.run([govcore_bin, "--json", *args[:-2]], capture_output=True, text=True, check=True)
    assert json.loads(c.stdout)["kept_reason"] == d.kept_reason
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)

"""The static policies under an objective (issue 13): --max-slowdown raises a pinned level to the
lowest one whose step time, predicted by the model folder's roofline.txt, is within the bound of
the top level's; --objective edp/ed2p with the roofline policy only; the trade reported. The
expected levels are computed here from the Python twin of the model (read_roofline, work_terms),
not from govcore."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from wrapped import report as wrapped_report

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError
from pydvfs.model.curve import energy_basis
from pydvfs.policy.roofline_curve import read_roofline, work_terms

WORKLOADS = [("bert", 12, 768, 64.0), ("bert", 2, 128, 25.0), ("bert", 24, 1024, 70.0), ("pythia", 6, 512, 84.0),
             ("pythia", 12, 768, 128.0), ("bert", 4, 256, 30.0)]
BOUNDS_PCT = [0.0, 1.0, 3.0, 5.0, 10.0, 20.0, 40.0, 1e6]


def _wl(model, layers, hidden, seq_len) -> dict:
    return {"model": model, "layers": layers, "hidden": hidden, "seq_len": seq_len}


class Curve:
    """The roofline model's predicted time and energy per token of one workload (Python twin)."""

    def __init__(self, model_dir, layers, hidden, seq_len):
        self.rb = read_roofline(model_dir / "roofline.txt")
        self.a, self.b, _ = work_terms(layers, hidden, seq_len, self.rb.constants)
        self.coef = self.rb.coef(layers, hidden, seq_len)

    def time_s(self, mhz: float) -> float:
        return self.a / (mhz / 1000.0) + self.b

    def energy_j(self, mhz: float) -> float:
        return float((energy_basis([mhz], self.rb.vf) @ self.coef)[0])

    def lowest_within(self, levels, from_mhz: float, pct: float) -> float:
        top_s = self.time_s(levels[-1])
        return next(f for f in levels if f >= from_mhz and self.time_s(f) <= top_s * (1 + pct / 100))

    def near_the_bound(self, levels, pct: float) -> bool:
        """A level within rounding of the bound: C and numpy may round it either way."""
        top_s = self.time_s(levels[-1])
        return any(abs(self.time_s(f) / top_s - (1 + pct / 100)) < 1e-9 for f in levels)


@pytest.fixture
def levels(board) -> list[float]:
    return pydvfs.open_device(board.root).available_frequencies_mhz


def test_the_bound_raises_the_tree_level_to_the_lowest_level_meeting_it(trained, board, levels):
    model, _ = trained
    raised_between = 0
    for model_type, layers, hidden, seq in WORKLOADS:
        wl, curve = _wl(model_type, layers, hidden, seq), Curve(model, layers, hidden, seq)
        free = pydvfs.decide(wl, "mlg", model, board.root)
        assert free.policy_mhz == free.freq_mhz and free.trade is None  # no bound: no curve loaded
        for pct in BOUNDS_PCT:
            if curve.near_the_bound(levels, pct):
                continue
            d = pydvfs.decide(wl, "mlg", model, board.root, max_slowdown_pct=pct)
            want = curve.lowest_within(levels, free.freq_mhz, pct)
            assert d.freq_mhz == want, (wl, pct)
            assert d.policy_mhz == free.freq_mhz and d.proposed_mhz == free.proposed_mhz
            assert d.objective == {"kind": "energy", "max_slowdown_pct": pct}
            top = levels[-1]
            assert d.trade["vs_mhz"] == top and d.trade["basis"] == "roofline"
            assert d.trade["s_per_step_pct"] == pytest.approx(100 * (curve.time_s(want) / curve.time_s(top) - 1),
                                                              abs=1e-9)
            assert d.trade["j_per_step_pct"] == pytest.approx(
                100 * (curve.energy_j(want) / curve.energy_j(top) - 1), abs=1e-9)
            assert d.trade["s_per_step_pct"] <= pct + 1e-9
            if pct == 0.0:
                assert d.freq_mhz == top  # only the top level is as fast as itself
            if pct == 1e6:
                assert d.freq_mhz == free.freq_mhz  # every level meets it: unchanged
            raised_between += free.freq_mhz < d.freq_mhz < top
    assert raised_between > 0  # some bound lands strictly between the tree's level and the top


@pytest.mark.parametrize("policy", ["ffg", "rules"])
def test_the_other_pinning_policies_are_raised_alike(trained, board, levels, policy):
    model, _ = trained
    wl, curve = _wl("bert", 12, 768, 64.0), Curve(model, 12, 768, 64.0)
    free = pydvfs.decide(wl, policy, model, board.root)
    for pct in (0.0, 5.0, 1e6):
        d = pydvfs.decide(wl, policy, model, board.root, max_slowdown_pct=pct)
        assert d.freq_mhz == curve.lowest_within(levels, free.freq_mhz, pct) and d.policy_mhz == free.freq_mhz


def test_roofline_minimises_e_t_or_e_t2_within_the_bound(trained, board, levels):
    model, _ = trained
    differs = 0
    for model_type, layers, hidden, seq in WORKLOADS:
        wl, curve = _wl(model_type, layers, hidden, seq), Curve(model, layers, hidden, seq)
        energy = pydvfs.decide(wl, "roofline", model, board.root)
        for k, objective in enumerate(("energy", "edp", "ed2p")):
            cost = {f: curve.energy_j(f) * curve.time_s(f) ** k for f in levels}
            for pct in (None, 2.0, 10.0):
                if pct is not None and curve.near_the_bound(levels, pct):
                    continue
                top_s = curve.time_s(levels[-1])
                ok = [f for f in levels if pct is None or curve.time_s(f) <= top_s * (1 + pct / 100)]
                d = pydvfs.decide(wl, "roofline", model, board.root, objective=objective, max_slowdown_pct=pct)
                assert d.freq_mhz == min(ok, key=cost.get), (wl, objective, pct)
                assert d.policy_mhz == min(levels, key=cost.get)
                assert d.objective == {"kind": objective, "max_slowdown_pct": pct}
                differs += objective != "energy" and pct is None and d.freq_mhz != energy.freq_mhz
    assert differs > 0  # E t prefers a faster clock than E where the curve says so


def test_refusals_say_why_and_what_to_use(trained, board):
    model, _ = trained
    wl = _wl("bert", 12, 768, 64.0)
    for policy in ("mlg", "ffg", "rules"):
        with pytest.raises(InvalidValueError, match=r"one clock.*--policy roofline.*--policy online"):
            pydvfs.decide(wl, policy, model, board.root, objective="edp")
    with pytest.raises(InvalidValueError, match=r"model folder from `pydvfs train` that holds roofline.txt"):
        pydvfs.decide(wl, "mlg", None, board.root, max_slowdown_pct=5)  # the built-in tree: no curve
    for bad in ({"max_slowdown_pct": -1.0}, {"max_slowdown_pct": math.nan}, {"max_slowdown_pct": math.inf},
                {"objective": "speed"}):
        with pytest.raises(InvalidValueError):
            pydvfs.apply(wl, "mlg", model, board.root, **bad)
    assert board.read_hz("max_freq") == 1300500000 and board.read_hz("min_freq") == 306000000
    # maxn pins nothing: the bound is met by the board's own governor
    assert pydvfs.decide(wl, "maxn", None, board.root, max_slowdown_pct=5).freq_mhz is None
    assert pydvfs.decide(wl, "maxn", None, board.root, objective="ed2p").freq_mhz is None


def test_apply_pins_the_raised_level_and_both_clis_agree(trained, board, levels, cli, govcore_bin):
    model, _ = trained
    curve = Curve(model, 12, 768, 64.0)
    free = pydvfs.decide(_wl("bert", 12, 768, 64.0), "mlg", model, board.root)
    pct = next(p for p in BOUNDS_PCT if free.freq_mhz < curve.lowest_within(levels, free.freq_mhz, p) < levels[-1])
    want = curve.lowest_within(levels, free.freq_mhz, pct)
    args = ["apply", "--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--model-dir", str(model),
            "--max-slowdown", str(pct), "--sysfs-root", str(board.root)]
    out, texts = {}, {}
    for name, run in (("pydvfs", lambda a: cli(*a)),
                      ("govcore", lambda a: subprocess.run([govcore_bin, *a], capture_output=True, text=True))):
        res = run([*args, "--json"])
        assert res.returncode == 0, res.stderr
        out[name] = json.loads(res.stdout)
        assert board.read_hz("max_freq") == board.read_hz("min_freq") == round(want * 1e6)
        text = run(args)
        assert f"GPU clock {want:g} MHz" in text.stdout and f"mlg chose {free.freq_mhz:g} MHz" in text.stdout
        assert "predicted by the roofline model" in text.stdout
        texts[name] = text.stdout
        assert cli("restore", "--sysfs-root", str(board.root)).returncode == 0
    # the decision's text is composed once (govcore/decision_text.c): both front ends say the same
    said = {name: [line for line in t.splitlines() if line.split(" ", 1)[0] in ("policy", "objective", "bound", "trade")]
            for name, t in texts.items()}
    assert said["pydvfs"] == said["govcore"] and len(said["govcore"]) == 4, said
    for r in out.values():
        assert r["freq_mhz"] == want and r["policy_mhz"] == free.freq_mhz
        assert r["objective"] == {"kind": "energy", "max_slowdown_pct": pct}
        assert r["trade"]["vs_mhz"] == levels[-1] and r["trade"]["s_per_step_pct"] <= pct
    py, c = out["pydvfs"]["trade"], out["govcore"]["trade"]
    assert py["vs_mhz"] == c["vs_mhz"] and py["basis"] == c["basis"]
    assert py["s_per_step_pct"] == pytest.approx(c["s_per_step_pct"], rel=1e-12)
    assert py["j_per_step_pct"] == pytest.approx(c["j_per_step_pct"], rel=1e-12)


def test_bad_values_are_one_line_exit_2(trained, board, cli, govcore_bin):
    model, _ = trained
    base = ["apply", "--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--sysfs-root", str(board.root)]
    for extra in (["--max-slowdown", "-1", "--model-dir", str(model)], ["--max-slowdown", "nan", "--model-dir",
                                                                        str(model)],
                  ["--objective", "speed"], ["--objective", "edp", "--model-dir", str(model)],
                  ["--max-slowdown", "5"]):
        for res in (cli(*base, *extra), subprocess.run([govcore_bin, *base, *extra], capture_output=True, text=True)):
            assert res.returncode == 2, (extra, res.stderr)
            assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, (extra, res.stderr)
    assert board.read_hz("max_freq") == 1300500000


def test_run_and_the_in_process_governor_pin_the_raised_level(trained, tmp_path, cli):
    model, _ = trained
    orin = build_fake_board(tmp_path / "orin", "jp6")
    levels = pydvfs.open_device(orin.root).available_frequencies_mhz
    curve = Curve(model, 12, 768, 64.0)
    wl = _wl("bert", 12, 768, 64.0)
    free = pydvfs.decide(wl, "mlg", model, orin.root)
    pct = next(p for p in BOUNDS_PCT if free.freq_mhz < curve.lowest_within(levels, free.freq_mhz, p) < levels[-1])
    want = curve.lowest_within(levels, free.freq_mhz, pct)
    seen = tmp_path / "seen"
    copy = f"import shutil; shutil.copy({str(orin.devfreq_dir / 'max_freq')!r}, {str(seen)!r})"
    res = cli("run", "--sysfs-root", str(orin.root), "--policy", "mlg", "--workload",
              "model=bert,layers=12,hidden=768,seq_len=64", "--model-dir", str(model), "--max-slowdown", str(pct),
              "--json", "--", sys.executable, "-c", copy)
    assert res.returncode == 0, res.stderr
    r = wrapped_report(res)
    assert int(seen.read_text()) == round(want * 1e6)  # what the command ran at
    assert r["chosen_mhz"] == want and r["decision"]["policy_mhz"] == free.freq_mhz
    assert r["objective"] == {"kind": "energy", "max_slowdown_pct": pct, "energy": "module"}
    assert r["trade"]["vs_mhz"] == levels[-1] and r["restored"]
    assert orin.read_hz("max_freq") == round(levels[-1] * 1e6)  # restored
    text = cli("run", "--sysfs-root", str(orin.root), "--policy", "mlg", "--workload",
               "model=bert,layers=12,hidden=768,seq_len=64", "--model-dir", str(model), "--max-slowdown", str(pct),
               "--", sys.executable, "-c", "pass")
    assert f"mlg chose {free.freq_mhz:g} MHz" in text.stderr and "trade" in text.stderr, text.stderr

    gov = pydvfs.OnlineGovernor("mlg", wl, sysfs_root=orin.root, model_dir=model, max_slowdown_pct=pct, log=None)
    gov.start()
    try:
        assert gov.current_mhz == want and orin.read_hz("max_freq") == round(want * 1e6)
    finally:
        report = gov.close()
    assert report["trade"]["vs_mhz"] == levels[-1] and orin.read_hz("max_freq") == round(levels[-1] * 1e6)
    with pytest.raises(InvalidValueError, match="--policy roofline"):
        pydvfs.OnlineGovernor("mlg", wl, sysfs_root=orin.root, model_dir=model, objective="edp", log=None).start()
    assert orin.read_hz("max_freq") == round(levels[-1] * 1e6)


def test_energy_basis_twin_matches_the_c_model(trained):
    """The Python twin this file computes with agrees with govcore's energy and time."""
    model, _ = trained
    from pydvfs import _core

    rl = _core.Roofline(model / "roofline.txt")
    for _, layers, hidden, seq in WORKLOADS:
        curve = Curve(model, layers, hidden, seq)
        for f in (306.0, 714.0, 1300.5):
            w = (False, None, layers, hidden, seq)
            assert rl.time_s(w, f) == pytest.approx(curve.time_s(f), rel=1e-12)
            assert rl.energy_j(w, f) == pytest.approx(curve.energy_j(f), rel=1e-12)
    assert np.isfinite(curve.a) and curve.a > 0

"""Issue 26 item 3: the board learns from its own runs (pydvfs/policy/, docs/store.md).

On a fake Orin Nano Super, :class:`pydvfs.OnlineGovernor` runs four workloads with the
simulator's module J/step and s/step at whatever clock the board holds (a sampler whose windows
integrate the simulated power over simulated time: no real time passes, no animated process);
each run is recorded in the board's store. Then ``apply`` on workloads of similar shape picks
clocks within 2 % of the least module energy and says it learned them on this board, and a fifth
online run starts from the learned clock. Around it: the store's folder and files are private
(refused when not), a damaged record is skipped with one line, the store is bounded, and
``--no-record`` / ``record=False`` write nothing."""
from __future__ import annotations

import json
import os
import random
import stat
import sys
from types import SimpleNamespace

import pytest
from wrapped import report

import pydvfs
from pydvfs.device import table as boards
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import StoreError
from pydvfs.policy.board_calibration import ORIGIN as CALIBRATED
from pydvfs.policy.learned import learn
from pydvfs.policy.objective import Objective
from pydvfs.policy.store import FORMAT, RunStore, check_record
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.model import default_params, operating_point
from pydvfs.sim.profiles import profile

BOARD = "orin-nano-super"
LEARN_FROM = [("bert-small", "SST-2"), ("bert-base", "RTE"), ("pythia-70m", "MRPC"), ("pythia-410m", "SST-2")]
SIMILAR = [("bert-mini", "SST-2"), ("bert-medium", "MRPC"), ("bert-large", "SST-2"), ("pythia-160m", "RTE"),
           ("pythia-1b", "MRPC")]
FIFTH = ("pythia-160m", "RTE")
STEPS = 1500  # each run: ~5-10 simulated minutes of the model search's 10-s windows


def truth(model: str, task: str) -> dict:
    """Level -> (module J/step, CPU+GPU J/step, s/step) of the simulated board."""
    p, w = default_params(), get_workload(model, task)
    out = {}
    for f in profile(BOARD).levels_mhz:
        op = operating_point(w, "fixed", f, p, board=BOARD)
        out[f] = (op.role_power_w["module"] * op.t_step_s, op.role_power_w["cpu_gpu"] * op.t_step_s, op.t_step_s)
    return out


def workload(model: str, task: str) -> dict:
    w = get_workload(model, task)
    return {"model": w.arch.family, "layers": w.arch.layers, "hidden": w.arch.hidden,
            "seq_len": w.task.avg_tokens, "name": model}


class SimSampler:
    """The sampler interface over simulated time: each step the test adds the simulated energy
    of one step at the clock the board holds; a window is the difference of the counters."""

    def __init__(self, rails):
        self.rails = tuple(rails)
        self.board = BOARD
        self.now_s = 0.0
        self.e = {"module": 0.0, "cpu_gpu": 0.0}
        self.open: dict = {}
        self.measurement = None

    def start(self):
        return self

    def stop(self):
        pass

    def begin_window(self, name):
        self.open[name] = (self.now_s, dict(self.e))

    def _window(self, name):
        t0, e0 = self.open[name]
        d = self.now_s - t0
        return SimpleNamespace(duration_s=d, energy_j={}, avg_power_w={}, module_energy_j=self.e["module"] - e0["module"],
                               cpu_gpu_energy_j=self.e["cpu_gpu"] - e0["cpu_gpu"], board=BOARD,
                               gpu_util_pct=None, to_dict=lambda: {"duration_s": d})

    def end_window(self, name):
        m = self._window(name)
        del self.open[name]
        return m

    def peek_window(self, name):
        return self._window(name)


@pytest.fixture
def nano(tmp_path, monkeypatch):
    """A fake Orin Nano Super whose OnlineGovernor sampler is the simulated one."""
    fb = build_fake_board(tmp_path / "board", board=BOARD)
    made = []

    def sampler(rate_hz=None, sysfs_root=None):
        made.append(SimSampler(fb.rails))
        return made[-1]

    monkeypatch.setattr("pydvfs.governor.inprocess.Sampler", sampler)
    return SimpleNamespace(fb=fb, samplers=made, data=tmp_path / "runs")


def online_run(nano, model: str, task: str, seed: int, callback: bool = False, **options) -> dict:
    """One OnlineGovernor run of STEPS steps on the simulated board (1 % power noise per step);
    ``callback``: the governor the framework callbacks make (integrations/common.py)."""
    t = truth(model, task)
    top = max(t)
    rng = random.Random(seed)
    options = dict(sysfs_root=nano.fb.root, total_steps=STEPS, data_dir=nano.data, log=None,
                   clock=lambda: nano.samplers[-1].now_s, **options)
    if callback:
        from pydvfs.integrations.common import make_governor

        gov = make_governor("online", workload(model, task), options)
    else:
        gov = pydvfs.OnlineGovernor(workload=workload(model, task), **options)
    gov.start()
    s = nano.samplers[-1]
    for _ in range(STEPS):
        f = gov.current_mhz or top  # the board's own governor: the top clock
        j_mod, j_cg, dt = t[f]
        k = 1 + 0.01 * rng.gauss(0, 1)
        s.now_s += dt
        s.e["module"] += j_mod * k
        s.e["cpu_gpu"] += j_cg * k
        gov.step()
    return gov.close()


def test_the_board_learns_from_four_runs_and_apply_and_a_fifth_run_use_it(nano, cli):
    for i, (m, task) in enumerate(LEARN_FROM):
        r = online_run(nano, m, task, seed=i)
        assert r["probed"] and r["recorded_to"] == str(nano.data / f"runs-{BOARD}.jsonl")
    lines = (nano.data / f"runs-{BOARD}.jsonl").read_text().splitlines()
    assert len(lines) == 4
    rec = json.loads(lines[0])
    assert rec["format"] == FORMAT and rec["board"] == BOARD and rec["measure"] == "module"
    assert rec["workload"]["layers"] == 4 and rec["front_end"] == "OnlineGovernor"
    assert len(rec["probes"]) >= 2 and all(p["j_per_step"] > 0 and p["s_per_step"] > 0 for p in rec["probes"])
    assert rec["settled_mhz"] in profile(BOARD).levels_mhz

    # the runs calibrated the board (issue 51): for a shape it never ran, the calibration decides
    # (it predicts that shape's own curve), within 2 % of the least module energy
    for m, task in SIMILAR:
        t = truth(m, task)
        d = pydvfs.decide(workload(m, task), sysfs_root=nano.fb.root, data_dir=nano.data)
        assert d.learned is None and d.to_dict()["origin"]["kind"] == CALIBRATED, m
        assert t[d.freq_mhz][0] <= 1.02 * min(v[0] for v in t.values()), (m, task, d.freq_mhz)
    # without the calibration (removed, or every fit rejected) the runs' votes decide
    (nano.data / f"calibration-{BOARD}.json").unlink()
    for m, task in SIMILAR:  # other workloads of similar shape: within 2 % of the least module energy
        t = truth(m, task)
        best = min(t[f][0] for f in t)
        d = pydvfs.decide(workload(m, task), sysfs_root=nano.fb.root, data_dir=nano.data)
        assert d.learned is not None and d.to_dict()["origin"]["kind"] == "board-learned", m
        assert d.learned["runs"] == 4 and "learned on this board from 4 runs" in d.describe()
        assert t[d.freq_mhz][0] <= 1.02 * best, (m, task, d.freq_mhz, {f: round(v[0] / best, 4) for f, v in t.items()})
    # the tree alone (what apply did before) for comparison: the store is what made the difference
    tree = pydvfs.decide(workload(*SIMILAR[1]), sysfs_root=nano.fb.root, data_dir=nano.data, use_runs=False)
    assert tree.learned is None and "origin" not in tree.to_dict() or tree.to_dict()["origin"]["kind"] != "board-learned"

    # the CLI says so too, and apply pins the learned clock
    wl = workload(*SIMILAR[3])
    spec = ",".join(f"{k}={v}" for k, v in wl.items() if k != "name")
    res = cli("apply", "--sysfs-root", str(nano.fb.root), "--json", "--workload", spec, "--data-dir", str(nano.data))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["origin"]["kind"] == "board-learned" and out["origin"]["runs"] == 4
    assert "learned on this board from 4 runs" in res.stderr
    assert nano.fb.read_hz("max_freq") == round(out["freq_mhz"] * 1e6)
    assert cli("restore", "--sysfs-root", str(nano.fb.root)).returncode == 0

    # a fifth online run starts from the learned clock, and says so
    learned = pydvfs.decide(workload(*FIFTH), sysfs_root=nano.fb.root, data_dir=nano.data).freq_mhz
    r = online_run(nano, *FIFTH, seed=5)
    assert r["start_mhz"] == learned and "learned on this board from 4 runs" in r["start_source"]
    assert r["learned"]["freq_mhz"] == learned
    # ...and the model search was given the nearest shape's measured clocks as data (issue 30 item 4)
    assert r["prior"]["observations"] and "learned on this board" in r["prior"]["source"]
    assert {f for f, _, _ in r["prior"]["observations"]} <= set(r["search_levels_mhz"])
    assert len((nano.data / f"runs-{BOARD}.jsonl").read_text().splitlines()) == 5

    # status counts the runs; train --from-runs shows the refit
    res = cli("status", "--sysfs-root", str(nano.fb.root), "--data-dir", str(nano.data))
    assert res.returncode == 0, res.stderr
    assert "learned   from 5 runs on this board (5 module; 5 workload shapes)" in res.stdout
    st = json.loads(cli("status", "--sysfs-root", str(nano.fb.root), "--data-dir", str(nano.data), "--json").stdout)
    assert st["learned_runs"]["runs"] == 5 and st["learned_runs"]["data_dir"] == str(nano.data)
    res = cli("train", "--from-runs", "--board", BOARD, "--data-dir", str(nano.data), "--json")
    assert res.returncode == 0, res.stderr
    table = json.loads(res.stdout)
    assert table["board"] == BOARD and table["runs"] == 5 and len(table["shapes"]) == 5


def test_no_record_writes_nothing_and_a_callback_run_is_recorded(nano):
    r = online_run(nano, "bert-base", "SST-2", seed=0, record=False)
    assert r["probed"] and "recorded_to" not in r
    assert not nano.data.exists()
    r = online_run(nano, "bert-base", "SST-2", seed=0, callback=True, record=False)  # passed through
    assert not nano.data.exists()
    r = online_run(nano, "bert-base", "SST-2", seed=0, callback=True)
    rec = json.loads((nano.data / f"runs-{BOARD}.jsonl").read_text())
    assert rec["front_end"] == "callback" and rec["settled_mhz"] == r["chosen_mhz"]


def record(board=BOARD, layers=12, f_best=714.0, measure="module") -> dict:
    probes = [{"freq_mhz": f, "j_per_step": 1.0 + abs(f - f_best) / 1000, "s_per_step": 100.0 / f, "windows": 3}
              for f in (612.0, 714.0, 816.0)]
    return {"format": FORMAT, "board": board, "measure": measure, "probes": probes, "settled_mhz": f_best,
            "workload": {"model": "bert", "layers": layers, "hidden": 768, "seq_len": 64.0}}


def test_store_files_are_private_and_data_only(tmp_path):
    store = RunStore(tmp_path / "a" / "runs")
    path = store.append(record())
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "runs").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(open(path).read())["board"] == BOARD  # plain JSON lines


def test_a_folder_others_can_write_or_a_link_is_refused(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(StoreError, match="writable by no one else"):
        RunStore(open_dir).append(record())
    os.chmod(open_dir, 0o755)
    below = open_dir / "runs"  # its parent (made 0777 again) could be swapped by another user
    RunStore(below).append(record())
    os.chmod(open_dir, 0o777)
    with pytest.raises(StoreError, match="can be changed by another user"):
        RunStore(below).load(BOARD)
    os.chmod(open_dir, 0o755)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StoreError, match="symbolic link"):
        RunStore(tmp_path / "link").append(record())
    # a planted link in place of the board's file is not followed
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    (real / f"runs-{BOARD}.jsonl").symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        RunStore(real).append(record())
    assert victim.read_text() == "mine\n"
    with pytest.raises(StoreError, match="not an absolute path"):
        RunStore("relative/runs")


def test_a_damaged_record_is_skipped_with_one_line(tmp_path, capsys):
    store = RunStore(tmp_path / "runs")
    store.append(record(layers=12, f_best=714.0))
    path = tmp_path / "runs" / f"runs-{BOARD}.jsonl"
    with open(path, "a") as fh:
        fh.write('{"format": "pydvfs-runs/1", "board": "orin-nano-super", "probes": \n')  # cut short
        fh.write(json.dumps({**record(), "probes": [{"freq_mhz": 714, "j_per_step": -1, "s_per_step": 1,
                                                     "windows": 1}]}) + "\n")
        fh.write('{"__class__": "os.system", "format": "pickle"}\n')
    store.append(record(layers=24, f_best=816.0))
    loaded = store.load(BOARD)
    assert [r["workload"]["layers"] for r in loaded.records] == [12, 24]
    assert len(loaded.skipped) == 3 and "line 2: not JSON" in loaded.warning()
    assert "\n" not in loaded.warning()
    d = pydvfs.policy.learned.board_learned(BOARD, {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64},
                                          profile(BOARD).levels_mhz, data_dir=tmp_path / "runs")
    assert d.freq_mhz == 714.0 and d.runs == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "skipped 3 damaged run record(s)" in err[0]
    assert len(store.compact(BOARD).skipped) == 3 and store.load(BOARD).skipped == []  # dropped


def test_the_store_is_bounded_oldest_first(tmp_path):
    store = RunStore(tmp_path / "runs")
    for layers in range(1, 8):
        store.append(record(layers=layers), max_runs=5)
    assert [r["workload"]["layers"] for r in store.load(BOARD).records] == [3, 4, 5, 6, 7]


def test_check_record_refuses_what_is_not_a_record():
    check_record(record())
    for bad in ({**record(), "format": "x"}, {**record(), "board": "../etc"}, {**record(), "measure": "all"},
                {**record(), "probes": []}, {**record(), "workload": {"model": "bert", "layers": -1}}):
        with pytest.raises(ValueError):
            check_record(bad)


def test_learn_votes_by_distance_and_objective():
    levels = profile(BOARD).levels_mhz
    recs = [record(layers=12, f_best=714.0), record(layers=24, f_best=816.0)]
    near12 = learn(recs, {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 60}, levels)
    assert near12.freq_mhz == 714.0 and near12.runs == 2 and near12.neighbours[0]["workload"]["layers"] == 12
    assert learn(recs, {"model": "bert", "layers": 22, "hidden": 768, "seq_len": 64}, levels).freq_mhz == 816.0
    far = {"model": "bert", "layers": 2, "hidden": 128, "seq_len": 13}
    assert learn(recs, far, levels) is None  # nothing of a similar shape: the built-in policy decides
    assert learn(recs, near12.neighbours[0]["workload"], levels, Objective("energy", energy="cpu-gpu")) is None
    # EDP weighs the step time (100/f): the faster clock wins where energy is nearly flat
    assert learn(recs, {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}, levels,
                 Objective("edp")).freq_mhz == 816.0


def test_run_policy_online_records_and_no_record_opts_out(cli, tmp_path):
    """``pydvfs run --policy online`` end to end (the animated simulated process): the run is
    recorded; with --no-record nothing is written."""
    from pydvfs.sim.model import operating_point as op_at

    fb = build_fake_board(tmp_path / "board", board=BOARD)
    w = get_workload("bert-base", "SST-2")
    t_step = op_at(w, "fixed", 714.0, default_params(), board=BOARD).t_step_s
    scale = t_step / 0.0015
    data = tmp_path / "runs"
    for extra in ([], ["--no-record"]):
        progress = tmp_path / "steps"
        cmd = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(fb.root), "--board", BOARD,
               "--model", "bert-base", "--task", "SST-2", "--steps", "1500", "--time-scale", f"{scale:.6g}",
               "--tick-ms", "1", "--progress-file", str(progress), "--seed", "0"]
        res = cli("run", "--sysfs-root", str(fb.root), "--json", "--start", "714", "--search", "hill",
                  "--window", "0.3", "--min-steps", "50", "--settle", "0.05", "--rate", "1000", "--progress-file",
                  str(progress), "--data-dir", str(data), *extra, "--", *cmd)
        assert res.returncode == 0, res.stderr
        r = report(res)
        if not extra:
            assert r["probed"] and r["recorded_to"] == str(data / f"runs-{BOARD}.jsonl")
            assert json.loads((data / f"runs-{BOARD}.jsonl").read_text())["front_end"] == "pydvfs run"
            from pydvfs.cli.run import text_report

            assert f"recorded  for this board in {data / f'runs-{BOARD}.jsonl'}" in text_report(r)
        else:
            assert "recorded_to" not in r
    assert len((data / f"runs-{BOARD}.jsonl").read_text().splitlines()) == 1
    assert boards.board(BOARD).gpu_levels_mhz  # the board of the table the records name

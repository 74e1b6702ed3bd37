"""`pydvfs calibrate` (pydvfs/governor/calibrate.py, pydvfs/policy/board_calibration.py): one simulated
job on a board whose physics is a member of its uncertainty family no policy was trained on
(held out) calibrates the board; `apply` then picks, for workloads it never saw, clocks within
2 % of that board's least module energy."""
from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError, StoreError
from pydvfs.governor.calibrate import calibrate
from pydvfs.governor.engine import WindowParams
from pydvfs.policy.apply import decide
from pydvfs.policy.board_calibration import CalibrationStore, FitRejected, board_calibration
from pydvfs.policy.score import held_out, truth
from pydvfs.sim.uncertainty import held_out as held_out_member

BOARD = "orin-nano-super"
MEMBER = "held-out-0"  # the default simulator's best clocks cost this board up to 3.6 %
SCALE = 400.0
BERT_BASE = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3}
WINDOW = WindowParams(min_window_s=0.3, min_steps=60, settle_s=0.05)


def job(root, progress, steps=200000, member=MEMBER):
    return [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(root), "--board", BOARD,
            "--member", member, "--model", "bert-base", "--task", "SST-2", "--steps", str(steps),
            "--time-scale", str(SCALE), "--tick-ms", "1", "--progress-file", str(progress)]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    # The animated board runs in scaled time: on a machine both of whose cores are busy (two test
    # runs at once), a window can stretch and the gate rightly refuses that fit (measured: 4.2 %
    # rms with knobs at a bound). A fresh job then: the gate is the product's, not loosened here.
    for attempt in range(3):
        tmp = tmp_path_factory.mktemp("cal")
        fake = build_fake_board(tmp / "board", board=BOARD)
        data = tmp / "data"
        log = io.StringIO()
        (tmp / "steps").write_text("123456\n")  # a count an earlier job left: counted from, not removed
        try:
            r = calibrate(job(fake.root, tmp / "steps"), BERT_BASE, tmp / "steps", window=WINDOW, rate_hz=1000,
                          sysfs_root=fake.root, state_dir=str(tmp / "state"), data_dir=data, log=log)
        except FitRejected:
            assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)  # restored
            if attempt == 2:
                raise
            continue
        return fake, data, r, log.getvalue()


def test_one_job_calibrates_the_board_and_restores_it(calibrated):
    fake, data, r, log = calibrated
    assert r["restored"] and r["stopped"] and r["calibration"]["measurements"] == len(r["clocks_mhz"]) >= 4
    assert None in r["clocks_mhz"] and 1020.0 in r["clocks_mhz"]  # MAXN and the top level measured
    assert "calibrated on this board from" in log
    cal = board_calibration(BOARD, data)
    assert cal is not None and cal.measurements == r["calibration"]["measurements"]
    mode = stat.S_IMODE(os.stat(r["path"]).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(data).st_mode) == 0o700
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)


def test_apply_on_the_calibrated_board_picks_within_2_percent_of_its_least_energy(calibrated):
    fake, data, _, _ = calibrated
    p = held_out_member(BOARD, 0).params()
    worst, before, said = 0.0, 0.0, None
    for model, task in held_out()[::4]:  # workloads the job never ran
        t = truth(BOARD, model, task, p)
        e = t.energy_j["module"]
        d = decide(t.workload, sysfs_root=fake.root, data_dir=data)
        worst = max(worst, 100.0 * (e[d.freq_mhz] / min(e.values()) - 1.0))
        said = d
        # the default simulator's own best clock: what deciding without the calibration gets at most
        before = max(before, 100.0 * (e[truth(BOARD, model, task).best_mhz("module")] / min(e.values()) - 1.0))
    assert worst <= 2.0 < before, (worst, before)
    out = said.to_dict()
    assert out["origin"]["kind"] == "calibrated on this board" and out["saving_range_pct"] is not None
    assert "calibrated on this board from" in said.describe()


def test_a_damaged_calibration_is_a_warning_and_the_tree_decides(tmp_path):
    fake = build_fake_board(tmp_path / "board", board=BOARD)
    store = CalibrationStore(tmp_path / "data")
    os.makedirs(store.path, mode=0o700)
    with open(os.path.join(store.path, store.file_name(BOARD)), "w") as fh:
        fh.write('{"format": "pydvfs-calibration/1", "knobs": {"static": 99}}')
    os.chmod(os.path.join(store.path, store.file_name(BOARD)), 0o600)
    with pytest.raises(StoreError, match="damaged"):
        store.read(BOARD)
    d = decide(json.loads('{"model": "bert", "layers": 12, "hidden": 768, "seq_len": 13.3}'),
               sysfs_root=fake.root, data_dir=tmp_path / "data")
    assert d.to_dict()["origin"]["kind"] in ("estimate", "calibrated")


def test_a_job_that_ends_too_soon_is_one_clear_error_and_the_board_is_restored(tmp_path):
    fake = build_fake_board(tmp_path / "board", board=BOARD)
    with pytest.raises(InvalidValueError, match="the command ended"):
        calibrate(job(fake.root, tmp_path / "steps", steps=50), BERT_BASE, tmp_path / "steps", window=WINDOW,
                  rate_hz=1000, sysfs_root=fake.root, state_dir=str(tmp_path / "state"), data_dir=tmp_path / "d",
                  log=io.StringIO())
    assert board_calibration(BOARD, tmp_path / "d") is None
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)


def test_status_says_whether_the_board_is_calibrated(calibrated, tmp_path, capsys):
    from pydvfs.cli import main

    fake, data, r, _ = calibrated
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"calibrated yes: calibrated on this board from {r['calibration']['measurements']} measurements" in out
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(tmp_path / "none"), "--json"]) == 0
    assert "calibration" not in json.loads(capsys.readouterr().out)
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(tmp_path / "none")]) == 0
    assert "calibrated no:" in capsys.readouterr().out


def test_calibrate_never_takes_nor_removes_a_file_that_is_not_a_step_count(tmp_path, capsys):
    """It removed whatever --progress-file named (a user's file, a FIFO) before it started."""
    from pydvfs.cli import main

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    rc = main(["calibrate", "--sysfs-root", str(fake.root), "--workload", "model=bert,layers=12,hidden=768,seq_len=13",
               "--data-dir", str(tmp_path / "d"), "--progress-file", str(notes), "--", "true"])
    err = capsys.readouterr().err
    assert rc == 2 and "not a step count" in err and "left as it is" in err and len(err.strip().splitlines()) == 1
    assert notes.read_text() == "my notes\n"
    os.mkfifo(tmp_path / "fifo")
    assert main(["calibrate", "--sysfs-root", str(fake.root), "--workload", "model=bert,layers=2,hidden=128,seq_len=13",
                 "--data-dir", str(tmp_path / "d"), "--progress-file", str(tmp_path / "fifo"), "--", "true"]) == 2
    assert "not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)


@pytest.mark.parametrize("argv, why", [
    (["--progress-file", "/tmp/x"], "no training command"),
    (["--progress-file", "/nonexistent-dir/steps", "--", "true"], "no folder /nonexistent-dir"),
])
def test_calibrate_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, why):
    from pydvfs.cli import main

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    rc = main(["calibrate", "--sysfs-root", str(fake.root), "--workload", "model=bert,layers=12,hidden=768,seq_len=13",
               "--data-dir", str(tmp_path / "d"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)


def test_an_online_run_and_the_in_process_governor_start_from_the_calibration(calibrated, tmp_path):
    from pydvfs.device import open_device
    from pydvfs.governor.loop import plan_online

    fake, data, r, _ = calibrated
    dev = open_device(fake.root, str(tmp_path / "state"))
    log = io.StringIO()
    plan = plan_online(dev, BERT_BASE, log=log, data_dir=data)
    assert plan["start_mhz"] == r["chosen_mhz"] and "calibrated on this board from" in plan["start_source"]
    assert "starting at" in log.getvalue()
    plain = plan_online(dev, BERT_BASE, data_dir=tmp_path / "none", log=io.StringIO())
    assert "calibrated" not in plain["start_source"]
    # uncalibrated, the plan says how far the board's optimum may be: the family's spread
    lo, hi = plain["family_spread_mhz"]
    assert lo < hi and plan["family_spread_mhz"] is None


def test_calibrate_writes_a_record_to_share_without_identifiers(calibrated):
    fake, data, r, _ = calibrated
    js, md = r["record"]
    rec = json.loads(open(js).read())
    assert rec["board"] == BOARD and rec["capture"]["format"] and len(rec["curve"]) == r["calibration"]["measurements"]
    for c in rec["curve"]:  # the fitted simulator is nearer the measured shape than the estimate was, overall
        assert c["after_j_rel"] > 0 and c["before_j_rel"] > 0
    err = sum(abs(c["after_j_rel"] - c["measured_j_rel"]) for c in rec["curve"])
    assert err < sum(abs(c["before_j_rel"] - c["measured_j_rel"]) for c in rec["curve"])
    assert {d["workload"] for d in rec["decisions"]} and all(d["after_mhz"] for d in rec["decisions"])
    text = open(md).read()
    assert text.startswith("# pydvfs calibration of") and "| setting |" in text and "| workload |" in text
    blob = json.dumps(rec).lower()
    for ident in ("serial_number", "hostname", "/etc/machine-id", "address"):
        assert ident not in blob
    assert stat.S_IMODE(os.stat(js).st_mode) == stat.S_IMODE(os.stat(md).st_mode) == 0o600


def test_published_records_fold_into_a_profiles_knobs(calibrated, tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from fold_calibrations import main as fold_main

    _, _, r, _ = calibrated
    rec = json.loads(Path(r["record"][0]).read_text())
    other = dict(rec, calibration={**rec["calibration"], "knobs": {**rec["calibration"]["knobs"], "static": 1.5}})
    (tmp_path / "other.json").write_text(json.dumps(other))
    # one record given three times is one vote (issue 51: it counted three)
    assert fold_main([r["record"][0], r["record"][0], r["record"][0], str(tmp_path / "other.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["board"] == BOARD and out["records"] == 2 and out["given"] == 4
    assert out["knobs"]["static"]["median"] == (r["calibration"]["knobs"]["static"] + 1.5) / 2
    # refused in one line, never a traceback: not a record, a record whose calibration is of another
    # board than it says, a malformed calibration, not JSON
    moved = dict(rec, board="orin-nx")
    broken = dict(rec, calibration={**rec["calibration"], "points": [{"j_per_step": 1.0, "s_per_step": 1.0}] * 2})
    for text, why in (('{"format": "x"}', "not a pydvfs-calibration/2-record"), ("[1, 2]", "not a pydvfs"),
                      (json.dumps(moved), "of board 'orin-nx' holds a calibration of 'orin-nano-super'"),
                      (json.dumps(broken), "malformed"), ("{", "not JSON")):
        (tmp_path / "bad.json").write_text(text)
        assert fold_main([str(tmp_path / "bad.json")]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_each_recorded_online_run_refits_the_calibration(calibrated, tmp_path, capsys):
    """Issue 35: an online run recorded in the store refits the board's calibration from its own
    job's points and the store's runs (the same physics, another workload); damaged records and
    another board's are never fitted; status and apply say the new count. The calibration is the
    member's exact curve at calibrate's clocks: the runs agree with it, so no run moves a decision
    alone (a noisy calibrate job's fit once was held at the second run on a busy CI machine, as
    designed: test_calibration_gate holds that rule)."""
    import shutil

    from pydvfs.cli import main
    from pydvfs.device import open_device
    from pydvfs.policy.board_calibration import design, fit, new_calibration, predict, sim_run_for
    from pydvfs.policy.record import record_run
    from pydvfs.policy.store import RunStore, make_record
    from pydvfs.workload import Workload

    fake, data0, _, _ = calibrated
    data = tmp_path / "data"
    shutil.copytree(data0, data)  # modes kept: 0700 folder, 0600 files
    member = dict(held_out_member(BOARD, 0).knobs)
    bert = Workload.from_any(BERT_BASE)
    run = sim_run_for(bert)
    own = predict(BOARD, member, run, design(BOARD, run))
    CalibrationStore(data).save(new_calibration(BOARD, *fit(BOARD, run, own), bert, own, "module"))
    before = board_calibration(BOARD, data)
    wl = {"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 40.0}
    clocks = (510.0, 612.0, 714.0, 1020.0, None)  # what an online run on this board measured

    def run_report(w):
        pts = predict(BOARD, member, sim_run_for(Workload.from_any(w)), clocks)
        return {"trajectory": [{"freq_mhz": f, "j_per_step": j, "s_per_step": s, "steps": 100}
                               for f, (j, s) in pts.items()],
                "objective": {"kind": "energy", "energy": "module"}, "chosen_mhz": 612.0, "converged": True}

    report = run_report(wl)
    dev = open_device(fake.root, str(tmp_path / "state"))
    other = make_record(dict(report), "orin-nx", "NVIDIA Jetson Orin NX", [510.0, 612.0, 714.0, 1020.0], wl, "pydvfs run")
    store = RunStore(data)
    with open(store.file_path(BOARD), "w") as fh:  # never fitted: a damaged line, another board's record
        fh.write('{"format": "pydvfs-runs/1", "board": "orin-nano-super", "probes": [\n' + json.dumps(other) + "\n")
    os.chmod(store.file_path(BOARD), 0o600)
    wl2 = {"model": "pythia", "layers": 16, "hidden": 2048, "seq_len": 60.0}
    for n, w in ((1, wl), (2, wl2), (2, wl2)):  # the same run given twice is one vote
        log = io.StringIO()
        assert record_run(run_report(w), dev, w, "pydvfs run", data, log, "pydvfs run")
        after = board_calibration(BOARD, data)
        assert after.points == before.points and after.created_utc == before.created_utc
        # its own points and each distinct run's five, never an earlier refit's again
        assert (after.measurements, after.online_runs) == (before.measurements + n * len(clocks), n)
        assert f"calibrated on this board from {after.measurements} measurements" in log.getvalue()
    assert stat.S_IMODE(os.stat(CalibrationStore(data).file_path(BOARD)).st_mode) == 0o600
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"calibrated on this board from {after.measurements} measurements" in out
    assert f"refitted {after.refit_utc} with 2 online runs" in out
    d = decide(BERT_BASE, sysfs_root=fake.root, data_dir=data)  # no recorded shape near it: the calibration's
    assert d.origin["measurements"] == after.measurements
    assert f"from {after.measurements} measurements" in d.describe()


def test_a_damaged_calibration_is_not_refitted_and_the_run_is_still_recorded(tmp_path):
    from pydvfs.device import open_device
    from pydvfs.policy.record import record_run
    from pydvfs.policy.store import RunStore

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    store = CalibrationStore(tmp_path / "data")
    os.makedirs(store.path, mode=0o700)
    path = os.path.join(store.path, store.file_name(BOARD))
    with open(path, "w") as fh:
        fh.write('{"format": "pydvfs-calibration/1", "knobs": {"static": 99}}')
    os.chmod(path, 0o600)
    report = {"trajectory": [{"freq_mhz": f, "j_per_step": 1.0 + f / 1e4, "s_per_step": 1e3 / f, "steps": 100}
                             for f in (510.0, 1020.0)], "objective": {"energy": "module"}, "chosen_mhz": 510.0}
    log = io.StringIO()
    dev = open_device(fake.root, str(tmp_path / "state"))
    assert record_run(report, dev, BERT_BASE, "pydvfs run", tmp_path / "data", log, "pydvfs run")
    assert len(RunStore(tmp_path / "data").load(BOARD).records) == 1
    lines = log.getvalue().strip().splitlines()
    assert len(lines) == 1 and "warning: the board's calibration was not refitted" in lines[0] and "damaged" in lines[0]


# steps at a steady rate in argv[1] whatever the GPU does, while the simulated job argv[3:] draws the
# board's power at its clock (its own steps in argv[2], awaited before the first step)
STEADY = """import os, signal, subprocess, sys, time
from pydvfs.progress import write_progress
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
child = subprocess.Popen(sys.argv[3:])
try:
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    n = 0
    while True:
        n += 1
        write_progress(sys.argv[1], n)
        time.sleep(0.002)
finally:
    child.kill()
    child.wait()
"""


def test_a_command_whose_steps_do_not_follow_the_clock_is_no_calibration(tmp_path, capsys):
    """Issue 51: steps at a steady rate whatever the GPU does fitted with 47.6 % rms error,
    knobs at bounds, exit 0, and were stored as the board's calibration."""
    from pydvfs.cli import main

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    rc = main(["calibrate", "--sysfs-root", str(fake.root), "--state-dir", str(tmp_path / "state"),
               "--data-dir", str(tmp_path / "d"), "--workload", "model=bert,layers=12,hidden=768,seq_len=13.3",
               "--progress-file", str(tmp_path / "steps"), "--window", "0.3", "--min-steps", "20", "--settle", "0.05",
               "--", sys.executable, "-c", STEADY, str(tmp_path / "steps"), str(tmp_path / "sim"),
               *job(fake.root, tmp_path / "sim")])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "no calibration stored" in last and "do not follow the GPU clock" in last, err
    assert board_calibration(BOARD, tmp_path / "d") is None
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)
    assert CalibrationStore(tmp_path / "d").rejection(BOARD)["source"] == "pydvfs calibrate"


def test_calibrate_waits_a_bounded_time_for_the_first_step_and_restores_the_board(tmp_path):
    """Issue 51: a command that never writes its step count kept the board at its top clock."""
    fake = build_fake_board(tmp_path / "board", board=BOARD)
    log = io.StringIO()
    with pytest.raises(InvalidValueError, match="no step count came .* in 0.5 s") as e:
        calibrate([sys.executable, "-c", "import time; time.sleep(60)"], BERT_BASE, tmp_path / "steps",
                  window=WindowParams(min_window_s=0.3, min_steps=20, settle_s=0.05, progress_timeout_s=0.5),
                  rate_hz=1000, sysfs_root=fake.root, state_dir=str(tmp_path / "state"), data_dir=tmp_path / "d",
                  log=log)
    assert "board was restored" in str(e.value) and "waiting up to 0.5 s for" in log.getvalue()
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (306000000, 1020000000)
    assert board_calibration(BOARD, tmp_path / "d") is None


def _online_report(member_knobs, wl, clocks=(510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, None), partial=False):
    """What an online run of ``wl`` on the board ``member_knobs`` measured (the clocks the search
    probes on this board, MAXN first)."""
    from pydvfs.policy.board_calibration import predict, sim_run_for
    from pydvfs.workload import Workload

    pts = predict(BOARD, member_knobs, sim_run_for(Workload.from_any(wl)), clocks)
    return {"trajectory": [{"freq_mhz": f, "j_per_step": j, "s_per_step": s, "steps": 100} for f, (j, s) in pts.items()],
            "objective": {"kind": "energy", "energy": "module"}, "chosen_mhz": 714.0, "converged": not partial,
            "partial": partial}


def test_one_governed_run_calibrates_an_uncalibrated_board_for_every_workload(tmp_path, capsys):
    """Issue 51: an online run on an uncalibrated board calibrated nothing; the built-in keeps MAXN
    there. Now the run's record calibrates it (gated), and apply on workloads the run never saw
    picks within 2 % of the board's least energy; a partial run, or steps that do not follow the
    clock, calibrate nothing, and status says why."""
    from pydvfs.cli import main
    from pydvfs.device import open_device
    from pydvfs.policy.record import record_run

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    dev = open_device(fake.root, str(tmp_path / "state"))
    data = tmp_path / "data"
    knobs = dict(held_out_member(BOARD, 0).knobs)
    log = io.StringIO()  # Ctrl-C'd part-way: recorded, never a calibration
    assert record_run(_online_report(knobs, BERT_BASE, partial=True), dev, BERT_BASE, "pydvfs run", data, log, "pydvfs run")
    assert board_calibration(BOARD, data) is None and "calibrated" not in log.getvalue()
    steady = _online_report(knobs, BERT_BASE)
    for w in steady["trajectory"]:  # a step count that rises whatever the GPU does
        w["j_per_step"], w["s_per_step"] = w["j_per_step"] / w["s_per_step"] * 0.01, 0.01
    log = io.StringIO()
    assert record_run(steady, dev, BERT_BASE, "pydvfs run", data, log, "pydvfs run")
    assert board_calibration(BOARD, data) is None
    line = log.getvalue().strip().splitlines()
    assert len(line) == 1 and "not calibrated: the fit with this run was rejected" in line[0], line
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(data)]) == 0
    assert "the last fit was rejected" in capsys.readouterr().out
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(data), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert "calibration" not in st and "do not follow the GPU clock" in st["calibration_rejected"]["why"]

    data = tmp_path / "data2"  # a store without the steady record
    p = held_out_member(BOARD, 0).params()
    before = []
    for model, task in held_out()[::16]:  # before any run: MAXN, never above MAXN + 1 %
        t = truth(BOARD, model, task, p)
        d = decide(t.workload, sysfs_root=fake.root, data_dir=data)
        before.append(t.vs_maxn_pct("module", d.freq_mhz))
        assert d.freq_mhz is None or t.vs_maxn_pct("module", d.freq_mhz) <= 1.0
        assert d.freq_mhz is not None or "pydvfs calibrate" in d.kept_reason
    log = io.StringIO()
    assert record_run(_online_report(knobs, BERT_BASE), dev, BERT_BASE, "pydvfs run", data, log, "pydvfs run")
    assert "the board is now calibrated on this board from 7 measurements of 1 online run" in log.getvalue()
    cal = board_calibration(BOARD, data)
    assert cal is not None and cal.measurements == 7 and cal.online_runs == 0
    worst = 0.0
    for model, task in held_out()[::16]:
        t = truth(BOARD, model, task, p)
        e = t.energy_j["module"]
        d = decide(t.workload, sysfs_root=fake.root, data_dir=data)  # the calibration's, or the run's own shape
        assert d.learned or d.to_dict()["origin"]["kind"] == "calibrated on this board"
        worst = max(worst, 100.0 * (e[d.freq_mhz] / min(e.values()) - 1.0))
    assert worst <= 2.0 and min(before) >= -1.0, (worst, before)


def test_a_nonsense_calibration_stored_before_the_gate_is_not_decided_from(tmp_path, capsys):
    """Issue 51: a fit with 47.6 % rms error and knobs at bounds was stored and status said
    calibrated; one already stored is now a warning, and the built-in decides."""
    from pydvfs.cli import main
    from pydvfs.policy.board_calibration import new_calibration
    from pydvfs.workload import Workload

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    knobs = {"static": 0.6, "vf_exp": 0.8, "vf_knee": 1.3, "compute": 1.25, "maxn": 0.7, "cpu": 1.0, "vf_top": 1.0}
    pts = {f: (0.02, 0.01) for f in (306.0, 510.0, 714.0, 1020.0, None)}
    CalibrationStore(tmp_path / "d").save(new_calibration(BOARD, knobs, 0.476, Workload.from_any(BERT_BASE), pts,
                                                          "module"))
    log = io.StringIO()
    assert board_calibration(BOARD, tmp_path / "d", log) is None
    assert "is not used: the board's simulator follows the measured curve only to 47.6 % rms error" in log.getvalue()
    d = decide(BERT_BASE, sysfs_root=fake.root, data_dir=tmp_path / "d")
    assert d.to_dict()["origin"]["kind"] != "calibrated on this board"
    assert main(["status", "--sysfs-root", str(fake.root), "--data-dir", str(tmp_path / "d")]) == 0
    assert "calibrated no:" in capsys.readouterr().out


def test_a_joint_knobs_run_calibrates_the_board_from_its_gpu_line(tmp_path):
    """Issue 51: `run --knobs` recorded nothing, so it calibrated nothing. Its windows at the top
    mode's EMC and CPU clocks (the GPU line the joint search probes first) are GPU-only
    measurements: they are recorded and calibrate the board; the modes off that line are not."""
    from pydvfs.device import open_device
    from pydvfs.policy.record import record_run
    from pydvfs.policy.store import RunStore

    fake = build_fake_board(tmp_path / "board", board=BOARD)
    dev = open_device(fake.root, str(tmp_path / "state"))
    line = _online_report(dict(held_out_member(BOARD, 0).knobs), BERT_BASE, clocks=(1020.0, 714.0, 510.0))
    traj = [{**w, "freq_mhz": [w["freq_mhz"], 3199.0, 1728.0]} for w in line["trajectory"]]
    traj += [{**traj[1], "freq_mhz": [714.0, 2133.0, 1728.0], "j_per_step": 9.0},  # off the line: never fitted
             {**traj[2], "freq_mhz": [510.0, 3199.0, 1113.6], "s_per_step": 9.0}]
    report = {**line, "search_kind": "joint", "trajectory": traj, "chosen_mhz": [714.0, 2133.0, 1728.0],
              "start_mhz": [1020.0, 3199.0, 1728.0]}
    log = io.StringIO()
    assert record_run(report, dev, BERT_BASE, "pydvfs run", tmp_path / "data", log, "pydvfs run")
    rec = RunStore(tmp_path / "data").load(BOARD).records[-1]
    assert [p["freq_mhz"] for p in rec["probes"]] == [510.0, 714.0, 1020.0] and rec["settled_mhz"] is None
    cal = board_calibration(BOARD, tmp_path / "data")
    assert cal is not None and cal.measurements == 3 and cal.rms_log_error < 0.01, log.getvalue()
    assert "the board is now calibrated" in log.getvalue()
    off = {**report, "trajectory": traj[3:]}  # nothing on the line: recorded nothing, and says so
    log = io.StringIO()
    assert record_run(off, dev, BERT_BASE, "pydvfs run", tmp_path / "none", log, "pydvfs run") is None
    assert "this joint (--knobs) run did not calibrate the board" in log.getvalue()
    assert board_calibration(BOARD, tmp_path / "none") is None

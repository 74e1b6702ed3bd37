"""`pydvfs sweep` on a board: the simulated training process animates a fake Orin while the real
pinning code and C sampler run against it."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from wrapped import report

from pydvfs.device.fake import build_fake_board

WORKLOAD = "name=bert-mini/SST-2,model=bert,layers=4,hidden=256,seq_len=13.3,task=SST-2,batch_size=16"


@pytest.fixture
def orin(tmp_path):
    return build_fake_board(tmp_path / "board", "jp6")


def train_cmd(orin, steps=150):
    return [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(orin.root),
            "--model", "bert-mini", "--task", "SST-2", "--steps", str(steps), "--time-scale", "25"]


def sweep_args(orin, out, *extra):
    return ["sweep", "--sysfs-root", str(orin.root), "--out", str(out), "--workload", WORKLOAD,
            "--freqs", "510,1300", "--settle", "0", "--idle", "0.2", "--rate", "500", *extra]


def test_sweep_measures_every_setting_and_resumes(cli, orin, tmp_path):
    out = tmp_path / "d.csv"
    # 1000 steps (~1-2 s a run): long against the start-up of the process, which the window also
    # holds at idle power and which a busy machine stretches to a second or more
    res = cli(*sweep_args(orin, out, "--json", "--", *train_cmd(orin, steps=1000)))
    assert res.returncode == 0, res.stderr
    summary = report(res)
    assert summary["runs"] == 3 and summary["skipped"] == 0
    assert summary["noise"]["n_workloads"] == 1  # the sweep says whether it can be labelled
    assert "ETA" in res.stderr  # progress lines
    df = pd.read_csv(out)
    assert sorted(df["setting"]) == ["fixed", "fixed", "maxn"]
    assert set(df["freq_mhz"].dropna()) == {510.0, 1300.5}
    assert (df["energy_cpu_gpu_j"] > 0).all() and (df["samples"] > 10).all()
    assert (df["exit_status"] == 0).all() and df["idle_power_w"].notna().all()
    # the process followed the pinned clock: at 510 MHz the rails carry far less power than at
    # 1300.5 (power comes from the simulated rails, so it does not depend on the machine's load)
    p = df.set_index("freq_mhz")["avg_power_w"]
    assert p[510.0] < 0.8 * p[1300.5], p
    assert orin.read_hz("max_freq") == 1300500000 and orin.read_hz("min_freq") == 306000000

    res = cli(*sweep_args(orin, out, "--json", "--", *train_cmd(orin)))
    assert report(res)["runs"] == 0  # resumed: nothing left to do

    # a crash mid-write: the last row is half there; the rerun cuts it and measures that run again
    text = out.read_text()
    lines = text.splitlines(keepends=True)
    out.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    res = cli(*sweep_args(orin, out, "--json", "--", *train_cmd(orin)))
    summary = report(res)
    assert summary["repaired_bytes"] > 0 and summary["runs"] == 1
    assert len(pd.read_csv(out)) == 3


def test_failing_command_is_recorded(cli, orin, tmp_path):
    out = tmp_path / "d.csv"
    res = cli(*sweep_args(orin, out, "--", sys.executable, "-c", "import sys; sys.exit(3)"))
    assert res.returncode == 1
    # the summary (on stderr, after the progress lines) names the three failures; stdout is CMD's
    assert res.stderr.count("\nFAILED: ") == 3 and "FAILED" not in res.stdout
    assert set(pd.read_csv(out)["exit_status"]) == {3}


def test_a_command_ended_by_a_stop_signal_is_not_recorded_and_a_resume_runs_it(orin, tmp_path):
    """scancel or a time limit signals the whole Slurm step: the command may die of the SIGTERM
    before the sweep's own handler runs. Such a cell was cut off, not measured: it is left out
    (and said), so a resumed sweep measures it; an ordinary failure is still recorded."""
    from pydvfs.characterise.sweep import parse_workload, run_sweep

    out = tmp_path / "d.csv"
    cmd = ["sh", "-c", '[ "$PYDVFS_FREQ_MHZ" != 510 ] || kill -TERM $$']
    s = run_sweep(cmd, parse_workload(WORKLOAD), out, freqs="510,1300", settle_s=0, idle_s=0,
                  sysfs_root=str(orin.root), state_dir=str(tmp_path / "st"))
    assert s["runs"] == 2 and [(f["freq_mhz"], f["exit_status"], f["recorded"]) for f in s["failed"]] == [(510, 143, False)]
    assert sorted(pd.read_csv(out)["freq_mhz"].fillna(0)) == [0, 1300.5]  # MAXN and 1300.5 MHz
    s = run_sweep(["true"], parse_workload(WORKLOAD), out, freqs="510,1300", settle_s=0, idle_s=0,
                  sysfs_root=str(orin.root), state_dir=str(tmp_path / "st"))
    assert (s["runs"], s["skipped"], s["failed"]) == (1, 2, [])


def test_bad_input_one_line_and_board_untouched(cli, orin, tmp_path):
    out = tmp_path / "d.csv"
    cases = [
        sweep_args(orin, out, "--", "/no/such/program"),
        sweep_args(orin, out),  # no command
        ["sweep", "--sysfs-root", str(orin.root), "--out", str(out), "--workload", "model=toaster,layers=1,hidden=1,seq_len=1", "--", "true"],
        ["sweep", "--sysfs-root", str(orin.root), "--out", str(out), "--workload", WORKLOAD, "--freqs", "fast", "--", "true"],
    ]
    for args in cases:
        res = cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert orin.read_hz("max_freq") == 1300500000 and orin.read_hz("min_freq") == 306000000


def _seed_pinning_first() -> int:
    """A seed whose shuffled order runs the pinned clock before MAXN (see sweep.run_sweep)."""
    for seed in range(100):
        order = [("fixed", 306.0), ("maxn", None)]
        random.Random(f"{seed}/bert-mini/SST-2/0").shuffle(order)
        if order[0][0] == "fixed":
            return seed
    raise AssertionError("no seed puts the pinned clock first")


def test_ctrl_c_restores_the_board(orin, tmp_path, spawn):
    out, started = tmp_path / "d.csv", tmp_path / "started"
    args = [sys.executable, "-m", "pydvfs", *sweep_args(orin, out, "--freqs", "306", "--seed", str(_seed_pinning_first()),
                                                        "--", "sh", "-c", f"touch {started}; exec sleep 60")]
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # the pinned run's command started (a loaded machine starts Python slowly)
    while not (started.exists() and orin.read_hz("max_freq") == 306000000):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    assert orin.read_hz("min_freq") == orin.read_hz("max_freq") == 306000000  # pinned, training
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert orin.read_hz("max_freq") == 1300500000 and orin.read_hz("min_freq") == 306000000


def test_without_the_train_extra_the_sweep_runs_and_says_what_it_left_out(orin, tmp_path, monkeypatch, capsys):
    """Without pandas the sweep once ran every setting, then exited 2 ("this needs pandas")
    with no summary: it now says so before the first run, and summarises without the noise check."""
    from pydvfs import cli

    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    out = tmp_path / "data.csv"
    rc = cli.main([*sweep_args(orin, out, "--freqs", "714", "--idle", "0", "--json"), "--", "true"])
    res = capsys.readouterr()
    assert rc == 0, res.err
    summary = report(res)  # on stderr: CMD keeps stdout
    assert summary["runs"] == 2 and summary["noise"] is None  # 714 MHz and MAXN
    assert "pip install 'pydvfs[train]'" in summary["noise_left_out"]
    first = res.err.splitlines()[0]
    assert first.startswith("pydvfs sweep: note: the noise check after the sweep is left out: this needs pandas")

"""Signals, full disks and bad input: the board always comes back, the user gets one line."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pydvfs.device.fake import build_fake_board

WORKLOAD = "name=w,model=bert,layers=4,hidden=256,seq_len=13.3"
SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def orin(tmp_path):
    return build_fake_board(tmp_path / "board", "jp6")


def pinned(orin) -> bool:
    return orin.read_hz("min_freq") == orin.read_hz("max_freq")


def restored(orin) -> bool:
    return (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == (306000000, 1300500000)


def start_and_signal(spawn, args, orin, sig):
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # a loaded machine starts Python slowly
    while not pinned(orin) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert pinned(orin), proc.stderr.read() if proc.poll() is not None else "never pinned"
    time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sweep_restores_on_termination_signals(orin, tmp_path, sig, status, spawn):
    args = [sys.executable, "-m", "pydvfs", "sweep", "--sysfs-root", str(orin.root), "--out", str(tmp_path / "d.csv"),
            "--workload", WORKLOAD, "--freqs", "510", "--settle", "0", "--idle", "0", "--", *SLEEP]
    # whichever of 510 MHz and MAXN runs first, wait for the pinned run
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not pinned(orin) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert pinned(orin)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert restored(orin)


def test_run_restores_on_sighup(orin, spawn):
    args = [sys.executable, "-m", "pydvfs", "run", "--policy", "rules", "--workload", WORKLOAD,
            "--sysfs-root", str(orin.root), "--", *SLEEP]
    rc, err = start_and_signal(spawn, args, orin, signal.SIGHUP)
    assert rc == 129, err
    assert restored(orin)


def test_governed_restores_on_sigterm(orin, spawn):
    code = ("import sys, time, pydvfs\n"
            "with pydvfs.governed({'model': 'bert', 'layers': 12, 'hidden': 768, 'seq_len': 40}, policy='rules',"
            " sysfs_root=sys.argv[1]):\n    time.sleep(60)\n")
    rc, _ = start_and_signal(spawn, [sys.executable, "-c", code, str(orin.root)], orin, signal.SIGTERM)
    assert rc != 0 and restored(orin)


def test_sweep_on_a_full_disk_restores_and_says_so(orin, tmp_path):
    def small_files():  # a dataset that cannot grow past 2 kB, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    args = [sys.executable, "-m", "pydvfs", "sweep", "--sysfs-root", str(orin.root), "--out", str(tmp_path / "d.csv"),
            "--workload", WORKLOAD, "--repeats", "3", "--settle", "0", "--idle", "0", "--", "true"]
    proc = subprocess.run(args, capture_output=True, text=True, preexec_fn=small_files, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "File too large" in proc.stderr
    assert restored(orin)


@pytest.fixture
def paths(tmp_path):
    regular = tmp_path / "regular"
    regular.write_text("x")
    (tmp_path / "adir").mkdir()
    bad_results = tmp_path / "rep"
    bad_results.mkdir()
    (bad_results / "results.json").write_text("{not json")
    return {"regular": str(regular), "adir": str(tmp_path / "adir"), "rep": str(bad_results)}


CASES = [
    ["sweep", "--out", "{adir}", "--workload", WORKLOAD, "--", "true"],
    ["sweep", "--out", "{regular}/x.csv", "--workload", WORKLOAD, "--", "true"],
    ["sweep", "--sim", "--out", "{regular}/x.csv", "--models", "bert-tiny", "--tasks", "SST-2"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", "model=bert,layers=inf,hidden=8,seq_len=4", "--", "true"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", "model=bert,layers=2.7,hidden=8,seq_len=4", "--", "true"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", WORKLOAD + ",params=abc", "--", "true"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", WORKLOAD, "--settle", "nan", "--", "true"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", WORKLOAD, "--idle", "inf", "--", "true"],
    ["sweep", "--out", "{adir}/d.csv", "--workload", WORKLOAD, "--freqs", "inf", "--", "true"],
    ["apply", "--model", "bert", "--layers", "1" + "0" * 400, "--hidden", "8", "--seq-len", "4"],
    ["measure", "--rate", "1e-10", "--", "true"],
    ["train", "--data", "{adir}", "--out", "{adir}/m"],
    ["report", "{rep}"],
    ["demo", "--seed", "-1", "--out", "{adir}/demo"],
    ["run", "--policy", "online", "--progress-file", "{regular}/x", "--", "true"],
]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[:3]) for c in CASES])
def test_bad_input_is_one_line_exit_2(cli, orin, paths, case):
    args = [a.format(**paths) for a in case] + ["--sysfs-root", str(orin.root)]
    if "--" in args:  # global options go before the command
        i = args.index("--")
        args = args[:i] + args[-2:] + args[i:-2]
    res = cli(*args)
    assert res.returncode == 2, (args, res.stderr[-500:])
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr[-800:]
    assert restored(orin)


def test_govcore_measure_rejects_a_rate_it_cannot_keep(orin):
    repo = Path(__file__).resolve().parents[2]
    subprocess.run(["make", "-s", "-C", str(repo / "govcore"), "govcore"], check=True, capture_output=True)
    res = subprocess.run([str(repo / "govcore" / "govcore"), "--sysfs-root", str(orin.root), "measure", "--rate",
                          "1e-10", "--", "true"], capture_output=True, text=True)
    assert res.returncode == 2 and "--rate" in res.stderr


def _write_dataset(path, energies, util_column=True):
    import csv

    from pydvfs.characterise.dataset import COLUMN_NAMES
    rows = []
    for name, curve in energies.items():
        base = {"workload": name, "model": "bert", "task": "t", "layers": 4, "hidden": 256, "seq_len": 20,
                "exit_status": 0}
        for f, e in curve.items():
            rows.append({**base, "setting": "fixed", "freq_mhz": f, "repeat": 0, "energy_cpu_gpu_j": e,
                         "avg_gpu_load_pct": 40})
        rows.append({**base, "setting": "maxn", "freq_mhz": "", "repeat": 0, "energy_cpu_gpu_j": 100.0,
                     "avg_gpu_load_pct": 77.0, "gpu_util_pct": 55.0 if util_column else ""})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMN_NAMES)
        w.writeheader()
        w.writerows(rows)


def test_board_datasets_supply_utilisation_from_the_maxn_runs(tmp_path):
    from pydvfs.policy.curves import curves_from_frame, read_dataset
    _write_dataset(tmp_path / "board.csv", {"a": {510.0: 80.0, 714.0: 70.0}}, util_column=False)
    _write_dataset(tmp_path / "sim.csv", {"a": {510.0: 80.0, 714.0: 70.0}}, util_column=True)
    assert curves_from_frame(read_dataset(tmp_path / "board.csv"))[0].workload.util_pct == 77.0
    assert curves_from_frame(read_dataset(tmp_path / "sim.csv"))[0].workload.util_pct == 55.0


def test_a_nan_energy_cannot_become_the_oracle(cli, tmp_path):
    _write_dataset(tmp_path / "d.csv", {"a": {306.0: float("nan"), 510.0: 80.0, 714.0: 70.0},
                                        "b": {306.0: 90.0, 510.0: 0.0, 714.0: 60.0}})
    res = cli("evaluate", "--data", str(tmp_path / "d.csv"), "--json", "--energy", "cpu-gpu")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)  # valid JSON: no NaN
    assert d["energy_column"] == "energy_cpu_gpu_j"
    oracle = {w["workload"]: w["oracle_mhz"] for w in d["workloads"]}
    assert oracle == {"a": 714.0, "b": 714.0}
    assert d["summary"]["mlg"]["oracle_mean_saving_pct"] == pytest.approx(35.0)


def test_a_sigterm_while_the_command_starts_leaves_no_orphan(tmp_path):
    """SIGTERM arriving inside Popen (after the fork): the child is stopped, then Terminated."""
    marker = tmp_path / "child-pid"
    code = f"""
import os, signal, subprocess, sys, time
from pydvfs import command, signals
orig = subprocess.Popen.__init__
def init_then_signal(self, *a, **k):
    orig(self, *a, **k)
    open({str(marker)!r}, "w").write(str(self.pid))
    os.kill(os.getpid(), signal.SIGTERM)
subprocess.Popen.__init__ = init_then_signal
with signals.terminate_as_exception():
    try:
        command.start_command([sys.executable, "-c", "import time; time.sleep(60)"])
    except signals.Terminated as e:
        sys.exit(e.exit_status)
sys.exit(0)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    child = int(marker.read_text())
    with pytest.raises(ProcessLookupError):  # reaped: gone
        os.kill(child, 0)

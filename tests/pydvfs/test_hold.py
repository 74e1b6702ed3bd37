"""`pydvfs pin MHZ -- CMD` and `pydvfs apply ... -- CMD`: the clock held for CMD's life, restored
after it (also when CMD fails, on SIGINT and SIGTERM), and CMD's exit status (issue 22)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from wrapped import report

ORIGINAL = (306000000, 1300500000, "nvhost_podgov")
WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=128"


def _state(board):
    return board.read_hz("min_freq"), board.read_hz("max_freq"), board.governor()


def _seen_by(board, out):
    """A command that writes the max_freq it saw into out, then exits 3."""
    return ["sh", "-c", f"cat {board.devfreq_dir / 'max_freq'} > {out}; exit 3"]


def test_pin_holds_the_clock_while_the_command_runs(cli, board, tmp_path):
    seen = tmp_path / "seen"
    out = cli("pin", "714", "--sysfs-root", str(board.root), "--json", "--", *_seen_by(board, seen))
    assert out.returncode == 3, out.stderr  # the command's status
    assert seen.read_text().strip() == "714000000"
    record = report(out)
    assert record["freq_mhz"] == 714 and record["exit_status"] == 3 and record["restored"] is True
    assert record["command"][0] == "sh"
    assert "held while sh runs" in out.stderr
    assert _state(board) == ORIGINAL
    # options before MHZ, and text output
    out = cli("pin", "--sysfs-root", str(board.root), "510", "--", "true")
    assert out.returncode == 0, out.stderr
    assert "pinned the GPU clock to 510 MHz" in out.stderr and "true exited with status 0; restored" in out.stderr
    assert _state(board) == ORIGINAL


def test_apply_holds_the_clock_while_the_command_runs(cli, board, tmp_path):
    seen = tmp_path / "seen"
    out = cli("apply", "--sysfs-root", str(board.root), "--workload", WORKLOAD, "--policy", "rules", "--json",
              "--", *_seen_by(board, seen))
    assert out.returncode == 3, out.stderr
    record = report(out)
    assert seen.read_text().strip() == str(int(record["freq_mhz"] * 1e6))
    assert record["exit_status"] == 3 and record["restored"] is True and record["policy"] == "rules"
    assert _state(board) == ORIGINAL


def test_bad_commands_and_options(cli, board):
    out = cli("pin", "714", "--sysfs-root", str(board.root), "--", "/nonexistent/cmd")
    assert out.returncode == 2 and "cannot run '/nonexistent/cmd'" in out.stderr
    assert _state(board) == ORIGINAL
    out = cli("pin", "714", "--sysfs-root", str(board.root), "--bogus", "--", "true")
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr
    out = cli("apply", "--sysfs-root", str(board.root), "--workload", WORKLOAD, "--dry-run", "--", "true")
    assert out.returncode == 2 and "--dry-run writes nothing" in out.stderr
    assert _state(board) == ORIGINAL
    # without a command pin stays as it always did (restore puts it back)
    out = cli("pin", "714", "--sysfs-root", str(board.root), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["freq_mhz"] == 714 and "exit_status" not in out.stdout
    assert cli("restore", "--sysfs-root", str(board.root)).returncode == 0


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_command_and_restores(board, tmp_path, sig, status, spawn):
    started = tmp_path / "started"
    p = spawn([sys.executable, "-m", "pydvfs", "pin", "510", "--sysfs-root", str(board.root), "--",
               "sh", "-c", f"touch {started}; exec sleep 600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.02)
    assert _state(board)[1] == 510000000
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == status, err
    assert "stopped; the GPU clock was restored" in err
    assert _state(board) == ORIGINAL


@pytest.mark.parametrize("verb", [["pin", "714"], ["apply", "--workload", WORKLOAD, "--policy", "rules"],
                                  ["run", "--policy", "rules", "--workload", WORKLOAD],
                                  ["sweep", "--workload", WORKLOAD, "--freqs", "714"]])
def test_a_command_that_cannot_run_is_refused_before_the_board_changes(board, capsys, tmp_path, verb):
    """Issue 37 item 18: `pin 612 -- /nonexistent-cmd` pinned, then said the command cannot
    run. Now one line, exit 2, and the board never written (its max_freq file untouched)."""
    from pydvfs.cli import main

    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\n")
    before = os.stat(board.devfreq_dir / "max_freq").st_mtime_ns
    for cmd in ("/nonexistent-cmd", "no-such-command-on-path", str(plain), str(tmp_path)):
        extra = {"run": ["--data-dir", str(tmp_path / "runs")], "sweep": ["--out", str(tmp_path / "s.csv")]}
        rc = main([*verb, *extra.get(verb[0], []), "--sysfs-root", str(board.root), "--", cmd])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and f"cannot run {cmd!r}" in err, (cmd, err)
    assert os.stat(board.devfreq_dir / "max_freq").st_mtime_ns == before and _state(board) == ORIGINAL

"""One owner per GPU: real concurrent processes on one fake board (issue 15, item 1)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wrapped import report

import pydvfs
from pydvfs.device import ownership
from pydvfs.device.fake import build_fake_board

REPO = Path(__file__).resolve().parents[2]
GOVCORE = REPO / "govcore" / "govcore"
ORIGINAL = (306000000, 1300500000, "nvhost_podgov")


@pytest.fixture(scope="module")
def govcore():
    subprocess.run(["make", "-s", "-C", str(GOVCORE.parent), "govcore"], check=True, capture_output=True)
    return str(GOVCORE)


def _board_state(fb):
    return fb.read_hz("min_freq"), fb.read_hz("max_freq"), fb.governor()


def _wait_for(cond, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


LOOP_GOVCORE = """
set -u
refused=0
for i in $(seq 1 {n}); do
  for verb in "pin {mhz}" restore; do
    out=$({gc} --sysfs-root {root} $verb 2>&1) || {{
      case "$out" in *"governed by another process (pid "*) refused=$((refused+1));;
        *) echo "UNEXPECTED: $out"; exit 1;; esac; }}
  done
done
echo "refused=$refused"
"""

LOOP_PYTHON = """
import sys, pydvfs
from pydvfs.errors import BoardBusyError
root, mhz, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
refused = 0
for i in range(n):
    try:
        pydvfs.pin(mhz, sysfs_root=root)
        pydvfs.restore(sysfs_root=root)
    except BoardBusyError as e:
        assert "pid " in str(e), e
        refused += 1
print(f"refused={refused}")
"""


def test_two_processes_looping_pin_restore_leave_the_board_as_it_was(tmp_path, govcore):
    """Before the lock, two such loops ended with the board pinned and 'nothing to restore', or
    with a saved 'original' of min 918 / max 510 that restore called damaged."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    procs = [
        subprocess.Popen(["sh", "-c", LOOP_GOVCORE.format(n=25, mhz=918, gc=govcore, root=fb.root)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        subprocess.Popen(["sh", "-c", LOOP_GOVCORE.format(n=25, mhz=510, gc=govcore, root=fb.root)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        subprocess.Popen([sys.executable, "-c", LOOP_PYTHON, str(fb.root), "714", "25"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        subprocess.Popen([sys.executable, "-c", LOOP_PYTHON, str(fb.root), "1122", "25"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
        assert re.search(r"refused=\d+", out), out
    print("refusals per loop:", [re.search(r"refused=(\d+)", o).group(1) for o in outs])
    # each pin/restore ran whole, alone: the last one of all was a restore
    assert _board_state(fb) == ORIGINAL
    assert pydvfs.open_device(fb.root).saved_state() is None


def test_a_second_governor_is_refused_naming_the_holder(tmp_path, govcore):
    fb = build_fake_board(tmp_path / "b", "jp5")
    dev = pydvfs.open_device(fb.root)
    dev.pin(714)
    me = f"(pid {os.getpid()})"
    for verb in (["pin", "510"], ["restore"], ["apply", "--model", "bert", "--layers", "12", "--hidden",
                                              "768", "--seq-len", "64"]):
        out = subprocess.run([govcore, "--sysfs-root", str(fb.root), *verb], capture_output=True, text=True)
        assert out.returncode == 2 and me in out.stderr, (verb, out.stderr)
        assert len(out.stderr.splitlines()) == 1
    out = subprocess.run([sys.executable, "-m", "pydvfs", "restore", "--sysfs-root", str(fb.root)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and me in out.stderr
    assert fb.read_hz("max_freq") == 714000000  # nothing was changed by the refused ones
    # dry runs and status only read: allowed
    out = subprocess.run([govcore, "--sysfs-root", str(fb.root), "status"], capture_output=True, text=True)
    assert out.returncode == 0
    # --force takes the board back, both front ends
    out = subprocess.run([sys.executable, "-m", "pydvfs", "restore", "--force", "--sysfs-root", str(fb.root)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert _board_state(fb) == ORIGINAL
    dev.pin(612)
    out = subprocess.run([govcore, "--sysfs-root", str(fb.root), "restore", "--force"], capture_output=True, text=True)
    assert out.returncode == 0 and "restoring anyway" in out.stderr
    assert _board_state(fb) == ORIGINAL
    assert dev.restore() is False  # ours: nothing left to restore, and the lock is dropped
    assert not ownership.holds(dev._board)


HOLD_PIN = """
import sys, time, pydvfs
pydvfs.pin(918, sysfs_root=sys.argv[1])
print("pinned", flush=True)
time.sleep(600)
"""


def test_a_dead_holders_lock_is_taken_over(tmp_path, govcore):
    fb = build_fake_board(tmp_path / "b", "jp5")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_PIN, str(fb.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "pinned"
        dev = pydvfs.open_device(fb.root)
        lock_file = Path(dev._board.lock_path())
        assert lock_file.read_text().strip() == str(holder.pid)
        assert ownership.holder_pid(dev._board) == holder.pid
        with pytest.raises(pydvfs.BoardBusyError, match=f"pid {holder.pid}"):
            dev.pin(510)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the kernel dropped the dead holder's lock: a plain restore works, no --force
    assert ownership.holder_pid(dev._board) == 0
    out = subprocess.run([govcore, "--sysfs-root", str(fb.root), "restore"], capture_output=True, text=True)
    assert out.returncode == 0 and "restored governor" in out.stdout, out.stderr
    assert _board_state(fb) == ORIGINAL
    assert oct(lock_file.stat().st_mode & 0o777) == "0o600"


def test_lock_file_is_never_followed_through_a_symlink(tmp_path):
    fb = build_fake_board(tmp_path / "b", "jp5")
    dev = pydvfs.open_device(fb.root)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    lock_file = Path(dev._board.lock_path())
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock_file.symlink_to(victim)
    with pytest.raises(pydvfs.PydvfsError):
        dev.pin(510)
    assert victim.read_text() == "keep me\n"
    assert fb.read_hz("max_freq") == 1300500000


def test_governed_holds_the_board_for_the_whole_block(tmp_path, govcore):
    fb = build_fake_board(tmp_path / "b", "jp5")
    w = pydvfs.Workload(model="bert", layers=12, hidden=768, seq_len=64)
    with pydvfs.governed(w, sysfs_root=fb.root):
        out = subprocess.run([govcore, "--sysfs-root", str(fb.root), "pin", "510"], capture_output=True, text=True)
        assert out.returncode == 2 and f"pid {os.getpid()}" in out.stderr
    assert _board_state(fb) == ORIGINAL
    out = subprocess.run([govcore, "--sysfs-root", str(fb.root), "pin", "510"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr  # released at the end of the block
    subprocess.run([govcore, "--sysfs-root", str(fb.root), "restore"], check=True, capture_output=True)


def test_two_overlapping_runs_the_second_is_refused(tmp_path):
    """Before the lock, the first run restored and deleted the state while the second still ran,
    which then reported 'board was not changed'."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    wl = "model=bert,layers=12,hidden=768,seq_len=64"
    marker = tmp_path / "started"
    first = subprocess.Popen(
        [sys.executable, "-m", "pydvfs", "run", "--json", "--policy", "ffg", "--workload", wl,
         "--sysfs-root", str(fb.root), "--", "sh", "-c", f"touch {marker}; sleep 4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(marker.exists)
        pinned = _board_state(fb)
        assert pinned[0] == pinned[1]
        second = subprocess.run(
            [sys.executable, "-m", "pydvfs", "run", "--policy", "rules", "--workload", wl,
             "--sysfs-root", str(fb.root), "--", "true"], capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert f"(pid {first.pid})" in second.stderr and len(second.stderr.splitlines()) == 1
        assert _board_state(fb) == pinned  # the refused run changed nothing
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert report(subprocess.CompletedProcess(first.args, first.returncode, out, err))["restored"] is True
    assert _board_state(fb) == ORIGINAL

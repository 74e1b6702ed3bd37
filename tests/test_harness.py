"""The test harness itself (tests/conftest.py, tests/background.py; issue 37 items 22, 24): a
session leaves nothing outside its temp folders, a signal test's command never outlives it, nor
does background work still running when the session ends, and a test that cannot start a process
says so. One nested pytest run (a few seconds) of a checkout made of the harness and four small
tests, in a world-writable /tmp folder (as root that puts its temp folders in /run)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

INNER = '''
import errno, os, subprocess, time

def test_a_signal_test_fails_midway(spawn):
    pidfile = os.environ["GRANDCHILD_PID"]
    p = spawn(["sh", "-c", f"sleep 600 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait"])
    while not os.path.exists(pidfile):
        time.sleep(0.02)
    p.kill()  # the leader only, as a test's own cleanup would: its child lives on
    assert False, "failed mid-way"

def test_cannot_fork(monkeypatch):
    def no_process(*a, **k):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    monkeypatch.setattr(subprocess, "_fork_exec", no_process)
    subprocess.run(["true"])

def test_uses_tmp_path(tmp_path):
    (tmp_path / "x").write_bytes(b"x" * 1000)
'''
# a module with background work (tests/background.py) still running when the session ends
INNER_BACKGROUND = '''
import os, time
import background

PIDFILE = os.environ["BACKGROUND_PID"]
BACKGROUND = [lambda: background.start("sleep", background.run,
                                       ["sh", "-c", f"echo $$ > {PIDFILE}.tmp; mv {PIDFILE}.tmp {PIDFILE}; exec sleep 600"],
                                       900)]

def test_the_background_job_runs():
    while not os.path.exists(PIDFILE):
        time.sleep(0.02)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _tree(base: Path) -> set:
    """A session's folders there: session-* (pytest-of-*/pytest-N before issue 37)."""
    return {str(p) for p in (*base.glob("*"), *base.glob("*/*"))} if base.is_dir() else set()


def test_a_session_leaves_no_process_and_no_folder_and_names_a_failed_fork(tmp_path):
    work = Path(tempfile.mkdtemp(prefix="pydvfs-harness-"))  # /tmp: writable by others above it
    try:
        (work / "tests").mkdir()
        for name in ("conftest.py", "background.py"):
            shutil.copy(REPO / "tests" / name, work / "tests" / name)
        (work / "tests" / "test_inner.py").write_text(INNER)
        (work / "tests" / "test_inner_background.py").write_text(INNER_BACKGROUND)
        pidfile, bg_pidfile = tmp_path / "grandchild", tmp_path / "background"
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_DEBUG_TEMPROOT"}
        env.update(PYTHONPATH=str(REPO), GRANDCHILD_PID=str(pidfile), BACKGROUND_PID=str(bg_pidfile))
        run_dirs = [Path("/run/pydvfs-tests"), Path("/var/lib/pydvfs-tests")]
        before = {d: _tree(d) for d in run_dirs}
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=work,
                             env=env, capture_output=True, text=True, timeout=300)  # the sleep 600 ended
        out = res.stdout + res.stderr
        assert "2 failed, 2 passed" in out, out[-3000:]
        assert "COULD NOT START A PROCESS" in out and "Not a failure of the code under test" in out, out[-3000:]
        deadline = time.monotonic() + 30
        for pid, what in ((int(pidfile.read_text()), "the failed signal test left its command running"),
                          (int(bg_pidfile.read_text()), "the session left its background job running")):
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, 9)
                pytest.fail(what)
        if os.geteuid() == 0:  # as root, a checkout under /tmp keeps its temp folders in /run
            for d in run_dirs:
                assert _tree(d) <= before[d], sorted(_tree(d) - before[d])[:5]
    finally:
        shutil.rmtree(work, ignore_errors=True)

"""Work in the background of a test session (issue 37 item 24). Test helper only.

The suite's slowest work (tests/test_packaging.py's quick demo from an installed wheel,
tests/test_pythons.py's installs under three Pythons: about 7 minutes) is one process at a time
waiting on pip, the compiler and the demo, while the rest of the suite keeps one core busy. So it
starts as soon as the tests are collected (a test module that has such work lists its starters in
``BACKGROUND``; tests/conftest.py calls them), one job after the other in one thread, beside the
rest of the suite on the other core; the tests that check its results wait for them. Its
processes are killed when the session ends (tests/conftest.py calls :func:`end`), whatever
state they are in.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
BASE: Path | None = None  # where the jobs' folders go (tests/conftest.py's TEST_TMP)
_pool: ThreadPoolExecutor | None = None
_jobs: dict = {}
_procs: list = []
_root: Path | None = None
_ending = False
_lock = threading.Lock()


def start(name: str, fn: Callable, *args) -> Future:
    """fn(*args), run once per session in the background thread, queued behind the jobs started
    before it; its Future. One thread runs the jobs in the order they were started: a job may
    wait on the result of a job started before it (done by then), never on a later one's (it
    would wait for ever: start what a job needs first, as sdist_job() does)."""
    global _pool
    if name not in _jobs:
        _pool = _pool or ThreadPoolExecutor(max_workers=1, thread_name_prefix="pydvfs-background")
        _jobs[name] = _pool.submit(fn, *args)
    return _jobs[name]


def new_dir(name: str) -> Path:
    """A fresh folder for a job (removed by end())."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="pydvfs-background-", dir=BASE))
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_root))


def run(cmd, timeout: float, **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw), in a session
    of its own whose process group is killed on the timeout or by end()."""
    with _lock:  # end() kills every command started before it, and none starts after it
        if _ending:
            raise RuntimeError("the test session is ending: no new command")
        p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, **kw)
        _procs.append(p)
    with p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            p.communicate()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _kill_group(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)


def end() -> None:
    """Cancel the jobs not started, kill the commands of a running one, wait for the thread,
    remove the folders."""
    import shutil

    global _ending
    if _pool is not None:
        for job in _jobs.values():  # those not started (shutdown's cancel_futures: Python 3.9+)
            job.cancel()
        with _lock:
            _ending = True
            for p in _procs:
                if p.poll() is None:
                    _kill_group(p)
        _pool.shutdown(wait=True)
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)


def build_sdist() -> Path:
    """The job "sdist": the sdist, built from this checkout (PEP 517, setuptools' backend)."""
    import sys

    out = new_dir("sdist")
    build = "from setuptools import build_meta as b; import sys; print(b.build_sdist(sys.argv[1]))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    res = run([sys.executable, "-c", build, str(out)], 600, cwd=REPO, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return out / res.stdout.strip().splitlines()[-1]


def sdist_job() -> Future:
    return start("sdist", build_sdist)

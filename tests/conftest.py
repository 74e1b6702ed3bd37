"""Fixtures shared by every test: fake boards in temp dirs, never the host's /sys."""
from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import background
import pytest

from pydvfs.device.fake import ORIN_11_LEVELS_HZ, ORIN_13_LEVELS_HZ, build_fake_board

REPO = Path(__file__).resolve().parents[1]



def _written_only_by_root(path: Path) -> bool:
    """No folder from / down to path is owned by another user or writable by group or others."""
    for p in (path, *path.parents):
        st = p.stat()
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
    return True


# As root, pydvfs loads a model folder's policy.so only from a path that no one else can write
# (pydvfs/policy/manifest.py, govcore/policy_load.c); /tmp is world-writable. So the tests, which
# run as root on CI, keep their temp folders under the checkout's build/ folder, or, for a
# checkout that lies below such a folder (a clone in /tmp), under /run. TEST_TMP is mode 0755:
# the tests that run clients as nobody make their folders in it.
# Outside the checkout each session has a folder of its own there, removed when it ends
# (pytest_unconfigure): nothing is left in /run, and a nested session (tests/test_pythons.py runs
# pytest in venvs) never removes its parent's.
TEST_TMP = REPO / "build" / "tmp"
_OWN_TEST_TMP = False
if os.geteuid() == 0:
    if not _written_only_by_root(REPO):
        _base = Path("/run/pydvfs-tests") if _written_only_by_root(Path("/run")) else Path("/var/lib/pydvfs-tests")
        _base.mkdir(mode=0o755, parents=True, exist_ok=True)
        TEST_TMP, _OWN_TEST_TMP = Path(tempfile.mkdtemp(prefix="session-", dir=_base)), True
        TEST_TMP.chmod(0o755)
    TEST_TMP.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(TEST_TMP))
background.BASE = TEST_TMP if TEST_TMP.is_dir() else None

# The session's own record, state and lock folders and an empty sysfs root, set before any
# fixture runs: module- and session-scoped fixtures start their processes before _hermetic_env
# (per test) points these at fresh folders, and a run they start must not record into the host's
# /var/lib/pydvfs (as root) or reach its /run or /sys.
_SESSION_DIRS = Path(tempfile.mkdtemp(prefix="pydvfs-session-", dir=TEST_TMP if TEST_TMP.is_dir() else None))
atexit.register(shutil.rmtree, _SESSION_DIRS, True)
for _var, _name in (("PYDVFS_DATA_DIR", "runs"), ("PYDVFS_STATE_DIR", "state"), ("PYDVFS_LOCK_DIR", "locks"),
                    ("PYDVFS_SYSFS_ROOT", "empty-root")):
    (_SESSION_DIRS / _name).mkdir(mode=0o700)
    os.environ[_var] = str(_SESSION_DIRS / _name)


def pytest_unconfigure(config):
    background.end()
    if _OWN_TEST_TMP:
        shutil.rmtree(TEST_TMP, ignore_errors=True)
        with contextlib.suppress(OSError):
            TEST_TMP.parent.rmdir()  # the last session out removes /run/pydvfs-tests


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that could not start a process (fork or exec failed for want of processes or
    memory: another job exhausted the machine's limits) says so first, not as a pydvfs failure."""
    outcome = yield
    rep = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if rep.failed and isinstance(exc, OSError) and exc.errno in (errno.EAGAIN, errno.ENOMEM) and any(
            e.name in ("_execute_child", "_fork_exec", "fork") for e in call.excinfo.traceback):
        rep.longrepr = (f"COULD NOT START A PROCESS ({exc}): the machine's process or memory limit was "
                        f"reached, by this or another job; rerun when it is idle. Not a failure of the code "
                        f"under test.\n\n{rep.longrepr}")


@pytest.fixture
def spawn():
    """subprocess.Popen in a session of its own; when the test ends, on every path (a timeout, a
    failed assert), whatever is left of that process group is killed (SIGKILL) and reaped: a
    signal test never leaves its command (a training process, a sleep) running."""
    procs = []

    def start(args, **kw) -> subprocess.Popen:
        # a shell that starts the tests in the background (`make test &`, nohup in a script)
        # hands them SIGINT ignored, and an ignored signal stays ignored through exec: the Ctrl-C
        # of a signal test would never reach the command. A handled one is reset by exec
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        if ignored:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            p = subprocess.Popen([str(a) for a in args], start_new_session=True, **kw)
        finally:
            if ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.append(p)
        return p

    yield start
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # sent even when the leader is gone: a member keeps the group (and its id) alive
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=30)


@pytest.fixture(scope="session")
def test_tmp() -> Path:
    """TEST_TMP: a folder (0755) root may load policies from and nobody may traverse."""
    return TEST_TMP


@pytest.fixture(autouse=True)
def _hermetic_env(tmp_path_factory, monkeypatch):
    """Point the default sysfs root at an empty folder and the state, lock and run-record
    folders at temp ones, so no test can reach the host's /sys, /run or ~/.local/share by
    accident (a fresh record folder per test: no test learns from another's runs)."""
    empty = tmp_path_factory.mktemp("empty-root")
    monkeypatch.setenv("PYDVFS_DATA_DIR", str(tmp_path_factory.mktemp("runs")))
    monkeypatch.setenv("PYDVFS_SYSFS_ROOT", str(empty))
    monkeypatch.setenv("PYDVFS_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    monkeypatch.setenv("PYDVFS_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))


@pytest.fixture
def board(tmp_path):
    """An AGX Orin on JetPack 5 (ga10b, hwmon INA3221, 11 levels)."""
    return build_fake_board(tmp_path / "board", "jp5")


@pytest.fixture
def powered_orin(tmp_path):
    """An AGX Orin on JetPack 6 (build_fake_board's jp6) whose rails hold a
    constant 10 W GPU and 2 W CPU: energy follows time, whatever the clock."""
    b = build_fake_board(tmp_path / "board", "jp6")
    b.set_rail("VDD_GPU_SOC", 5000, 2000)  # 10 W
    b.set_rail("VDD_CPU_CV", 5000, 400)  # 2 W
    return b


@pytest.fixture(params=[("jp5", ORIN_11_LEVELS_HZ), ("jp6", ORIN_13_LEVELS_HZ), ("jp6", ORIN_11_LEVELS_HZ),
                        ("jp4", None)],
                ids=["jp5-11", "jp6-13", "jp6-11", "jp4-xavier"])
def any_board(request, tmp_path):
    layout, levels = request.param
    return build_fake_board(tmp_path / "board", layout, levels_hz=levels)


@pytest.fixture(scope="session")
def govcore_bin():
    """The govcore binary, built from this tree (``make -C govcore govcore``)."""
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True, capture_output=True)
    return str(REPO / "govcore" / "govcore")


@pytest.fixture
def cli():
    """Run ``python -m pydvfs ARGS`` as a user would; returns the CompletedProcess."""

    # generous: under load (two test runs on 2 cores) a LOOCV training takes minutes; a hang still ends
    def run(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([sys.executable, "-m", "pydvfs", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def syn_csv(tmp_path_factory):
    """A synthetic characterisation dataset with known optima (tests/pydvfs/policy/synthetic.py)."""
    sys.path.insert(0, str(REPO / "tests" / "pydvfs" / "policy"))
    import synthetic

    path = tmp_path_factory.mktemp("syn") / "syn.csv"
    synthetic.write(path)
    return path


@pytest.fixture(scope="session")
def trained(syn_csv, tmp_path_factory):
    """A model folder trained by `pydvfs train` on the synthetic data's first three tasks."""
    from pydvfs.policy.curves import curves_from_frame, read_dataset
    from pydvfs.policy.train import train

    out = tmp_path_factory.mktemp("model")
    curves = curves_from_frame(read_dataset(syn_csv), tasks=["sst2", "qnli", "mrpc"])
    metrics = train(curves, out, source="synthetic", data_path=syn_csv)
    return out, metrics


def pytest_collection_finish(session):
    """Start the background work (tests/background.py) of the modules whose tests will run (once
    -k and -m have deselected theirs)."""
    for module in dict.fromkeys(getattr(item, "module", None) for item in session.items):
        for start in getattr(module, "BACKGROUND", ()):
            start()

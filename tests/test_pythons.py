"""pydvfs under the Python each JetPack ships: 3.8 (JetPack 5, Ubuntu 20.04), 3.10 (JetPack 6),
3.12 (JetPack 7). For each of them found on this machine (else skipped, saying which is missing):

- a fresh venv, with that Python's own pip, installs the sdist as a user on the board would: no
  extras, build isolation (pip fetches the build requirements for that Python: setuptools,
  Cython, wheel) and the extension compiled for it; pytest alone is added;
- from an empty folder, with no PYTHONPATH: the installed copy, not the checkout, is imported;
  `pydvfs --version`; then the core tests (discovery, pin/restore through the API, status, pin,
  restore and measure through the CLI, on fake boards) run there with that Python;
- the daemon client: govcore serve (this tree's binary, as root) on a fake board, and the
  Python API through it (tests/govcore/test_serve.py's client, here as root from the venv).

The three venvs are built and tested in the background from the start of the session
(tests/background.py), one after the other, beside the rest of the suite. One sdist serves all
three (the background job "sdist", which tests/test_packaging.py installs too).
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import background
import pytest
from test_packaging import clean_env, sh

from pydvfs import __version__

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "govcore"))
from test_serve import CLIENT_API, ORIGINAL  # noqa: E402

from pydvfs.device.fake import build_fake_board  # noqa: E402

pytestmark = pytest.mark.slow

JETPACK_PYTHONS = {"3.8": "JetPack 5", "3.10": "JetPack 6", "3.12": "JetPack 7"}
# The core subset: files (or tests) that need the base install alone (pytest and the extension).
CORE_TESTS = ["tests/pydvfs/test_device.py", "tests/pydvfs/test_measure_cli.py",
              "tests/pydvfs/test_cli_board.py::test_status_json",
              "tests/pydvfs/test_cli_board.py::test_pin_restore_cycle",
              "tests/pydvfs/test_cli_board.py::test_errors_are_one_line_exit_2"]
# test_measure_cli's govcore half compiles govcore again for each Python: the C is not the
# Python's, and tests/govcore covers it
CORE_TESTS_K = "not govcore"
# Every module of the base install imports, but for the extras' packages it names (numpy, torch,
# ...): a module that needs an extra says so by the missing package; anything else is a bug
# (syntax or typing this Python lacks, a dependency nobody declared).
IMPORT_EVERY_MODULE = """
import importlib, importlib.metadata, json, pkgutil, pydvfs
out = {"extras": {}, "broken": {}}
for m in pkgutil.walk_packages(pydvfs.__path__, "pydvfs."):
    if m.name == "pydvfs.__main__":
        continue
    try:
        importlib.import_module(m.name)
    except ModuleNotFoundError as e:
        out["extras" if (e.name or "").split(".")[0] in EXTRAS else "broken"][m.name] = repr(e)
    except Exception as e:
        out["broken"][m.name] = repr(e)
out["installed"] = sorted(d.metadata["Name"] for d in importlib.metadata.distributions())
print(json.dumps(out))
""".replace("EXTRAS", repr({"numpy", "scipy", "pandas", "sklearn", "m2cgen", "statsmodels", "torch", "transformers",
                            "tokenizers", "accelerate", "lightning", "pytorch_lightning", "matplotlib"}))


def find_python(version: str) -> str | None:
    """pythonX.Y on PATH that runs (a pyenv shim may not), else pyenv's newest X.Y."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python{version}"),
                  *sorted(glob.glob(str(pyenv / f"{version}.*" / "bin" / f"python{version}")), reverse=True),
                  f"/usr/bin/python{version}"]
    for exe in candidates:
        if exe and os.access(exe, os.X_OK):
            ok = subprocess.run([exe, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, check=False)
            if ok.returncode == 0 and ok.stdout.strip() == version:
                return exe
    return None


def run(cmd, cwd, timeout=600, env=None) -> subprocess.CompletedProcess:
    return background.run(cmd, timeout, cwd=cwd, env=env or clean_env())


def install_and_test(version: str, exe: str) -> dict:
    """The venv, the install and the core tests under one Python; returns what the tests check."""
    sdist = background.sdist_job().result()
    work = background.new_dir(f"py{version}")
    t0 = time.monotonic()
    venv = work / "venv"
    sh([exe, "-m", "venv", venv], work)
    py = venv / "bin" / "python"
    sh([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", sdist], work)
    installed = time.monotonic()
    cwd = work / "elsewhere"
    cwd.mkdir()
    where = json.loads(sh([py, "-c", ("import json, sys, pydvfs, pydvfs._core; print(json.dumps("
                                      "[pydvfs.__file__, pydvfs._core.__file__, sys.version]))")], cwd).stdout)
    imports = json.loads(sh([py, "-c", IMPORT_EVERY_MODULE], cwd).stdout)
    version = sh([venv / "bin" / "pydvfs", "--version"], cwd).stdout
    sh([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest"], work)
    # the repo's tests on the installed copy: the cwd is not the checkout, so `python -m pydvfs`
    # and `import pydvfs` find the venv's
    tests = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", REPO, "-k", CORE_TESTS_K,
                 *(str(REPO / t) for t in CORE_TESTS)], cwd)
    done = time.monotonic()
    return {"venv": venv, "cwd": cwd, "where": where, "imports": imports, "version": version, "tests": tests,
            "seconds": {"venv + pip install sdist": round(installed - t0, 1),
                        "core tests": round(done - installed, 1), "total": round(done - t0, 1)}}


def start_installs() -> dict:
    """{version: the Future of its background job (install_and_test), or None: no such Python}."""
    background.sdist_job()  # first: the installs wait on it
    return {v: (background.start(f"python {v}", install_and_test, v, exe) if exe else None)
            for v, exe in ((v, find_python(v)) for v in JETPACK_PYTHONS)}


# The three installs start in the background when the tests are collected (tests/background.py),
# one after the other, beside the rest of the suite.
BACKGROUND = [start_installs]


@pytest.fixture(scope="module")
def pythons():
    """{version: (future of install_and_test's dict) or None (no such Python)}."""
    futures = start_installs()
    yield futures
    times = {v: f.result()["seconds"] for v, f in futures.items() if f and f.done() and not f.exception()}
    print("\nJetPack Pythons, wall time (s):", json.dumps(times))


def result_for(pythons, version: str) -> dict:
    if pythons[version] is None:
        pytest.skip(f"no python{version} ({JETPACK_PYTHONS[version]}'s Python) with venv and ensurepip on this "
                    f"machine: install it (e.g. `pyenv install {version}`) to test it")
    return pythons[version].result()


@pytest.mark.parametrize("version", list(JETPACK_PYTHONS))
def test_base_install_and_core_tests(pythons, version):
    r = result_for(pythons, version)
    pkg, core, full = r["where"]
    assert full.startswith(version + "."), full
    site = str(r["venv"] / "lib" / f"python{version}" / "site-packages")
    assert pkg.startswith(site) and core.startswith(site), r["where"]  # the installed copy, not the checkout
    imports = r["imports"]
    assert not imports["broken"], imports["broken"]
    assert set(imports["installed"]) - {"pip", "setuptools"} == {"pydvfs"}, imports  # no extras, nothing pulled
    assert "pydvfs.cli" not in imports["extras"] and "pydvfs.measure.windows" not in imports["extras"], imports["extras"]
    assert r["version"].startswith(f"pydvfs {__version__}"), r["version"]
    tests = r["tests"]
    summary = tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else ""
    assert tests.returncode == 0 and " passed" in summary, tests.stdout[-4000:] + tests.stderr[-2000:]
    print(f"python {version}: {summary}; {r['seconds']}")


@pytest.mark.parametrize("version", list(JETPACK_PYTHONS))
def test_daemon_client(pythons, version, govcore_bin, tmp_path):
    """The venv's pydvfs governs through govcore serve: pin, apply, sampler windows, restore."""
    r = result_for(pythons, version)
    if os.geteuid() != 0:
        pytest.skip("needs root to run govcore serve")
    board = build_fake_board(tmp_path / "board", "jp5")
    (tmp_path / "state").mkdir()
    sock, log = tmp_path / "govcore.sock", tmp_path / "daemon.log"
    daemon = subprocess.Popen([govcore_bin, "--sysfs-root", tmp_path / "board", "--state-dir", tmp_path / "state",
                               "serve", "--socket", sock, "--group", "root", "--policy-dir", tmp_path / "policies"],
                              stderr=open(log, "ab"))
    try:
        deadline = time.monotonic() + 30
        while "serving " not in (log.read_text() if log.exists() else ""):
            assert daemon.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        env = {**clean_env(), "PYDVFS_SOCKET": str(sock), "PYDVFS_SYSFS_ROOT": "/nonexistent"}
        client = run([r["venv"] / "bin" / "python", "-c", CLIENT_API], r["cwd"], timeout=120, env=env)
        assert client.returncode == 0 and client.stdout.startswith("ok "), client.stderr[-3000:]
    finally:
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=30)
    assert rc == 0, log.read_text()
    assert (board.read_hz("min_freq"), board.read_hz("max_freq"), board.governor()) == ORIGINAL

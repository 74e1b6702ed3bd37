"""pydvfs as a user installs it: the sdist and the wheel hold everything a build and every verb
need, and non-editable installs into fresh venvs work away from the checkout.

- the sdist is built from the checkout, the wheel from the *unpacked sdist* (so a file missing
  from the sdist fails the build), and govcore's Makefile builds the binary there too;
- venv "core": fresh, the wheel only (no extras): --version, status / apply / restore on a fake
  board;
- venv "extras": the wheel built from the sdist (the extension compiled once, by the dists
  fixture; tests/test_pythons.py has pip build the sdist itself), on top of the test
  environment's packages (torch, scikit-learn, ... through a .pth file, so nothing is
  downloaded): the demo (which trains with `pydvfs train`; the suite's one quick demo, so all
  of its checks are here), then `pydvfs apply --model-dir` with the model it trained.
The wheel and the extras venv with its demo are made in the background from the start of the
session (tests/background.py), beside the rest of the suite; the tests wait for them.
Every command runs from an empty folder with no PYTHONPATH, and each venv's pydvfs is checked to
be its own installed copy, not the checkout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from pydvfs import __version__

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "pydvfs"))
import background  # noqa: E402
from report_numbers import check_quick_demo  # noqa: E402

pytestmark = pytest.mark.slow

SDIST_MUST_HOLD = ["LICENSE", "MANIFEST.in", "setup.py", "pyproject.toml", "pydvfs/_core.pyx",
                   "pydvfs/_policy.pxi", "pydvfs/_core.pxd", "govcore/Makefile", "govcore/main.c",
                   "govcore/sources.txt", "govcore/warnings.txt", "govcore/policy.h", "govcore/govcore.h",
                   "govcore/policy_load.c", "tests/govcore/check.h",
                   "pydvfs/data/real/zeus_nsdi23/summary_power_v100.csv",
                   "pydvfs/roofline/data/mlenergy_a100.csv"]
WHEEL_MUST_HOLD = ["pydvfs/_govcore_include/policy.h", "pydvfs/_govcore_include/govcore.h",
                   "pydvfs/data/real/perseus_sosp24/gpt3-175b+a100_sxm_bf16.csv",
                   "pydvfs/data/real/zeus_nsdi23/summary_power_v100.csv",
                   "pydvfs/roofline/data/mlenergy_a100.csv", "pydvfs/_core.pyx", "pydvfs/_policy.pxi"]
WORKLOAD = ["--model", "bert", "--layers", "12", "--hidden", "768", "--seq-len", "128"]


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("CC", None)
    return env


def sh(cmd, cwd, timeout=600, **kw) -> subprocess.CompletedProcess:
    res = background.run(cmd, timeout, cwd=cwd, env=kw.pop("env", clean_env()), **kw)
    assert res.returncode == 0, f"{cmd}: {res.stderr[-3000:]}"
    return res


class Timings(dict):
    def run(self, name, fn):
        t = time.monotonic()
        out = fn()
        self[name] = round(time.monotonic() - t, 1)
        return out


def dists_job():
    return background.start("dists", build_dists)


def demo_job():
    return background.start("demo", demo_in_a_venv)


# The wheel, then the extras venv and its quick demo, start in the background when the tests are
# collected (tests/background.py): the tests below check their results.
BACKGROUND = [background.sdist_job, dists_job, demo_job]


@pytest.fixture(scope="module")
def timings():
    t = Timings()
    yield t
    print("\npackaging timings (s):", json.dumps(t))


def build_dists() -> dict:
    """The wheel built from the unpacked sdist (so a file missing from the sdist fails it)."""
    sdist = background.sdist_job().result()
    timings = Timings()
    out, unpacked = background.new_dir("dists"), background.new_dir("unpacked")
    build = "from setuptools import build_meta as b; import sys; print(b.build_wheel(sys.argv[1]))"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    src = unpacked / f"pydvfs-{__version__}"
    wheel = out / timings.run("wheel from the sdist", lambda: sh(
        [sys.executable, "-c", build, out], src)).stdout.strip().splitlines()[-1]
    return {"sdist": sdist, "wheel": wheel, "src": src, "timings": timings}


@pytest.fixture(scope="module")
def dists(timings):
    d = dists_job().result()
    timings.update(d["timings"])
    return d


def test_sdist_holds_the_sources_and_the_licence(dists):
    with tarfile.open(dists["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    missing = [f for f in SDIST_MUST_HOLD if f not in names]
    assert not missing, missing
    assert not [n for n in names if n.endswith((".so", ".o")) or n == "pydvfs/_core.c"]
    licence = (dists["src"] / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence


def test_wheel_holds_extension_headers_data_and_licence(dists):
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    missing = [f for f in WHEEL_MUST_HOLD if f not in names]
    assert not missing, missing
    assert any(n.startswith("pydvfs/_core.") and n.endswith(".so") for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in meta and f"Version: {__version__}" in meta


def test_govcore_builds_from_the_sdist(dists):
    sh(["make", "-s", "-C", dists["src"] / "govcore", "govcore"], dists["src"])
    out = sh([dists["src"] / "govcore" / "govcore", "--version"], dists["src"]).stdout
    assert out.startswith(f"govcore {__version__}\n")  # no git describe: not a clone


def make_venv(path: Path, timings, name) -> Path:
    """A venv without pip or setuptools of its own (no ensurepip: quicker, and the venv's old
    bundled setuptools cannot shadow the build requirements)."""
    timings.run(f"venv {name}", lambda: sh([sys.executable, "-m", "venv", "--without-pip", path], path.parent))
    return path / "bin"


def site_packages(venv_bin: Path) -> Path:
    out = sh([venv_bin / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], venv_bin)
    return Path(out.stdout.strip())


def assert_installed_copy(venv_bin: Path, cwd: Path) -> None:
    where = sh([venv_bin / "python", "-c", ("import pydvfs, pydvfs._core; print(pydvfs.__file__); "
                                           "print(pydvfs._core.__file__)")], cwd).stdout.split()
    for path in where:
        assert path.startswith(str(site_packages(venv_bin))), path
        assert not path.startswith(str(REPO / "pydvfs")), path


def test_wheel_in_a_fresh_venv_without_extras(dists, tmp_path, timings):
    venv = make_venv(tmp_path / "core", timings, "core")
    # this environment's pip installs into the venv (pip --python): the venv holds pydvfs alone
    timings.run("pip install wheel", lambda: sh(
        [sys.executable, "-m", "pip", "--python", venv / "python", "install", "-q", "--no-index", "--no-deps",
         dists["wheel"]], tmp_path))
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert_installed_copy(venv, cwd)
    assert sh([venv / "python", "-c", "import importlib.util as u; print(u.find_spec('sklearn'))"],
              cwd).stdout.strip() == "None"  # truly without the extras

    version = sh([venv / "pydvfs", "--version"], cwd).stdout
    assert version.startswith(f"pydvfs {__version__}") and "built-in trees" in version and "sha256 " in version
    sh([venv / "python", "-c", ("import sys; from pydvfs.device.fake import build_fake_board; "
                               "build_fake_board(sys.argv[1], 'jp5')"), cwd / "board"], cwd)
    board = ["--sysfs-root", cwd / "board", "--state-dir", cwd / "state", "--json"]
    status = json.loads(sh([venv / "pydvfs", "status", *board], cwd).stdout)
    assert status["gpu"] == "ga10b" and status["pinned"] is False
    applied = json.loads(sh([venv / "pydvfs", "apply", *WORKLOAD, *board], cwd).stdout)
    assert applied["freq_mhz"] in status["available_mhz"] and applied["model"].startswith("builtin")
    assert json.loads(sh([venv / "pydvfs", "status", *board], cwd).stdout)["pinned"] is True
    assert json.loads(sh([venv / "pydvfs", "restore", *board], cwd).stdout)["restored"] is True


def demo_in_a_venv() -> dict:
    """The venv with extras: the sdist's wheel installed there, and its quick demo run from an
    empty folder (the suite's one quick demo: about 6 min of CPU on an idle machine)."""
    dists = dists_job().result()
    timings = Timings()
    work = background.new_dir("extras")
    venv = make_venv(work / "extras", timings, "extras")
    # the heavy extras (torch, scikit-learn, ...) and the build requirements come from this test's
    # environment: a .pth line appends its site-packages after the venv's own, so the venv's
    # pydvfs comes first
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages(venv) / "test-environment.pth").write_text("\n".join(sorted(here)) + "\n")
    timings.run("pip install wheel", lambda: sh(
        [venv / "python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--ignore-installed",
         dists["wheel"]], work))
    cwd = work / "elsewhere"
    cwd.mkdir()
    demo = timings.run("demo --quick", lambda: background.run(
        [venv / "pydvfs", "demo", "--quick", "--out", cwd / "demo", "--json"], 2400, cwd=cwd, env=clean_env()))
    return {"venv": venv, "cwd": cwd, "demo": demo, "timings": timings}


def test_the_sdists_wheel_in_a_venv_with_extras_trains_applies_and_runs_the_demo(timings):
    r = demo_job().result()
    timings.update(r["timings"])
    venv, cwd, demo = r["venv"], r["cwd"], r["demo"]
    assert_installed_copy(venv, cwd)
    assert sh([venv / "pydvfs", "--version"], cwd).stdout.startswith(f"pydvfs {__version__}")
    assert demo.returncode == 0, demo.stderr[-3000:]
    check_quick_demo(cwd / "demo", json.loads(demo.stdout), demo.stderr)

    model = cwd / "demo" / "model"  # trained by the demo's `pydvfs train` with the installed headers
    assert (model / "manifest.txt").is_file() and (model / "policy.so").is_file()
    sh([venv / "python", "-c", ("import sys; from pydvfs.device.fake import build_fake_board; "
                               "build_fake_board(sys.argv[1], 'jp6')"), cwd / "board"], cwd)
    board = ["--sysfs-root", cwd / "board", "--state-dir", cwd / "state", "--json"]
    applied = json.loads(sh([venv / "pydvfs", "apply", *WORKLOAD, "--model-dir", model, *board], cwd).stdout)
    assert applied["model"].startswith("trained") and applied["freq_mhz"] is not None
    assert json.loads(sh([venv / "pydvfs", "restore", *board], cwd).stdout)["restored"] is True

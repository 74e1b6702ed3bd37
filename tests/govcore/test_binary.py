"""The standalone `govcore` binary: the same verbs and JSON as the Python CLI, natively and as
the aarch64 build under qemu-aarch64 (our proof that it runs on the Jetson's CPU)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from pydvfs import __version__
from pydvfs.device.fake import ORIN_13_LEVELS_HZ, build_fake_board

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]

GOVCORE = REPO / "govcore"


def _make(target: str) -> None:
    subprocess.run(["make", "-s", "-C", str(GOVCORE), target], check=True, capture_output=True)


@pytest.fixture(scope="session")
def native():
    _make("govcore")
    return [str(GOVCORE / "govcore")]


@pytest.fixture(scope="session")
def aarch64():
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cross tools not installed ({', '.join(missing)}): run `make cross-tools` "
                    "(Debian: gcc-aarch64-linux-gnu qemu-user)")
    _make("govcore-aarch64")
    binary = str(GOVCORE / "govcore-aarch64")
    arch = subprocess.run(["file", binary], capture_output=True, text=True).stdout
    assert "aarch64" in arch or "ARM aarch64" in arch or arch == ""
    # dynamically linked (the binary dlopen()s trained policies): qemu finds the aarch64 libc
    # under the cross toolchain's sysroot, as the Jetson has it under /
    return ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", binary]


def run(binary, *args):
    return subprocess.run([*binary, *args], capture_output=True, text=True, timeout=60)


def check_binary(binary, tmp_path, cli):
    fb = build_fake_board(tmp_path / "b", "jp6", levels_hz=ORIN_13_LEVELS_HZ)
    root = ["--sysfs-root", str(fb.root)]

    out = run(binary, "status", "--json", *root)
    assert out.returncode == 0, out.stderr
    native_status = json.loads(out.stdout)
    py_status = json.loads(cli("status", "--json", *root).stdout)
    assert native_status == py_status

    out = run(binary, "pin", "700", "--json", *root)
    assert out.returncode == 0, out.stderr
    pin = json.loads(out.stdout)
    assert pin["freq_mhz"] == 726.75 and pin["snapped"] is True
    assert fb.read_hz("min_freq") == fb.read_hz("max_freq") == 726750000

    # the Python side sees the binary's saved state, and vice versa
    assert json.loads(cli("status", "--json", *root).stdout)["saved_state"]["max_mhz"] == 1300.5
    out = run(binary, "restore", "--json", *root)
    assert json.loads(out.stdout)["restored"] is True
    assert fb.read_hz("max_freq") == 1300500000 and fb.read_hz("min_freq") == 114750000

    for bad in (["pin", "x"], ["pin"], ["nope"], ["--bogus", "status"]):
        out = run(binary, *bad, *root)
        assert out.returncode == 2, bad
        assert out.stderr.startswith("govcore: error: ") and len(out.stderr.splitlines()) == 1
    out = run(binary, "status", "--sysfs-root", str(tmp_path / "none"))
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_native_binary(native, tmp_path, cli):
    check_binary(native, tmp_path, cli)


def test_aarch64_binary_under_qemu(aarch64, tmp_path, cli):
    check_binary(aarch64, tmp_path, cli)


def test_binary_links_only_libc(native):
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd not available")
    libs = subprocess.run([ldd, native[0]], capture_output=True, text=True).stdout
    names = {line.split()[0] for line in libs.splitlines() if line.strip()}
    allowed = ("linux-vdso", "libc.so", "libm.so", "libpthread", "libdl", "ld-linux", "/lib64/ld-linux")
    assert all(n.startswith(allowed) or "ld-linux" in n for n in names), names


def test_version_names_the_built_in_policies_as_pydvfs_does(native, cli):
    """Both --version say what decides the clock: the built-in policies compiled in (read from
    gen_policies_builtin.c's table, not a list of their own), each board with its measures and its
    data's hash, and that file's SHA-256: the same lines after the first."""
    from pydvfs import _core

    c = run(native, "--version")
    py = cli("--version")
    assert c.returncode == 0 and py.returncode == 0, c.stderr + py.stderr
    c_lines, py_lines = c.stdout.splitlines(), py.stdout.splitlines()
    assert c_lines[0].startswith(f"govcore {__version__}") and py_lines[0].startswith(f"pydvfs {__version__}")
    assert c_lines[1:] == py_lines[1:]  # policies, a line a board, the fallback, build
    sha = hashlib.sha256((GOVCORE / "gen_policies_builtin.c").read_bytes()).hexdigest()
    pairs = _core.BUILTIN_POLICIES
    assert c_lines[1] == (f"policies  {len(pairs)} built-in trees, one per board and energy measure "
                          f"(gen_policies_builtin.c, sha256 {sha}):")
    boards = list(dict.fromkeys(b for b, _ in pairs))
    for board, line in zip(boards, c_lines[2:2 + len(boards)]):
        measures = [m for b, m in pairs if b == board]
        data = _core.Tree(None, board_id=board, measure=measures[0]).provenance["data_sha256"]
        assert line.startswith(f"          {board}: {', '.join(measures)} (data sha256 {data[:12]}"), line
    assert c_lines[2 + len(boards)].startswith("          any other board: ")
    ranges = hashlib.sha256((GOVCORE / "gen_policy_ranges.c").read_bytes()).hexdigest()
    assert c_lines[3 + len(boards)].endswith(f"(gen_policy_ranges.c, sha256 {ranges})")
    assert c_lines[4 + len(boards)].startswith("build     dynamic") and len(c_lines) == 5 + len(boards)
    assert "policy_tree.c" not in c.stdout  # the one tree is not what applies


def test_one_source_list_and_warning_set(native):
    """The Makefile builds from govcore/sources.txt with govcore/warnings.txt (as setup.py does)."""
    def lines(name):
        return [t.strip() for t in (GOVCORE / name).read_text().splitlines() if t.strip() and not t.startswith("#")]
    cmd = subprocess.run(["make", "-n", "-B", "-C", str(GOVCORE), "govcore"], capture_output=True, text=True).stdout
    compile_line = next(line for line in cmd.splitlines() if " -o govcore " in line)
    words = compile_line.split()
    assert all(src in words for src in lines("sources.txt"))
    assert all(flag in words for flag in lines("warnings.txt")) and "-Wextra" in words


def test_a_workload_comes_back_as_typed(govcore_bin, tmp_path):
    """The docs' SST-2 workload (seq_len 13.3, SST-2's 13.32 rounded) is no workload outside the
    built-ins' training range, and govcore's JSON writes 13.3, not 13.300000000000001, and its name."""
    board = build_fake_board(tmp_path / "b", "jp5")
    out = subprocess.run([govcore_bin, "--sysfs-root", str(board.root), "--json", "apply", "--dry-run", "--policy",
                          "mlg", "--workload", "name=bert-base/sst2,model=bert,layers=12,hidden=768,seq_len=13.3,"
                          "task=sst2,batch_size=32"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert '"seq_len": 13.3,' in out and '"batch_size": 32,' in out
    assert json.loads(out)["workload"]["name"] == "bert-base/sst2"  # as pydvfs's JSON has it
    assert "outside the built-in policy's training workloads" not in out

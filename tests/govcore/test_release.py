"""The board binaries of `make -C govcore release POLICY=MODEL_DIR/policy_tree.c`: statically
linked (no loader, so the board's glibc does not matter), the trained tree compiled in and named
by --version, and deciding as `pydvfs apply --model-dir` does for the same tree. The x86_64 build
runs natively, the aarch64 build under qemu-aarch64 (no -L sysroot: nothing to load)."""
from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from test_binary import check_binary, run
from wrapped import report

import pydvfs
from pydvfs.device.fake import ORIN_13_LEVELS_HZ, build_fake_board

REPO = Path(__file__).resolve().parents[2]
PT_DYNAMIC, PT_INTERP = 2, 3


@pytest.fixture(scope="module")
def release(trained, tmp_path_factory):
    """Both release binaries, built with the `trained` fixture's tree compiled in."""
    missing = [t for t in ("aarch64-linux-gnu-gcc",) if shutil.which(t) is None]
    if missing:
        pytest.skip("cross compiler not installed: run `make cross-tools` (Debian: gcc-aarch64-linux-gnu "
                    "libc6-dev-arm64-cross)")
    model_dir, _ = trained
    dist = tmp_path_factory.mktemp("dist")
    out = subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "release",
                          f"POLICY={model_dir / 'policy_tree.c'}", f"DIST={dist}"],
                         check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "warning" not in out.stderr, out.stderr
    return {"x86_64": dist / "govcore-linux-x86_64", "aarch64": dist / "govcore-linux-aarch64",
            "model_dir": model_dir}


def program_headers(path: Path) -> tuple[int, list[int]]:
    """(e_machine, [p_type of each program header]) of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    e_machine = struct.unpack_from("<H", data, 18)[0]
    e_phoff = struct.unpack_from("<Q", data, 32)[0]
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    return e_machine, [struct.unpack_from("<I", data, e_phoff + i * e_phentsize)[0] for i in range(e_phnum)]


@pytest.mark.parametrize("arch, e_machine", [("x86_64", 62), ("aarch64", 183)])
def test_statically_linked(release, arch, e_machine):
    machine, types = program_headers(release[arch])
    assert machine == e_machine
    assert PT_INTERP not in types and PT_DYNAMIC not in types  # no loader, no NEEDED
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-d", str(release[arch])], check=False, capture_output=True, text=True).stdout
        assert "There is no dynamic section" in out and "NEEDED" not in out


def binary(release, arch):
    if arch == "aarch64":
        if shutil.which("qemu-aarch64") is None:
            pytest.skip("qemu-aarch64 not installed: run `make cross-tools` (Debian: qemu-user)")
        return ["qemu-aarch64", str(release[arch])]
    return [str(release[arch])]


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_version_names_the_compiled_in_tree(release, arch, syn_csv):
    out = run(binary(release, arch), "--version")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    tree_c = release["model_dir"] / "policy_tree.c"
    assert f"tree hash sha256 {hashlib.sha256(tree_c.read_bytes()).hexdigest()}" in text
    assert f"data      synthetic (sha256 {hashlib.sha256(syn_csv.read_bytes()).hexdigest()})" in text
    assert "tree      trained: synthetic" in text and "static, tree compiled in" in text
    trained_line = next(line for line in text.splitlines() if line.startswith("trained "))
    assert trained_line.split()[1].endswith("Z")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_board_verbs_on_fake_boards(release, arch, tmp_path, cli):
    check_binary(binary(release, arch), tmp_path, cli)  # status, pin, restore, bad input
    fb = build_fake_board(tmp_path / "m", "jp5")
    root = ["--sysfs-root", str(fb.root)]
    out = run(binary(release, arch), "measure", "--json", "--rate", "200", *root, "--", "sleep", "0.3")
    assert out.returncode == 0, out.stderr
    m = report(out)  # on stderr: CMD keeps stdout
    assert m["exit_status"] == 0 and m["samples"] > 0 and m["duration_s"] >= 0.3
    assert set(m["energy_j"]) >= {"VDD_GPU_SOC", "VDD_CPU_CV"}


GRID = list(itertools.product(["bert", "pythia"], [2, 6, 12, 24], [128, 1024], [16.0, 70.0, 256.0],
                              [None, 20.0, 95.0]))


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_apply_chooses_as_pydvfs_with_the_same_tree(release, arch, tmp_path, cli):
    fb = build_fake_board(tmp_path / "b", "jp6", levels_hz=ORIN_13_LEVELS_HZ)
    root = ["--sysfs-root", str(fb.root)]
    model_dir = str(release["model_dir"])
    for model, layers, hidden, seq, util in GRID:
        args = ["--model", model, "--layers", str(layers), "--hidden", str(hidden), "--seq-len", str(seq)]
        args += ["--util", str(util)] if util is not None else []
        c = run(binary(release, arch), "apply", *args, "--dry-run", "--json", *root)
        assert c.returncode == 0, c.stderr
        py = pydvfs.decide({"model": model, "layers": layers, "hidden": hidden, "seq_len": seq, "util_pct": util},
                           model_dir=model_dir, sysfs_root=fb.root)
        got = json.loads(c.stdout)
        assert got["freq_mhz"] == py.freq_mhz, (model, layers, hidden, seq, util)
        assert got["features"] == py.features and got["model"] == py.model
    # the CLI says the same (one workload: the grid above goes through the same library call)
    args = ["--model", "bert", "--layers", "24", "--hidden", "1024", "--seq-len", "70", "--json", *root]
    py_cli = json.loads(cli("apply", *args, "--model-dir", model_dir, "--dry-run").stdout)
    assert json.loads(run(binary(release, arch), "apply", *args, "--dry-run").stdout)["freq_mhz"] == py_cli["freq_mhz"]
    # and it pins, then restores
    out = run(binary(release, arch), "apply", *args)
    assert out.returncode == 0, out.stderr
    assert fb.read_hz("max_freq") == fb.read_hz("min_freq") == round(py_cli["freq_mhz"] * 1e6)
    assert run(binary(release, arch), "restore", *root).returncode == 0
    assert fb.read_hz("max_freq") == 1300500000


def test_model_dir_is_refused_by_the_static_build(release):
    out = run(binary(release, "x86_64"), "apply", "--model", "bert", "--layers", "2", "--hidden", "128",
              "--seq-len", "10", "--model-dir", str(release["model_dir"]), "--dry-run")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "static build" in out.stderr and "POLICY=" in out.stderr


def test_release_refuses_a_policy_that_does_not_match_its_manifest(trained, tmp_path):
    model_dir, _ = trained
    changed = tmp_path / "model"
    shutil.copytree(model_dir, changed)
    (changed / "policy_tree.c").write_text((changed / "policy_tree.c").read_text() + "\n/* edited */\n")
    out = subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "release",
                          f"POLICY={changed / 'policy_tree.c'}", f"DIST={tmp_path / 'dist'}"],
                         check=False, capture_output=True, text=True)
    assert out.returncode != 0 and "does not match" in out.stderr
    assert not (tmp_path / "dist").exists()


def test_install(tmp_path):
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True, capture_output=True)
    out = subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "install", "PREFIX=/usr/local",
                          f"DESTDIR={tmp_path}"], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    installed = tmp_path / "usr" / "local" / "bin" / "govcore"
    assert installed.is_file() and installed.stat().st_mode & 0o777 == 0o755
    assert subprocess.run([str(installed), "--version"], check=False, capture_output=True, text=True).stdout.startswith("govcore ")
    unit = REPO / "govcore" / "govcore.service"
    assert (tmp_path / "etc/systemd/system/govcore.service").is_file() == unit.is_file()


def test_a_missing_cross_compiler_is_named_with_its_installer(tmp_path):
    """On a fresh machine `make -C govcore release` ended in "Error 127" (aarch64-linux-gnu-gcc
    missing): it names the tool and how to install it, before building anything."""
    missing = "aarch64-linux-gnu-gcc-0"  # a version no machine has
    out = subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "release", f"AARCH64_CC={missing}",
                          f"DIST={tmp_path / 'dist'}"], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert f"the compiler {missing} is not installed" in out.stderr and "Error 127" not in out.stderr
    assert "make release" in out.stderr and "apt-get install gcc-aarch64-linux-gnu" in out.stderr
    assert not (tmp_path / "dist").exists()

"""As root, a model folder's policy.so runs only if no one else could have put it there, the
folder matches its manifest, and it is built for this CPU (govcore/policy_load.c, one loader
for `pydvfs apply --model-dir` and `govcore apply --model-dir`).

Every refusal is checked on both front ends, and with a policy.so whose constructor writes a
marker file: the marker proves the policy's code did not run. The first test shows that the same
policy does run (and writes the marker) from a trusted folder, so the marker can tell."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pydvfs.policy.manifest import read_manifest, sha256_file
from pydvfs.policy.to_c import govcore_include_dir

REPO = Path(__file__).resolve().parents[3]
NOBODY = 65534
APPLY = ["apply", "--model", "bert", "--layers", "24", "--hidden", "1024", "--seq-len", "70",
         "--dry-run", "--json"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the rule is for root (euid 0); run the tests as root")

CONSTRUCTOR = r"""
#include <stdio.h>
__attribute__((constructor)) static void policy_code_ran(void)
{
    FILE *f = fopen(MARKER, "w");
    if (f) {
        fputs("the policy's code ran\n", f);
        fclose(f);
    }
}
"""


@pytest.fixture(scope="module")
def govcore_bin():
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True, capture_output=True)
    return str(REPO / "govcore" / "govcore")


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "policy-code-ran"


def build_marked_policy(tree_c: Path, out: Path, marker: Path, cc: str = "cc") -> Path:
    """policy.so of tree_c plus a constructor that writes `marker` when the object is loaded."""
    ctor = out.parent / "ctor.c"
    ctor.write_text(CONSTRUCTOR)
    subprocess.run([cc, "-std=c99", "-O1", "-fPIC", "-shared", "-DGC_TREE_SYMBOL=gc_tree",
                    f"-DMARKER=\"{marker}\"", f"-I{govcore_include_dir()}", "-o", str(out), str(tree_c),
                    str(ctor)], check=True, capture_output=True)
    ctor.unlink()
    return out


def record_in_manifest(model: Path, policy_so: Path) -> None:
    """Make the manifest vouch for policy_so, so that only the check under test can stop it."""
    text = (model / "manifest.txt").read_text()
    old = read_manifest(model)["policy_so_sha256"]
    (model / "manifest.txt").write_text(text.replace(old, sha256_file(policy_so)))


@pytest.fixture
def model(trained, tmp_path, marker):
    """A copy of the trained folder whose policy.so writes the marker when loaded, with a
    manifest that matches it: under a root-owned path no one else can write."""
    src, _ = trained
    base = tmp_path / "models"
    base.mkdir(mode=0o755)
    dst = base / "model"
    shutil.copytree(src, dst)
    os.chmod(dst, 0o755)
    build_marked_policy(dst / "policy_tree.c", dst / "policy.so", marker)
    record_in_manifest(dst, dst / "policy.so")
    return dst


def run_pydvfs(cli, model_dir, board, env=None):
    return cli(*APPLY, "--sysfs-root", str(board.root), "--model-dir", str(model_dir), env=env)


def run_govcore(govcore_bin, model_dir, board):
    return subprocess.run([govcore_bin, *APPLY, "--sysfs-root", str(board.root), "--model-dir", str(model_dir)],
                          check=False, capture_output=True, text=True)


def both(cli, govcore_bin, model_dir, board):
    return run_pydvfs(cli, model_dir, board), run_govcore(govcore_bin, model_dir, board)


def assert_refused(results, marker, *words):
    for res in results:
        assert res.returncode == 2, res.stdout + res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        for w in words:
            assert w in res.stderr, res.stderr
    assert not marker.exists(), "the refused policy's code ran"


def test_a_trusted_folder_loads_and_the_marker_shows_it(cli, govcore_bin, model, board, marker):
    for run in (lambda: run_pydvfs(cli, model, board), lambda: run_govcore(govcore_bin, model, board)):
        res = run()
        assert res.returncode == 0, res.stderr
        assert marker.exists()
        marker.unlink()


def test_world_writable_folder(cli, govcore_bin, model, board, marker):
    os.chmod(model, 0o777)
    assert_refused(both(cli, govcore_bin, model, board), marker, "refusing to load a policy as root",
                   str(model), "writable by group or others", "chmod go-w")


def test_group_writable_folder_above(cli, govcore_bin, model, board, marker):
    os.chmod(model.parent, 0o775)
    assert_refused(both(cli, govcore_bin, model, board), marker, str(model.parent), "writable by group or others")


def test_a_root_owned_sticky_folder_above_is_safe(cli, govcore_bin, model, board, marker):
    """`make demo` as root in a clone under /tmp (1777 root): no one else can rename or replace the
    folders root owns there, so the policy loads; the model folder itself sticky-writable does not."""
    os.chmod(model.parent, 0o1777)
    for run in (lambda: run_pydvfs(cli, model, board), lambda: run_govcore(govcore_bin, model, board)):
        res = run()
        assert res.returncode == 0, res.stderr
        marker.unlink()
    os.chmod(model, 0o1777)
    assert_refused(both(cli, govcore_bin, model, board), marker, str(model), "writable by group or others")


def test_folder_of_another_owner(cli, govcore_bin, model, board, marker):
    os.chown(model, NOBODY, NOBODY)
    assert_refused(both(cli, govcore_bin, model, board), marker, "owned by another user", f"uid {NOBODY}")


def test_policy_of_another_owner(cli, govcore_bin, model, board, marker):
    os.chown(model / "policy.so", NOBODY, NOBODY)
    assert_refused(both(cli, govcore_bin, model, board), marker, "policy.so is owned by another user")


def test_owned_by_the_real_uid_is_trusted(govcore_bin, model, board, marker):
    """sudo-like: euid 0, real uid the caller's; the caller's own folder is trusted."""
    os.chown(model, NOBODY, NOBODY)
    args = [govcore_bin, *APPLY, "--sysfs-root", str(board.root), "--model-dir", str(model)]
    as_caller = [sys.executable, "-c",
                 f"import os, sys; os.setresuid({NOBODY}, 0, 0); os.execv(sys.argv[1], sys.argv[1:])", *args]
    res = subprocess.run(as_caller, check=False, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert marker.exists()


def test_symlink_swapped_in_for_policy_so(cli, govcore_bin, model, board, marker, tmp_path):
    """The path is checked, then the file behind it replaced by a link to code the manifest
    vouches for: the loader opens with O_NOFOLLOW and loads the checked fd, so it is refused."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    os.replace(model / "policy.so", elsewhere / "policy.so")
    os.symlink(elsewhere / "policy.so", model / "policy.so")
    assert_refused(both(cli, govcore_bin, model, board), marker, "symbolic link")


def test_a_symlinked_folder_is_checked_where_it_points(cli, govcore_bin, model, board, marker, tmp_path):
    link = tmp_path / "link-to-model"
    os.symlink(model, link)
    py, c = both(cli, govcore_bin, link, board)
    assert py.returncode == 0 and c.returncode == 0, py.stderr + c.stderr
    assert marker.exists()
    marker.unlink()
    os.chmod(model, 0o777)  # the target is what counts, not the (root-owned) link
    assert_refused(both(cli, govcore_bin, link, board), marker, str(model))


def test_policy_so_changed_after_training(cli, govcore_bin, model, board, marker, trained):
    """A different policy.so than the manifest records (here: the marked one, manifest as trained)."""
    shutil.copy2(trained[0] / "manifest.txt", model / "manifest.txt")
    assert_refused(both(cli, govcore_bin, model, board), marker, "policy.so does not match manifest.txt",
                   "train again")


def test_policy_tree_changed_after_training(cli, govcore_bin, model, board, marker):
    (model / "policy_tree.c").write_text((model / "policy_tree.c").read_text() + "/* edited */\n")
    assert_refused(both(cli, govcore_bin, model, board), marker, "policy_tree.c does not match manifest.txt")


def test_no_manifest_or_another_format(cli, govcore_bin, model, board, marker):
    text = (model / "manifest.txt").read_text()
    (model / "manifest.txt").write_text(text.replace("\nformat 1\n", "\nformat 99\n"))
    assert_refused(both(cli, govcore_bin, model, board), marker, "format 99")
    (model / "manifest.txt").unlink()
    assert_refused(both(cli, govcore_bin, model, board), marker, "manifest.txt")


@pytest.fixture
def foreign(model, marker):
    """The folder with an aarch64 policy.so (a model trained on a laptop, copied to the board,
    here the other way round), recorded in the manifest."""
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if cc is None:
        pytest.skip("aarch64 cross compiler not installed: run `make cross-tools`")
    build_marked_policy(model / "policy_tree.c", model / "policy.so", marker, cc=cc)
    record_in_manifest(model, model / "policy.so")
    return model


def test_foreign_arch_govcore_names_both_and_the_fixes(govcore_bin, foreign, board, marker):
    assert_refused([run_govcore(govcore_bin, foreign, board)], marker, "built for aarch64", "runs on x86_64", "make -C govcore release",
                   "rebuild it from policy_tree.c")


def test_foreign_arch_pydvfs_rebuilds_from_policy_tree_c(cli, govcore_bin, foreign, board, marker):
    foreign_so = sha256_file(foreign / "policy.so")
    res = run_pydvfs(cli, foreign, board)
    assert res.returncode == 0, res.stderr
    assert not marker.exists()  # rebuilt from the tree, never loaded
    assert (foreign / "policy.so").read_bytes()[18] == 62  # EM_X86_64
    assert read_manifest(foreign)["policy_so_sha256"] == sha256_file(foreign / "policy.so") != foreign_so
    # and govcore takes the rebuilt folder as well
    c = run_govcore(govcore_bin, foreign, board)
    assert c.returncode == 0, c.stderr


def test_foreign_arch_pydvfs_without_a_compiler(cli, foreign, board, marker):
    res = run_pydvfs(cli, foreign, board, env={"CC": "/bin/false"})
    assert_refused([res], marker, "built for aarch64", "rebuilding it here failed")
    assert (foreign / "policy.so").read_bytes()[18] == 183  # left as it was


def test_laptop_policy_on_the_board_names_both_cpus(model, board, marker):
    """The case users meet: a policy.so compiled on an x86_64 laptop, loaded by the aarch64
    govcore on the board (here under qemu-aarch64). Run as nobody: qemu's -L sysroot also
    stands in for "/" in the root walk, which a real board does not have."""
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "setpriv") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"tools not installed ({', '.join(missing)}): run `make cross-tools`")
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore-aarch64"], check=True, capture_output=True)
    readable = Path(tempfile.mkdtemp(dir=REPO / "build", prefix="laptop-model-"))
    try:
        os.chmod(readable, 0o755)
        shutil.copytree(model, readable / "model")
        res = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                              "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu",
                              str(REPO / "govcore" / "govcore-aarch64"), *APPLY, "--sysfs-root", str(board.root),
                              "--model-dir", str(readable / "model")], check=False, capture_output=True, text=True)
    finally:
        shutil.rmtree(readable)
    assert_refused([res], marker, "built for x86_64, but this program runs on aarch64", "policy_tree.c")


# Issue 27 item 3: every file of a model folder gets policy.so's checks, roofline.txt included
# (the roofline policy and the slowdown bound read it), and no model file can hang a front end.
ROOFLINE_APPLY = [["--policy", "roofline"], ["--max-slowdown", "10"]]


@pytest.mark.parametrize("extra", ROOFLINE_APPLY, ids=["roofline", "max-slowdown"])
def test_roofline_txt_of_a_user_s_folder_linking_to_a_root_only_file(cli, govcore_bin, model, board, extra,
                                                                      tmp_path):
    """Before: as root, a folder nobody owns whose roofline.txt links to a 0600 root file printed
    that file's first line in the error."""
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET-LINE=hunter2\n")
    secret.chmod(0o600)
    theirs = tmp_path / "theirs"
    shutil.copytree(model, theirs)
    (theirs / "roofline.txt").unlink()
    (theirs / "roofline.txt").symlink_to(secret)
    for p in [theirs, *theirs.iterdir()]:
        os.lchown(p, NOBODY, NOBODY)
    argv = [*APPLY, *extra, "--sysfs-root", str(board.root), "--model-dir", str(theirs)]
    results = [cli(*argv), subprocess.run([govcore_bin, *argv], capture_output=True, text=True, timeout=60)]
    for res in results:
        assert res.returncode == 2, res.stdout + res.stderr
        assert "TOPSECRET" not in res.stdout + res.stderr and "hunter2" not in res.stdout + res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
    # in a folder root trusts, the link itself is refused (a model folder holds its own files)
    (model / "roofline.txt").unlink()
    (model / "roofline.txt").symlink_to(secret)
    argv = [*APPLY, *extra, "--sysfs-root", str(board.root), "--model-dir", str(model)]
    for res in (cli(*argv), subprocess.run([govcore_bin, *argv], capture_output=True, text=True, timeout=60)):
        assert res.returncode == 2 and "symbolic link" in res.stderr, res.stderr
        assert "hunter2" not in res.stdout + res.stderr


@pytest.mark.parametrize("name, extra", [("roofline.txt", ["--policy", "roofline"]),
                                         ("roofline.txt", ["--max-slowdown", "10"]),
                                         ("policy.so", []), ("manifest.txt", [])])
def test_a_fifo_in_a_model_folder_is_refused_not_waited_on(cli, govcore_bin, model, board, marker, name, extra):
    """Before: a FIFO named roofline.txt or policy.so hung both front ends for ever."""
    (model / name).unlink()
    os.mkfifo(model / name, 0o644)
    argv = [*APPLY, *extra, "--sysfs-root", str(board.root), "--model-dir", str(model)]
    for res in (cli(*argv, timeout=60), subprocess.run([govcore_bin, *argv], capture_output=True, text=True,
                                                       timeout=60)):
        assert res.returncode == 2 and "not a regular file" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not marker.exists()

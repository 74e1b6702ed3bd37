"""Issue 27, items 1, 2, 12, 14 and 15 (the capture's parts): nothing a board capture, a link or
another local user can turn against the user of ``capture-board`` and ``fake-board --from``.

The rules (docs/boards.md, "Capture your board"): every entry of a capture is laid out beneath
DIR as the kernel resolves it, following no link, in a folder only the caller can write;
capture-board reads beneath the root without following links and writes its file 0600; a
capture file is at most 8 MiB; device-tree strings keep their NUL. The root cases run as root
against a tree a real unprivileged user (``setpriv`` to nobody) owns and changes.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pydvfs.device import capture as capmod
from pydvfs.device import open_device
from pydvfs.device.capture import FORMAT, VERSION, capture_board, read_capture, rebuild, write_capture
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError

NOBODY = "nobody"


def _have_nobody() -> bool:
    try:
        pwd.getpwnam(NOBODY)
    except KeyError:
        return False
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


needs_root = pytest.mark.skipif(not _have_nobody(), reason="needs root, setpriv and a 'nobody' user")


@pytest.fixture
def nobody_tmp(test_tmp):
    """A folder nobody can traverse (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="i27-", dir=test_tmp))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args],
                          capture_output=True, text=True, timeout=60)


def chown_tree(path: Path) -> None:
    pw = pwd.getpwnam(NOBODY)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, pw.pw_uid, pw.pw_gid)


def tree(path: Path) -> set[str]:
    """Every name beneath path (links not followed)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(path):
        out |= {os.path.relpath(os.path.join(dirpath, n), path) for n in dirnames + filenames}
    return out


def write_cap(path: Path, entries: dict, **extra) -> Path:
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION, "meta": {}, "entries": entries, **extra}))
    return path


def one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


# ---------------------------------------------------------------- item 1: out of DIR ---------

CLIMB = {  # each link points to ".." of where it is written; the kernel climbs once per link
    "a/u1": {"link": ".."},
    "a/u1/u2": {"link": ".."},
    "a/u1/u2/u3": {"link": ".."},
    "a/u1/u2/u3/home/alice/.ssh/authorized_keys": {"link": "../../../../../key"},
    "a/u1/u2/u3/victim/etc/ld.so.preload": {"text": "/tmp/evil.so\n"},
    "key": {"text": "ssh-ed25519 AAAA attacker\n"},
}
THROUGH_A_LINK = {  # lexically inside (a/b/../.. is the top), but a/b is the top, so it climbs twice
    "a/b": {"link": ".."},
    "a/x": {"link": "b/../../outside"},
    "a/y": {"text": "1\n"},
}


@pytest.mark.parametrize("entries", [CLIMB, THROUGH_A_LINK], ids=["chain-of-dotdot", "dotdot-through-a-link"])
def test_a_capture_whose_links_climb_out_of_dir_is_refused_and_nothing_is_laid_out(tmp_path, cli, entries):
    base = tmp_path / "base"
    dest = base / "x" / "y" / "board"
    dest.parent.mkdir(parents=True)
    f = write_cap(tmp_path / "cap.json", entries)
    before = tree(tmp_path)
    line = one_line_error(cli("fake-board", str(dest), "--from", str(f)))
    assert "leads out of the tree" in line or "lies beneath the link" in line, line
    assert tree(tmp_path) == before  # not DIR, not a link, not a file anywhere
    with pytest.raises(InvalidValueError):
        read_capture(f)


def test_the_lay_out_itself_follows_no_link_even_for_an_unchecked_capture(tmp_path):
    """rebuild() walks each component from DIR's descriptor with O_NOFOLLOW: even a capture
    that skipped read_capture's checks cannot put an entry outside DIR."""
    dest = tmp_path / "base" / "x" / "y" / "board"
    dest.parent.mkdir(parents=True)
    before = tree(tmp_path)
    with pytest.raises(InvalidValueError, match="cannot lay out"):
        rebuild({"entries": CLIMB}, dest)
    assert tree(tmp_path) == before  # and what it had made is gone


def test_a_genuine_capture_still_lays_out(tmp_path):
    fb = build_fake_board(tmp_path / "board", "jp6")
    out = write_capture(capture_board(fb.root), tmp_path / "cap.json")
    rebuilt = rebuild(read_capture(out), tmp_path / "rebuilt")
    assert open_device(rebuilt).gpu_name == open_device(fb.root).gpu_name
    assert stat.S_IMODE(os.stat(rebuilt).st_mode) == 0o777 & ~_umask()


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


@needs_root
def test_as_root_a_folder_another_user_can_write_is_refused(tmp_path, cli):
    f = write_capture(capture_board(build_fake_board(tmp_path / "board", "jp5").root), tmp_path / "cap.json")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    chown_tree(theirs)  # an empty folder nobody owns: nobody could swap DIR/sys for a link mid-build
    open_ = tmp_path / "open"
    open_.mkdir()
    open_.chmod(0o777)
    for d in (theirs, open_):
        line = one_line_error(cli("fake-board", str(d), "--from", str(f)))
        assert "can be written by" in line and "give a new folder" in line, line
        assert list(d.iterdir()) == []
    # a new folder in a parent nobody owns is made private to root while it is filled
    parent = tmp_path / "nobodys"
    parent.mkdir()
    chown_tree(parent)
    res = cli("fake-board", str(parent / "board"), "--from", str(f))
    assert res.returncode == 0, res.stderr
    st = os.stat(parent / "board" / "sys")
    assert st.st_uid == 0 and not st.st_mode & 0o022


# ---------------------------------------------------------------- item 2: capture-board as root --

@needs_root
def test_capture_as_root_follows_no_folder_swapped_for_a_link_and_writes_0600(nobody_tmp, monkeypatch):
    """nobody owns the captured tree and swaps the GPU's devfreq folder for a link to a folder
    of root's (0700, its `governor` a 0600 secret) at the worst moment: between the walk that
    found the folder and the open of a file in it."""
    tmp_path = nobody_tmp
    fb = build_fake_board(tmp_path / "board", "jp5")
    chown_tree(fb.root)
    secret_dir = tmp_path / "root-only"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "governor").write_text("rootsecret42\n")
    (secret_dir / "governor").chmod(0o600)
    df = fb.devfreq_dir
    rel_df = os.path.relpath(os.path.realpath(df), os.path.realpath(fb.root))
    real_resolve = capmod._Capture.resolve
    swapped = []

    def resolve_then_swap(self, rel):
        real = real_resolve(self, rel)
        if real == f"{rel_df}/governor" and not swapped:
            res = as_nobody(sys.executable, "-c",
                            "import os, sys; d = sys.argv[1]; os.rename(d, d + '.orig'); os.symlink(sys.argv[2], d)",
                            str(df), str(secret_dir))
            assert res.returncode == 0, res.stderr
            swapped.append(True)
        return real

    monkeypatch.setattr(capmod._Capture, "resolve", resolve_then_swap)
    cap = capture_board(fb.root)
    assert swapped
    assert "rootsecret42" not in json.dumps(cap)
    out = write_capture(cap, tmp_path / "cap.json")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_capture_reads_nothing_through_a_link_made_after_the_walk(tmp_path, monkeypatch):
    """The same swap without root: a sensor folder becomes a link between two readings."""
    fb = build_fake_board(tmp_path / "board", "jp5")
    outside = tmp_path / "outside"
    outside.mkdir()
    hw = next(d for d in fb.hwmon_dirs)
    for f in os.listdir(hw):
        (outside / f).write_text("424242\n")
    real_sleep = capmod.time.sleep
    swapped = []

    def sleep_then_swap(s):
        if not swapped:
            os.rename(hw, str(hw) + ".orig")
            os.symlink(outside, hw)
            swapped.append(True)
        real_sleep(s)

    monkeypatch.setattr(capmod.time, "sleep", sleep_then_swap)
    cap = capture_board(fb.root)
    assert swapped and cap["readings"]
    assert "424242" not in json.dumps(cap["readings"])


# ---------------------------------------------------------------- item 12: device-tree strings --

def test_device_tree_strings_keep_their_nul_through_capture_and_rebuild(tmp_path):
    fb = build_fake_board(tmp_path / "board", board="agx-orin", jetpack=6)
    name_file = fb.gpu_dir / "of_node" / "name"
    assert name_file.read_bytes() == b"gpu\x00"  # as the kernel shows it: NUL, no newline
    cap = capture_board(fb.root)
    kept = {p: e["text"] for p, e in cap["entries"].items() if p.endswith("of_node/name")}
    assert "gpu\x00" in kept.values() and "nvdla0\x00" in kept.values(), kept
    assert not [s for s in cap["skipped"] if "of_node" in s["path"]], cap["skipped"]
    out = write_capture(cap, tmp_path / "cap.json")
    rebuilt = rebuild(read_capture(out), tmp_path / "rebuilt")
    assert open_device(rebuilt).gpu_name == "gpu"
    assert os.path.basename(open_device(rebuilt).devfreq_dir) == os.path.basename(fb.devfreq_dir)


# ---------------------------------------------------------------- items 14, 15: bad files ----

def test_bad_capture_files_get_one_line(tmp_path, cli):
    good = capture_board(build_fake_board(tmp_path / "board", "jp5").root)
    cases = {
        "meta-not-object": json.dumps({**good, "meta": "x"}),
        "nested": "[" * 100000 + "]" * 100000,
        "version-true": json.dumps({**good, "version": True}),
        "over-8-mib": json.dumps({**good, "pad": "x" * (9 * 1024 * 1024)}),
        "not-ascii-text": json.dumps({**good, "entries": {"a": {"text": "\udcff"}}}),
    }
    for name, text in cases.items():
        f = tmp_path / f"{name}.json"
        f.write_text(text, errors="surrogatepass")
        line = one_line_error(cli("fake-board", str(tmp_path / f"out-{name}"), "--from", str(f)))
        assert str(f) in line, (name, line)
        assert not (tmp_path / f"out-{name}").exists()
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "not a regular file" in one_line_error(cli("fake-board", str(tmp_path / "out-fifo"), "--from", str(fifo)))


def test_a_capture_never_grows_past_the_cap_it_is_read_with(tmp_path, monkeypatch):
    monkeypatch.setattr(capmod, "TOTAL_CAP_BYTES", 60_000)
    monkeypatch.setattr(capmod, "META_RESERVE_BYTES", 12_000)
    fb = build_fake_board(tmp_path / "board", "jp5")
    caps = fb.root / "sys/kernel/nvpmodel_clk_cap"
    caps.mkdir(parents=True)
    for i in range(400):  # more numbers than the cap holds
        (caps / f"cap{i:03d}").write_text(" ".join(["1300500000"] * 20) + "\n")
    out = write_capture(capture_board(fb.root), tmp_path / "cap.json")
    assert os.path.getsize(out) <= 60_000
    cap = read_capture(out)
    assert any("full" in s["why"] for s in cap["skipped"])

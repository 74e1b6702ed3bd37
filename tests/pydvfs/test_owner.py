"""One owner per GPU whatever the caller, a restore that always works, and nothing root writes
followed through a user's links (issue 22)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import pydvfs
from pydvfs.device import ownership
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError, StateFileError
from pydvfs.progress import read_progress, write_progress

REPO = Path(__file__).resolve().parents[2]
GOVCORE = REPO / "govcore" / "govcore"
ORIGINAL = (306000000, 1300500000, "nvhost_podgov")
HANG_GUARD_S = 60  # a verb that waits on a FIFO fails the test instead of hanging it


@pytest.fixture(scope="module")
def govcore():
    subprocess.run(["make", "-s", "-C", str(GOVCORE.parent), "govcore"], check=True, capture_output=True)
    return str(GOVCORE)


def _board_state(fb):
    return fb.read_hz("min_freq"), fb.read_hz("max_freq"), fb.governor()


def _private(path: Path) -> str:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(path)


def _pydvfs(*args, env=None, timeout=HANG_GUARD_S, cwd=None):
    return subprocess.run([sys.executable, "-m", "pydvfs", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=timeout,
                          cwd=cwd)


def _govcore(gc, *args, env=None, timeout=HANG_GUARD_S, cwd=None):
    return subprocess.run([gc, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=timeout, cwd=cwd)


HOLD_PIN = """
import sys, time, pydvfs
pydvfs.pin(510, sysfs_root=sys.argv[1], state_dir=sys.argv[2])
print("pinned", flush=True)
time.sleep(600)
"""


# ------------------------------------------------------------ the lock belongs to the GPU ---

def test_another_state_folder_cannot_pin_while_the_gpu_is_held(tmp_path, govcore):
    """Before: `PYDVFS_STATE_DIR=other pydvfs pin 714` was accepted and saved the live pin as the
    original; the last restore left the GPU pinned for good."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    first, other = _private(tmp_path / "first"), _private(tmp_path / "other")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_PIN, str(fb.root), first], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "pinned"
        out = _pydvfs("pin", "714", "--sysfs-root", str(fb.root), env={"PYDVFS_STATE_DIR": other})
        assert out.returncode == 2 and f"(pid {holder.pid})" in out.stderr, out.stderr
        assert len(out.stderr.splitlines()) == 1
        out = _govcore(govcore, "--sysfs-root", str(fb.root), "--state-dir", other, "pin", "714")
        assert out.returncode == 2 and f"(pid {holder.pid})" in out.stderr, out.stderr
        out = _govcore(govcore, "--sysfs-root", str(fb.root), "--state-dir", other, "restore")
        assert out.returncode == 2 and f"(pid {holder.pid})" in out.stderr, out.stderr
        # the board through a symlinked root is the same GPU: refused too
        link = tmp_path / "link"
        link.symlink_to(fb.root)
        with pytest.raises(pydvfs.BoardBusyError, match=f"pid {holder.pid}"):
            pydvfs.pin(714, sysfs_root=link, state_dir=other)
        assert _board_state(fb)[:2] == (510000000, 510000000)
        assert not list(Path(other).iterdir())  # nothing saved there: no false "original"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert pydvfs.restore(sysfs_root=fb.root, state_dir=first) is True
    assert _board_state(fb) == ORIGINAL


@pytest.mark.parametrize("state_dir", [5, "5", "rel/state", b"rel"])
def test_relative_or_non_path_state_folders_are_refused_by_the_api(tmp_path, monkeypatch, state_dir):
    fb = build_fake_board(tmp_path / "b", "jp5")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidValueError, match="state_dir must be a folder path|not an absolute path"):
        pydvfs.pin(714, sysfs_root=fb.root, state_dir=state_dir)
    assert not (tmp_path / "5").exists() and not (tmp_path / "rel").exists()
    assert _board_state(fb) == ORIGINAL


def test_relative_state_folders_are_refused_by_both_front_ends(tmp_path, govcore):
    fb = build_fake_board(tmp_path / "b", "jp5")
    for env, opt in (({}, ["--state-dir", "rel"]), ({"PYDVFS_STATE_DIR": "rel"}, [])):
        out = _pydvfs("pin", "714", "--sysfs-root", str(fb.root), *opt, env=env, cwd=tmp_path)
        assert out.returncode == 2 and "not an absolute path" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
        out = _govcore(govcore, "--sysfs-root", str(fb.root), *opt, "pin", "714", env=env, cwd=tmp_path)
        assert out.returncode == 2 and "not an absolute path" in out.stderr, out.stderr
    assert not (tmp_path / "rel").exists()
    assert _board_state(fb) == ORIGINAL


def test_lock_folder_is_one_per_system_whatever_the_state_folder(tmp_path, monkeypatch):
    fb = build_fake_board(tmp_path / "b", "jp5")
    a = pydvfs.open_device(fb.root, _private(tmp_path / "a"))
    b = pydvfs.open_device(fb.root, _private(tmp_path / "b-state"))
    assert a._board.lock_path() == b._board.lock_path()
    assert Path(a._board.lock_path()).parent == Path(os.environ["PYDVFS_LOCK_DIR"])
    monkeypatch.setenv("PYDVFS_LOCK_DIR", "relative/locks")
    with pytest.raises(InvalidValueError, match="absolute"):
        a.pin(714)


# ------------------------------------------------------------------ threads take turns ---

def _race(fb, state_dir):
    errors = []

    def loop(mhz):
        try:
            for _ in range(30):
                pydvfs.pin(mhz, sysfs_root=fb.root, state_dir=state_dir)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(mhz,)) for mhz in (510, 714)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_threads_pinning_then_restore_end_at_the_original_every_time(tmp_path):
    """Before: in 2 of 5 runs restore returned True with the board left at 510 or 714."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    state_dir = _private(tmp_path / "state")
    for _ in range(8):
        assert _race(fb, state_dir) == []
        assert pydvfs.restore(sysfs_root=fb.root, state_dir=state_dir) is True
        assert _board_state(fb) == ORIGINAL
        assert pydvfs.open_device(fb.root, state_dir).saved_state() is None
        assert not ownership.holds(pydvfs.open_device(fb.root)._board)


def test_mixed_pin_restore_apply_threads_end_restorable(tmp_path):
    """Before: a mixed run ended pinned with no saved state."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    state_dir = _private(tmp_path / "state")
    w = pydvfs.Workload(model="bert", layers=12, hidden=768, seq_len=64)
    errors = []

    def run(action):
        try:
            for _ in range(20):
                action()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    actions = [lambda: pydvfs.pin(612, sysfs_root=fb.root, state_dir=state_dir),
               lambda: pydvfs.restore(sysfs_root=fb.root, state_dir=state_dir),
               lambda: pydvfs.apply(w, policy="rules", sysfs_root=fb.root, state_dir=state_dir)]
    for _ in range(3):
        threads = [threading.Thread(target=run, args=(a,)) for a in actions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        lo, hi, _ = _board_state(fb)
        # pinned means the original is saved (never pinned with nothing to restore)
        saved = pydvfs.open_device(fb.root, state_dir).saved_state()
        if lo == hi:
            assert saved is not None and (saved.min_mhz, saved.max_mhz) == (306.0, 1300.5)
        pydvfs.restore(sysfs_root=fb.root, state_dir=state_dir)
        assert _board_state(fb) == ORIGINAL


def test_nested_governed_leaves_the_board_to_the_outer_block(tmp_path):
    fb = build_fake_board(tmp_path / "b", "jp5")
    w = pydvfs.Workload(model="bert", layers=12, hidden=768, seq_len=64)
    with pydvfs.governed(w, policy="rules", sysfs_root=fb.root) as outer:
        outer_hz = fb.read_hz("max_freq")
        assert outer_hz == fb.read_hz("min_freq") == round(outer.freq_mhz * 1e6)
        with pydvfs.governed(w, policy="maxn", sysfs_root=fb.root):
            pass
        with pydvfs.governed(w, policy="rules", sysfs_root=fb.root):
            pass
        # the inner exits did not restore: the board is still governed, by the outer block
        lo, hi, _ = _board_state(fb)
        assert lo == hi
        assert pydvfs.open_device(fb.root).saved_state() is not None
    assert _board_state(fb) == ORIGINAL


# ---------------------------------------------------- an original that is itself a pin ---

def test_an_original_that_is_a_pin_is_said_when_saved(tmp_path, govcore):
    fb = build_fake_board(tmp_path / "b", "jp5")
    (fb.devfreq_dir / "min_freq").write_text("1300500000\n")  # as jetson_clocks leaves it
    out = _pydvfs("pin", "714", "--json", "--sysfs-root", str(fb.root))
    assert out.returncode == 0, out.stderr
    assert "itself a pin" in json.loads(out.stdout)["warning"]
    assert "warning: the clock state saved as the original is itself a pin" in out.stderr
    assert _pydvfs("restore", "--sysfs-root", str(fb.root)).returncode == 0
    out = _govcore(govcore, "--sysfs-root", str(fb.root), "--json", "pin", "510")
    assert out.returncode == 0 and "itself a pin" in json.loads(out.stdout)["warning"]
    assert "itself a pin" in out.stderr
    # a later pin saves nothing new: nothing to say
    out = _govcore(govcore, "--sysfs-root", str(fb.root), "--json", "pin", "612")
    assert out.returncode == 0 and "warning" not in json.loads(out.stdout) and not out.stderr
    assert _govcore(govcore, "--sysfs-root", str(fb.root), "restore").returncode == 0
    out = _govcore(govcore, "--sysfs-root", str(fb.root), "apply", "--policy", "rules", "--model", "bert",
                   "--layers", "12", "--hidden", "768", "--seq-len", "64")
    assert out.returncode == 0 and "itself a pin" in out.stderr, out.stderr
    assert _govcore(govcore, "--sysfs-root", str(fb.root), "restore").returncode == 0
    out = _govcore(govcore, "--sysfs-root", str(fb.root), "--json", "apply", "--policy", "rules", "--model", "bert",
                   "--layers", "12", "--hidden", "768", "--seq-len", "64")
    assert out.returncode == 0 and "itself a pin" in json.loads(out.stdout)["warning"], out.stderr
    assert _govcore(govcore, "--sysfs-root", str(fb.root), "restore").returncode == 0
    assert _board_state(fb)[:2] == (1300500000, 1300500000)  # the original, pin and all
    # pydvfs apply says it too (text and --json); a dry run pins nothing and says nothing
    apply_args = ("apply", "--policy", "rules", "--model", "bert", "--layers", "12", "--hidden", "768",
                  "--seq-len", "64", "--sysfs-root", str(fb.root))
    out = _pydvfs(*apply_args, "--json")
    assert out.returncode == 0 and "itself a pin" in json.loads(out.stdout)["warning"], out.stderr
    assert "pydvfs: warning: the clock state saved as the original is itself a pin" in out.stderr
    assert _pydvfs("restore", "--sysfs-root", str(fb.root)).returncode == 0
    out = _pydvfs(*apply_args, "--dry-run", "--json")
    assert out.returncode == 0 and "warning" not in json.loads(out.stdout) and "itself a pin" not in out.stderr
    # an ordinary original: no warning
    (fb.devfreq_dir / "min_freq").write_text("306000000\n")
    res = pydvfs.pin(714, sysfs_root=fb.root)
    assert res.warning is None
    pydvfs.restore(sysfs_root=fb.root)


# ---------------------------------------------------- restore needs no new disk space ---

@contextlib.contextmanager
def _tiny_tmpfs(where: Path):
    where.mkdir(mode=0o700)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(fs: Path) -> Path:
    filler = fs / "filler"
    with open(filler, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
    with pytest.raises(OSError):  # truly full
        (fs / "probe").write_bytes(b"x" * 4096)
    return filler


def test_restore_works_on_a_full_state_filesystem(tmp_path, govcore):
    """Before: restore, restore --force, govcore restore [--force] all failed with "cannot write
    lock file ... No space left on device"."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    with _tiny_tmpfs(tmp_path / "run") as fs:
        env = {"PYDVFS_STATE_DIR": _private(fs / "pydvfs"), "PYDVFS_LOCK_DIR": _private(fs / "pydvfs" / "locks")}
        verbs = [lambda: _pydvfs("restore", "--sysfs-root", str(fb.root), env=env),
                 lambda: _pydvfs("restore", "--force", "--sysfs-root", str(fb.root), env=env),
                 lambda: _govcore(govcore, "--sysfs-root", str(fb.root), "restore", env=env),
                 lambda: _govcore(govcore, "--sysfs-root", str(fb.root), "restore", "--force", env=env)]
        for verb in verbs:
            out = _pydvfs("pin", "714", "--sysfs-root", str(fb.root), env=env)
            assert out.returncode == 0, out.stderr
            filler = _fill(fs)
            try:
                out = verb()
                assert out.returncode == 0, out.stderr
                assert "restored governor nvhost_podgov" in out.stdout, out.stdout
                assert _board_state(fb) == ORIGINAL
            finally:
                filler.unlink()
                with contextlib.suppress(FileNotFoundError):
                    (fs / "probe").unlink()


# ------------------------------------------ a state that no longer matches the board ---

def _saved(fb, text: str) -> Path:
    """Pin (in another process: this one must not hold the lock) and replace the saved state."""
    out = _pydvfs("pin", "714", "--sysfs-root", str(fb.root))
    assert out.returncode == 0, out.stderr
    path = Path(pydvfs.open_device(fb.root).state_file())
    path.write_text("# govcore saved GPU clock state\n" + text)
    return path


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_restore_of_a_state_the_board_no_longer_matches(tmp_path, govcore, front):
    """Before: a governor or level gone from the tables blocked restore entirely."""
    fb = build_fake_board(tmp_path / "b", "jp5")
    path = _saved(fb, "governor=gone_governor\nmin_hz=306000000\nmax_hz=1300500000\n")
    args = ["restore", "--sysfs-root", str(fb.root)]
    out = _pydvfs(*args) if front == "pydvfs" else _govcore(govcore, "--sysfs-root", str(fb.root), "restore")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert 'governor (saved "gone_governor" is not one this board offers)' in out.stderr, out.stderr
    assert "removed" in out.stderr
    assert _board_state(fb) == ORIGINAL  # the range went back all the same
    assert not path.exists()  # it no longer blocks the board
    out = _pydvfs(*args)
    assert out.returncode == 0 and "nothing to restore" in out.stdout
    # a level gone: what the board offers is written, the rest named
    path = _saved(fb, "governor=nvhost_podgov\nmin_hz=500000000\nmax_hz=1300500000\n")
    out = _pydvfs(*args)
    assert out.returncode == 2 and "min_freq (saved 500 MHz is not a level of this board)" in out.stderr
    assert fb.read_hz("max_freq") == 1300500000 and not path.exists()


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_a_damaged_state_says_what_to_do_and_force_drops_it(tmp_path, govcore, front):
    fb = build_fake_board(tmp_path / "b", "jp5")
    path = _saved(fb, "governor=nvhost_podgov\nmin_hz=12abc\nmax_hz=1300500000\n")

    def restore(*extra):
        if front == "pydvfs":
            return _pydvfs("restore", *extra, "--sysfs-root", str(fb.root))
        return _govcore(govcore, "--sysfs-root", str(fb.root), "restore", *extra)

    out = restore()
    assert out.returncode == 2 and "damaged" in out.stderr and "restore --force" in out.stderr, out.stderr
    assert path.exists()
    out = restore("--force")
    assert out.returncode == 0, out.stderr
    assert "dropped the saved state" in out.stderr
    assert not path.exists()
    assert fb.read_hz("max_freq") == 714000000  # nothing written from a damaged state
    assert restore().returncode == 0


def test_through_the_api_a_partial_restore_raises_and_frees_the_board(tmp_path):
    fb = build_fake_board(tmp_path / "b", "jp5")
    dev = pydvfs.open_device(fb.root)
    dev.pin(714)
    assert ownership.holds(dev._board)
    Path(dev.state_file()).write_text(
        "# govcore saved GPU clock state\ngovernor=gone_governor\nmin_hz=306000000\nmax_hz=1300500000\n")
    with pytest.raises(StateFileError, match="governor"):
        dev.restore()
    assert not ownership.holds(dev._board)  # nothing left to govern: the lock is dropped
    assert dev.restore() is False


# -------------------------------------------------------------- govcore restore as root ---

def test_govcore_restore_as_root_names_a_missing_max_freq(tmp_path, govcore):
    if os.geteuid() != 0:
        pytest.skip("the root path")
    fb = build_fake_board(tmp_path / "b", "jp5")
    assert _govcore(govcore, "--sysfs-root", str(fb.root), "pin", "510").returncode == 0
    (fb.devfreq_dir / "max_freq").unlink()
    out = _govcore(govcore, "--sysfs-root", str(fb.root), "restore")
    assert out.returncode == 2
    assert "without root" not in out.stderr, out.stderr
    assert "still not as saved: max_freq" in out.stderr, out.stderr
    assert fb.read_hz("min_freq") == 306000000  # what could be written was


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_restore_that_cannot_read_cur_freq_back_succeeds(tmp_path, govcore, front):
    fb = build_fake_board(tmp_path / "b", "jp5")
    state = Path(pydvfs.open_device(fb.root).state_file())
    assert _govcore(govcore, "--sysfs-root", str(fb.root), "pin", "510").returncode == 0
    (fb.devfreq_dir / "cur_freq").unlink()
    if front == "pydvfs":
        out = _pydvfs("restore", "--sysfs-root", str(fb.root))
    else:
        out = _govcore(govcore, "--sysfs-root", str(fb.root), "restore")
    assert out.returncode == 0, out.stderr
    assert "cur_freq unknown" in out.stderr
    assert "restored governor nvhost_podgov, min 306 MHz, max 1300.5 MHz" in out.stdout
    assert not state.exists()
    assert _board_state(fb) == ORIGINAL


# --------------------------------------------------------------- board files are regular ---

@pytest.mark.parametrize("name", ["cur_freq", "governor", "in1_input"])
def test_a_fifo_in_the_board_tree_is_refused_never_waited_on(tmp_path, govcore, name):
    fb = build_fake_board(tmp_path / "b", "jp5")
    if name == "in1_input":
        target = fb.rails["VDD_GPU_SOC"].voltage_path
    else:
        target = fb.devfreq_dir / name
    target.unlink()
    os.mkfifo(target)
    for run in (lambda *a: _pydvfs(*a), lambda *a: _govcore(govcore, *a)):
        out = run("status", "--sysfs-root", str(fb.root))  # the guard's timeout fails a hang
        assert "Traceback" not in out.stderr
        if name != "in1_input":
            assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr
        out = run("pin", "714", "--sysfs-root", str(fb.root))
        assert "Traceback" not in out.stderr
        if name != "in1_input":
            assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr
            assert fb.read_hz("max_freq") == 1300500000
        else:
            assert out.returncode == 0, out.stderr
            assert _govcore(govcore, "--sysfs-root", str(fb.root), "restore").returncode == 0
    out = _pydvfs("measure", "--sysfs-root", str(fb.root), "--", "true")
    assert "Traceback" not in out.stderr


# ------------------------------------------------------ the progress file's writer ---

def test_progress_writer_never_follows_a_planted_link(tmp_path):
    """Before: root's write_progress opened F.tmp.<pid> with open(..., "w"): a planted link
    truncated the file it pointed at."""
    victim = tmp_path / "victim"
    victim.write_text("root-only\n")
    folder = tmp_path / "user"
    folder.mkdir()
    steps = folder / "steps"
    planted = [folder / f"steps.tmp.{os.getpid()}", folder / f"steps.tmp.{os.getpid()}.1"]
    for p in planted:
        p.symlink_to(victim)
    write_progress(steps, 42)
    assert victim.read_text() == "root-only\n"
    assert read_progress(steps) == 42
    assert all(p.is_symlink() for p in planted)  # left alone, not followed
    # a link planted at the progress file itself is replaced, its target untouched
    steps.unlink()
    steps.symlink_to(victim)
    write_progress(steps, 43)
    assert victim.read_text() == "root-only\n" and not steps.is_symlink() and read_progress(steps) == 43


def test_progress_reader_never_waits_on_a_fifo(tmp_path):
    fifo = tmp_path / "steps"
    os.mkfifo(fifo)
    result = []
    t = threading.Thread(target=lambda: result.append(read_progress(fifo)), daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert result == [None]


def test_through_the_daemon_an_original_that_is_a_pin_is_said_too(tmp_path, govcore):
    """The daemon's pin and apply replies carry the warning; pydvfs pin and apply through it
    (PYDVFS_SOCKET) show it as they do directly (PinResult.warning, Decision.warning)."""
    import time

    fb = build_fake_board(tmp_path / "b", "jp5")
    (fb.devfreq_dir / "min_freq").write_text("1300500000\n")  # as jetson_clocks leaves it
    sock = tmp_path / "run" / "govcore.sock"
    sock.parent.mkdir(mode=0o755)
    log = tmp_path / "daemon.log"
    proc = subprocess.Popen([govcore, "--sysfs-root", str(fb.root), "--state-dir", _private(tmp_path / "state"),
                             "serve", "--socket", str(sock), "--group", "root",
                             "--policy-dir", str(tmp_path / "policies")], stderr=open(log, "wb"))
    env = {"PYDVFS_SOCKET": str(sock)}
    try:
        deadline = time.monotonic() + 30
        while "serving " not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.02)
        out = _pydvfs("pin", "714", "--json", env=env)  # undone as it exits: the daemon restores the pin
        assert out.returncode == 0, out.stderr
        assert "itself a pin" in json.loads(out.stdout)["warning"]
        assert "pydvfs: warning: the clock state saved as the original is itself a pin" in out.stderr
        out = _pydvfs("apply", "--policy", "rules", "--model", "bert", "--layers", "12", "--hidden", "768",
                      "--seq-len", "64", "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert "itself a pin" in json.loads(out.stdout)["warning"]
        assert "pydvfs: warning: the clock state saved as the original is itself a pin" in out.stderr
        out = _pydvfs("apply", "--policy", "rules", "--model", "bert", "--layers", "12", "--hidden", "768",
                      "--seq-len", "64", "--dry-run", "--json", env=env)
        assert out.returncode == 0 and "warning" not in json.loads(out.stdout), out.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert _board_state(fb)[:2] == (1300500000, 1300500000)  # the original, pin and all

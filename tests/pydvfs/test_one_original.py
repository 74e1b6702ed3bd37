"""Issue 27 item 7: one GPU has one saved original, wherever it is asked from. Before, after
`pin 612 --emc 665.6 --cpu 1036.8 --state-dir A` had exited, `pin 408 --state-dir B` saved the
live pin as B's "original", and `restore --state-dir B` left the board pinned at 612/665.6/1036.8;
the same through a bind-mounted second root and with a second PYDVFS_LOCK_DIR. Now the record is
named after the GPU's devfreq node (every path to the GPU meets it) and the lock folder says
where it lives, so a second saver finds it or is refused, naming it."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.device.fake_domains import EMC_DIR, add_clock_domains
from pydvfs.device.table import board as board_row
from pydvfs.errors import BoardBusyError

NANO = board_row("orin-nano-super")
CPU0 = "sys/devices/system/cpu/cpufreq/policy0"


@pytest.fixture
def nano(tmp_path):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO)
    return b


def _private(path):
    path.mkdir(mode=0o700)
    return path


def _pinned(b) -> tuple:
    return (b.read_hz("min_freq"), b.read_hz("max_freq"), (b.root / EMC_DIR / "mrq_rate_locked").read_text().strip(),
            (b.root / CPU0 / "scaling_max_freq").read_text().strip())


ORIGINAL = (306000000, 1300500000, "0", "1728000")
JOINT = (612000000, 612000000, "1", "1036800")


def _gc(govcore_bin, root, *args, env=None):
    return subprocess.run([govcore_bin, "--sysfs-root", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_a_second_state_folder_is_refused_naming_the_first(nano, tmp_path, cli, govcore_bin):
    a, b = _private(tmp_path / "A"), _private(tmp_path / "B")
    assert _pinned(nano) == ORIGINAL
    p = _gc(govcore_bin, nano.root, "--state-dir", str(a), "pin", "612", "--emc", "665.6", "--cpu", "1036.8")
    assert p.returncode == 0, p.stderr
    assert _pinned(nano) == JOINT
    for res in (_gc(govcore_bin, nano.root, "--state-dir", str(b), "pin", "408"),
                cli("pin", "408", "--sysfs-root", str(nano.root), env={"PYDVFS_STATE_DIR": str(b)})):
        assert res.returncode == 2 and f"already saved in {a}" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    with pytest.raises(BoardBusyError, match="already saved in"):
        pydvfs.open_device(nano.root, state_dir=str(b)).pin(408)
    assert _pinned(nano) == JOINT and not list(b.iterdir())  # nothing saved in B, nothing changed
    assert "nothing to restore" in _gc(govcore_bin, nano.root, "--state-dir", str(b), "restore").stdout
    p = _gc(govcore_bin, nano.root, "--state-dir", str(a), "restore")
    assert p.returncode == 0 and _pinned(nano) == ORIGINAL, p.stderr
    # the record is gone: B may now save the (true) original
    p = _gc(govcore_bin, nano.root, "--state-dir", str(b), "pin", "408")
    assert p.returncode == 0, p.stderr
    assert _gc(govcore_bin, nano.root, "--state-dir", str(b), "restore").returncode == 0
    assert _pinned(nano) == ORIGINAL


def test_a_second_lock_folder_finds_the_same_record(nano, tmp_path, govcore_bin):
    """The record is the GPU's: a second PYDVFS_LOCK_DIR (a second lock) still meets it in the
    state folder, so the second pin keeps the first original and restore puts that back."""
    l1, l2 = _private(tmp_path / "L1"), _private(tmp_path / "L2")
    p = _gc(govcore_bin, nano.root, "pin", "612", "--emc", "665.6", "--cpu", "1036.8", env={"PYDVFS_LOCK_DIR": str(l1)})
    assert p.returncode == 0, p.stderr
    p = _gc(govcore_bin, nano.root, "pin", "408", env={"PYDVFS_LOCK_DIR": str(l2)})
    assert p.returncode == 0, p.stderr
    p = _gc(govcore_bin, nano.root, "restore", env={"PYDVFS_LOCK_DIR": str(l2)})
    assert p.returncode == 0, p.stderr
    assert _pinned(nano) == ORIGINAL  # before: 612/665.6/1036.8 left ("saved" the pin)


BIND = r"""
set -e
mount --bind "$1" "$2"
"$3" --sysfs-root "$1" pin 612 --emc 665.6 --cpu 1036.8 >/dev/null
"$3" --sysfs-root "$2" pin 408 >/dev/null
"$3" --sysfs-root "$2" restore
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root for a bind mount")
def test_a_bind_mounted_second_root_meets_the_same_record(nano, tmp_path, govcore_bin):
    second = tmp_path / "second"
    second.mkdir()
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", BIND, "sh", str(nano.root),
                        str(second), govcore_bin], capture_output=True, text=True, env=os.environ.copy())
    assert p.returncode == 0, p.stderr
    assert _pinned(nano) == ORIGINAL, p.stdout  # before: the board left pinned at 612/665.6/1036.8

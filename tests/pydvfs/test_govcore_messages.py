"""Issue 27, items 13 and 16 (govcore's messages, both front ends): a sysfs root the user may not
read says "permission denied", not "does not exist"; a clock typed in Hz (or kHz) says it looks
like one; a CPU clock refused says the rule by which another one was snapped."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.device.fake_domains import add_clock_domains
from pydvfs.device.table import board as board_row
from pydvfs.errors import InvalidValueError

NANO = board_row("orin-nano-super")
NOBODY = 65534

# the CLI as nobody: run once as root on a board it may read (the interpreter's own files may be
# unreadable to nobody: every module the verb needs is then imported), then with the privileges
# dropped, as a user would run it. argv: WARM_ROOT VERB ARGS...
AS_NOBODY = """
import contextlib, io, os, sys
from pydvfs.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main([*sys.argv[2:-1], sys.argv[1]])
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture
def nano(tmp_path):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO)
    return b


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the front ends as nobody")
def test_a_root_the_user_cannot_read_says_permission_denied(test_tmp, govcore_bin):
    tmp_path = Path(tempfile.mkdtemp(prefix="pydvfs-perm-", dir=test_tmp))  # nobody may traverse it
    tmp_path.chmod(0o755)
    b = build_fake_board(tmp_path / "board", "jp6")
    b.root.chmod(0o700)  # root's: nobody may not read it
    gone = tmp_path / "gone"
    warm = build_fake_board(tmp_path / "warm", "jp6")
    for root, words in ((b.root, "permission denied"), (gone, "does not exist")):
        g = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", govcore_bin,
                            "--sysfs-root", str(root), "status"], capture_output=True, text=True, cwd="/")
        p = subprocess.run([sys.executable, "-c", AS_NOBODY, str(warm.root), "status", "--sysfs-root", str(root)],
                           capture_output=True, text=True, cwd="/", env={**os.environ, "PYDVFS_SOCKET": ""})
        for res in (g, p):
            assert res.returncode == 2 and words in res.stderr, res.stderr
            assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
    # the API says the same, with the error of its cause
    code = ("import os, pydvfs\npydvfs.open_device(%r)\nos.setgroups([]); os.setresgid(65534, 65534, 65534); "
            "os.setresuid(65534, 65534, 65534)\ntry:\n    pydvfs.open_device(%r)\n"
            "except pydvfs.errors.BoardPermissionError as e:\n    print(e)\n    raise SystemExit(3)\n") % (str(warm.root),
                                                                                            str(b.root))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert res.returncode == 3 and "permission denied" in res.stdout, res.stdout + res.stderr
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize("text, words", [
    ("714000000", "714000000 looks like Hz: that is 714 MHz, so give 714"),
    ("1300500000", "looks like Hz: that is 1300.5 MHz"),
    ("1036800", "1036800 looks like kHz: that is 1036.8 MHz, so give 1036.8"),
])
def test_a_clock_typed_in_hz_says_it_looks_like_hz(nano, cli, govcore_bin, text, words):
    root = str(nano.root)
    for res in (cli("pin", text, "--sysfs-root", root),
                subprocess.run([govcore_bin, "--sysfs-root", root, "pin", text], capture_output=True, text=True),
                subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "612", "--cpu", text], capture_output=True,
                               text=True)):
        assert res.returncode == 2 and words in res.stderr and "not a clock" in res.stderr, res.stderr
    with pytest.raises(InvalidValueError, match=words):
        pydvfs.open_device(root).pin(text)
    # a number that is no plausible clock in any unit gets no guess
    p = cli("pin", "99999999999999", "--sysfs-root", root)
    assert p.returncode == 2 and "looks like" not in p.stderr


def test_a_cpu_clock_refused_says_the_rule_that_snapped_another(nano, cli, govcore_bin):
    root = str(nano.root)
    rule = "from its lowest to its highest level (115.2..1728 MHz) is snapped to each policy's nearest level"
    for res in (cli("pin", "612", "--cpu", "5000", "--sysfs-root", root),
                subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "612", "--cpu", "5000"],
                               capture_output=True, text=True)):
        assert res.returncode == 2 and rule in res.stderr and "outside that range is refused" in res.stderr, \
            res.stderr
    p = cli("pin", "612", "--emc", "1000", "--sysfs-root", root)
    assert p.returncode == 2 and "the EMC takes one of its rates exactly" in p.stderr, p.stderr
    # and the snapped one still is, saying so
    p = subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "612", "--cpu", "1000"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and "snapped to each policy's nearest level" in p.stdout, p.stderr
    assert pydvfs.open_device(root).restore() is True

"""Inputs that once ended in a traceback: each now gives one line and exit 2, or simply works
(issue 22: non-UTF-8 governors and sysfs roots, `--watch inf`, `apply(policy=None)`, a float
window, a file as the sysfs root)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError


def _one_line_error(out: subprocess.CompletedProcess) -> None:
    err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode("utf-8", "backslashreplace")
    assert out.returncode == 2, (out.stdout, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _bytes_run(*args: bytes | str) -> subprocess.CompletedProcess:
    """`python -m pydvfs ARGS` with arguments that may be bytes, its stdout strict UTF-8 (as in
    a desktop's en_US.UTF-8 locale, where an undecodable byte printed raises)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    return subprocess.run([sys.executable, "-m", "pydvfs", *args], capture_output=True, env=env, timeout=300)


def test_a_governor_that_is_not_utf8_is_shown_escaped(cli, board, govcore_bin, tmp_path):
    df = board.devfreq_dir
    (df / "available_governors").write_bytes(b"nvhost_podgov perf\xff\x1b[31m userspace\n")
    (df / "governor").write_bytes(b"perf\xff\x1b[31m\n")
    where = ["--sysfs-root", str(board.root), "--state-dir", str(tmp_path)]
    for args in (["status"], ["status", "--json"], ["measure", "--sysfs-root", str(board.root)], ["restore"],
                 ["restore", "--json"]):
        out = cli(*args, "--", "true") if args[0] == "measure" else cli(*args, *where)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr)
        if args[0] == "status" or args == ["restore", "--json"]:
            shown = json.loads(out.stdout)["governor"] if "--json" in args else out.stdout
            assert "perf\\xff\\x1b[31m" in shown and "\x1b" not in out.stdout, (args, out.stdout)
    # a governor govcore would not write back is not saved: refused in one line, the board as it was
    out = cli("pin", "714", *where)
    _one_line_error(out)
    assert "perf\\xff\\x1b[31m" in out.stderr and "\x1b" not in out.stderr
    assert (df / "governor").read_bytes() == b"perf\xff\x1b[31m\n"
    g = subprocess.run([govcore_bin, "status", *where], capture_output=True)
    assert g.returncode == 0 and b"governor  perf\\xff\\x1b[31m" in g.stdout and b"\x1b" not in g.stdout


def test_a_sysfs_root_that_is_not_utf8(tmp_path):
    root = os.path.join(os.fsencode(tmp_path), b"orin-\xff")
    build_fake_board(os.fsdecode(root), "jp5")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    where = [b"--sysfs-root", root, b"--state-dir", os.fsencode(state)]
    for args in ([b"status"], [b"status", b"--json"], [b"pin", b"714"], [b"measure", *where[:2], b"--", b"true"],
                 [b"restore"]):
        out = _bytes_run(*args) if args[0] == b"measure" else _bytes_run(*args, *where)
        assert out.returncode == 0 and b"Traceback" not in out.stderr, (args, out.stderr)
    out = _bytes_run(b"status", *where)
    assert b"sysfs     " + os.fsencode(tmp_path) + b"/orin-\\xff\n" in out.stdout
    out = _bytes_run(b"status", b"--json", *where)
    assert json.loads(out.stdout)["sysfs_root"] == os.fsdecode(root)
    out = _bytes_run(b"status", b"--sysfs-root", root + b"-missing")
    _one_line_error(out)
    assert b"orin-\\xff-missing does not exist" in out.stderr


def test_a_file_as_the_sysfs_root_is_not_a_directory(cli, govcore_bin, tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    out = cli("status", "--sysfs-root", str(f))
    _one_line_error(out)
    assert f"sysfs root {f} is not a directory" in out.stderr
    g = subprocess.run([govcore_bin, "status", "--sysfs-root", str(f)], capture_output=True, text=True)
    assert g.returncode == 2 and "is not a directory" in g.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "-1", "0", "1e6", "soon"])
def test_status_watch_takes_a_sane_number_of_seconds(cli, board, value):
    out = cli("status", "--sysfs-root", str(board.root), "--watch", value, "--count", "1")
    _one_line_error(out)
    assert "--watch" in out.stderr


def test_apply_policy_none_is_the_default_and_a_wrong_type_is_refused(board, tmp_path):
    w = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}
    d = pydvfs.decide(w, policy=None, sysfs_root=board.root)
    assert d.policy == "mlg" and d == pydvfs.decide(w, sysfs_root=board.root)
    for bad in (3, "fast", b"mlg"):
        with pytest.raises(InvalidValueError, match="unknown policy"):
            pydvfs.apply(w, policy=bad, sysfs_root=board.root, state_dir=tmp_path)
    assert board.read_hz("max_freq") == 1300500000


def test_a_window_given_as_seconds(board):
    from pydvfs.governor.engine import WindowParams
    from pydvfs.integrations.common import make_governor

    gov = pydvfs.OnlineGovernor(window=1.5, sysfs_root=board.root, log=None)
    assert gov.window == WindowParams(min_window_s=1.5)
    # what GovernorCallback(window=1.0) and the Lightning callback build at train begin
    gov = make_governor("online", None, {"window": 1.0, "sysfs_root": board.root, "log": None})
    assert gov.window.min_window_s == 1.0 and gov.window.settle_s == WindowParams().settle_s
    for bad in (float("inf"), 0, True, "10", {"min_window": 3}):
        with pytest.raises(InvalidValueError, match="window"):
            pydvfs.OnlineGovernor(window=bad, sysfs_root=board.root, log=None)

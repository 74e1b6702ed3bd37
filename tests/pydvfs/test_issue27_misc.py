"""Issue 27 items 14, 15 and 16 (the Python side): one line instead of a traceback (a non-UTF-8
state folder; a daemon whose reply is deep, huge, key-less or with an errno that is not one),
SIGTERM to `fake-board --animate` ends its simulated process, and the messages a new user met."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pydvfs.device import table as boards
from pydvfs.errors import InvalidValueError
from pydvfs.measure.energy import require

REPO = Path(__file__).resolve().parents[2]


def one_line(res, code=2) -> str:
    err = res.stderr if isinstance(res.stderr, str) else res.stderr.decode("utf-8", "replace")
    assert res.returncode == code, (res.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ item 14 ----------------------

def test_status_with_a_state_dir_that_is_not_utf8(board, tmp_path):
    state = os.path.join(os.fsencode(tmp_path), b"state-\xff")
    os.mkdir(state, 0o700)
    env = {**os.environ, "PYDVFS_STATE_DIR": state}
    res = subprocess.run([sys.executable, "-m", "pydvfs", "status", "--sysfs-root", str(board.root)],
                         capture_output=True, env=env, timeout=120)
    assert res.returncode == 0 and b"Traceback" not in res.stderr, res.stderr


class FakeDaemon:
    """A UNIX socket that answers every request line with ``reply`` (bytes), then keeps the
    connection open ``hold_s``: what a broken or hostile daemon could send."""

    def __init__(self, path: Path, reply: bytes, hold_s: float = 0.0):
        self.path, self.reply, self.hold_s = str(path), reply, hold_s
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.settimeout(5)
                    if conn.recv(4096):
                        conn.sendall(self.reply)
                    deadline = time.monotonic() + self.hold_s
                    while time.monotonic() < deadline and not self.stop.is_set():
                        time.sleep(0.05)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("name,reply,hold_s,words", [
    ("deep", b"[" * 100000 + b"\n", 0, "nested too deeply"),
    ("errno-not-a-number", json.dumps({"error": "the board is busy", "errno": "x"}).encode() + b"\n", 0,
     "the board is busy"),
    ("errno-a-list", json.dumps({"error": ["a"], "errno": [1.5]}).encode() + b"\n", 0, '["a"]'),
    ("keyless", b"{}\n", 0, "reply to 'status' has no '"),
    ("huge", b"x" * (2 * 1024 * 1024), 20, "larger than 262144 bytes"),
])
def test_a_broken_daemons_reply_is_one_line(tmp_path, name, reply, hold_s, words):
    sock = Path("/tmp") / f"pydvfs-i27-{os.getpid()}-{name}.sock"
    daemon = FakeDaemon(sock, reply, hold_s)
    try:
        env = {**os.environ, "PYDVFS_SOCKET": str(sock)}
        t0 = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "pydvfs", "status"], capture_output=True, text=True,
                             env=env, timeout=60)
        line = one_line(res)
        assert words in line, line
        assert time.monotonic() - t0 < 15  # a huge reply is cut off at the cap, not waited out
    finally:
        daemon.close()
        sock.unlink(missing_ok=True)


# ------------------------------------------------------------------ item 15 ----------------------

def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_sigterm_to_fake_board_animate_ends_its_simulated_process(tmp_path):
    progress = tmp_path / "steps"
    p = subprocess.Popen([sys.executable, "-m", "pydvfs", "fake-board", str(tmp_path / "orin"), "--animate",
                          "bert-base", "--progress-file", str(progress)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (progress.exists() and _children(p.pid)):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        child = _children(p.pid)[0]
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert "stopped (SIGTERM)" in err, err
    deadline = time.monotonic() + 20
    while not _gone(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the simulated training process outlived fake-board --animate")
        time.sleep(0.05)


# ------------------------------------------------------------------ item 16 ----------------------

def test_a_bad_workload_number_names_its_key(cli, board):
    res = cli("apply", "--dry-run", "--sysfs-root", str(board.root), "--workload",
              "model=bert,layers=twelve,hidden=768,seq_len=13")
    line = one_line(res)
    assert "layers" in line and "'twelve'" in line and "could not convert" not in line, line
    line = one_line(cli("apply", "--dry-run", "--sysfs-root", str(board.root), "--workload",
                        "model=bert,layers=12,hidden=768,seq_len=short"))
    assert "seq_len" in line and "'short'" in line, line


def test_the_energy_hint_is_a_whole_sentence():
    b = boards.board("agx-orin")
    with pytest.raises(InvalidValueError) as e:
        require(b, "module", b.model_example, rails=list(b.role_rails("cpu_gpu")))
    assert str(e.value).endswith("; --energy cpu-gpu can be measured here"), str(e.value)


def test_run_help_names_one_default_policy(cli):
    text = " ".join(cli("run", "--help").stdout.split())
    policy = text.split("--policy {")[-1].split("--workload", 1)[0]  # the option's help, not the usage
    assert policy.count("(default)") == 1 and "online (default)" in policy, policy
    apply = " ".join(cli("apply", "--help").stdout.split())
    assert apply.split("--policy {")[-1].split("--model-dir", 1)[0].count("(default)") == 1


def test_the_docs_state_the_state_files_format_and_say_each_sentence_once():
    readme = (REPO / "docs" / "safety.md").read_text()
    fmt = re.search(r"#define GC_STATE_FORMAT (\d+)", (REPO / "govcore" / "state.h").read_text()).group(1)
    assert f"`format={fmt}`" in readme and re.findall(r"`format=(\d+)`", readme) == [fmt]
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(readme.split())) if len(s.strip()) > 40]
    repeated = {s for s in sentences if sentences.count(s) > 1}
    assert not repeated, repeated
    readme = " ".join((REPO / "README.md").read_text().split())
    assert not [s for s in set(sentences) if s in readme]  # the README links the page, not its sentences

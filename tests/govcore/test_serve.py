"""`govcore serve` as root on a fake board, its clients as an unprivileged user (setpriv to
nobody with a test group): pin, apply, windows and restore through the Python API and the
govcore verbs; a client outside the group refused; a client SIGKILLed while pinned -> board
restored within 1 s; two clients -> the second refused; the daemon SIGKILLed -> the next start
restores. The daemon is the AddressSanitizer + UBSan build (make -C govcore build/govcore-asan);
a hypothesis client throws random, oversized, partial and binary requests at it."""
from __future__ import annotations

import grp
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrapped import report as wrapped_report

from pydvfs.device.fake import build_fake_board

REPO = Path(__file__).resolve().parents[2]
GOVCORE = REPO / "govcore"
ASAN_BIN = GOVCORE / "build" / "govcore-asan"
# one group per test process: two test runs on one machine must not add, use and delete the same one
GROUP = f"pydvfs-test-{os.getpid()}"
ORIGINAL = (306000000, 1300500000, "nvhost_podgov")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root (to run the daemon) and setpriv (to run clients as nobody)")


def _client_python() -> str | None:
    """An interpreter nobody may run (the venv's may live under /root)."""
    for exe in (sys.executable, "/usr/bin/python3"):
        ok = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", exe, "-c", "pass"],
                            capture_output=True, cwd="/")
        if ok.returncode == 0:
            return exe
    return None


@pytest.fixture(scope="module")
def group_gid():
    created = False
    try:
        gid = grp.getgrnam(GROUP).gr_gid
    except KeyError:
        if shutil.which("groupadd") is None:
            pytest.skip("no groupadd to create the test group")
        subprocess.run(["groupadd", "--system", GROUP], check=True)
        created = True
        gid = grp.getgrnam(GROUP).gr_gid
    yield gid
    if created:
        subprocess.run(["groupdel", GROUP], check=False)


@pytest.fixture(scope="module")
def asan_govcore():
    subprocess.run(["make", "-s", "-C", str(GOVCORE), "govcore", "build/govcore-asan"], check=True,
                   capture_output=True)
    return str(ASAN_BIN)


@pytest.fixture(scope="module")
def client_python():
    exe = _client_python()
    if exe is None:
        pytest.skip("no Python interpreter the user nobody may run")
    return exe


class Daemon:
    def __init__(self, binary, work: Path, board):
        self.binary, self.work, self.board = binary, work, board
        self.sock = work / "run" / "govcore.sock"
        self.log = work / "daemon.log"
        self.proc = None
        self.extra: list[str] = []  # more `serve` options (kept for a restart)

    def _serving(self) -> int:
        return self.log.read_text().count("serving ") if self.log.exists() else 0

    def start(self):
        before = self._serving()
        env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=99",
               "UBSAN_OPTIONS": "halt_on_error=1:exitcode=98"}
        self.proc = subprocess.Popen(
            [self.binary, "--sysfs-root", str(self.board.root), "--state-dir", str(self.work / "state"),
             "serve", "--socket", str(self.sock), "--group", GROUP, "--policy-dir", str(self.work / "policies"),
             *self.extra],
            stderr=open(self.log, "ab"), env=env)
        deadline = time.monotonic() + 30
        while self._serving() == before:  # (a stale socket may exist before)
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.02)
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        return self.proc.returncode

    def request(self, *lines: str) -> list[dict]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(self.sock))
            f = s.makefile("rw")
            out = []
            for line in lines:
                f.write(line + "\n")
                f.flush()
                out.append(json.loads(f.readline()))
            return out


@pytest.fixture
def work(test_tmp):
    # /tmp/pytest-of-root may be 0700: nobody must reach the socket and the fake board. Not /tmp
    # itself: root loads the installed policy from here, and refuses a world-writable folder above it
    # (tests/conftest.py's TEST_TMP).
    d = Path(tempfile.mkdtemp(prefix="pydvfs-serve-", dir=test_tmp))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon(work, asan_govcore, group_gid):
    board = build_fake_board(work / "board", "jp5")
    (work / "run").mkdir(mode=0o755)
    (work / "state").mkdir(mode=0o755)
    d = Daemon(asan_govcore, work, board).start()
    yield d
    rc = d.stop()
    log = d.log.read_text()
    assert rc == 0, log  # 99/98: a sanitizer report
    for report in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error"):
        assert report not in log, log
    assert _state(board) == ORIGINAL, log  # every test ends with the board as it was


def _state(board):
    """The board's clock state; a file caught between the daemon's truncate and write is read again."""
    for _ in range(100):
        try:
            return board.read_hz("min_freq"), board.read_hz("max_freq"), board.governor()
        except ValueError:
            time.sleep(0.001)
    raise AssertionError("a devfreq file stayed empty")


def _as_nobody(gid: int | str, argv: list[str], sock, **kw) -> subprocess.Popen:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYDVFS_SOCKET": str(sock),
           "PYDVFS_SYSFS_ROOT": "/nonexistent", "HOME": "/tmp"}
    return subprocess.Popen(["setpriv", "--reuid=nobody", f"--regid={gid}", "--clear-groups", *argv],
                            env=env, cwd="/", text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


CLIENT_API = """
import pydvfs
st = pydvfs.open_device().status()
assert st["pinned"] is False, st
r = pydvfs.pin(700)                      # snapped to the table by the daemon (the one snap)
assert r.freq_mhz == 714, r
assert pydvfs.open_device().state().pinned
d = pydvfs.apply(pydvfs.Workload(model="bert", layers=12, hidden=768, seq_len=64))
assert d.freq_mhz is not None and d.features, d
dry = pydvfs.decide({"model": "pythia", "layers": 6, "hidden": 512, "seq_len": 128})
with pydvfs.Sampler(rate_hz=1000) as s:
    sum(range(200000))
m = s.measurement
assert m.duration_s > 0 and "VDD_GPU_SOC" in m.energy_j and m.samples >= 0, m
s2 = pydvfs.Sampler()
s2.begin_window("a"); s2.begin_window("b")
ma = s2.end_window("a"); mb = s2.end_window("b")
assert ma.duration_s > 0 and mb.duration_s > 0 and set(ma.energy_j) == set(mb.energy_j)
assert pydvfs.restore() is True
assert not pydvfs.open_device().state().pinned
w = pydvfs.Workload(model="bert", layers=24, hidden=1024, seq_len=128)
with pydvfs.governed(w) as dec:
    assert pydvfs.open_device().state().pinned
assert not pydvfs.open_device().state().pinned
print("ok", dec.freq_mhz)
"""


def test_unprivileged_client_governs_through_the_daemon(daemon, client_python, group_gid):
    p = _as_nobody(group_gid, [client_python, "-c", CLIENT_API], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.startswith("ok"), out
    assert _state(daemon.board) == ORIGINAL
    # the govcore verbs too (their reply: the verb's JSON record)
    gc = str(GOVCORE / "govcore")
    p = _as_nobody(group_gid, [gc, "status"], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and json.loads(out)["gpu"] == "ga10b", err
    p = _as_nobody(group_gid, [gc, "pin", "714"], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and json.loads(out)["freq_mhz"] == 714, err
    p = _as_nobody(group_gid, [gc, "pin", "not-a-clock"], daemon.sock)
    assert p.communicate(timeout=60) and p.returncode == 2


@pytest.fixture
def trained_model(trained):
    """A model folder from `pydvfs train` on the policy tests' synthetic data: the session's one
    (tests/conftest.py's ``trained``: the same data, tasks and training; copied, never changed)."""
    return trained[0]


def test_apply_with_a_tree_root_installed(daemon, client_python, group_gid, trained_model):
    installed = daemon.work / "policies" / "ours"
    shutil.copytree(trained_model, installed)
    wl = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}
    code = ("import json, sys, pydvfs\n"
            f"d = pydvfs.apply({wl!r}, model_dir=sys.argv[1])\n"
            "print(json.dumps(d.to_dict()))\n"
            "try:\n    pydvfs.apply({wl!r}, model_dir='/tmp')\nexcept pydvfs.InvalidValueError as e:\n"
            "    print('refused:', e)\n").replace("{wl!r}", repr(wl))
    p = _as_nobody(group_gid, [client_python, "-c", code, str(installed)], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    first, second = out.splitlines()
    decision = json.loads(first)
    assert decision["model"] != daemon.request("apply dry_run=1 " + " ".join(f"{k}={v}" for k, v in wl.items()))[0]["model"]
    local = __import__("pydvfs").decide(wl, model_dir=trained_model, sysfs_root=daemon.board.root)
    assert decision["freq_mhz"] == local.freq_mhz and decision["model"] == local.model
    assert second.startswith("refused:") and "policies" in second
    # a name that leads out of the policy folder is refused by the parser
    assert "tree" in daemon.request("apply model=bert layers=1 hidden=1 seq_len=1 tree=../x")[0]["error"]


def test_the_daemon_takes_the_boards_built_in_policy_for_the_measure_asked(daemon):
    """Without tree=, the daemon decides with the built-in policy of the board it serves, for the
    measure of energy= (module by default), as `pydvfs apply` and `govcore apply` do locally."""
    import pydvfs

    req = "apply dry_run=1 model=bert layers=12 hidden=768 seq_len=64"
    for measure, extra in (("module", ""), ("module", " energy=module"), ("cpu-gpu", " energy=cpu-gpu")):
        r = daemon.request(req + extra)[0]
        assert r["origin"]["source"] == "built-in" and r["origin"]["measure"] == measure, r
        local = pydvfs.decide({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64},
                              sysfs_root=daemon.board.root, energy=measure)
        assert r["origin"] == local.origin and r["freq_mhz"] == local.freq_mhz and r["model"] == local.model
    assert "energy measure" in daemon.request(req + " energy=watts")[0]["error"]


def test_every_request_of_protocol_1_is_answered(daemon):
    """The daemon's protocol is public (govcore/protocol.h): each request of version 1 is
    answered with its record, never an error, in one connection (tests/test_public_surface.py
    holds the rest of the public surface)."""
    replies = daemon.request("version", "status", "begin surface", "end surface",
                             "apply dry_run=1 model=bert layers=12 hidden=768 seq_len=64",
                             "pin 612", "restore")
    assert not [r for r in replies if "error" in r], replies
    assert replies[0]["protocol"] == 1, replies[0]


def test_pydvfs_run_works_unprivileged(daemon, client_python, group_gid):
    p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", "run", "--json", "--policy", "rules", "--workload",
                               "model=bert,layers=12,hidden=768,seq_len=64", "--", "sleep", "0.5"], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    report = wrapped_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert report["restored"] is True and report["decision"]["freq_mhz"] == 816  # rules: > 7 layers, seq_len > 53
    p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", "measure", "--json", "--", "sleep", "0.3"],
                   daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    m = wrapped_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert m["duration_s"] >= 0.3 and set(m["energy_j"]) == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0",
                                                              "VDDQ_VDD2_1V8AO"}


def test_a_client_outside_the_group_is_refused(daemon, client_python, group_gid):
    code = ("import pydvfs\ntry:\n    pydvfs.pin(714)\nexcept pydvfs.PydvfsError as e:\n    print(e)\n"
            "    raise SystemExit(3)")
    # the socket's mode (0660 root:group) refuses it first ...
    p = _as_nobody("nogroup", [client_python, "-c", code], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and "permission denied" in out and "usermod -aG pydvfs" in out, (out, err)
    # ... and the credentials check (SO_PEERCRED) where the socket's mode would let it in
    os.chmod(daemon.sock, 0o666)
    p = _as_nobody("nogroup", [client_python, "-c", code], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and "not a member of the daemon's group" in out, (out, err)
    assert _state(daemon.board) == ORIGINAL
    assert "uid 65534 gid 65534: refused: not root and not in group" in daemon.log.read_text()


HOLD = """
import sys, time, pydvfs
pydvfs.pin(float(sys.argv[1]))
print("pinned", flush=True)
time.sleep(600)
"""


def test_a_killed_client_s_pin_is_restored_within_a_second(daemon, client_python, group_gid):
    timings_ms = []
    for mhz in ("510", "918", "1224"):
        p = _as_nobody(group_gid, [client_python, "-c", HOLD, mhz], daemon.sock)
        assert p.stdout.readline().strip() == "pinned", p.stderr.read()
        assert _state(daemon.board)[0] == _state(daemon.board)[1] == int(mhz) * 1000000
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)
        while _state(daemon.board) != ORIGINAL and time.monotonic() - t0 < 10:
            time.sleep(0.001)
        timings_ms.append((time.monotonic() - t0) * 1000)
        p.wait()
        assert _state(daemon.board) == ORIGINAL
    print(f"kill -9 -> board restored in {', '.join(f'{t:.1f}' for t in timings_ms)} ms")
    assert max(timings_ms) < 1000, timings_ms


def test_a_second_client_is_refused_naming_the_holder(daemon, client_python, group_gid):
    first = _as_nobody(group_gid, [client_python, "-c", HOLD, "714"], daemon.sock)
    try:
        assert first.stdout.readline().strip() == "pinned"
        code = ("import pydvfs\ntry:\n    pydvfs.pin(510)\nexcept pydvfs.BoardBusyError as e:\n    print(e)\n"
                "    raise SystemExit(3)")
        second = _as_nobody(group_gid, [client_python, "-c", code], daemon.sock)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 3, (out, err)
        assert "pinned by another client" in out and f"(pid {first.pid})" in out, out
        # nor may it restore the holder's pin, and a root process governing directly is refused too
        assert daemon.request("restore")[0]["errno"] == 16
        direct = subprocess.run([str(GOVCORE / "govcore"), "--sysfs-root", str(daemon.board.root),
                                 "--state-dir", str(daemon.work / "state"), "pin", "510"],
                                capture_output=True, text=True, env={**os.environ, "PYDVFS_SOCKET": ""})
        assert direct.returncode == 2 and f"pid {daemon.proc.pid}" in direct.stderr, direct.stderr
        assert _state(daemon.board)[1] == 714000000
    finally:
        first.kill()
        first.wait()
    deadline = time.monotonic() + 5
    while _state(daemon.board) != ORIGINAL and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_daemon_killed_while_pinned_is_restored_by_the_next_start(daemon, asan_govcore):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        s.sendall(b"pin 612\n")
        assert json.loads(s.makefile().readline())["freq_mhz"] == 612
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait()
    assert _state(daemon.board)[1] == 612000000  # nobody restored it: the daemon died
    assert daemon.sock.exists()  # a stale socket is left behind
    daemon.start()  # removes the stale socket, restores the state the dead one left
    assert _state(daemon.board) == ORIGINAL
    log = daemon.log.read_text()
    assert "removed a stale socket" in log and "restored the board from a state left" in log


def test_without_root_and_without_a_daemon_one_line_says_what_to_do(work, client_python):
    board = build_fake_board(work / "board", "jp5")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYDVFS_SYSFS_ROOT": str(board.root),
           "PYDVFS_STATE_DIR": "/tmp", "HOME": "/tmp"}
    if os.path.exists("/run/pydvfs/govcore.sock"):
        pytest.skip("a govcore daemon runs on this machine")
    for argv in ([client_python, "-m", "pydvfs", "pin", "714"], [str(GOVCORE / "govcore"), "pin", "714"],
                 [str(GOVCORE / "govcore"), "restore"]):
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
                           capture_output=True, text=True, cwd="/", timeout=60, env=env)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.splitlines()) == 1 and "without root" in p.stderr
        assert "govcore serve" in p.stderr and "usermod -aG pydvfs" in p.stderr
    assert _state(board) == ORIGINAL


def test_a_second_daemon_refuses_to_start(daemon, asan_govcore):
    out = subprocess.run([asan_govcore, "--sysfs-root", str(daemon.board.root), "serve", "--socket",
                          str(daemon.sock), "--group", GROUP], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "another govcore serve" in out.stderr
    assert daemon.request("version")[0]["protocol"] == 1  # the first one still serves


def test_sigterm_restores_the_board(daemon):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        s.sendall(b"pin 408\n")
        assert json.loads(s.makefile().readline())["freq_mhz"] == 408
        assert daemon.stop(signal.SIGTERM) == 0
    assert _state(daemon.board) == ORIGINAL
    assert not daemon.sock.exists()
    assert not Path(f"{daemon.sock}.lock").exists()  # its one-instance lock file went with it
    daemon.extra = ["--idle-timeout", "0"]
    daemon.start()  # for the fixture's clean stop; 0 is never, and the log says so (not "after 0 s")
    serving = [line for line in daemon.log.read_text().splitlines() if "serving " in line][-1]
    assert "idle connections never closed" in serving, serving


def test_pin_through_the_daemon_follows_the_rules_of_a_direct_pin(daemon, asan_govcore, tmp_path):
    """`pin 714.0000005` through the daemon once said "not a clock of the board's table: 714
    MHz": the daemon reads clocks with the one grammar (gc_parse_mhz), snaps as a direct pin
    does and refuses far clocks in the same words."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        f = s.makefile("rw")

        def ask(line):
            f.write(line + "\n")
            f.flush()
            return json.loads(f.readline())

        r = ask("pin 700.5")
        assert r["requested_mhz"] == 700.5 and r["freq_mhz"] == 714 and r["snapped"] is True
        assert "fraction of at most 6 digits" in ask("pin 714.0000005")["error"]  # refused by the grammar
        far = ask("pin 99999")["error"]
        assert far == "99999 MHz is outside the board's table (306..1300.5 MHz) by more than one level"
        assert _state(daemon.board)[:2] == (714000000, 714000000)  # the refusals changed nothing
        ask("restore")
    board, state = daemon.board, tmp_path / "direct"
    state.mkdir(mode=0o700)
    direct = subprocess.run([asan_govcore, "--sysfs-root", str(board.root), "--state-dir", str(state), "pin",
                             "99999"], capture_output=True, text=True, env={**os.environ, "PYDVFS_SOCKET": ""})
    assert direct.returncode == 2 and far in direct.stderr and "--nearest" in direct.stderr


def test_the_daemon_s_pin_obeys_the_power_mode_cap_and_says_so(daemon, client_python, group_gid):
    """The daemon's pin reply is govcore pin's record: power_cap_mhz and clamped_from_mhz
    (report.c gc_json_pin); a pydvfs client through the daemon reports the same."""
    cap = daemon.board.root / "sys/kernel/nvpmodel_clk_cap/gpu"
    cap.parent.mkdir(parents=True, exist_ok=True)
    cap.write_text("612000000\n")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        f = s.makefile("rw")

        def ask(line):
            f.write(line + "\n")
            f.flush()
            return json.loads(f.readline())

        r = ask("pin 918")
        assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (612, 612, 918), r
        assert _state(daemon.board)[:2] == (612000000, 612000000)
        r = ask("pin 510")
        assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (510, 612, None), r
        ask("restore")
    p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", "pin", "918", "--json", "--", "true"], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    r = wrapped_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (612, 612, 918), r
    assert "918 MHz is above the power mode's GPU cap: pinned 612 MHz" in err, err
    assert _state(daemon.board) == ORIGINAL


def test_pydvfs_pin_direct_and_through_the_daemon_give_the_same_level_and_words(daemon, client_python,
                                                                              group_gid, work):
    """One conversion at each boundary and one snap, in C: the client sends the clock as asked
    (no snap of its own), the daemon snaps it once and says the level it set in Hz. `pydvfs pin`
    directly (root, its own fake board) and through the daemon (nobody) say the same."""
    direct_board = build_fake_board(work / "direct", "jp5")
    (work / "direct-state").mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYDVFS_STATE_DIR": str(work / "direct-state")}
    env.pop("PYDVFS_SOCKET", None)

    def both(*args):
        direct = subprocess.run([sys.executable, "-m", "pydvfs", *args, "--sysfs-root", str(direct_board.root)],
                                capture_output=True, text=True, env=env, timeout=120)
        p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", *args], daemon.sock)
        out, err = p.communicate(timeout=120)
        assert _state(daemon.board) == ORIGINAL  # the pin ended with the client's connection
        return (direct.returncode, direct.stdout, direct.stderr), (p.returncode, out, err)

    for args in (["pin", "700.5"], ["pin", "99999", "--nearest"]):
        d, r = both(*args)
        assert d[0] == r[0] == 0, (d, r)
        assert d[1] == r[1], (d[1], r[1])  # the same words
        subprocess.run([sys.executable, "-m", "pydvfs", "restore", "--sysfs-root", str(direct_board.root)],
                       check=True, capture_output=True, env=env)
    d, r = both("pin", "700.5", "--json")
    dj, rj = json.loads(d[1]), json.loads(r[1])
    assert dj == {**rj, "state_file": dj["state_file"]}
    assert dj["requested_mhz"] == 700.5 and dj["freq_mhz"] == 714.0 and dj["snapped"] is True
    subprocess.run([sys.executable, "-m", "pydvfs", "restore", "--sysfs-root", str(direct_board.root)],
                   check=True, capture_output=True, env=env)
    d, r = both("pin", "99999")  # refused far outside the table, in govcore's words, changing nothing
    assert d[0] == r[0] == 2 and d[2] == r[2], (d, r)
    assert "99999 MHz is outside the board's table (306..1300.5 MHz) by more than one level; pass " \
           "--nearest" in d[2]
    assert _state(direct_board) == ORIGINAL
    # the daemon's reply: the level set, exact, in Hz; nearest=1 pins far outside the table
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        f = s.makefile("rw")
        f.write("pin 99999 nearest=1\n")
        f.flush()
        reply = json.loads(f.readline())
        f.close()  # (the file holds the socket open)
        assert reply["freq_hz"] == 1300500000 and reply["freq_mhz"] == 1300.5 and reply["snapped"] is True
    deadline = time.monotonic() + 30
    while _state(daemon.board) != ORIGINAL:  # that connection's pin: restored once the daemon sees it close
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gc = str(GOVCORE / "govcore")
    p = _as_nobody(group_gid, [gc, "pin", "99999", "--nearest"], daemon.sock)  # refused before: no table here
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and json.loads(out)["freq_hz"] == 1300500000, err


def test_requests_are_bounded_and_strict(daemon):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(daemon.sock))
        s.sendall(b"x" * 5000)  # no newline, longer than 512 bytes
        reply = json.loads(s.makefile().readline())
        assert "longer than 512" in reply["error"]
        try:  # and closed (a reset: the rest of what it sent was never read)
            assert s.recv(10) == b""
        except ConnectionResetError:
            pass
    # a slow client does not block another
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(daemon.sock))
    slow.sendall(b"stat")
    assert daemon.request("status")[0]["gpu"] == "ga10b"
    slow.close()
    assert daemon.request("version")[0]["version"] == __import__("pydvfs").__version__


def test_the_daemon_reads_a_workload_by_the_one_grammar(daemon):
    """Every case of tests/data/workload_grammar.json as an apply request (its commas as the
    request's spaces): what pydvfs and govcore refuse, the daemon refuses for the same reason
    (issue 37: `seq_len=1e-7` was accepted directly and refused by the daemon); what they accept
    it decides, with the same notice where the workload is outside the policy's training data."""
    from workload_cases import CASES, reason

    from pydvfs import Workload
    from pydvfs.errors import InvalidValueError
    from pydvfs.workload import parse_workload

    for case in CASES:
        spec = case["spec"]
        if "\n" in spec:  # (a second request: test_requests_are_bounded_and_strict's business)
            continue
        reply = daemon.request("apply " + spec.replace(",", " ") + " dry_run=1")[0]
        if "refused" not in case:
            assert "error" not in reply, (case, reply)
            outside = case.get("outside", [])
            assert (reply["outside_training"] is None) == (not outside), (case, reply)
            assert all(f"{key} " in (reply["outside_training"] or "") for key in outside), (case, reply)
            continue
        assert "error" in reply, (case, reply)
        if case["refused"].startswith("workload "):  # a key's value or a workload: the same words
            with pytest.raises(InvalidValueError) as direct:
                Workload.from_any(parse_workload(spec))
            assert reason(reply["error"]) == reason(str(direct.value)), (case, reply)


REQUESTS = st.one_of(
    st.binary(max_size=700),                                               # anything
    st.binary(min_size=513, max_size=3000),                                # oversized
    st.sampled_from(["pin", "begin", "end", "apply", "restore x", "status ", "pin 714.0.0", "pin -714",
                     "pin 7e2", "pin 0x2ca", "begin ..", "apply model=bert", "apply layers=1 layers=2"])
    .map(str.encode),
    st.lists(st.sampled_from(["pin", "apply", "begin", "end", "model=bert", "layers=12", "hidden=768",
                              "seq_len=64", "policy=ffg", "tree=../x", "dry_run=2", "714", "1300.5",
                              "util_pct=101", "\x00", "\t", "", "é"]), max_size=8)
    .map(lambda ws: " ".join(ws).encode("utf-8")),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=REQUESTS, split=st.integers(0, 50))
def _fuzz_one(daemon, counter, data, split):
    counter[0] += 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(daemon.sock))
        # partial: the request arrives in two pieces
        s.sendall(data[:split])
        s.sendall(data[split:] + b"\n")
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except ConnectionResetError:
            pass
    assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
    accepted = False
    for line in buf.split(b"\n")[:-1]:
        reply = json.loads(line)  # every reply is one line of JSON
        accepted |= "error" not in reply
        if not accepted:  # refused requests (and nothing before them) leave the board as it was
            assert _state(daemon.board) == ORIGINAL
    # whatever it asked, the board goes back when the connection has gone
    for _ in range(200):
        if _state(daemon.board) == ORIGINAL:
            break
        time.sleep(0.005)
    assert _state(daemon.board) == ORIGINAL


def test_hypothesis_client_never_crashes_the_daemon(daemon):
    counter = [0]
    _fuzz_one(daemon, counter)
    print(f"hypothesis client: {counter[0]} requests sent over the socket; daemon alive, board unchanged")
    assert counter[0] >= 100
    assert daemon.request("status")[0]["pinned"] is False


# ----------------------------------------------------------------------------- every member is served

CONNECT_MANY = """
import json, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
served, refused = [], []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    try:
        s.sendall(b"version\\n")
    except OSError:
        pass  # refused: the daemon said why and closed
    f = s.makefile("r")
    r = json.loads(f.readline())
    (refused if "error" in r else served).append((s, f, r))
print(json.dumps({"served": len(served), "refused": [r["error"] for _, _, r in refused]}), flush=True)
sys.stdin.readline()  # hold them until the test says
"""


def _member(uid: int | str, gid: int, argv: list[str], sock) -> subprocess.Popen:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYDVFS_SOCKET": str(sock), "HOME": "/tmp"}
    return subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv],
                            env=env, cwd="/", text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_one_member_cannot_take_every_slot_and_root_is_always_served(daemon, client_python, group_gid):
    # four members (uids), each trying 20 connections: 16 each at most, 60 in all (4 kept for root)
    holders = []
    try:
        results = []
        for uid in (65534, 40001, 40002, 40003):
            p = _member(uid, group_gid, [client_python, "-c", CONNECT_MANY, str(daemon.sock), "20"], daemon.sock)
            holders.append(p)
            line = p.stdout.readline()
            assert line, p.stderr.read()
            results.append(json.loads(line))
        assert [r["served"] for r in results] == [16, 16, 16, 12], results
        assert all("at most 16 per user" in e for e in results[0]["refused"]), results[0]
        assert any("too many clients" in e for e in results[3]["refused"]), results[3]
        # every slot a member may take is taken: root's status is still served (its kept slots)
        for _ in range(3):
            assert daemon.request("status")[0]["gpu"] == "ga10b"
        log = daemon.log.read_text()
        assert "uid 65534: refused: too many connections from uid 65534 (at most 16 per user)" in log
        # one member's slots do not lock another out: the first lets go, a fifth member is served
        holders[0].communicate("\n", timeout=60)
        p = _member(40004, group_gid, [client_python, "-c", CONNECT_MANY, str(daemon.sock), "1"], daemon.sock)
        holders.append(p)
        assert json.loads(p.stdout.readline())["served"] == 1
    finally:
        for p in holders:
            if p.poll() is None:
                p.communicate("\n", timeout=60)
    assert daemon.request("version")[0]["protocol"] == 1


IDLE_CLIENT = """
import json, socket, sys
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    return s, s.makefile("rw")
def ask(f, line):
    f.write(line + "\\n"); f.flush()
    return json.loads(f.readline())
_, idle = conn()
_, pin = conn()
_, win = conn()
assert ask(idle, "version")["protocol"] == 1
assert ask(pin, "pin 714")["freq_mhz"] == 714
assert "rails" in ask(win, "begin w")
notice = idle.readline()         # the daemon closes the idle one, saying why ...
assert idle.readline() == ""     # ... then EOF
print("idle:", json.loads(notice)["error"], flush=True)
# the pin and the window outlived the idle limit
assert ask(pin, "status")["pinned"] is True
assert ask(win, "end w")["duration_s"] > 0
print("ok", flush=True)
"""


def test_idle_connections_are_closed_but_a_pin_or_window_is_kept(daemon, client_python, group_gid):
    daemon.stop()
    daemon.extra = ["--idle-timeout", "1"]
    daemon.start()
    p = _as_nobody(group_gid, [client_python, "-c", IDLE_CLIENT, str(daemon.sock)], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    assert "idle: idle for over 1 s: closed by the daemon" in out and out.endswith("ok\n"), out
    assert "uid 65534: idle for over 1 s" in daemon.log.read_text()
    assert _state(daemon.board) == ORIGINAL  # the pin's connection ended: restored
    # the Python client's kept connection, closed for idleness, is made again without a word
    # (nothing was lost with it: not counted as a loss that a `pydvfs run` would warn about)
    code = ("import time, pydvfs\nfrom pydvfs.device import remote\nd = pydvfs.open_device()\nd.status()\n"
            "time.sleep(3)\nprint(d.status()['gpu'], remote.reconnects())")
    p = _as_nobody(group_gid, [client_python, "-c", code], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and out.strip() == "ga10b 0" and "warning" not in err, (out, err)
    bad = subprocess.run([daemon.binary, "serve", "--idle-timeout", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--idle-timeout" in bad.stderr and len(bad.stderr.splitlines()) == 1


CONTROL_LABEL = "".join(chr(c) for c in range(1, 32) if c != 10) * 2


def _add_rails_with_control_labels(board, count: int = 12) -> None:
    """More ina3221 hwmon folders, each channel's label 59 control characters (escaped as \\xNN,
    5 bytes each in JSON) and a unique tail."""
    from pydvfs.device.fake import rewrite_int

    sys_ = Path(board.root) / "sys"
    for i in range(count // 3):
        d = sys_ / "bus" / "i2c" / "drivers" / "ina3221" / f"2-004{i}" / "hwmon" / f"hwmon{60 + i}"
        d.mkdir(parents=True)
        (sys_ / "class" / "hwmon" / f"hwmon{60 + i}").symlink_to(os.path.relpath(d, sys_ / "class" / "hwmon"))
        (d / "name").write_text("ina3221\n")
        (d / "update_interval").write_text("7\n")
        for ch in (1, 2, 3):
            (d / f"in{ch}_label").write_text(CONTROL_LABEL[:59] + f"r{i}{ch}\n")
            (d / f"in{ch}_enable").write_text("1\n")
            rewrite_int(d / f"in{ch}_input", 5000)
            rewrite_int(d / f"curr{ch}_input", 1000)


def test_a_reply_with_control_character_labels_is_sent_whole_and_the_pin_stays(daemon):
    daemon.stop()
    _add_rails_with_control_labels(daemon.board)
    daemon.start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(daemon.sock))
        f = s.makefile("rwb")

        def ask(line: str) -> bytes:
            f.write(line.encode() + b"\n")
            f.flush()
            return f.readline()

        assert json.loads(ask("pin 714"))["freq_mhz"] == 714
        rails = json.loads(ask("begin big"))["rails"]
        # The labels arrive escaped (\\xNN) and cut to the board's name length (docs/boards.md):
        # 12 labels that then read the same are kept apart as LABEL#2, #3, ... The reply is
        # no longer over the old 16 KiB buffer with 16 rails; the daemon's buffer grows anyway.
        escaped = "".join(f"\\x{ord(c):02x}" for c in CONTROL_LABEL[:8])
        assert len(rails) == 16 and sum(r.startswith(escaped) for r in rails) == 12
        assert len(set(rails)) == 16 and not any(c in "".join(rails) for c in CONTROL_LABEL)
        raw = ask("end big")
        print(f"a window's reply with 12 control-character rail labels: {len(raw)} bytes")
        window = json.loads(raw)
        assert set(window["energy_j"]) == set(rails)
        # the same connection still serves, and its pin was never undone
        assert json.loads(ask("status"))["pinned"] is True
        assert _state(daemon.board)[:2] == (714000000, 714000000)
    assert "closed by the daemon" not in daemon.log.read_text()


def test_serve_refuses_to_start_without_root(work, asan_govcore, group_gid):
    board = build_fake_board(work / "board", "jp5")
    for d in ("run", "state"):
        (work / d).mkdir(mode=0o755)
    argv = [asan_govcore, "--sysfs-root", str(board.root), "--state-dir", str(work / "state"), "serve",
            "--socket", str(work / "run" / "govcore.sock"), "--group", GROUP]
    as_nobody = ["setpriv", "--reuid=nobody", f"--regid={group_gid}", "--clear-groups"]
    locks = work / "locks"  # nobody's own lock folder (the hermetic one is root's)
    locks.mkdir(mode=0o700)
    os.chown(locks, 65534, group_gid)
    env = dict(os.environ, PYDVFS_LOCK_DIR=str(locks))
    p = subprocess.run([*as_nobody, *argv], capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "must run as root" in p.stderr and "pid 0" not in p.stderr
    # the override, for a board this user may write (the tests' own fake boards) ...
    p = subprocess.run([*as_nobody, *argv, "--allow-non-root"], capture_output=True, text=True, timeout=60, cwd="/",
                       env=env)
    assert p.returncode == 2 and "cannot write" in p.stderr and "max_freq" in p.stderr, p.stderr
    # ... serves once the board is the user's
    for path in [work / "run", work / "state", *Path(board.root).rglob("*")]:
        os.lchown(path, 65534, group_gid)
    d = subprocess.Popen([*as_nobody, *argv, "--allow-non-root"], stderr=subprocess.PIPE, text=True, cwd="/", env=env)
    try:
        assert "serving" in d.stderr.readline()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(work / "run" / "govcore.sock"))
            s.sendall(b"pin 510\n")
            assert json.loads(s.makefile().readline())["freq_mhz"] == 510
    finally:
        d.terminate()
        assert d.wait(timeout=30) == 0
    assert _state(board) == ORIGINAL


RESTART_CLIENT = """
import sys, pydvfs
dev = pydvfs.open_device()
pydvfs.pin(714)
print("pinned", flush=True)
sys.stdin.readline()                       # the daemon is killed and started again meanwhile
assert dev.state().pinned, dev.state()     # the same device connects again, and pins again
assert pydvfs.open_device().status()["pinned"] is True   # a fresh one too
assert pydvfs.restore() is True
assert not dev.state().pinned
print("ok", flush=True)
"""


def test_the_client_reconnects_and_pins_again_after_a_daemon_restart(daemon, client_python, group_gid):
    p = _as_nobody(group_gid, [client_python, "-c", RESTART_CLIENT], daemon.sock, stdin=subprocess.PIPE)
    assert p.stdout.readline().strip() == "pinned", p.stderr.read()
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    daemon.start()  # restores the board the dead daemon left pinned
    assert _state(daemon.board) == ORIGINAL
    out, err = p.communicate("\n", timeout=120)
    assert p.returncode == 0 and out.strip() == "ok", (out, err)
    assert "was lost (the daemon restarted?); pinned 714 MHz again on a new connection" in err, err
    assert _state(daemon.board) == ORIGINAL


def test_a_run_whose_daemon_restarted_finishes_and_reports(daemon, client_python, group_gid):
    flags = daemon.work / "flags"
    flags.mkdir(mode=0o777)
    os.chmod(flags, 0o777)
    cmd = ["sh", "-c", f"touch {flags}/started; while [ ! -e {flags}/go ]; do sleep 0.05; done"]
    p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", "run", "--json", "--policy", "rules", "--workload",
                               "model=bert,layers=12,hidden=768,seq_len=64", "--", *cmd], daemon.sock)
    deadline = time.monotonic() + 120
    while not (flags / "started").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    assert _state(daemon.board)[1] == 816000000
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    daemon.start()
    (flags / "go").touch()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    report = wrapped_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert report["exit_status"] == 0 and report["restored"] is True, report
    assert report["warnings"] and "lost during the run" in report["warnings"][0], report
    assert "pydvfs run: warning:" in err and "pinned 816 MHz again" in err, err
    assert _state(daemon.board) == ORIGINAL


def test_pin_and_apply_hold_the_clock_for_a_command_through_the_daemon(daemon, client_python, group_gid):
    max_freq = Path(daemon.board.devfreq_dir) / "max_freq"
    wl = ["--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--policy", "rules"]
    for verb, mhz in ((["pin", "714"], 714), (["apply", *wl], 816)):
        p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", *verb, "--json", "--", "sh", "-c",
                                   f"cat {max_freq}; exit 5"], daemon.sock)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 5, err  # the command's status
        assert f"{mhz}000000" in out  # what the command saw (its stdout stays its own)
        record = wrapped_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        assert record["freq_mhz"] == mhz and record["exit_status"] == 5 and record["restored"] is True
        assert _state(daemon.board) == ORIGINAL
        # without a command, what the change lasts is said
        p = _as_nobody(group_gid, [client_python, "-m", "pydvfs", *verb], daemon.sock)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert f"pinned {mhz} MHz until this command exits" in err and " -- CMD` to hold it" in err, err
        assert _state(daemon.board) == ORIGINAL


def test_the_objective_and_the_slowdown_bound_travel_through_the_daemon(daemon, client_python, group_gid,
                                                                         trained_model):
    installed = daemon.work / "policies" / "ours"
    shutil.copytree(trained_model, installed)
    assert (installed / "roofline.txt").exists()
    wl = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}
    goals = [{"policy": "roofline", "objective": "edp"}, {"policy": "roofline", "objective": "ed2p"},
             {"policy": "mlg", "max_slowdown_pct": 2.5}, {"policy": "roofline", "max_slowdown_pct": 0}]
    code = ("import json, sys, pydvfs\n"
            f"for goal in {goals!r}:\n"
            f"    d = pydvfs.decide({wl!r}, model_dir=sys.argv[1], **goal)\n"
            "    print(json.dumps(d.to_dict()))\n")
    p = _as_nobody(group_gid, [client_python, "-c", code, str(installed)], daemon.sock)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    import pydvfs

    for line, goal in zip(out.splitlines(), goals):
        remote = json.loads(line)
        local = pydvfs.decide(wl, model_dir=installed, sysfs_root=daemon.board.root, **goal).to_dict()
        for key in ("freq_mhz", "policy_mhz", "objective", "trade"):
            assert remote[key] == local[key], (goal, key, remote[key], local[key])
    # pinned through the daemon with its goal, and the refusals in one line
    r = daemon.request("apply model=bert layers=12 hidden=768 seq_len=64 policy=roofline tree=ours objective=edp")[0]
    assert r["objective"] == {"kind": "edp", "max_slowdown_pct": None} and r["freq_mhz"], r
    assert "tree=NAME" in daemon.request("apply model=bert layers=1 hidden=1 seq_len=1 policy=roofline")[0]["error"]
    assert "objective" in daemon.request("apply model=bert layers=1 hidden=1 seq_len=1 objective=fast")[0]["error"]
    p = _as_nobody(group_gid, [str(GOVCORE / "govcore"), "apply", "--workload", "model=bert,layers=12,hidden=768,"
                               "seq_len=64", "--objective", "edp", "--dry-run"], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and len(err.splitlines()) == 1 and "edp" in err, (out, err)


def test_a_damaged_state_says_what_to_do_and_root_clears_it(daemon, asan_govcore):
    """Before: every client's verbs failed on a damaged saved state, and nothing said how to
    clear it. The daemon's error names the fix; root's `govcore restore --force` applies it."""
    from pydvfs.device import open_device

    state_dir = daemon.work / "state"
    state = Path(open_device(daemon.board.root, str(state_dir)).state_file())
    state.write_text("# govcore saved GPU clock state\ngovernor=nvhost_podgov\nmin_hz=12abc\nmax_hz=1\n")
    state.chmod(0o600)
    (reply,) = daemon.request("pin 612")
    assert "damaged" in reply["error"] and "govcore restore --force" in reply["error"], reply
    (reply,) = daemon.request("restore")
    assert "restore --force" in reply["error"], reply
    out = subprocess.run([asan_govcore, "--sysfs-root", str(daemon.board.root), "--state-dir", str(state_dir),
                          "restore", "--force"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "dropped the saved state" in out.stderr, out.stderr
    assert not state.exists()
    first, second = daemon.request("pin 612", "restore")
    assert first["freq_mhz"] == 612 and second["restored"] is True


def test_a_member_may_not_undo_a_pin_root_left_standing(daemon, client_python, group_gid):
    """Issue 27 item 5: `sudo govcore pin 408 --cpu ...` (here: a GPU pin, the daemon's state
    folder) then a member's `restore` through the daemon returned {"restored": true}. A saved
    state no client of the daemon holds is root's: a member may neither restore it nor pin over
    it (its disconnect would undo root's pin); root's own client may."""
    state_dir = str(daemon.work / "state")
    direct = subprocess.run([str(GOVCORE / "govcore"), "--sysfs-root", str(daemon.board.root), "--state-dir",
                             state_dir, "pin", "408"], capture_output=True, text=True,
                            env={**os.environ, "PYDVFS_SOCKET": ""})
    assert direct.returncode == 0, direct.stderr
    gc = str(GOVCORE / "govcore")
    for verb in (["restore"], ["pin", "714"]):
        p = _as_nobody(group_gid, [gc, *verb], daemon.sock)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2 and "pinned outside the daemon" in err and "sudo govcore restore" in err, (out, err)
        assert _state(daemon.board)[:2] == (408000000, 408000000)
    code = "import pydvfs\ntry:\n    pydvfs.restore()\nexcept pydvfs.PydvfsError as e:\n    print(e)\n    raise SystemExit(3)"
    p = _as_nobody(group_gid, [client_python, "-c", code], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and "only root may undo it" in out, (out, err)
    assert _state(daemon.board)[:2] == (408000000, 408000000)
    # root, through the daemon, may
    (reply,) = daemon.request("restore")
    assert reply["restored"] is True, reply
    assert _state(daemon.board) == ORIGINAL


def test_how_a_workload_trains_travels_through_the_daemon(daemon, client_python, group_gid, govcore_bin):
    """issue 28: `pydvfs apply` and `govcore apply`, direct and through the daemon, give the same
    decision for a LoRA bf16 workload, and the daemon saw how it trains (its record echoes it)."""
    spec = ("model=qwen2.5-0.5b,layers=24,hidden=896,seq_len=200,peft=lora,rank=16,precision=bf16,"
            "batch_size=8,tokens_per_step=1600.5")
    method = {"peft": "lora", "rank": 16, "precision": "bf16", "batch_size": 8, "tokens_per_step": 1600.5,
              "trainable_params": None, "weight_bits": None}
    local = subprocess.run([govcore_bin, "--sysfs-root", str(daemon.board.root), "apply", "--workload", spec,
                            "--dry-run", "--json"], capture_output=True, text=True)
    assert local.returncode == 0, local.stderr
    direct = json.loads(local.stdout)
    for argv in ([str(GOVCORE / "govcore"), "apply", "--workload", spec, "--dry-run", "--json"],
                 [client_python, "-m", "pydvfs", "apply", "--workload", spec, "--dry-run", "--json"]):
        p = _as_nobody(group_gid, argv, daemon.sock)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        remote = json.loads(out)
        assert remote["freq_mhz"] == direct["freq_mhz"] and remote["features"] == direct["features"], (argv, remote)
        assert {k: remote["workload"][k] for k in method} == method == {k: direct["workload"][k] for k in method}
    r = daemon.request("apply model=qwen2.5-0.5b layers=24 hidden=896 seq_len=200 peft=lora rank=16 "
                       "precision=bf16 dry_run=1")[0]
    assert r["freq_mhz"] == direct["freq_mhz"] and r["workload"]["peft"] == "lora", r
    for bad, key in (("peft=lorx", "peft"), ("rank=16", "rank"), ("peft=lora rank=1.5", "rank"),
                     ("precision=fp8", "precision"), ("weight_bits=4", "weight_bits"), ("peft=lora peft=none", "peft")):
        e = daemon.request(f"apply model=llama layers=2 hidden=64 seq_len=9 {bad} dry_run=1")[0]
        assert key in e["error"] and "\n" not in e["error"], (bad, e)
    p = _as_nobody(group_gid, [str(GOVCORE / "govcore"), "apply", "--workload", spec.replace("bf16", "fp8"),
                               "--dry-run"], daemon.sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and len(err.splitlines()) == 1 and "precision" in err, (out, err)

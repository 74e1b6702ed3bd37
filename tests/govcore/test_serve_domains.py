"""`govcore serve` pins and restores the GPU, EMC and CPU clocks as one for an unprivileged
user (setpriv to nobody in the test group), through the Python API and the govcore verb; a clock
not in a domain's table is refused with nothing written; a client killed while it holds the mode
gets every domain restored. The daemon is test_serve.py's (the ASan + UBSan build)."""
from __future__ import annotations

import json
import signal
import time

import pytest
from test_serve import (  # noqa: F401  (fixtures)
    GOVCORE,
    ORIGINAL,
    Daemon,
    _as_nobody,
    _state,
    asan_govcore,
    client_python,
    group_gid,
    pytestmark,
    work,
)

from pydvfs.device.fake import build_fake_board
from pydvfs.device.fake_domains import EMC_DIR, add_clock_domains
from pydvfs.device.table import board as board_row

NANO = board_row("orin-nano-super")


def _domains(b) -> tuple:
    """EMC lock and rate, and each policy's governor, min and max (files re-read while empty)."""
    def read(p):
        for _ in range(100):
            text = p.read_text().strip()
            if text:
                return text
            time.sleep(0.001)
        raise AssertionError(f"{p} stayed empty")
    cpu = b.root / "sys/devices/system/cpu/cpufreq"
    return (read(b.root / EMC_DIR / "mrq_rate_locked"),
            *(read(cpu / f"policy{p}" / f) for p in (0, 4)
              for f in ("scaling_governor", "scaling_min_freq", "scaling_max_freq")))


@pytest.fixture
def daemon(work, asan_govcore, group_gid):  # noqa: F811
    b = build_fake_board(work / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO)
    (work / "run").mkdir(mode=0o755)
    (work / "state").mkdir(mode=0o755)
    d = Daemon(asan_govcore, work, b).start()
    d.original_domains = _domains(b)
    yield d
    rc = d.stop()
    log = d.log.read_text()
    assert rc == 0, log
    for report in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error"):
        assert report not in log, log
    assert _state(b) == (ORIGINAL[0], ORIGINAL[1], ORIGINAL[2]), log
    assert _domains(b) == d.original_domains, log


CLIENT = """
import json, sys
import pydvfs
dev = pydvfs.open_device()
assert dev.through_daemon
doms = {d["name"]: d for d in dev.status()["domains"]}
assert set(doms) == {"emc", "cpu0", "cpu4"} and all(d["available"] for d in doms.values()), doms
r = dev.pin(612, emc_mhz=2133, cpu_mhz=1040)
assert r.freq_mhz == 612 and r.domains_mhz == {"emc": 2133, "cpu0": 1036.8, "cpu4": 1036.8}, r
doms = {d["name"]: d for d in dev.status()["domains"]}
assert doms["emc"]["pinned"] and doms["cpu4"]["min_mhz"] == 1036.8, doms
print("pinned", flush=True)
sys.stdin.readline()
try:
    dev.pin(612, emc_mhz=1000)
except pydvfs.errors.InvalidValueError as e:
    assert "not in its table" in str(e), e
else:
    raise AssertionError("1000 MHz EMC accepted")
assert dev.restore() is True
print("restored", flush=True)
sys.stdin.readline()
"""


def test_the_daemon_pins_and_restores_all_three_for_a_user(daemon, client_python, group_gid):  # noqa: F811
    b = daemon.board
    p = _as_nobody(group_gid, [client_python, "-c", CLIENT], daemon.sock, stdin=-1)
    assert p.stdout.readline().strip() == "pinned", p.stderr.read() if p.poll() is not None else ""
    assert (b.root / EMC_DIR / "rate").read_text().strip() == "2133000000"
    assert _domains(b)[0] == "1" and _domains(b)[5] == "1036800"
    assert _state(b)[0] == 612000000
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "restored", p.stderr.read()
    assert _domains(b) == daemon.original_domains and _state(b) == ORIGINAL
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(timeout=60) == 0, p.stderr.read()
    # the govcore verb: its reply is the pin's JSON record; the pin ends with the command
    gc = str(GOVCORE / "govcore")
    q = _as_nobody(group_gid, [gc, "pin", "612", "--emc", "665.6", "--cpu", "729.6"], daemon.sock)
    out, err = q.communicate(timeout=60)
    assert q.returncode == 0 and json.loads(out)["domains"] == {"emc": 665.6, "cpu0": 729.6, "cpu4": 729.6}, err
    q = _as_nobody(group_gid, [gc, "pin", "612", "--emc", "700"], daemon.sock)
    out, err = q.communicate(timeout=60)
    assert q.returncode == 2 and "emc: 700 MHz is not in its table" in err, err
    deadline = time.monotonic() + 10
    while _domains(b) != daemon.original_domains and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _domains(b) == daemon.original_domains


def test_a_killed_client_s_mode_is_restored(daemon, client_python, group_gid):  # noqa: F811
    b = daemon.board
    p = _as_nobody(group_gid, [client_python, "-c", CLIENT], daemon.sock, stdin=-1)
    assert p.stdout.readline().strip() == "pinned"
    assert _domains(b) != daemon.original_domains
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while (_domains(b) != daemon.original_domains or _state(b) != ORIGINAL) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _domains(b) == daemon.original_domains and _state(b) == ORIGINAL

"""Issue 27 item 10: one transient board error (`cannot read .../cur_freq: Invalid argument`)
no longer ends a whole search: the engine tries a failed pin (a GPU level or a whole mode) or
restore once more before it gives up, and the daemon client asks a read (`status`) once more
after an error reply that is the board's read failing. A second failure still ends the search."""
from __future__ import annotations

import io
import json
import os
import socket
import threading

import pytest
from test_online import FULL, limits, orin, train_cmd  # noqa: F401  (fixture)

from pydvfs.device import remote
from pydvfs.errors import BoardIOError, InvalidValueError

TRANSIENT = "cannot read /sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu/cur_freq: Invalid argument"


@pytest.mark.parametrize("failures", [1, 2], ids=["once-retried", "twice-gives-up"])
def test_one_transient_pin_error_does_not_end_the_search(orin, tmp_path, monkeypatch, failures):  # noqa: F811
    from pydvfs.device import Device
    from pydvfs.governor.loop import WindowParams, run_governed

    real_pin, calls = Device.pin, []

    def pin(self, mhz):
        calls.append(mhz)
        if len(calls) in range(3, 3 + failures):  # the third pin fails (and the retry, for 2)
            raise BoardIOError(TRANSIENT)
        return real_pin(self, mhz)

    monkeypatch.setattr(Device, "pin", pin)
    progress, log = tmp_path / "steps", io.StringIO()
    r = run_governed(train_cmd(orin, progress, 3000), "online", progress_file=progress, rate_hz=1000,
                     start_mhz=612, window=WindowParams(min_window_s=0.15, min_steps=100, settle_s=0.05),
                     sysfs_root=orin.root, log=log)
    assert r["exit_status"] == 0 and r["steps"] == 3000
    assert "trying once more" in log.getvalue()
    if failures == 1:  # before: "cannot pin ...: searching stopped"
        assert r["fallback"] is None and "searching stopped" not in log.getvalue(), log.getvalue()
        assert calls[2] == calls[3]  # the same level, once more
    else:
        assert r["fallback"] is not None and "searching stopped" in log.getvalue()
    assert limits(orin) == FULL


def test_a_joint_mode_pin_is_retried_once_but_a_refused_mode_is_not():
    """The joint search's board calls go through ModeDevice.pin (pin_mode): the same retry; a
    mode the board refuses (ClockVerifyError) is dropped by the engine, not asked again."""
    from pydvfs.errors import ClockVerifyError
    from pydvfs.governor.engine import OnlineEngine
    from pydvfs.governor.joint_search import ModeDevice

    calls, fail = [], [BoardIOError(TRANSIENT)]

    def pin_mode(g, e, c):
        calls.append((g, e, c))
        if fail:
            raise fail.pop()

    dev, said = ModeDevice(object(), pin_mode), []
    eng = OnlineEngine.__new__(OnlineEngine)
    eng._say = said.append
    eng._once_more(lambda: dev.pin((612.0, 2133.0, 1036.8)), "pinning 612/2133/1036.8 MHz")
    assert calls == [(612.0, 2133.0, 1036.8)] * 2 and "trying once more" in said[0]
    calls.clear()
    fail.append(ClockVerifyError("clock did not take"))
    with pytest.raises(ClockVerifyError):
        eng._once_more(lambda: dev.pin((714.0, 2133.0, 1036.8)), "pinning 714/2133/1036.8 MHz")
    assert len(calls) == 1


def _daemon(sock_path, replies: list[dict]):
    """A one-connection stand-in for `govcore serve` answering from replies, in order."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(1)
    asked = []

    def serve():
        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        for reply in replies:
            line = f.readline()
            if not line:
                break
            asked.append(line.decode().strip())
            f.write((json.dumps(reply) + "\n").encode())
            f.flush()
        conn.close()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return asked


@pytest.mark.parametrize("first, retried", [({"error": TRANSIENT, "errno": 22}, True),
                                            ({"error": "usage: pin MHZ", "errno": 22}, False)])
def test_the_daemon_client_asks_a_failed_read_once_more(tmp_path, first, retried):
    sock = tmp_path / "s"
    asked = _daemon(sock, [first, {"sysfs_root": "/", "ok": 1}])
    conn = remote.Connection(str(sock))
    if retried:
        assert conn.request("status")["ok"] == 1 and asked == ["status", "status"]
    else:
        with pytest.raises(InvalidValueError):
            conn.request("status")
        assert asked == ["status"]
    os.unlink(sock) if sock.exists() else None

"""The exporter against what others hand it (issue 37, items 3, 11, 12, 14, 15, 21): files in the
governor folder any governed user may write, idle HTTP connections, `--listen` text, a user
without root, paths other than /metrics. In-process (one collector for the module, no
Prometheus server), so they run where test_exporter.py's rig is skipped."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pydvfs.cli import main
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError
from pydvfs.governor import status as gs

pytest.importorskip("prometheus_client", reason="the metrics extra: pip install 'pydvfs[metrics]'")


def _scrape(collector) -> dict:
    """{(sample name, labels without board): value} of one scrape of ``collector``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "board")))] = s.value
    return out


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    """An Orin Nano Super with its clock domains and a garbled nvpmodel.conf, a governor folder,
    one collector on both."""
    from pydvfs.integrations.prometheus import BoardCollector

    tmp = tmp_path_factory.mktemp("exporter-input")
    fb = build_fake_board(tmp / "b", board="orin-nano-super", clock_domains=True)
    (fb.root / "var/lib/nvpmodel").mkdir(parents=True, exist_ok=True)  # the fake lays out its own
    (fb.root / "var/lib/nvpmodel/status").write_text("pmode:0002\n")
    (fb.root / "etc/nvpmodel.conf").write_text("< POWER_MODEL ID=2 NAME=25W\nGPU MAX_FREQ 918000000\n")
    folder = tmp / "governor"
    folder.mkdir()
    col = BoardCollector(fb.root, 200.0, "b", governor_path=str(folder))
    try:
        yield {"fb": fb, "folder": folder, "col": col}
    finally:
        col.close()


def _record(**extra) -> dict:
    return {"format": gs.FORMAT, "pid": os.getpid(), "uid": os.getuid(), "updated_unix_s": time.time(),
            "policy": "online", "phase": "hold", "freq_mhz": 612.0, "steps": 10, **extra}


def test_a_bad_governor_file_is_skipped_and_counted_never_a_failed_scrape(rig):
    """Before: each of these made every scrape fail (HTTP 500, the energy too): RecursionError,
    a float() of "abc" or [1], .items() of a list, OverflowError in os.kill, a FIFO held open."""
    folder = rig["folder"]
    (folder / "good.json").write_text(json.dumps(_record()))
    bad = {"deep.json": "[" * 60000 + "]" * 60000,
           "time-text.json": json.dumps(_record(updated_unix_s="abc")),
           "time-list.json": json.dumps(_record(updated_unix_s=[1])),
           "domains.json": json.dumps(_record(domains_mhz=[1, 2])),
           "pid.json": json.dumps(_record(pid=10 ** 20)),
           "huge.json": json.dumps(_record(freq_mhz=int("9" * 400)))}
    for name, text in bad.items():
        (folder / name).write_text(text)
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer holds it open
    try:
        page = _scrape(rig["col"])
    finally:
        os.close(held)
        for name in (*bad, "fifo.json", "good.json"):
            (folder / name).unlink()
    assert page[("pydvfs_governor_bad_files", ())] == len(bad) + 1
    assert page[("pydvfs_governor_up", ())] == 1
    assert page[("pydvfs_governor_clock_hertz", (("domain", "gpu"),))] == 612e6
    assert page[("pydvfs_energy_joules_total", (("role", "module"),))] >= 0
    assert _scrape(rig["col"])[("pydvfs_governor_bad_files", ())] == 0


def test_a_record_counts_only_for_a_process_of_the_file_s_owner(rig):
    """Before: any file naming pid 1 counted as live: a user could publish any governor_* value."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    nobody = pwd.getpwnam("nobody").pw_uid
    folder = rig["folder"]
    forged = {"pid1.json": _record(pid=1, freq_mhz=1e300), "mine.json": _record(freq_mhz=1e300)}
    for name, rec in forged.items():
        (folder / name).write_text(json.dumps(rec))
        os.chown(folder / name, nobody, -1)  # nobody's file, naming root's processes
    try:
        page = _scrape(rig["col"])
        assert page[("pydvfs_governor_up", ())] == 0 and page[("pydvfs_governor_bad_files", ())] == 2
        os.chown(folder / "mine.json", 0, -1)  # root's file naming root's process: live
        page = _scrape(rig["col"])
        assert page[("pydvfs_governor_up", ())] == 1 and page[("pydvfs_governor_bad_files", ())] == 1
    finally:
        for name in forged:
            (folder / name).unlink()
    # a record whose process ended is stale: skipped, not counted as bad
    (folder / "old.json").write_text(json.dumps(_record(pid=gs.PID_MAX)))
    try:
        assert gs.read_folder(folder) == ([], 0)
    finally:
        (folder / "old.json").unlink()


def test_an_unknown_power_mode_is_not_exported(rig):
    """Before: a garbled nvpmodel.conf gave power_mode_info{mode="2",name=""} while `status`
    said the mode was unknown."""
    page = _scrape(rig["col"])
    assert not [k for k in page if k[0] == "pydvfs_power_mode_info"]
    mode = rig["col"].dev.power_mode()
    assert mode["id"] is None and "garbled" in mode["unknown"]


def test_an_unprivileged_exporter_exports_the_cpu_clocks_and_says_what_it_cannot_read(rig, tmp_path, test_tmp):
    """As nobody (the shipped unit's user is unprivileged): cpufreq is world-readable, so the CPU
    clocks and the GPU cap are exported; the EMC's debugfs (root's) is said once, not dropped in
    silence. Before: only the GPU's clock, min and max."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    from pydvfs.integrations.prometheus import BoardCollector

    root = Path(tempfile.mkdtemp(prefix="exporter-nobody-", dir=test_tmp))  # a folder nobody may traverse
    try:
        root.chmod(0o755)
        fb = build_fake_board(root / "b", board="orin-nano-super", clock_domains=True)
        (fb.root / "sys/kernel/debug").chmod(0o700)  # debugfs: root's
        _scrape(rig["col"])  # everything a scrape imports, imported (the interpreter's files may be root's)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody from here on, then one collector and one scrape
            code = 1
            try:
                os.close(r)
                sys.stderr = open(tmp_path / "stderr", "w")  # noqa: SIM115 (the child ends with os._exit)
                nb = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setresgid(nb.pw_gid, nb.pw_gid, nb.pw_gid)
                os.setresuid(nb.pw_uid, nb.pw_uid, nb.pw_uid)
                col = BoardCollector(fb.root, 200.0, "b")
                pages = [_scrape(col), _scrape(col)]
                col.close()
                sys.stderr.flush()
                os.write(w, json.dumps([[[k[0], k[1], v] for k, v in p.items()] for p in pages]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            raw = f.read()
        assert os.waitpid(pid, 0)[1] == 0
        pages = [{(name, tuple(map(tuple, labels))): v for name, labels, v in p} for p in json.loads(raw)]
        said = (tmp_path / "stderr").read_text()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for page in pages:
        for dom in ("gpu", "cpu0", "cpu4"):
            for name in ("pydvfs_clock_hertz", "pydvfs_clock_min_hertz", "pydvfs_clock_max_hertz"):
                assert (name, (("domain", dom),)) in page, (name, dom)
        assert page[("pydvfs_clock_cap_hertz", (("domain", "gpu"),))] == 1020e6
        assert not [k for k in page if ("domain", "emc") in k[1]]
    assert said.count("the emc clock is not exported") == 1, said  # once, for two scrapes


def test_idle_connections_are_bounded_and_timed_out(rig):
    """Before: every idle connection held a thread for as long as it liked (slowloris)."""
    import threading

    from pydvfs.integrations.prometheus import serve

    server, _ = serve(rig["col"], "127.0.0.1", 0, max_connections=4, request_timeout_s=1.0)
    port = server.server_port
    idle = []
    try:
        threads = threading.active_count()
        for _ in range(12):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
            idle.append(s)
        time.sleep(0.3)
        assert threading.active_count() <= threads + 4  # one thread per allowed connection at most
        for s in idle:  # each closed at its deadline, those over the bound after their turn
            s.settimeout(30)
            assert s.recv(1024) == b""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.status == 200 and b"pydvfs_board_info" in r.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert b'href="/metrics"' in r.read()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nonexistent", timeout=10)
        assert e.value.code == 404
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("text", ["127.0.0.1:\u0669\u0664\u0665\u0661", "1_9451", "+19451", " 19451", "19451 ",
                                  "::1", "fe80::1:9450", "[::1]", "[localhost]:9450", "127.0.0.1:", "h o:9450",
                                  "127.0.0.1:99999"])
def test_listen_is_parsed_strictly(text):
    from pydvfs.integrations.prometheus import parse_listen

    with pytest.raises(InvalidValueError) as e:
        parse_listen(text)
    assert "\n" not in str(e.value)


def test_listen_accepts_the_documented_forms_and_prints_brackets():
    from pydvfs.integrations.prometheus import listen_text, parse_listen

    assert parse_listen("9451") == ("127.0.0.1", 9451)
    assert parse_listen(":9451") == ("127.0.0.1", 9451)
    assert parse_listen("0.0.0.0:9450") == ("0.0.0.0", 9450)
    assert parse_listen("[::1]:19451") == ("::1", 19451)
    assert listen_text(*parse_listen("[::1]:19451")) == "[::1]:19451"
    assert "bracket" in _error(["exporter", "--listen", "::1"])


def _error(argv) -> str:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(argv) == 2
    assert err.getvalue().count("\n") == 1, err.getvalue()
    return err.getvalue()


def test_a_typo_beside_the_exporter_or_fake_board_is_refused(tmp_path):
    """Before: accepted and ignored."""
    assert "--governor-status" in _error(["exporter", "--governor-status", "/nonexistent"])
    assert "--animate" in _error(["fake-board", str(tmp_path / "b"), "--progress-file", str(tmp_path / "f")])
    assert not (tmp_path / "b").exists()


def test_once_json_prints_json(rig, capsys):
    """Before: `exporter --once --json` printed the text format."""
    assert main(["exporter", "--once", "--json", "--sysfs-root", str(rig["fb"].root), "--board-name", "b"]) == 0
    out = json.loads(capsys.readouterr().out)
    fams = {m["name"]: m for m in out["metrics"]}
    cpu = [s for s in fams["pydvfs_clock_hertz"]["samples"] if s["labels"]["domain"] == "cpu0"]
    assert out["board"] == "b" and cpu and cpu[0]["value"] > 0
    assert fams["pydvfs_energy_joules"]["type"] == "counter"

"""`pydvfs measure` and `govcore measure`: same report, same JSON keys, same exit statuses."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pydvfs import cli
from pydvfs.device.fake import build_fake_board

REPO = Path(__file__).resolve().parents[2]
KEYS = ["command", "exit_status", "duration_s", "board", "energy_j", "module_energy_j",
        "cpu_gpu_energy_j", "gpu_energy_j", "roles", "module_partial", "avg_power_w", "gpu_util_pct", "samples", "read_errors", "rate_hz",
        "failed_reads", "interpolated_pct", "negative_readings", "incomplete_rails", "readings_ok",
        "no_energy_reason"]


@pytest.fixture
def board(tmp_path):
    b = build_fake_board(tmp_path / "board")
    b.set_rail("VDD_GPU_SOC", 5000, 2000)  # 10 W
    b.set_rail("VDD_CPU_CV", 5000, 1000)   # 5 W
    b.set_load(250)
    return b


@pytest.fixture(scope="module")
def govcore_bin(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("bin") / "govcore"
    src = [str(p) for p in sorted((REPO / "govcore").glob("*.c"))]
    subprocess.run([cc, "-std=c99", "-D_GNU_SOURCE", "-O2", "-o", str(out), *src, "-lpthread", "-lm"],
                   check=True)
    return out


def run_pydvfs(argv, monkeypatch, capsys):
    # Only this module's verb: the test does not depend on other verbs' modules.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["pydvfs.cli.measure"])
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def run_govcore(binary, argv):
    p = subprocess.run([str(binary), *argv], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(params=["pydvfs", "govcore"])
def measure(request, monkeypatch, capsys, tmp_path):
    """measure(board, *args) -> (rc, report, stderr) through either front end: the report
    written to ``-o FILE`` ("" where none was), stdout left to CMD (and checked empty: these
    commands print nothing there)."""
    n = [0]

    def with_report(run, board, args):
        n[0] += 1
        out = tmp_path / f"report-{n[0]}"
        rc, stdout, stderr = run(["-o", str(out), *args])
        assert stdout == "", stdout  # the report never goes to stdout: CMD's
        return rc, out.read_text() if out.exists() else "", stderr

    if request.param == "pydvfs":
        def go(board, *args):
            return with_report(lambda a: run_pydvfs(["measure", "--sysfs-root", str(board.root), *a],
                                                    monkeypatch, capsys), board, args)
    else:
        binary = request.getfixturevalue("govcore_bin")

        def go(board, *args):
            return with_report(lambda a: run_govcore(binary, ["--sysfs-root", str(board.root), "measure", *a]),
                               board, args)
    return go


def test_json_report(board, measure):
    rc, out, _ = measure(board, "--json", "--rate", "500", "--", sys.executable, "-c",
                         "import time; time.sleep(0.3)")
    assert rc == 0
    d = json.loads(out)
    assert list(d) == KEYS
    assert d["command"][0] == sys.executable and d["exit_status"] == 0
    assert 0.3 <= d["duration_s"] < 5
    assert d["energy_j"]["VDD_GPU_SOC"] == pytest.approx(10.0 * d["duration_s"], rel=1e-6)
    assert d["cpu_gpu_energy_j"] == pytest.approx(15.0 * d["duration_s"], rel=1e-6)
    assert d["avg_power_w"]["VDD_CPU_CV"] == pytest.approx(5.0, rel=1e-6)
    assert d["module_energy_j"] == pytest.approx(15.0 * d["duration_s"], rel=1e-6)  # the AGX's rails, each once
    assert "total_energy_j" not in d and "total_avg_power_w" not in d  # no sum over "all rails"
    assert d["gpu_util_pct"] == pytest.approx(25.0)
    assert d["samples"] > 30 and d["read_errors"] == 0


def test_text_report(board, measure):
    rc, out, _ = measure(board, "--", "sleep", "0.3")
    assert rc == 0
    assert "sleep exited with status 0" in out
    for word in ("time", "VDD_GPU_SOC", "module", "cpu+gpu", "gpu load  25.0 %", "samples"):
        assert word in out


def test_exit_status_is_passed_through(board, measure):
    rc, out, _ = measure(board, "--json", "--", "sh", "-c", "exit 3")
    assert rc == 3 and json.loads(out)["exit_status"] == 3
    rc, out, _ = measure(board, "--json", "--", "sh", "-c", "kill -TERM $$")
    assert rc == 128 + signal.SIGTERM and json.loads(out)["exit_status"] == 128 + signal.SIGTERM


@pytest.mark.parametrize("args, message", [
    (["--", "/nonexistent/cmd"], "cannot run"),
    ([], "needs a command"),
    (["--rate", "0", "--", "true"], "rate"),
])
def test_errors_are_one_line_and_exit_2(board, measure, args, message):
    rc, out, err = measure(board, *args)
    assert rc == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_no_sensor_exit_2(board, measure):
    for d in board.hwmon_dirs:
        (d / "name").write_text("other\n")
    rc, _, err = measure(board, "--", "true")
    assert rc == 2 and "no power rail" in err


def test_fewer_than_two_readings_report_no_energy_and_say_why(board, measure):
    """`measure -- true` once reported energies from "samples 0 at 0.0 Hz"."""
    board.set_update_interval(5000)  # the sampler follows the sensor: one reading per 5 s
    rc, out, err = measure(board, "--json", "--", "true")
    assert rc == 0, err
    d = json.loads(out)
    assert list(d) == KEYS and d["samples"] < 2
    assert d["cpu_gpu_energy_j"] is None and d["module_energy_j"] is None
    assert set(d["energy_j"].values()) == {None} and set(d["avg_power_w"].values()) == {None}
    assert "an energy needs at least 2" in d["no_energy_reason"]
    rc, out, _ = measure(board, "--", "true")
    assert rc == 0 and "energy    none: " in out and " J " not in out and "cpu+gpu" not in out
    board.set_update_interval(1)
    rc, out, _ = measure(board, "--json", "--", "sleep", "0.3")
    d = json.loads(out)
    assert d["no_energy_reason"] is None and d["samples"] >= 2 and d["module_energy_j"] > 0

"""`pydvfs status|pin|restore` as a user runs them."""
from __future__ import annotations

import json
import subprocess

import pytest


def test_status_json(cli, board):
    out = cli("status", "--sysfs-root", str(board.root), "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["gpu"] == "ga10b" and st["governor"] == "nvhost_podgov"
    assert len(st["available_mhz"]) == 11 and st["saved_state"] is None


def test_status_text_and_options_before_the_verb(cli, board):
    out = cli("status", "--sysfs-root", str(board.root))
    assert out.returncode == 0, out.stderr
    assert "VDD_GPU_SOC" in out.stdout and "1300.5" in out.stdout
    out = cli("--json", "status", "--sysfs-root", str(board.root))
    assert out.returncode == 0 and json.loads(out.stdout)["gpu"] == "ga10b"


def test_board_options_only_on_board_verbs(cli, board, tmp_path):
    """--sysfs-root/--state-dir belong to the verbs that touch a board, not to the others."""
    for verb in (["status"], ["pin", "714"], ["restore"], ["apply", "--workload",
                 "model=bert,layers=12,hidden=768,seq_len=128", "--dry-run"]):
        out = cli(*verb, "--sysfs-root", str(board.root), "--state-dir", str(tmp_path / "st"))
        assert out.returncode == 0, (verb, out.stderr)
    assert cli("--sysfs-root", str(board.root), "status").returncode == 2
    for verb in (["train", "--data", "x.csv", "--out", "m"], ["report"], ["roofline", "simulate", "--out", "x"]):
        out = cli(*verb, "--sysfs-root", str(board.root))
        assert out.returncode == 2 and "unrecognized arguments: --sysfs-root" in out.stderr, verb
    assert "  --sysfs-root" not in cli("--help").stdout
    assert "--sysfs-root" not in cli("analyse", "--help").stdout
    assert "  --sysfs-root DIR" in cli("status", "--help").stdout


def test_status_shows_live_watts_and_load(cli, board):
    board.set_rail("VDD_GPU_SOC", 5000, 2000)   # 10 W
    board.set_rail("VDD_CPU_CV", 5000, 400)     # 2 W
    board.set_load(375)
    st = json.loads(cli("status", "--sysfs-root", str(board.root), "--json").stdout)
    live = st["live"]
    assert live["power_w"]["VDD_GPU_SOC"] == pytest.approx(10.0)
    assert live["cpu_gpu_power_w"] == pytest.approx(12.0) and live["gpu_load_pct"] == pytest.approx(37.5)
    out = cli("status", "--sysfs-root", str(board.root))
    assert "VDD_GPU_SOC 10.00 W" in out.stdout and "cpu+gpu 12.00 W" in out.stdout
    assert "gpu load  37.5 %" in out.stdout and "warning" not in out.stderr


def test_a_board_reading_zero_watts_is_flagged(cli, board):
    for name in board.rails:
        board.set_rail(name, 0, 0)
    out = cli("status", "--sysfs-root", str(board.root))
    assert out.returncode == 0 and "every power rail reads 0 W" in out.stderr
    out = cli("measure", "--sysfs-root", str(board.root), "--", "sleep", "0.3")
    assert out.returncode == 0 and "every power rail reads 0 W" in out.stderr


def test_status_watch_refreshes(cli, board):
    out = cli("status", "--sysfs-root", str(board.root), "--watch", "0.1", "--count", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("board     agx-orin: NVIDIA") == 3 and out.stdout.count("--- ") == 2
    out = cli("status", "--sysfs-root", str(board.root), "--watch", "0.1", "--count", "2", "--json")
    docs = [json.loads(line) for line in out.stdout.splitlines()]  # JSON Lines: one document per refresh
    assert len(docs) == 2 and all(d["gpu"] == "ga10b" for d in docs)
    assert cli("status", "--sysfs-root", str(board.root), "--watch", "0").returncode == 2
    out = cli("status", "--sysfs-root", str(board.root), "--count", "3")  # was ignored without --watch
    assert out.returncode == 2 and "give --watch too" in out.stderr


def test_version_json_is_one_document(capsys):
    from pydvfs.cli import main

    for argv in (["--version", "--json"], ["--json", "--version"]):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["version"]


@pytest.mark.parametrize("want,refused", [("99999", True), ("1400", True), ("200", True), ("1370", False),
                                          ("210", False), ("700", False)])
def test_pin_far_outside_the_table_is_refused(cli, board, govcore_bin, want, refused, tmp_path):
    """306..1300.5 MHz: one level step beyond each end (204, 1377 MHz) is the limit; further out
    is refused unless --nearest, by both front ends alike."""
    for front in ([], [govcore_bin]):
        cmd = (lambda *a: subprocess.run([govcore_bin, *a], capture_output=True, text=True)) if front else cli
        args = ["pin", want, "--sysfs-root", str(board.root), "--state-dir", str(tmp_path)]
        out = cmd(*args)
        assert out.returncode == (2 if refused else 0), out.stderr
        if refused:
            assert "--nearest" in out.stderr and len(out.stderr.strip().splitlines()) == 1
            assert board.read_hz("max_freq") == 1300500000  # nothing written
            out = cmd(*args, "--nearest")
            assert out.returncode == 0, out.stderr
        assert cmd("restore", "--sysfs-root", str(board.root), "--state-dir", str(tmp_path)).returncode == 0


def test_pin_restore_cycle(cli, board):
    out = cli("pin", "700", "--sysfs-root", str(board.root), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["freq_mhz"] == 714 and d["snapped"] is True
    st = json.loads(cli("status", "--sysfs-root", str(board.root), "--json").stdout)
    assert st["pinned"] and st["saved_state"]["max_mhz"] == 1300.5
    out = cli("restore", "--sysfs-root", str(board.root))
    assert out.returncode == 0 and "restored" in out.stdout
    out = cli("restore", "--sysfs-root", str(board.root), "--json")
    assert json.loads(out.stdout)["restored"] is False


def test_errors_are_one_line_exit_2(cli, board, tmp_path):
    for args in (["pin", "fast", "--sysfs-root", str(board.root)],
                 ["status", "--sysfs-root", str(tmp_path / "nowhere")],
                 ["status"],  # default root is an empty folder in tests
                 ["pin"],
                 ["frobnicate"]):
        out = cli(*args)
        assert out.returncode == 2, args
        assert "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert board.read_hz("max_freq") == 1300500000


def test_help_explains_every_verb(cli):
    out = cli("--help")
    assert out.returncode == 0
    for verb in ("status", "pin", "restore"):
        assert verb in out.stdout


def test_a_board_file_that_is_not_utf8_is_the_same_json_from_both_front_ends(cli, board, govcore_bin):
    """govcore --json wrote the raw bytes (no JSON parser reads them); the daemon's status too."""
    (board.devfreq_dir / "governor").write_bytes(b"\xff\xfe\xc3\xa9ok\xed\xa0\x80\n")
    ours = json.loads(cli("status", "--sysfs-root", str(board.root), "--json").stdout)["governor"]
    out = subprocess.run([govcore_bin, "--sysfs-root", str(board.root), "--json", "status"], capture_output=True)
    assert json.loads(out.stdout)["governor"] == ours == "\\xff\\xfe\u00e9ok\\xed\\xa0\\x80"  # é is UTF-8


def test_govcore_runs_no_command_where_only_measure_does(cli, board, govcore_bin, tmp_path):
    """`govcore pin 816 -- CMD` pinned, never ran CMD and left the clock pinned."""
    for verb in (["pin", "816"], ["apply", "--workload", "model=bert,layers=12,hidden=768,seq_len=128"],
                 ["restore"], ["status"]):
        out = subprocess.run([govcore_bin, "--sysfs-root", str(board.root), "--state-dir", str(tmp_path), *verb,
                              "--", "touch", str(tmp_path / "ran")], capture_output=True, text=True)
        assert out.returncode == 2 and "runs no command" in out.stderr, (verb, out.stderr)
    assert not (tmp_path / "ran").exists()
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (306000000, 1300500000)
    # an empty --state-dir is not the default folder (as root: /run/pydvfs) in disguise
    out = subprocess.run([govcore_bin, "--sysfs-root", str(board.root), "--state-dir", "", "pin", "816"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "--state-dir needs a folder" in out.stderr
    out = cli("pin", "816", "--sysfs-root", str(board.root), "--state-dir", "")
    assert out.returncode == 2 and "state folder is empty" in out.stderr
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (306000000, 1300500000)

"""`pydvfs status|pin|restore` as a user runs them."""
from __future__ import annotations

import json


def test_status_json(cli, board):
    out = cli("status", "--sysfs-root", str(board.root), "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["gpu"] == "ga10b" and st["governor"] == "nvhost_podgov"
    assert len(st["available_mhz"]) == 11 and st["saved_state"] is None


def test_status_text_and_options_before_the_verb(cli, board):
    out = cli("--sysfs-root", str(board.root), "status")
    assert out.returncode == 0, out.stderr
    assert "VDD_GPU_SOC" in out.stdout and "1300.5" in out.stdout


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

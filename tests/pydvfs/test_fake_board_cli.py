"""`pydvfs fake-board --board ID` for every board of the table (issue 26 item 6): the clock domains
the table gives the board (the EMC's BPMP folder, the cpufreq policies) are laid out, so the
README's joint pin works on it, its rails hold the board's idle power, and `--animate` runs the
board's own simulator profile."""
from __future__ import annotations

import json

import pytest

from pydvfs.cli import main
from pydvfs.cli.fake_board import joint_pin_example
from pydvfs.device.fake_domains import CPUFREQ_DIR, EMC_DIR, cpu_levels_khz
from pydvfs.device.table import board as table_board
from pydvfs.device.table import boards
from pydvfs.progress import read_progress

BOARDS = tuple(boards())


def _json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("board_id", BOARDS)
def test_every_board_gets_its_domains_and_idle_power(board_id, tmp_path, capsys):
    b = table_board(board_id)
    root = tmp_path / board_id
    made = _json(capsys, "fake-board", str(root), "--board", board_id)
    want = (["emc"] if b.emc_mhz else []) + [f"cpu{p['policy']}" for p in b.cpu_policies]
    assert made["domains"] == want and made["board"] == board_id
    assert made["idle_power_w"] > 0.5  # the board's idle power, not rails at 0 W
    assert (root / EMC_DIR / "rate").is_file() == bool(b.emc_mhz)
    assert len(list((root / CPUFREQ_DIR).glob("policy*"))) == len(b.cpu_policies)
    st = _json(capsys, "status", "--sysfs-root", str(root), "--state-dir", str(tmp_path / "st"))
    assert st["live"]["module_power_w"] > 0.5, st["live"]


@pytest.mark.parametrize("board_id", [b for b in BOARDS if table_board(b).emc_mhz or table_board(b).cpu_policies])
def test_the_joint_pin_works_on_the_fake_board(board_id, tmp_path, capsys):
    b = table_board(board_id)
    root, state = tmp_path / board_id, str(tmp_path / "st")
    made = _json(capsys, "fake-board", str(root), "--board", board_id)
    joint = joint_pin_example(board_id).split()
    assert "--emc" in joint and "--cpu" in joint  # every board of the table with one has both
    emc_mhz, cpu_mhz = float(joint[1]), float(joint[3])
    assert emc_mhz in b.emc_mhz and round(cpu_mhz * 1000) in cpu_levels_khz(b)
    gpu = made["levels_mhz"][len(made["levels_mhz"]) // 2]
    pinned = _json(capsys, "pin", f"{gpu:g}", *joint, "--sysfs-root", str(root), "--state-dir", state)
    assert pinned["freq_mhz"] == gpu, pinned
    assert int((root / EMC_DIR / "rate").read_text()) == round(emc_mhz * 1e6)
    for p in b.cpu_policies:
        d = root / CPUFREQ_DIR / f"policy{p['policy']}"
        assert int(d.joinpath("scaling_max_freq").read_text()) == round(cpu_mhz * 1000)
    assert main(["restore", "--sysfs-root", str(root), "--state-dir", state]) == 0
    capsys.readouterr()
    assert (root / EMC_DIR / "mrq_rate_locked").read_text().strip() == "0"
    for p in b.cpu_policies:
        d = root / CPUFREQ_DIR / f"policy{p['policy']}"
        assert int(d.joinpath("scaling_max_freq").read_text()) == cpu_levels_khz(b)[-1]


def test_a_board_without_those_domains_offers_no_joint_pin():
    assert joint_pin_example("thor") == "" and joint_pin_example("nano") == ""


@pytest.mark.parametrize("argv", [["--board", b] for b in BOARDS] + [["--layout", "jp4"]])
def test_animate_runs_every_board_of_the_table(argv, tmp_path, capsys):
    steps = tmp_path / "steps"
    rc = main(["fake-board", str(tmp_path / "b"), *argv, "--animate", "bert-tiny", "--steps", "20",
               "--time-scale", "1000", "--progress-file", str(steps)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert read_progress(steps) == 20 and "its 20 steps are done" in err, err


@pytest.mark.parametrize("argv, says", [
    (["--animate", "nope"], "unknown model 'nope'"),
    (["--animate", "bert-tiny", "--task", "NOPE"], "unknown task 'NOPE'"),
    (["--animate", "bert-tiny", "--steps", "-1"], "--steps: must be within 1.."),
    (["--animate", "bert-tiny", "--time-scale", "0"], "--time-scale: must be > 0"),
    (["--animate", "bert-tiny", "--time-scale", "nan"], "--time-scale: must be > 0"),
    (["--animate", "bert-tiny", "--progress-file", "{tmp}/notes.txt"], "not a step count"),  # was overwritten
    (["--animate", "bert-tiny", "--progress-file", "{tmp}"], "it is a folder"),  # was a traceback
    (["--animate", "bert-tiny", "--progress-file", "{tmp}/no/steps"], "no folder"),  # was a traceback
    (["--steps", "5"], "give --animate MODEL too"),  # was ignored
    (["--animate", ""], "it was empty"),  # laid out a board that was not animated
])
def test_a_bad_animation_is_refused_before_the_board_is_laid_out(argv, says, tmp_path, capsys):
    """An unknown model or task, --steps -1 or --time-scale 0 laid the tree out, then failed in
    the simulated process seconds later in several lines (or, --steps -1, "ran" and exited 0):
    now one line, exit 2, and no tree."""
    root = tmp_path / "b"
    (tmp_path / "notes.txt").write_text("mine\n")
    try:
        rc = main(["fake-board", str(root), *[a.replace("{tmp}", str(tmp_path)) for a in argv]])
    except SystemExit as e:  # argparse's refusal
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not root.exists() and (tmp_path / "notes.txt").read_text() == "mine\n"

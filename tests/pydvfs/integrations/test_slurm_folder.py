"""The sweep folder of `pydvfs sweep --slurm` without a cluster (pydvfs/integrations/slurm.py):
what a task and the merge trust, the serial number's read, damaged parts, the command's
placeholders. The cluster's own tests are in test_slurm_sweep.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from pydvfs.characterise.dataset import iter_rows
from pydvfs.device import open_device
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import InvalidValueError
from pydvfs.integrations import slurm

SPEC = "name=w0,model=bert,layers=2,hidden=64,seq_len=16"
OPTIONS = {"freqs": "510,714", "repeats": 1, "settle": 0, "idle": 0, "rate": None, "seed": 0}


@pytest.fixture
def sweep(tmp_path):
    """A sweep folder as `submit` leaves it (the plan written, no job), a fake board, and a
    command that records its cell's workload."""
    board = build_fake_board(tmp_path / "board", "jp5")
    folder = tmp_path / "sweep"
    cells = tmp_path / "cells"
    cells.mkdir()
    cmd = ["sh", "-c", f'echo "$PYDVFS_WORKLOAD" > {cells}/{{name}}-$PYDVFS_SETTING-$PYDVFS_FREQ_MHZ']
    plan = slurm._plan_of([SPEC], cmd, {**OPTIONS, "sysfs_root": str(board.root), "state_dir": str(tmp_path / "st")})
    slurm.check_folder(folder, create=True)
    slurm._write_json(folder / slurm.PLAN, plan)
    return folder, board, cells


def _task(folder, sha, env=None):
    return subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--slurm-task", str(folder), "--plan-sha256", sha],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURMD_NODENAME": "n1", **(env or {})})


def test_a_task_runs_only_the_plan_submitted(sweep):
    folder, board, cells = sweep
    sha = slurm.digest((folder / slurm.PLAN).read_bytes())
    swapped = json.loads((folder / slurm.PLAN).read_text())
    swapped["cmd"] = ["sh", "-c", f"touch {cells}/PWNED"]
    (folder / slurm.PLAN).write_text(json.dumps(swapped))
    cp = _task(folder, sha)
    assert cp.returncode == 2 and "is not the plan submitted" in cp.stderr and "Traceback" not in cp.stderr
    assert not any(cells.iterdir()) and not (folder / "parts" / "0.csv").exists()


def test_a_task_measures_its_own_workload(sweep):
    folder, board, cells = sweep
    cp = _task(folder, slurm.digest((folder / slurm.PLAN).read_bytes()))
    assert cp.returncode == 0, cp.stderr
    seen = {p.name: p.read_text().strip() for p in cells.iterdir()}
    assert set(seen) == {"w0-fixed-510", "w0-fixed-714", "w0-maxn-"}
    assert set(seen.values()) == {SPEC}  # the spec as written
    nodes = list(iter_rows(folder / "parts" / "0.csv"))
    assert len(nodes) == 3 and {r["workload"] for r in nodes} == {"w0"}


@pytest.mark.parametrize("loosen", ["folder", "parent", "parts"])
def test_a_folder_another_user_can_change_is_refused_by_task_and_merge(sweep, loosen):
    folder, board, cells = sweep
    target = {"folder": folder, "parent": folder.parent, "parts": folder / "parts"}[loosen]
    target.chmod(0o777 if loosen != "parent" else 0o775)
    try:
        cp = _task(folder, slurm.digest((folder / slurm.PLAN).read_bytes()))
        assert cp.returncode == 2 and "refusing" in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
        assert not any(cells.iterdir())
        with pytest.raises(InvalidValueError, match="refusing"):
            slurm.merge(folder)
    finally:
        target.chmod(0o755 if loosen != "parent" else 0o700)


def test_a_root_owned_sticky_parent_is_safe(tmp_path):
    """/tmp's shape (1777 root): no one else can rename or replace what this user owns there."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    slurm.check_folder(shared / "sweep", create=True)
    assert (shared / "sweep" / "parts").is_dir()


@pytest.mark.parametrize("name", ["0.nodes.csv", "0.json", "0.csv"])
def test_a_link_planted_in_parts_is_never_followed(sweep, tmp_path, name):
    folder, board, cells = sweep
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    (folder / "parts" / name).symlink_to(secret)
    cp = _task(folder, slurm.digest((folder / slurm.PLAN).read_bytes()))
    assert cp.returncode == 2 and "refusing" in cp.stderr and "Traceback" not in cp.stderr
    assert secret.read_text() == "root only\n" and not any(cells.iterdir())


def test_the_serial_number_is_read_as_a_board_file(tmp_path):
    """A link out of the sysfs root (to a root-only file) gives no serial number; an ordinary one is read."""
    board = build_fake_board(tmp_path / "board", "jp5")
    serial = board.root / "proc" / "device-tree" / "serial-number"
    serial.parent.mkdir(parents=True, exist_ok=True)
    serial.write_bytes(b"1421622030447\0")
    dev = open_device(str(board.root), str(tmp_path / "st"))
    assert slurm._identity(dev, "n1")["serial_number"] == "1421622030447"
    secret = tmp_path / "secret"
    secret.write_text("root only")
    secret.chmod(0o600)
    serial.unlink()
    serial.symlink_to(secret)
    assert slurm._identity(dev, "n1")["serial_number"] is None


def test_merge_names_what_is_damaged_and_what_failed(sweep):
    """A torn last row (a task killed mid-row), a damaged parts/W.json, a node table not ours, a
    failed cell: merged as far as they go, each named, never a traceback."""
    folder, board, cells = sweep
    plan = json.loads((folder / slurm.PLAN).read_text())
    plan["workloads"] += [{**plan["workloads"][0], "name": f"w{i}"} for i in (1, 2)]
    plan["cmd"] = ["sh", "-c", '[ "$PYDVFS_FREQ_MHZ" != 714 ] || [ "$PYDVFS_WORKLOAD_NAME" != w2 ] || exit 3']
    (folder / slurm.PLAN).write_text(json.dumps(plan))
    sha = slurm.digest((folder / slurm.PLAN).read_bytes())
    for i in range(3):
        assert _task(folder, sha, {"SLURM_ARRAY_TASK_ID": str(i)}).returncode == (1 if i == 2 else 0)
    parts = folder / "parts"
    with open(parts / "0.csv", "a") as f:
        f.write("w0,bert,,,2,64")  # torn
    (parts / "1.json").write_text("{not json")
    (parts / "1.nodes.csv").write_text("a,b\n1,2\n")
    out = subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--merge", str(folder), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["rows"] == 6 and summary["incomplete"] == ["w1", "w2"]
    assert [d.split(":")[0] for d in summary["damaged"]] == ["w1"]
    assert summary["failed"] == [{"workload": "w2", "setting": "fixed", "freq_mhz": 714.0, "repeat": 0,
                                  "exit_status": 3}]
    text = subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--merge", str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert "FAILED: w2 714 MHz repeat 0 exited 3" in text.stdout and "skipped, damaged: w1" in text.stdout
    # the failed cell's task runs it again (and only it); the merge then takes its last run
    plan["cmd"] = ["true"]
    (folder / slurm.PLAN).write_text(json.dumps(plan))
    r = _task(folder, slurm.digest((folder / slurm.PLAN).read_bytes()), {"SLURM_ARRAY_TASK_ID": "2"})
    assert r.returncode == 0 and json.loads((parts / "2.json").read_text())["attempts"][-1]["runs"] == 1
    assert slurm.merge(folder)["failed"] == []


def test_a_damaged_plan_is_one_line(sweep):
    folder, board, cells = sweep
    (folder / slurm.PLAN).write_text('{"workloads": 3}')
    cp = _task(folder, slurm.digest((folder / slurm.PLAN).read_bytes()))
    assert cp.returncode == 2 and "is damaged" in cp.stderr and "Traceback" not in cp.stderr


@pytest.mark.parametrize("cmd, says", [
    (["echo", "{bogus}"], "{bogus} is not a workload field"),
    (["echo", "{task}"], "{task} has no value in workload 'w0'"),
])
def test_a_placeholder_is_checked_at_submission(cmd, says, tmp_path):
    cp = subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--slurm", "--out", str(tmp_path / "s"),
                         "--workload", SPEC, "--", *cmd], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and says in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "s").exists()


def test_a_missing_command_is_refused_at_submission(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--slurm", "--out", str(tmp_path / "s"),
                         "--workload", SPEC, "--", "no-such-trainer"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and "no-such-trainer" in cp.stderr and not (tmp_path / "s").exists()


def test_array_ranges():
    assert slurm._ranges([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"
    assert slurm._ranges(list(range(1500))) == "0-1499"
    assert slurm._ranges([5]) == "5"


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_braces_are_escaped_and_filled(tmp_path):
    from pydvfs.characterise.sweep import cell_command, parse_workload

    spec = parse_workload("name=bert-base/sst2,model=bert,layers=12,hidden=768,seq_len=13.3,task=sst2")
    assert cell_command(["train", "--model", "{model}-{layers}", "--task={task}", "awk {{print}}"], spec) == \
        ["train", "--model", "bert-12", "--task=sst2", "awk {print}"]

"""`pydvfs sweep --slurm` / `--merge` on bad input, without a cluster (in-process): one line,
exit 2, nothing submitted. The runs on a real Slurm are test_slurm.py's."""
from __future__ import annotations

import json

import pytest

from pydvfs.cli import main

WL = "name=w0,model=bert,layers=2,hidden=64,seq_len=16"


@pytest.mark.parametrize("args, says", [
    (["--merge", "{d}"], "is not a sweep folder of `pydvfs sweep --slurm` (no plan.json)"),
    (["--slurm", "--workload", WL, "--", "true"], "give --out DIR"),
    (["--slurm", "--out", "{d}", "--", "true"], "give --workload SPEC or --workloads FILE"),
    (["--slurm", "--out", "{d}", "--workloads", "{d}/none.txt", "--", "true"], "--workloads: cannot read"),
    (["--slurm", "--out", "{d}", "--workload", WL], "no training command"),
    (["--slurm", "--out", "{d}", "--workload", WL + ",layers=3", "--", "true"], "layers given twice"),
    (["--slurm", "--sim", "--out", "{d}"], "--slurm sweeps boards: no --sim"),
    (["--slurm-task", "{d}"], "is not a sweep folder"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, says):
    rc = main(["sweep", *(a.replace("{d}", str(tmp_path)) for a in args)])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_another_sweep_in_the_folder_is_refused(tmp_path, capsys):
    (tmp_path / "plan.json").write_text(json.dumps({"workloads": [], "cmd": ["true"]}))
    rc = main(["sweep", "--slurm", "--out", str(tmp_path), "--workload", WL, "--", "true"])
    assert rc == 2 and "holds another sweep" in capsys.readouterr().err
    assert json.loads((tmp_path / "plan.json").read_text())["workloads"] == []  # untouched


def test_a_task_outside_the_array_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "plan.json").write_text(json.dumps({"workloads": [{"name": "w0"}], "cmd": ["true"]}))
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    assert main(["sweep", "--slurm-task", str(tmp_path)]) == 2
    assert "runs inside the array job" in capsys.readouterr().err

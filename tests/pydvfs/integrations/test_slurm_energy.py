"""pydvfs/integrations/slurm_energy.py without Slurm: the SPANK plugin's energy files of a job
added up per node (`pydvfs slurm-energy JOB --dir DIR`); the plugin writing them on a real
cluster and the verb reading a job's folder through scontrol: test_slurm.py."""
from __future__ import annotations

import json
import os

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.integrations.slurm_energy import energy_files, summary


def _file(d, job, step, node, **kw):
    e = {"node": node, "job": job, "step": step, "mode": "714", "policy": "pin", "level_mhz": 714, "governed": True,
         "restored": True, "not_governed": None, "duration_s": 10.0, "module_j": 100.0, "cpu_gpu_j": 40.0, **kw}
    (d / f"slurm-{job}.{step}.{node}.dvfs.json").write_text(json.dumps(e))
    return e


def test_summary_per_node_counts_each_window_once(tmp_path):
    _file(tmp_path, 7, "batch", "n1")
    _file(tmp_path, 7, "0", "n1", governed=False, policy="outer step", duration_s=4.0, module_j=40.0)
    _file(tmp_path, 7, "0", "n2", cpu_gpu_j=None)  # a board whose roles do not give it
    _file(tmp_path, 7, "1", "n2", duration_s=5.0, module_j=50.0, cpu_gpu_j=20.0)
    _file(tmp_path, 7, "2", "n2", governed=False, policy=None, refused=True, not_governed="the GPU is busy",
          duration_s=None, module_j=None)
    _file(tmp_path, 8, "batch", "n1")  # another job's
    (tmp_path / "slurm-7.3.n3.dvfs.json").symlink_to(tmp_path / "slurm-8.batch.n1.dvfs.json")
    os.mkfifo(tmp_path / "slurm-7.4.n3.dvfs.json")  # never read: it would block
    s = summary("7", energy_files("7", tmp_path))
    n1, n2 = s["nodes"]
    assert (n1["node"], n1["steps"], n1["module_j"], n1["duration_s"]) == ("n1", 1, 100.0, 10.0)
    assert (n2["node"], n2["steps"], n2["module_j"], n2["cpu_gpu_j"]) == ("n2", 2, 150.0, None)
    assert n2["not_governed"] == "the GPU is busy" and n2["level_mhz"] == [714.0] and n2["mode"] == ["714"]
    assert s["total"] == {"module_j": 250.0, "cpu_gpu_j": None}  # never a partial sum


@pytest.mark.parametrize("args, says", [
    (["slurm-energy", "12a"], "not a job id: '12a'"),
    (["slurm-energy", "12", "--dir", "{tmp}/none"], "cannot read the folder"),
    (["slurm-energy", "12", "--dir", "{tmp}"], "job 12: no energy record: no slurm-12.*.dvfs.json in"),
])
def test_bad_input_is_one_line(cli, tmp_path, args, says):
    cp = cli(*(a.format(tmp=tmp_path) for a in args))
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and says in cp.stderr, cp.stderr


def test_text_and_json(cli, tmp_path):
    _file(tmp_path, 9, "batch", "n1")
    text = cli("slurm-energy", "9", "--dir", str(tmp_path))
    assert text.returncode == 0 and text.stdout.splitlines()[2].split() == ["n1", "1", "714", "pin", "714", "10.0",
                                                                           "100.0", "40.0"]
    data = json.loads(cli("slurm-energy", "9", "--dir", str(tmp_path), "--json").stdout)
    assert data["total"] == {"module_j": 100.0, "cpu_gpu_j": 40.0} and data["source"] == f"the energy files in {tmp_path}"
    with pytest.raises(InvalidValueError):
        energy_files("x", tmp_path)

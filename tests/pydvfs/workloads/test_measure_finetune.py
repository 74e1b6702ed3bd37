"""The real fine-tuning workload, run by `pydvfs measure` on a fake board with steady rails: the
measurement path a user takes on a Jetson, with a real PyTorch training command."""
from __future__ import annotations

import sys

import pytest
from wrapped import report

from pydvfs.device.fake import build_fake_board

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_measure_a_real_finetune(cli, tmp_path):
    board = build_fake_board(tmp_path / "board", "jp6")
    board.set_rail("VDD_GPU_SOC", 5000, 2000)  # 10 W
    board.set_rail("VDD_CPU_CV", 5000, 1000)   # 5 W
    board.set_load(500)
    res = cli("measure", "--sysfs-root", str(board.root), "--rate", "200", "--json", "--",
              sys.executable, "-m", "pydvfs.workloads.finetune", "--model", "bert-tiny", "--task", "sst2",
              "--max-steps", "3", "--threads", "1", "--json", timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    m = report(res)  # the report is on stderr; the training command's own output stays on stdout
    assert '"steps": 3' in res.stdout
    assert m["exit_status"] == 0 and m["read_errors"] == 0
    assert m["cpu_gpu_energy_j"] == pytest.approx(15.0 * m["duration_s"], rel=0.02)
    assert m["gpu_util_pct"] == pytest.approx(50.0)
    assert m["samples"] > 10

"""`python -m pydvfs.workloads.finetune` refuses what it cannot train in one line, exit 2, before
torch is imported (issue 37, item 13: these were tracebacks, a NaN run or a process storm)."""
import os
import sys

import pytest

from pydvfs.workloads import finetune


def _refused(capsys, argv) -> str:
    try:
        rc = finetune.main(argv + ["--device", "cpu"])
    except SystemExit as e:  # argparse's own refusals
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv,msg", [
    (["--epochs", "inf"], "--epochs"),
    (["--epochs", "nan"], "--epochs"),
    (["--epochs", "1e9"], "--epochs"),
    (["--lr", "inf"], "--lr must be a finite number"),
    (["--lr", "nan"], "--lr must be a finite number"),
    (["--threads", "100000"], "--threads must be within 1.."),
    (["--seed", "99999999999999999999"], "--seed"),
    (["--seed", "-1"], "--seed"),
])
def test_refused_in_one_line(capsys, argv, msg):
    assert msg in _refused(capsys, argv)


def test_a_folder_as_the_progress_file_is_refused_and_left_alone(capsys, tmp_path):
    (tmp_path / "keep").write_text("mine\n")
    assert "cannot write" in _refused(capsys, ["--progress-file", str(tmp_path)])
    assert sorted(os.listdir(tmp_path)) == ["keep"]  # no temporary file left behind


def test_without_torch_one_line_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as if not installed
    err = _refused(capsys, ["--max-steps", "1"])
    assert "this needs torch" in err and "pydvfs[finetune]" in err

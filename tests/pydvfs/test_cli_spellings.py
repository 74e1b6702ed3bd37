"""One spelling per thing across the verbs, help that copies and pastes, and what a newcomer
meets first: fake-board, the missing-extra message, sweep --sim resuming."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest

from pydvfs.cli import build_parser
from pydvfs.progress import read_progress

WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=128"


def _verbs():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    return sub.choices


def test_help_examples_are_never_wrapped_inside_a_word():
    """Every example line of every verb's --help is a whole command (starts with pydvfs), and no
    line ends inside a word (a trailing hyphen of a broken --option or file-name)."""
    seen = 0
    for name, p in _verbs().items():
        text = p.format_help()
        for line in text.splitlines():
            assert not re.search(r"\w-$", line), (name, line)
        if "examples:" in text:
            for line in text.split("examples:", 1)[1].strip("\n").splitlines():
                if line.strip() and "(in a second terminal)" not in line:
                    assert line.startswith("  pydvfs "), (name, line)
                    seen += 1
    assert seen >= 15
    for verb in ("status", "pin", "apply", "measure", "sweep", "run", "analyse", "train", "evaluate", "fake-board"):
        assert "examples:" in _verbs()[verb].format_help(), verb


def test_analyze_is_analyse_and_data_is_spelled_the_same(cli, tmp_path):
    data = tmp_path / "d.csv"
    r = cli("sweep", "--sim", "--out", str(data), "--models", "bert-tiny", "--tasks", "SST-2", "--json")
    assert r.returncode == 0, r.stderr
    outs = []
    for args in (["analyse", "--data", str(data)], ["analyze", "--data", str(data)], ["analyse", str(data)]):
        r = cli(*args, "--out", str(tmp_path / "a"), "--no-plots", "--json")
        assert r.returncode == 0, (args, r.stderr)
        assert "analyse: workloads: 1/1 (100%)" in r.stderr  # the progress line, on stderr
        outs.append(json.loads(r.stdout)["workloads"])
    assert outs[0] == outs[1] == outs[2]
    r = cli("analyse", "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "--data" in r.stderr


def test_tasks_take_commas_or_spaces(cli, tmp_path):
    counts = []
    for tasks in (["SST-2,MRPC"], ["SST-2", "MRPC"], ["SST-2,", "MRPC"]):
        out = tmp_path / f"{len(counts)}.csv"
        r = cli("sweep", "--sim", "--out", str(out), "--models", "bert-tiny", "--tasks", *tasks, "--json")
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            counts.append(sorted({row["task"] for row in csv.DictReader(f)}))
    assert counts == [["MRPC", "SST-2"]] * 3


def test_sim_sweep_resumes_without_duplicates(cli, tmp_path):
    out = tmp_path / "d.csv"
    args = ["sweep", "--sim", "--out", str(out), "--models", "bert-tiny", "--tasks", "SST-2", "--json"]
    first = json.loads(cli(*args).stdout)
    rows = out.read_text().splitlines()
    second = json.loads(cli(*args).stdout)
    assert out.read_text().splitlines() == rows  # nothing appended twice
    assert first["written"] == first["rows"] == 12 and first["skipped"] == 0
    assert second["written"] == 0 and second["skipped"] == 12
    more = json.loads(cli(*args[:-1], "--repeats", "2", "--json").stdout)
    assert more["written"] == 12 and more["skipped"] == 12  # only the new repeat is added
    assert len(out.read_text().splitlines()) == 1 + 24


def test_apply_takes_workload_and_govcore_agrees(cli, board, govcore_bin):
    common = ["--json", "--dry-run", "--sysfs-root", str(board.root)]
    a = json.loads(cli("apply", "--workload", WORKLOAD, *common).stdout)
    b = json.loads(cli("apply", "--model", "bert", "--layers", "12", "--hidden", "768", "--seq-len", "128",
                       *common).stdout)
    c = subprocess.run([govcore_bin, "apply", "--workload", WORKLOAD + ",name=x,task=sst2", *common],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    c = json.loads(c.stdout)
    assert a["freq_mhz"] == b["freq_mhz"] == c["freq_mhz"] and a["features"] == c["features"]
    for bad in (["--workload", "model=bert,layers=12"], ["--workload", "model=bert,colour=red,layers=1,hidden=1,seq_len=1"]):
        for res in (cli("apply", *bad, *common),
                    subprocess.run([govcore_bin, "apply", *bad, *common], capture_output=True, text=True)):
            assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_evaluate_takes_model_dir(cli, tmp_path):
    data = tmp_path / "d.csv"
    assert cli("sweep", "--sim", "--out", str(data), "--models", "bert-tiny", "bert-mini",
               "--tasks", "SST-2").returncode == 0
    r = cli("evaluate", "--data", str(data), "--model-dir", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "nowhere" in r.stderr
    r = cli("evaluate", "--data", str(data), "--json")
    assert r.returncode == 0, r.stderr
    assert "evaluate: workloads: 2/2 (100%)" in r.stderr
    r = cli("evaluate", "--data", str(data), "--model", "x")
    assert r.returncode == 2  # --model is a model type, never a folder


@pytest.mark.parametrize("module,extra,argv", [
    ("pandas", "train", ["train", "--data", "d.csv", "--out", "m"]),
    ("sklearn", "train", ["train", "--data", "d.csv", "--out", "m"]),
    ("pandas", "train", ["analyse", "--data", "d.csv", "--out", "a"]),
    ("matplotlib", "plot", ["analyse", "--data", "d.csv", "--out", "a"]),
    ("numpy", "train", ["roofline", "fit", "--data", "d.csv"]),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, module, extra, argv):
    """Run the verb in a Python where `import MODULE` fails, as when the extra is not installed."""
    assert subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--sim", "--out", str(tmp_path / "d.csv"),
                           "--models", "bert-tiny", "bert-mini", "bert-small", "--tasks", "SST-2"],
                          capture_output=True).returncode == 0
    code = ("import sys; sys.modules[%r] = None\n"
            "from pydvfs.cli import main; sys.exit(main(sys.argv[1:]))") % module
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if not line.startswith("analyse: workloads")]  # progress
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"pip install 'pydvfs[{extra}]'" in lines[0] and module in lines[0]


def test_fake_board_is_a_board_every_verb_takes(cli, tmp_path):
    root = tmp_path / "orin"
    r = cli("fake-board", str(root), "--layout", "jp6", "--levels", "13", "--json")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert made["layout"] == "jp6" and len(made["levels_mhz"]) == 13 and made["levels_mhz"][0] == 114.75
    st = json.loads(cli("status", "--sysfs-root", str(root), "--json").stdout)
    assert st["gpu"] == "gpu" and st["live"]["cpu_gpu_power_w"] > 1  # idle power, not 0 W
    r = cli("fake-board", str(root))
    assert r.returncode == 2 and "not an empty folder" in r.stderr  # never over an existing tree
    steps = tmp_path / "steps"
    r = cli("fake-board", str(tmp_path / "anim"), "--animate", "bert-tiny", "--steps", "50",
            "--time-scale", "1000", "--progress-file", str(steps))
    assert r.returncode == 0, r.stderr
    assert read_progress(steps) == 50
    # it says when and why it ended, not just stops
    assert "animation ended after" in r.stderr and "its 50 steps are done" in r.stderr, r.stderr
    r = cli("fake-board", str(tmp_path / "x4"), "--layout", "jp4", "--levels", "13")
    assert r.returncode == 2 and "AGX Orin table" in r.stderr  # the 13-level table is the AGX Orin's


def test_progress_line_reports_eta_only_when_asked():
    import io

    from pydvfs import eta

    assert eta.track([1, 2], "x") == [1, 2]  # no reporting: the iterable itself, no cost
    buf = io.StringIO()
    with eta.reporting(buf):
        assert list(eta.track(range(3), "folds")) == [0, 1, 2]
    assert buf.getvalue().endswith("folds: 3/3 (100%) 0:00\n")

"""Files and names a verb takes that are not what it expects (a hostile pass): a FIFO is never
waited on, a user's file or a link at an output's name is never replaced, a noise that
overflows is one line."""
from __future__ import annotations

import os

import pytest

from pydvfs.cli import main


def one_line_error(capsys, rc: int, *words: str) -> None:
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_a_fifo_is_never_waited_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "data.csv")
    one_line_error(capsys, main(["analyse", "--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "a")]),
                   "not a regular file")
    os.mkdir(tmp_path / "r")
    os.mkfifo(tmp_path / "r" / "sweep.csv")
    one_line_error(capsys, main(["report", str(tmp_path / "r")]), "no results.json")
    one_line_error(capsys, main(["roofline", "simulate", "--out", str(tmp_path / "data.csv")]), "not replaced")


def test_roofline_out_replaces_only_its_own_csv(tmp_path, capsys):
    mine = tmp_path / "mine.csv"
    mine.write_text("precious\n")
    one_line_error(capsys, main(["roofline", "simulate", "--out", str(mine)]), "not a CSV this command wrote")
    (tmp_path / "link.csv").symlink_to(tmp_path / "target.csv")
    one_line_error(capsys, main(["roofline", "simulate", "--out", str(tmp_path / "link.csv")]), "not replaced")
    assert mine.read_text() == "precious\n" and not (tmp_path / "target.csv").exists()
    out = tmp_path / "sim.csv"
    assert main(["roofline", "simulate", "--out", str(out)]) == 0
    first = out.read_text()
    assert main(["roofline", "simulate", "--out", str(out), "--seed", "1"]) == 0  # its own file: rewritten
    assert out.read_text() != first and out.read_text().splitlines()[0] == first.splitlines()[0]


@pytest.mark.parametrize("noise", ["300", "1e308", "inf", "-0.1", "nan"])
def test_an_energy_noise_beyond_a_sigma_of_two_is_one_line(tmp_path, capsys, noise):
    one_line_error(capsys, main(["roofline", "simulate", "--out", str(tmp_path / "s.csv"), "--energy-noise", noise]),
                   "--energy-noise")
    assert not (tmp_path / "s.csv").exists()


def test_analyse_replaces_its_own_outputs_only(tmp_path, capsys):
    data = tmp_path / "sweep.csv"
    assert main(["sweep", "--sim", "--out", str(data), "--models", "bert-tiny", "--tasks", "SST-2", "--repeats", "1"]) == 0
    out = tmp_path / "a"
    out.mkdir()
    (out / "summary.json").write_text('{"mine": 1}\n')
    one_line_error(capsys, main(["analyse", "--data", str(data), "--out", str(out), "--no-plots"]),
                   "not a summary `pydvfs analyse` wrote")
    assert (out / "summary.json").read_text() == '{"mine": 1}\n'
    (out / "summary.json").unlink()
    (out / "curves.csv").symlink_to(tmp_path / "elsewhere.csv")
    one_line_error(capsys, main(["analyse", "--data", str(data), "--out", str(out), "--no-plots"]), "not replaced")
    assert not (tmp_path / "elsewhere.csv").exists()
    (out / "curves.csv").unlink()
    capsys.readouterr()
    assert main(["analyse", "--data", str(data), "--out", str(out), "--no-plots"]) == 0
    assert main(["analyse", "--data", str(data), "--out", str(out), "--no-plots"]) == 0  # its own: rewritten
    assert "knob" in (out / "summary.json").read_text()


def test_an_empty_folder_name_is_not_the_current_folder(capsys):
    one_line_error(capsys, main(["report", ""]), "folder name is empty")


def test_an_empty_list_of_names_is_not_every_name(tmp_path, capsys):
    one_line_error(capsys, main(["sweep", "--sim", "--out", str(tmp_path / "s.csv"), "--tasks", ""]), "--tasks: no names")
    assert not (tmp_path / "s.csv").exists()

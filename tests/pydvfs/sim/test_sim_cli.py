import json

import pytest

from pydvfs import cli
from pydvfs.errors import InvalidValueError
from pydvfs.sim import cli as sim_cli


def _parser():
    ap = cli._Parser(prog="pydvfs")
    sub = ap.add_subparsers(dest="verb", parser_class=cli._Parser)
    sim_cli.register(sub, cli.common_options())
    return ap


def test_simsweep_writes_dataset_and_plots(tmp_path, capsys):
    out, plots = tmp_path / "d.csv", tmp_path / "plots"
    args = _parser().parse_args(["simsweep", "--json", "--out", str(out), "--plot", str(plots),
                                 "--models", "bert-base", "--tasks", "MRPC", "--repeats", "2"])
    assert args.func(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 24  # 11 clocks + MAXN, 2 repeats
    import pandas as pd

    df = pd.read_csv(out)
    assert len(df) == 24 and set(df["source"]) == {"sim"}
    assert {p.suffix for p in plots.iterdir()} == {".png", ".svg"}
    assert 510 <= summary["best_mhz"]["bert-base/MRPC"] <= 816


def test_simsweep_bad_input():
    ap = _parser()
    with pytest.raises(InvalidValueError):
        a = ap.parse_args(["simsweep"])
        a.func(a)
    with pytest.raises(InvalidValueError):
        a = ap.parse_args(["simsweep", "--out", "/tmp/x.csv", "--models", "bert-huge"])
        a.func(a)

"""Bad input ends in one line on stderr and exit status 2, never a traceback."""
import pytest

from pydvfs.roofline import multigpu_sim

GOOD_HEADER = "strategy,n_devices,layers,hidden,seq_len,batch,time_s,energy_j\n"


def _check(run_cli, *argv, needle=""):
    rc, out, err = run_cli(*argv)
    assert rc == 2
    # one error line, the last; a progress line of the work done before it may precede it
    lines = err.splitlines()
    assert lines and lines[-1].startswith("pydvfs: error:") and "Traceback" not in err, err
    assert sum(line.startswith("pydvfs:") for line in lines) == 1, err
    assert needle in err
    return err


def test_missing_file(run_cli, tmp_path):
    _check(run_cli, "roofline", "fit", "--data", tmp_path / "nope.csv", needle="no such data file")


def test_wrong_columns(run_cli, tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b,c\n1,2,3\n")
    _check(run_cli, "roofline", "fit", "--data", p, needle="unrecognised columns")


def test_empty_and_binary_files(run_cli, tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    _check(run_cli, "roofline", "fit", "--data", p)
    q = tmp_path / "bin.csv"
    q.write_bytes(b"\xff\xfe\x00\x81garbage\x00\n")
    _check(run_cli, "roofline", "fit", "--data", q)


@pytest.mark.parametrize("row,needle", [
    ("single,1,4,abc,128,8,1.0,10\n", "not a number"),
    ("single,1,4,256,128,8,-1.0,10\n", "positive"),
    ("single,1,4,256,128,8,1.0,-5\n", "positive or empty"),
    ("single,1,4,256,128,8,inf,10\n", "positive"),
    ("pipeline,1,4,256,128,8,1.0,10\n", "unknown strategy"),
    ("tp,2,4,512,128,8,1.0,10\n", "no speedup"),
])
def test_bad_numbers(run_cli, tmp_path, row, needle):
    p = tmp_path / "bad.csv"
    p.write_text(GOOD_HEADER + "single,1,4,256,128,8,1.0,10\n" + row)
    _check(run_cli, "roofline", "fit", "--data", p, needle=needle)


def test_no_energy_at_all(run_cli, tmp_path):
    p = tmp_path / "cpu.csv"
    p.write_text(GOOD_HEADER + "single,1,4,256,128,8,1.0,\n")
    _check(run_cli, "roofline", "fit", "--data", p, needle="no energy measurements")


def test_predict_errors(run_cli, tmp_path):
    bad = tmp_path / "fit.json"
    bad.write_text("{not json")
    base = ["--layers", 4, "--hidden", 256, "--seq-len", 128, "--batch", 8]
    _check(run_cli, "roofline", "predict", "--fit", bad, *base, needle="not a saved roofline fit")
    csv = tmp_path / "sim.csv"
    multigpu_sim.sweep(seed=0, n_configs=70).to_csv(csv, index=False)
    _check(run_cli, "roofline", "predict", "--data", csv, "--group", "gpt/x", *base, needle="no group")
    _check(run_cli, "roofline", "predict", "--data", csv, *base, "--strategy", "tp", "--devices", 2,
           "--speedup", -1, needle="positive")


def test_collect_bad_configs(run_cli, tmp_path):
    out = tmp_path / "c.csv"
    _check(run_cli, "roofline", "collect", "--out", out, "--configs", "L=2,d=64", needle="lacks")
    _check(run_cli, "roofline", "collect", "--out", out, "--configs", "L=2,d=65,h=4,ff=8,S=8,B=2",
           needle="multiple of h")
    _check(run_cli, "roofline", "collect", "--out", out, "--strategies", "pp", needle="--strategies")
    _check(run_cli, "roofline", "collect", "--out", out, "--devices", "1", needle="at least 2")
    assert not out.exists()

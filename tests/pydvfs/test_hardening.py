"""Issue 15, one regression test per failure the hostile pass found (items 2-8).

The symlink cases run as a real unprivileged user (``setpriv`` to nobody) against the real
``govcore`` binary and the Python CLI; sysfs writes go to fake boards. The C side of the same
failures is in tests/govcore/test_hardening.c (also run under ASan/UBSan by `make test`).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from wrapped import report as wrapped_report

from pydvfs import _core
from pydvfs.characterise.dataset import COLUMN_NAMES, DatasetWriter
from pydvfs.device import open_device
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import StateFileError

REPO = Path(__file__).resolve().parents[2]
GOVCORE = REPO / "govcore" / "govcore"
WORKLOAD = "name=bert-mini/sst2,model=bert,layers=4,hidden=256,seq_len=13.3,task=sst2"


@pytest.fixture(scope="session")
def govcore():
    subprocess.run(["make", "-s", "-C", str(GOVCORE.parent), "govcore"], check=True, capture_output=True)
    return str(GOVCORE)


def one_line_error(res: subprocess.CompletedProcess, code: int = 2) -> str:
    """The contract for bad input: exit 2, exactly one line on stderr, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def untouched(board) -> bool:
    return (board.read_hz("min_freq"), board.read_hz("max_freq"), board.governor()) == (
        board.levels_hz[0], board.levels_hz[-1], "nvhost_podgov")


# ------------------------------------------------------------------ a real unprivileged user ---

NOBODY = "nobody"


def _have_nobody() -> bool:
    try:
        pwd.getpwnam(NOBODY)
    except KeyError:
        return False
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


needs_root = pytest.mark.skipif(not _have_nobody(), reason="needs root, setpriv and a 'nobody' user")


@pytest.fixture
def public_tmp():
    """A temp folder under /tmp that nobody can traverse (pytest's own tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="pydvfs-i15-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _nobody_lock_dir(monkeypatch):
    """nobody's own lock folder (the lock folder is private to its user): /tmp/pydvfs-locks-UID,
    the default of a user without $XDG_RUNTIME_DIR, would outlive the test."""
    d = Path(tempfile.mkdtemp(prefix="pydvfs-i15-locks-", dir="/tmp"))
    if os.geteuid() == 0:
        chown_tree(d)
    monkeypatch.setenv("NOBODY_LOCK_DIR", str(d))
    yield
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("PYDVFS_STATE_DIR", "XDG_RUNTIME_DIR")}
    base.update({"PYTHONPATH": str(REPO), "HOME": "/nonexistent",
                 "PYDVFS_LOCK_DIR": os.environ["NOBODY_LOCK_DIR"]}, **(env or {}))
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args],
                          capture_output=True, text=True, env=base, timeout=120)


def chown_tree(path: Path, user: str = NOBODY) -> None:
    pw = pwd.getpwnam(user)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, pw.pw_uid, pw.pw_gid)


@needs_root
def test_root_refuses_a_state_folder_another_user_can_write(govcore, public_tmp):
    """The attack: a local user plants a symlink in a state folder they can write; root pins
    and would write the state text over the symlink's target."""
    board = build_fake_board(public_tmp / "board", "jp5")
    shared = public_tmp / "shared"
    shared.mkdir()
    chown_tree(shared)  # the attacker's folder
    victim = public_tmp / "victim"
    victim.write_text("root's precious file\n")
    state_name = Path(open_device(board.root, str(shared)).state_file()).name
    res = as_nobody(["ln", "-s", str(victim), str(shared / state_name)])
    assert res.returncode == 0, res.stderr
    for cli in ([govcore, "--sysfs-root", str(board.root), "--state-dir", str(shared), "pin", "510"],
                [sys.executable, "-m", "pydvfs", "pin", "510", "--sysfs-root", str(board.root),
                 "--state-dir", str(shared)]):
        res = subprocess.run(cli, capture_output=True, text=True)
        assert "refusing state folder" in one_line_error(res)
    assert victim.read_text() == "root's precious file\n"
    assert untouched(board)


@needs_root
def test_planted_dangling_symlink_is_not_a_saved_state(govcore, public_tmp):
    """Before: pin took a dangling symlink at the state path for "already saved", left the board
    pinned, and restore then said "nothing to restore"."""
    board = build_fake_board(public_tmp / "board", "jp5")
    state = public_tmp / "state"
    state.mkdir(mode=0o700)
    chown_tree(public_tmp)  # a user governing a board they may write, from their own folder
    state_path = open_device(board.root, str(state)).state_file()
    assert as_nobody(["ln", "-s", "/nonexistent/planted", state_path]).returncode == 0
    where = ["--sysfs-root", str(board.root), "--state-dir", str(state)]
    for tool in ([govcore], [sys.executable, "-m", "pydvfs"]):
        assert "symbolic link" in one_line_error(as_nobody([*tool, "pin", "510", *where]))
        assert untouched(board)
        assert "symbolic link" in one_line_error(as_nobody([*tool, "restore", *where]))
    # the user removes it: pin and restore work, the state file is theirs and 0600
    os.unlink(state_path)
    res = as_nobody([govcore, "--sysfs-root", str(board.root), "--state-dir", str(state), "pin", "510"])
    assert res.returncode == 0, res.stderr
    st = os.stat(state_path)
    assert st.st_uid == pwd.getpwnam(NOBODY).pw_uid and st.st_mode & 0o777 == 0o600
    res = as_nobody([govcore, "--sysfs-root", str(board.root), "--state-dir", str(state), "restore"])
    assert res.returncode == 0 and untouched(board)


@needs_root
def test_no_guessable_default_state_folder(govcore, public_tmp):
    """Without $XDG_RUNTIME_DIR there is no private default: refused, never /tmp/pydvfs-UID.
    Both front ends follow the one rule in clock.c."""
    board = build_fake_board(public_tmp / "board", "jp5")
    chown_tree(public_tmp)
    for tool in ([govcore], [sys.executable, "-m", "pydvfs"]):
        assert "--state-dir" in one_line_error(as_nobody([*tool, "pin", "510", "--sysfs-root", str(board.root)]))
        assert untouched(board)
    assert not Path(f"/tmp/pydvfs-{pwd.getpwnam(NOBODY).pw_uid}").exists()
    # with a private runtime folder the default works
    run_dir = public_tmp / "run-user"
    run_dir.mkdir(mode=0o700)
    chown_tree(run_dir)
    res = as_nobody([govcore, "--sysfs-root", str(board.root), "pin", "510"],
                    env={"XDG_RUNTIME_DIR": str(run_dir)})
    assert res.returncode == 0, res.stderr
    assert list((run_dir / "pydvfs").glob("gpu-*.state"))
    assert as_nobody([govcore, "--sysfs-root", str(board.root), "restore"],
                     env={"XDG_RUNTIME_DIR": str(run_dir)}).returncode == 0


@needs_root
def test_status_without_a_private_state_folder_shows_the_board(govcore, public_tmp):
    """`status` only reads: a user without $XDG_RUNTIME_DIR (and no --state-dir) still sees the
    board; whether a state is saved is reported as not known, not as an error."""
    board = build_fake_board(public_tmp / "board", "jp5")
    chown_tree(public_tmp)
    for tool in ([govcore], [sys.executable, "-m", "pydvfs"]):
        res = as_nobody([*tool, "status", "--json", "--sysfs-root", str(board.root)])
        assert res.returncode == 0, res.stderr
        st = json.loads(res.stdout)
        assert st["gpu"] == "ga10b" and st["saved_state"] is None and st["saved_state_known"] is False
        res = as_nobody([*tool, "status", "--sysfs-root", str(board.root)])
        assert res.returncode == 0 and "saved     not known: no private state folder" in res.stdout
    assert untouched(board)


def test_state_errors_are_state_file_errors(board, tmp_path):
    dev = open_device(board.root, str(tmp_path / "st"))
    dev.pin(510)
    Path(dev.state_file()).write_text("# govcore saved GPU clock state\nmax_hz=-1\nmin_hz=306000000\n"
                                      "governor=nvhost_podgov\n")
    with pytest.raises(StateFileError):
        dev.restore()
    assert board.read_hz("max_freq") == 510000000  # nothing written from a bad state


# ---------------------------------------------------------- item 3: files that are not ours ---

@pytest.mark.parametrize("content", [b"line one\nline two", bytes(range(256)) * 12],
                         ids=["text-without-last-newline", "binary-3k"])
def test_sweep_out_never_changes_a_file_it_did_not_write(cli, board, tmp_path, content):
    out = tmp_path / "notes.csv"
    out.write_bytes(content)
    res = cli("sweep", "--sysfs-root", str(board.root), "--out", str(out), "--workload", WORKLOAD,
              "--freqs", "510", "--settle", "0", "--idle", "0", "--", "true")
    assert "not a pydvfs dataset" in one_line_error(res)
    assert out.read_bytes() == content
    assert untouched(board)


def test_torn_row_repaired_only_in_our_dataset(tmp_path):
    ours = tmp_path / "d.csv"
    ours.write_text(",".join(COLUMN_NAMES) + "\nbert-x,bert,,,2,128")  # a crash mid-row
    w = DatasetWriter(ours)
    w.close()
    assert w.repaired_bytes == len("bert-x,bert,,,2,128")
    assert ours.read_text() == ",".join(COLUMN_NAMES) + "\n"
    link = tmp_path / "link.csv"
    link.symlink_to(ours)
    with pytest.raises(Exception, match="not a regular file"):
        DatasetWriter(link)


# --------------------------------------------------------- item 4: restore does what it can ---

def test_restore_reports_what_is_left_and_keeps_the_state(cli, board, tmp_path):
    state = tmp_path / "st"
    common = ["--sysfs-root", str(board.root), "--state-dir", str(state)]
    assert cli("pin", "510", *common).returncode == 0
    gov = board.devfreq_dir / "governor"
    gov.rename(board.devfreq_dir / "governor.away")
    gov.mkdir()  # neither readable nor writable as a file
    line = one_line_error(cli("restore", *common))
    assert "still not as saved: governor" in line and "kept" in line
    # the range went back regardless; the state stays for a retry
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (306000000, 1300500000)
    assert list(state.glob("gpu-*.state"))
    gov.rmdir()
    (board.devfreq_dir / "governor.away").rename(gov)
    res = cli("restore", "--json", *common)
    assert res.returncode == 0 and json.loads(res.stdout)["restored"] is True
    assert not list(state.glob("gpu-*.state"))


def test_run_report_printed_when_restore_fails(cli, board, tmp_path):
    gov = board.devfreq_dir / "governor"
    breaker = f"mv {gov} {gov}.away && mkdir {gov}"
    res = cli("run", "--json", "--sysfs-root", str(board.root), "--state-dir", str(tmp_path / "st"),
              "--policy", "ffg", "--workload", WORKLOAD, "--", "sh", "-c", breaker)
    assert res.returncode == 1, res.stderr
    report = wrapped_report(res)  # the report is there (on stderr), and says what happened
    assert report["exit_status"] == 0 and report["restored"] is False
    assert "governor" in report["restore_error"]
    assert "still not as saved" in res.stderr.strip().splitlines()[-1]


def test_empty_governor_file_is_not_damage(cli, board, tmp_path):
    (board.devfreq_dir / "governor").write_text("")
    common = ["--sysfs-root", str(board.root), "--state-dir", str(tmp_path / "st")]
    assert cli("pin", "714", *common).returncode == 0
    res = cli("restore", *common)
    assert res.returncode == 0, res.stderr
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (306000000, 1300500000)


# --------------------------------------------------------------- item 6: paths stay inside ---

def test_board_file_symlinked_out_of_the_root_is_not_written(cli, govcore, board, tmp_path):
    outside = tmp_path / "outside_max_freq"
    outside.write_text("1300500000\n")
    (board.devfreq_dir / "max_freq").unlink()
    (board.devfreq_dir / "max_freq").symlink_to(outside)
    for tool in ([sys.executable, "-m", "pydvfs"], [govcore]):
        res = subprocess.run([*tool, "pin", "510", "--sysfs-root", str(board.root), "--state-dir",
                              str(tmp_path / "st")], capture_output=True, text=True)
        # refused as a symlink (board files are regular files) before it could lead out
        err = one_line_error(res)
        assert "outside the sysfs root" in err or "not a regular file" in err, err
        assert outside.read_text() == "1300500000\n"


# ---------------------------------------------------------- item 7: the 13 bad inputs ---

@pytest.fixture(scope="module")
def sim_dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "sim.csv"
    subprocess.run([sys.executable, "-m", "pydvfs", "sweep", "--sim", "--out", str(out)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out.read_text().splitlines()


def _variant(lines, tmp_path, kind):
    head, rows = lines[0], lines[1:60]
    if kind == "truncated":
        rows = rows[:30] + [rows[30][:25]] + rows[31:]
    elif kind == "5-field":
        rows = rows[:30] + [",".join(rows[30].split(",")[:5])] + rows[31:]
    else:
        col = {"freq=1e308": "freq_mhz", "energy=inf": "energy_cpu_gpu_j"}[kind]
        cells = rows[5].split(",")
        cells[COLUMN_NAMES.index(col)] = "1e308" if kind == "freq=1e308" else "inf"
        rows[5] = ",".join(cells)
    path = tmp_path / f"{kind}.csv"
    path.write_text("\n".join([head, *rows]) + "\n")
    return path


@pytest.mark.parametrize("verb", ["analyse", "train"])
@pytest.mark.parametrize("kind", ["truncated", "5-field", "freq=1e308", "energy=inf"])
def test_analyse_and_train_refuse_bad_rows(cli, sim_dataset, tmp_path, verb, kind):
    path = _variant(sim_dataset, tmp_path, kind)
    args = [verb, str(path)] if verb == "analyse" else [verb, "--data", str(path)]
    line = one_line_error(cli(*args, "--out", str(tmp_path / "out")))
    assert f"{path}:" in line


def test_report_on_empty_results(cli, tmp_path):
    (tmp_path / "results.json").write_text("{}")
    assert "none of the sections" in one_line_error(cli("report", str(tmp_path)))
    assert not (tmp_path / "report.md").exists()


def test_report_of_the_current_folder_has_a_title(syn_csv, tmp_path):
    """`pydvfs report .` once titled its report "# pydvfs report: " (Path(".").name is "")."""
    run = tmp_path / "my-sweeps"
    run.mkdir()
    shutil.copy(syn_csv, run / "sweep.csv")
    out = subprocess.run([sys.executable, "-m", "pydvfs", "report", "."], cwd=run, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert out.returncode == 0, out.stderr
    assert (run / "report.md").read_text().splitlines()[0] == "# pydvfs report: my-sweeps"


@pytest.mark.parametrize("args", [
    ["roofline", "predict", "--fit", "x.json", "--layers", "2", "--hidden", "64", "--seq-len", "32",
     "--batch", "8", "--heads", "0"],
    ["roofline", "predict", "--fit", "x.json", "--layers", "2", "--hidden", "64", "--seq-len", "32",
     "--batch", "8", "--ff", "0"],
    ["roofline", "simulate", "--n", "1000000000", "--out", "x.csv"],
    ["sweep", "--repeats", "1000000000", "--out", "x.csv", "--workload", WORKLOAD, "--", "true"],
], ids=["heads-0", "ff-0", "simulate-n-1e9", "sweep-repeats-1e9"])
def test_numbers_out_of_bounds_refused(cli, tmp_path, args):
    res = cli(*args, timeout=60)
    assert "must be within" in one_line_error(res)


def test_bounds_are_stated_in_help(cli):
    assert "1..100" in cli("sweep", "--help").stdout
    assert "20..2000" in cli("roofline", "simulate", "--help").stdout


def test_predict_unknown_campaign(cli, tmp_path):
    sim = tmp_path / "sim.csv"
    fit = tmp_path / "fit.json"
    assert cli("roofline", "simulate", "--n", "40", "--out", str(sim)).returncode == 0
    assert cli("roofline", "fit", "--data", str(sim), "--save", str(fit)).returncode == 0
    base = ["roofline", "predict", "--fit", str(fit), "--layers", "4", "--hidden", "256",
            "--seq-len", "64", "--batch", "8"]
    assert cli(*base).returncode == 0
    assert "campaign" in one_line_error(cli(*base, "--campaign", "bogus"))


def test_govcore_status_extra_and_hex_clock(govcore, board):
    run = lambda *a: subprocess.run([govcore, "--sysfs-root", str(board.root), *a],  # noqa: E731
                                    capture_output=True, text=True)
    assert "no arguments" in one_line_error(run("status", "extra"))
    for text in ("0x132", "1e3", "inf", " 714", "714MHz", "-510"):
        assert "not a clock" in one_line_error(run("pin", text))
    assert untouched(board)


def test_negative_level_and_binary_table(cli, govcore, tmp_path):
    b = build_fake_board(tmp_path / "neg", "jp5")
    (b.devfreq_dir / "available_frequencies").write_text("306000000 -510000000 714000000\n")
    for tool in ([sys.executable, "-m", "pydvfs"], [govcore]):
        res = subprocess.run([*tool, "status", "--sysfs-root", str(b.root)], capture_output=True, text=True)
        assert "not a list of frequencies" in one_line_error(res)
    (b.devfreq_dir / "available_frequencies").write_bytes(b"\x1b[31m\xff\xfe\x00evil\x07 306000000\n")
    for tool in ([sys.executable, "-m", "pydvfs"], [govcore]):
        res = subprocess.run([*tool, "status", "--sysfs-root", str(b.root)], capture_output=True)
        line = one_line_error(subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(),
                                                          res.stderr.decode("latin-1")))
        assert all(0x20 <= ord(c) < 0x7f for c in line), line
        assert "\\x1b" in line


# ------------------------------------------------------------------ item 8: bad readings ---

def test_measure_reports_bad_readings(cli, govcore, board):
    board.set_rail("VDD_GPU_SOC", 5000, 2000)
    (board.rails["VIN_SYS_5V0"].current_path).write_text("garbage\n")
    board.set_rail("VDD_CPU_CV", 5000, -300)  # a negative current
    for tool in ([sys.executable, "-m", "pydvfs", "measure"], [govcore, "measure"]):
        res = subprocess.run([*tool, "--sysfs-root", str(board.root), "--json", "--",
                              "sleep", "0.3"], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        d = wrapped_report(res)
        assert d["readings_ok"] is False
        assert set(d["incomplete_rails"]) == {"VIN_SYS_5V0", "VDD_CPU_CV"}
        assert d["interpolated_pct"]["VIN_SYS_5V0"] > 95 and d["failed_reads"]["VIN_SYS_5V0"] > 5
        assert d["interpolated_pct"]["VDD_GPU_SOC"] == 0
        assert d["negative_readings"]["VDD_CPU_CV"] > 5 and d["energy_j"]["VDD_CPU_CV"] == 0
        assert d["energy_j"]["VIN_SYS_5V0"] == 0  # nothing was read: nothing made up
        assert "VIN_SYS_5V0" in res.stderr and "warning" in res.stderr
        strict = subprocess.run([*tool, "--sysfs-root", str(board.root), "--strict",
                                 "--", "sleep", "0.2"], capture_output=True, text=True)
        assert strict.returncode == 3 and "error" in strict.stderr
    # good readings: no warning, --strict passes
    board.set_rail("VDD_CPU_CV", 5000, 300)
    board.set_rail("VIN_SYS_5V0", 5000, 300)
    res = cli("measure", "--sysfs-root", str(board.root), "--strict", "--", "sleep", "0.2")
    assert res.returncode == 0 and "warning" not in res.stderr


def test_core_exposes_the_one_threshold():
    from pydvfs.cli.measure import EXIT_BAD_READINGS
    from pydvfs.measure.sampler import MAX_INTERPOLATED_PCT

    assert MAX_INTERPOLATED_PCT == _core.MAX_INTERPOLATED_PCT == 5.0 and EXIT_BAD_READINGS == 3

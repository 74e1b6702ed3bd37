"""Issue 27 item 11: a verb that wraps ``-- CMD`` leaves CMD's stdout and stderr where CMD wrote
them and says its own words on stderr (``--json``: on stderr, or to ``-o FILE``), as ``time``,
``nice`` and ``perf stat`` do: ``pydvfs measure -- python gen.py > out.txt`` keeps gen.py's
output. Every such verb of both front ends: pydvfs pin/apply/measure/run/sweep -- CMD and
govcore measure -- CMD (docs/cli.md, "Commands that wrap a command")."""
from __future__ import annotations

import json
import subprocess

import pytest
from wrapped import report

WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=64"
CMD = ["--", "sh", "-c", "echo CMD-OUT; echo CMD-ERR >&2"]


def verbs(board, tmp_path):
    """(name, argv before -- CMD, runs of CMD): every verb that takes -- CMD."""
    return [
        ("pin", ["pin", "612"], 1),
        ("apply", ["apply", "--workload", WORKLOAD, "--policy", "rules"], 1),
        ("measure", ["measure"], 1),
        ("run", ["run", "--policy", "rules", "--workload", WORKLOAD], 1),
        ("sweep", ["sweep", "--out", str(tmp_path / "d.csv"), "--workload", WORKLOAD, "--freqs", "510",
                   "--settle", "0", "--idle", "0.05"], 2),
    ]


@pytest.fixture
def front(cli, govcore_bin, board, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)

    def go(kind, argv):
        if kind == "govcore":
            return subprocess.run([govcore_bin, "--sysfs-root", str(board.root), *argv], capture_output=True,
                                  text=True, timeout=120)
        where = ["--sysfs-root", str(board.root)] + ([] if argv[0] == "measure" else ["--state-dir", str(state)])
        return cli(*argv[:1], *where, *argv[1:])
    return go


def _all(board, tmp_path):
    return [("pydvfs", name, argv, n) for name, argv, n in verbs(board, tmp_path)] + [
        ("govcore", "measure", ["measure"], 1)]


def test_cmds_stdout_stays_on_stdout_and_the_report_goes_to_stderr(front, board, tmp_path):
    for kind, name, argv, n in _all(board, tmp_path):
        (tmp_path / "d.csv").unlink(missing_ok=True)
        res = front(kind, [*argv, *CMD])
        assert res.returncode == 0, (kind, name, res.stderr)
        assert res.stdout == "CMD-OUT\n" * n, (kind, name, res.stdout)  # CMD's, and nothing of ours
        assert res.stderr.count("CMD-ERR") == n and "Traceback" not in res.stderr, (kind, name, res.stderr)
        assert "exited with status 0" in res.stderr or "runs measured" in res.stderr, (kind, name, res.stderr)


def test_json_goes_to_stderr_or_to_o_file(front, board, tmp_path):
    for kind, name, argv, n in _all(board, tmp_path):
        (tmp_path / "d.csv").unlink(missing_ok=True)
        json_args = ["--json"] if kind == "pydvfs" else []
        argv_json = [argv[0], *json_args, *argv[1:]] if kind == "pydvfs" else ["--json", *argv]
        res = front(kind, [*argv_json, *CMD])
        assert res.returncode == 0 and res.stdout == "CMD-OUT\n" * n, (kind, name, res.stdout, res.stderr)
        r = report(res)
        assert r.get("exit_status", 0) == 0 and ("command" in r or "runs" in r), (kind, name, r)
        (tmp_path / "d.csv").unlink(missing_ok=True)
        out = tmp_path / f"{kind}-{name}.json"
        res = front(kind, [*argv_json[:1], *(["-o", str(out)] if kind == "pydvfs" else []), *argv_json[1:],
                           *(["-o", str(out)] if kind == "govcore" else []), *CMD])
        assert res.returncode == 0 and res.stdout == "CMD-OUT\n" * n, (kind, name, res.stdout, res.stderr)
        assert "{" not in res.stderr, (kind, name, res.stderr)  # the report is in the file, not on stderr
        r = json.loads(out.read_text())
        assert r.get("exit_status", 0) == 0, (kind, name, r)


def test_an_existing_o_file_is_refused_before_cmd_runs(front, board, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("the user's\n")
    for kind, name, argv, _ in _all(board, tmp_path):
        marker = tmp_path / f"ran-{kind}-{name}"
        o = ["-o", str(taken)]
        argv_o = [argv[0], *o, *argv[1:]] if kind == "pydvfs" else [*argv, *o]
        res = front(kind, [*argv_o, "--", "touch", str(marker)])
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (kind, name, res.stderr)
        assert "exists" in res.stderr and "Traceback" not in res.stderr, (kind, name, res.stderr)
        assert not marker.exists() and taken.read_text() == "the user's\n", (kind, name)
        assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == (board.levels_hz[0], board.levels_hz[-1])


def test_a_verb_without_cmd_still_prints_on_stdout(cli, board, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    res = cli("pin", "612", "--sysfs-root", str(board.root), "--state-dir", str(state), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["freq_mhz"] == 612
    assert cli("restore", "--sysfs-root", str(board.root), "--state-dir", str(state)).returncode == 0

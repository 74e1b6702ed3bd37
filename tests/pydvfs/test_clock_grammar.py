"""One grammar of a clock typed as text, in both front ends: every case of
tests/data/clock_grammar.json through govcore's parser (the extension), pydvfs's API and CLI
(`pin`, `run --start`, `sweep --freqs`) and the govcore binary, with one answer each."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pydvfs import _core
from pydvfs.characterise.sweep import parse_freqs
from pydvfs.cli import main
from pydvfs.cli.common import clock_mhz
from pydvfs.device import mhz_to_hz
from pydvfs.errors import InvalidValueError

TABLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "clock_grammar.json").read_text("utf-8"))
CASES = [tuple(c) for c in TABLE["cases"]]
IDS = [ascii(text) for text, _ in CASES]


@pytest.mark.parametrize("text,hz", CASES, ids=IDS)
def test_the_parser_and_the_api(text, hz):
    if hz is None:
        with pytest.raises(InvalidValueError, match="not a clock"):
            _core.parse_mhz(text)
        with pytest.raises(InvalidValueError, match="not a clock"):
            mhz_to_hz(text)
        with pytest.raises(Exception, match="not a clock"):
            clock_mhz(text)  # run --start
        if not {" ", ","} & set(text) and text:  # (a list's separators)
            with pytest.raises(InvalidValueError, match="not a clock"):
                parse_freqs(text, [306.0, 714.0, 1300.5])
    else:
        assert _core.parse_mhz(text) == hz == mhz_to_hz(text)
        assert _core.parse_mhz(text.encode()) == hz
        assert clock_mhz(text) == hz / 1e6


def test_numbers_given_as_numbers_are_clocks_when_finite_and_positive():
    assert mhz_to_hz(714) == 714000000 and mhz_to_hz(1300.5) == 1300500000
    for bad in (0, -500, float("inf"), float("nan"), True, None, [714]):
        with pytest.raises(InvalidValueError, match="not a clock"):
            mhz_to_hz(bad)


def test_freq_lists_take_commas_or_spaces():
    assert parse_freqs("510,714 1300.5", [306.0, 510.0, 714.0, 1300.5]) == [510.0, 714.0, 1300.5]
    assert parse_freqs("700, 714", [306.0, 714.0, 1300.5]) == [714.0]
    for bad in (",", "510,1e3", "510,７１４"):
        with pytest.raises(InvalidValueError, match="--freqs"):
            parse_freqs(bad, [306.0, 714.0])


def _pin_rule(tmp_path):
    """(device, MHz, whether pin without --nearest takes it) on each side of both ends of a fake
    AGX Orin's table, and 99999: the rule every other front end must answer alike."""
    from pydvfs.device import open_device
    from pydvfs.device.fake import build_fake_board

    root = build_fake_board(tmp_path / "b", "jp5").root
    dev = open_device(root, str(tmp_path / "st"))
    levels = dev.available_frequencies_mhz
    step_lo, step_hi = levels[1] - levels[0], levels[-1] - levels[-2]
    for mhz in (levels[0] - step_lo - 1, levels[0] - step_lo, levels[-1] + step_hi, levels[-1] + step_hi + 1, 99999):
        try:
            dev.pin(mhz, nearest=False)
            pinned = True
        except InvalidValueError:
            pinned = False
        finally:
            dev.restore()
        yield dev, mhz, pinned
    assert not pinned  # 99999: refused by pin


def test_sweep_freqs_refuse_a_clock_pin_refuses(tmp_path):
    """`sweep --freqs 99999` swept 1300.5 MHz and exited 0 where `pin 99999` refuses the typo:
    the sweep's rule (levels.near_table) answers as govcore's gc_check_near_table, held here
    against the board's own pin without --nearest on each side of both ends."""
    for dev, mhz, pinned in _pin_rule(tmp_path):
        if pinned:
            assert parse_freqs(f"{mhz:g}", dev.available_frequencies_mhz) == [dev.snap_mhz(mhz)]
        else:
            with pytest.raises(InvalidValueError, match="--freqs: .* outside the board's table"):
                parse_freqs(f"{mhz:g}", dev.available_frequencies_mhz)


def test_run_start_refuses_a_clock_pin_refuses(tmp_path):
    """Issue 37 item 19: `run --start 99999` started at the top clock where `pin 99999` refuses:
    choose_start (the one place every online start goes through) asks pin's rule, on each side
    of both ends of the table."""
    from pydvfs.governor.loop import choose_start

    for dev, mhz, pinned in _pin_rule(tmp_path):
        if pinned:
            assert choose_start(dev, None, start_mhz=mhz)[0] == dev.snap_mhz(mhz)
        else:
            with pytest.raises(InvalidValueError, match="--start: .* outside the board's table"):
                choose_start(dev, None, start_mhz=mhz)


def _pydvfs(capsys, *argv) -> tuple[int, str, str]:
    """The pydvfs CLI in this process (the table has 33 cases: a process each would take half a
    minute on a busy machine)."""
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_both_front_ends_give_one_answer(capsys, board, govcore_bin, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    where = ["--sysfs-root", str(board.root), "--state-dir", str(state)]

    def govcore(*argv):
        out = subprocess.run([govcore_bin, *argv], capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr

    pydvfs = lambda *argv: _pydvfs(capsys, *argv)  # noqa: E731
    for text, hz in CASES:
        for name, front in (("pydvfs", pydvfs), ("govcore", govcore)):
            rc, out, err = front("pin", text, "--nearest", "--json", *where)
            if hz is None:
                assert rc == 2 and "not a clock" in err and len(err.strip().splitlines()) == 1, (name, text, err)
                assert board.read_hz("max_freq") == 1300500000  # nothing written
            else:
                assert rc == 0, (name, text, err)
                assert round(json.loads(out)["requested_mhz"] * 1e6) == hz, (name, text, out)
                assert front("restore", *where)[0] == 0


def test_a_clock_finer_than_a_hz_is_refused_alike_and_far_ones_in_the_same_words(capsys, board, govcore_bin,
                                                                                tmp_path):
    """`pin 714.0000005` once said "not a clock of the board's table: 714 MHz" through the
    daemon: a fraction finer than a Hz is refused by the grammar everywhere, and a clock far
    outside the table is refused by both front ends in the same words."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    where = ["--sysfs-root", str(board.root), "--state-dir", str(state)]
    g = subprocess.run([govcore_bin, "pin", "99999.5", *where], capture_output=True, text=True)
    rc, _, err = _pydvfs(capsys, "pin", "99999.5", *where)
    assert rc == g.returncode == 2
    assert err.split("error: ", 1)[1] == g.stderr.split("error: ", 1)[1]
    assert "99999.5 MHz is outside the board's table (306..1300.5 MHz) by more than one level" in err


def test_a_workload_key_given_twice_is_refused_by_both(capsys, board, govcore_bin):
    for spec in (["--workload", "model=bert,layers=12,hidden=768,seq_len=64,layers=24"],
                 ["--workload", "model=bert,layers=12,hidden=768,seq_len=64", "--layers", "24"],
                 ["--workload", "model=bert,layers=12,hidden=768,seq_len=64,name=a,name=b"]):
        argv = ["apply", *spec, "--dry-run", "--sysfs-root", str(board.root)]
        rc, _, err = _pydvfs(capsys, *argv)
        assert rc == 2 and "given twice" in err, err
        g = subprocess.run([govcore_bin, *argv], capture_output=True, text=True)
        assert g.returncode == 2 and "given twice" in g.stderr, g.stderr

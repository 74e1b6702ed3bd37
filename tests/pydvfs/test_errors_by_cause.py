"""Each failure has its own exception (govcore's GC_E* codes mapped in _core.check): a clock the
board did not take is not an I/O error, a damaged state file is not bad user input, garbled
board data is the board's fault. Every one is still a PydvfsError (one line, exit 2 on the CLI)."""
from __future__ import annotations

import pytest

import pydvfs
from pydvfs import errors


def test_garbled_available_frequencies_is_a_board_data_error(board):
    (board.devfreq_dir / "available_frequencies").write_text("306000000 fast 714000000\n")
    with pytest.raises(errors.BoardDataError, match="available_frequencies") as e:
        pydvfs.open_device(board.root)
    assert not isinstance(e.value, errors.InvalidValueError) and isinstance(e.value, errors.BoardIOError)


def test_a_damaged_state_file_is_a_state_file_error(board, tmp_path):
    dev = pydvfs.open_device(board.root, str(tmp_path))
    dev.pin(612)
    with open(dev.state_file(), "w") as f:
        f.write("governor=\nmin_hz=abc\n")
    with pytest.raises(errors.StateFileError, match="damaged"):
        dev.restore()
    assert not issubclass(errors.StateFileError, errors.InvalidValueError)


def test_a_verify_failure_is_not_an_io_error():
    # the C side returns -GC_EVERIFY for it (tests/govcore/test_clock.c, a mock board that caps)
    assert issubclass(errors.ClockVerifyError, errors.PydvfsError)
    assert not issubclass(errors.ClockVerifyError, (errors.BoardIOError, errors.InvalidValueError))


def test_the_cli_says_each_in_one_line(cli, board, tmp_path):
    (board.devfreq_dir / "available_frequencies").write_text("garbage\n")
    out = cli("status", "--sysfs-root", str(board.root))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "available_frequencies" in out.stderr

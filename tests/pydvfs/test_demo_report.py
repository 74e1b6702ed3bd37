"""The demo and its report (issue 37 items 22, 23): the demo writes only under its folder, and the
report says which measure, search and model each "best" clock is, with legible figures. Cheap:
single stages or hand-made results, never the whole demo (tests/test_packaging.py runs it once)."""
from __future__ import annotations

import os
from pathlib import Path

from pydvfs.cli import demo as cli_demo
from pydvfs.cli import main
from pydvfs.demo import stage_board


def test_the_demo_takes_its_locks_in_its_own_folder(tmp_path, monkeypatch):
    """As root the default lock folder is the host's /run/pydvfs/locks: the demo's fake boards
    lock in OUT/locks instead (here the default is the session's lock folder, which must stay
    untouched)."""
    host_locks = Path(os.environ["PYDVFS_LOCK_DIR"])
    before = sorted(host_locks.iterdir())
    monkeypatch.setattr(cli_demo, "STAGES", [("board", stage_board)])
    assert main(["demo", "--out", str(tmp_path / "out"), "--json"]) == 0
    assert sorted(host_locks.iterdir()) == before
    assert any((tmp_path / "out" / "locks").iterdir())

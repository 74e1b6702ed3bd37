"""Issue 37 items 0 and 16: ``run --progress-file`` never takes nor touches a file that is not a
step count, and the whole run's steps are the steps the run saw, not the file's value (a step
writer started before ``run``, a count left by an earlier run). In-process, on fake boards."""
from __future__ import annotations

import io
import os
import statistics
import sys
import threading
import time

import pytest

from pydvfs.cli import main
from pydvfs.errors import InvalidValueError
from pydvfs.governor.loop import WindowParams, run_governed
from pydvfs.progress import StepsSeen, existing_count, write_progress

SLEEP = [sys.executable, "-c", "import time; time.sleep(0.6)"]


# -- item 0 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["maxn", "online"])
@pytest.mark.parametrize("name, text", [("important.py", "print(1)\n"), ("config.json", '{"lr": 1}\n'),
                                        ("notes.txt", "12 apples 3\n"), ("blob", "\udcff")])
def test_a_file_that_is_not_a_step_count_is_refused_and_kept(board, tmp_path, capsys, policy, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = path.read_bytes(), os.stat(path).st_ino
    with pytest.raises(InvalidValueError, match="not a step count"):
        run_governed(["true"], policy, progress_file=path, sysfs_root=board.root, record=False, use_runs=False)
    rc = main(["run", "--policy", policy, "--sysfs-root", str(board.root), "--progress-file", str(path), "--no-record",
               "--", "true"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "not a step count" in err and "Traceback" not in err
    assert (path.read_bytes(), os.stat(path).st_ino) == before


def test_a_folder_or_fifo_is_refused_and_kept(board, tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, why in ((folder, "a folder"), (fifo, "not a regular file")):
        with pytest.raises(InvalidValueError, match=why):
            run_governed(["true"], "maxn", progress_file=path, sysfs_root=board.root)
    assert folder.is_dir() and os.path.exists(fifo)


def test_what_a_progress_file_may_hold_at_the_start(tmp_path):
    p = tmp_path / "steps"
    assert existing_count(p) == (None, None)
    for text, want in (("", (None, None)), ("193\n", (193, None)), ("12 4096\n", (12, 4096)), ("7.9", (7, None))):
        p.write_text(text)
        assert existing_count(p) == want
    for text in ("print(1)\n", "1 2 3\n", "-5\n", "nan\n"):
        p.write_text(text)
        with pytest.raises(ValueError, match="not a step count"):
            existing_count(p)


# -- item 16 --------------------------------------------------------------------------------
def test_steps_seen_counts_advances_from_the_start_count():
    cases = [((508, None), [508, 509, 600], 92),  # a writer already running: only its advances
             ((500, None), [500, 0, 1, 2, 300], 300),  # a count left before: CMD counts afresh from 0
             ((500, None), [500, 1, 2, 300], 300),  # ... writing its first count after one step
             ((None, None), [None, 0, 5, 250], 250),  # no file at the start
             ((None, None), [None, 3, 250], 250),
             ((40, None), [40, 40], 0)]  # CMD counted nothing
    for start, reads, want in cases:
        s = StepsSeen(start)
        for r in reads:
            s.see(r)
        assert s.steps == want, (start, reads)
        assert s.moved == (want > 0)
    s = StepsSeen((10, 1000))
    for steps, tokens in ((10, 1000), (12, 1200), (15, 1500)):
        s.see(steps, tokens)
    assert (s.steps, s.tokens) == (5, 500)


class Writer:
    """A step writer already running when the run starts (fake-board --animate's role): from
    ``first``, one step every ``period_s``."""

    def __init__(self, path, first: int = 1000, period_s: float = 0.005):
        self.path, self.count, self.period_s = path, first, period_s
        self.stop = threading.Event()
        write_progress(path, self.count)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.wait(self.period_s):
            self.count += 1
            write_progress(self.path, self.count)

    def close(self) -> int:
        self.stop.set()
        self.thread.join(10)
        return self.count


def test_a_static_run_counts_the_steps_it_saw_not_the_file_s_value(board, tmp_path):
    progress = tmp_path / "steps"
    writer = Writer(progress)
    time.sleep(0.05)
    try:
        r = run_governed(SLEEP, "maxn", progress_file=progress, sysfs_root=board.root, log=io.StringIO())
    finally:
        last = writer.close()
    assert r["steps_at_start"] >= 1000
    assert 0 < r["steps"] < 1000 and r["steps_at_start"] + r["steps"] <= last


def test_a_count_left_by_an_earlier_run_is_counted_from_zero(board, tmp_path):
    progress = tmp_path / "steps"
    progress.write_text("500\n")  # left by an earlier run; this CMD counts 0..40
    cmd = [sys.executable, "-c", "import sys; from pydvfs.progress import write_progress as w\n"
           "for i in range(41): w(sys.argv[1], i)", str(progress)]
    r = run_governed(cmd, "maxn", progress_file=progress, sysfs_root=board.root, log=io.StringIO())
    assert r["exit_status"] == 0 and r["steps_at_start"] == 500 and r["steps"] == 40


def test_an_online_run_s_whole_run_j_per_step_agrees_with_its_probes(powered_orin, tmp_path):
    """The README's pairing (a writer running before ``run``): the whole-run J/step, at constant
    power and step rate, is the probes' J/step, not a fraction of it."""
    progress = tmp_path / "steps"
    writer = Writer(progress, period_s=0.004)
    time.sleep(0.05)
    cmd = [sys.executable, "-c", "import time; time.sleep(1.6)"]
    try:
        r = run_governed(cmd, "online", progress_file=progress, sysfs_root=powered_orin.root, rate_hz=500,
                         start_mhz=714, search_kind="hill", log=io.StringIO(), record=False, use_runs=False,
                         window=WindowParams(min_window_s=0.2, min_steps=10, settle_s=0.0))
    finally:
        last = writer.close()
    assert r["trajectory"], "no window finished"
    probe = statistics.median(w["j_per_step"] for w in r["trajectory"])
    assert r["steps_at_start"] >= 1000 and r["steps_at_start"] + r["steps"] <= last
    assert r["j_per_step"] == pytest.approx(probe, rel=0.35), (r["j_per_step"], probe, r["steps"])

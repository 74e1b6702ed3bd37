"""Issue 37 items 1, 2, 7, 8, 9 and 10: the run store (pydvfs/policy/store.py, docs/store.md)
against damaged, hostile and concurrent input. In-process, on temporary folders."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading

import pytest

from pydvfs.cli import main
from pydvfs.device.fake import build_fake_board
from pydvfs.errors import StoreError
from pydvfs.policy.learned import board_learned, learn, learned_table
from pydvfs.policy.store import FORMAT, MAX_BYTES, MAX_RUNS, RunStore, check_record
from pydvfs.sim.profiles import profile

BOARD = "orin-nano-super"
SHAPE = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64.0}
SPEC = "model=bert,layers=12,hidden=768,seq_len=64"


def record(board=BOARD, name=None, **workload) -> dict:
    probes = [{"freq_mhz": f, "j_per_step": 1.0 + abs(f - 714.0) / 1000, "s_per_step": 100.0 / f, "windows": 3}
              for f in (612.0, 714.0, 816.0)]
    return {"format": FORMAT, "board": board, "measure": "module", "probes": probes, "settled_mhz": 714.0,
            "workload": {**SHAPE, "name": name, **workload}}


def line(d: dict) -> str:
    return json.dumps(d, separators=(",", ":")) + "\n"


def store_with(tmp_path, lines: list[str]):
    """A store holding a good record, then ``lines`` as written."""
    folder = tmp_path / "runs"
    RunStore(folder).append(record(name="good"))
    with open(folder / f"runs-{BOARD}.jsonl", "a") as fh:
        fh.writelines(lines)
    return RunStore(folder)


def names(loaded) -> list:
    return [r["workload"]["name"] for r in loaded.records]


# -- item 1: a huge integer is a damaged record, never a traceback ---------------------------
HUGE = "9" * 400
GOOD = line(record(name="also good"))
HUGE_LINES = {
    "freq_mhz": GOOD.replace('"freq_mhz":612.0', f'"freq_mhz":{HUGE}'),
    "j_per_step": GOOD.replace('"j_per_step":1.102', f'"j_per_step":{HUGE}'),
    "s_per_step": GOOD.replace('"s_per_step":0.16339869281045752', f'"s_per_step":{HUGE}'),
    "settled_mhz": GOOD.replace('"settled_mhz":714.0', f'"settled_mhz":{HUGE}'),
    "seq_len": GOOD.replace('"seq_len":64.0', f'"seq_len":{HUGE}'),
}


@pytest.mark.parametrize("field", sorted(HUGE_LINES))
def test_a_huge_integer_is_skipped_as_damaged(tmp_path, capsys, field):
    assert HUGE in HUGE_LINES[field]
    store = store_with(tmp_path, [HUGE_LINES[field], GOOD])
    loaded = store.load(BOARD)
    assert names(loaded) == ["good", "also good"]
    assert len(loaded.skipped) == 1 and "line 2" in loaded.warning()
    # what apply and run --policy online read: one warning, the records learned from
    d = board_learned(BOARD, SHAPE, profile(BOARD).levels_mhz, data_dir=tmp_path / "runs")
    assert d is not None and d.freq_mhz == 714.0
    assert "skipped 1 damaged run record(s)" in capsys.readouterr().err
    # an append past the cap (a run's end) rewrites without it
    store.append(record(name="third"), max_runs=2)
    assert names(store.load(BOARD)) == ["also good", "third"]


def test_a_huge_integer_fails_no_verb(tmp_path, capsys):
    store_with(tmp_path, [HUGE_LINES["j_per_step"]])
    fb = build_fake_board(tmp_path / "board", board=BOARD)
    data = str(tmp_path / "runs")
    for argv in (["apply", "--dry-run", "--json", "--sysfs-root", str(fb.root), "--workload", SPEC, "--data-dir", data],
                 ["status", "--json", "--sysfs-root", str(fb.root), "--data-dir", data],
                 ["train", "--from-runs", "--board", BOARD, "--data-dir", data, "--json"]):  # (drops it: last)
        assert main(argv) == 0, argv
        out = capsys.readouterr()
        json.loads(out.out)
        assert "skipped 1 damaged run record(s)" in out.err and "Traceback" not in out.err, argv


# -- item 2: concurrent appends at the cap keep every record --------------------------------
CAP = 20
EACH = 30


def _append_many(folder: str, who: int) -> None:
    store = RunStore(folder)
    for i in range(EACH):
        store.append(record(name=f"p{who}-{i}"), max_runs=CAP)


def test_two_processes_appending_at_the_cap_lose_no_record(tmp_path):
    folder = tmp_path / "runs"
    for i in range(CAP):  # at the cap from the start: every append rewrites the file
        RunStore(folder).append(record(name=f"old-{i}"), max_runs=CAP)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(folder), who)) for who in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        if p.is_alive():
            p.kill()
            p.join()
        assert p.exitcode == 0
    got = names(RunStore(folder).load(BOARD))
    assert len(got) == CAP
    # the newest CAP of the 2 x EACH appended: of each process, its last ones in its own order
    # (none where the other ran its last CAP appends after it had finished: on a busy machine
    # the two may not overlap), with no gap
    for who in (1, 2):
        mine = [int(n.split("-")[1]) for n in got if n.startswith(f"p{who}-")]
        assert mine == list(range(EACH - len(mine), EACH)), (who, got)
    assert not any(n.startswith("old-") for n in got)
    assert [f for f in os.listdir(folder) if f.endswith(".tmp")] == []


def test_every_append_survives_below_and_across_the_cap(tmp_path):
    """Threads of one process (each append opens and locks its own descriptor): all kept."""
    folder = tmp_path / "runs"
    threads = [threading.Thread(target=lambda w=w: [RunStore(folder).append(record(name=f"t{w}-{i}"), max_runs=100)
                                                    for i in range(15)]) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(names(RunStore(folder).load(BOARD))) == 60


# -- item 7: records are checked strictly ---------------------------------------------------
@pytest.mark.parametrize("bad, why", [
    (line(record(board="thor")), "another board"),
    (GOOD.replace('"layers":12', '"layers":12,"layers":48'), "key given twice"),
    (GOOD.replace('{"freq_mhz":612.0', '{"freq_mhz":612.0,"freq_mhz":918.0', 1), "key given twice"),
    (GOOD.replace('"layers":12', '"layers":"12"'), "layers"),
    (GOOD.replace('"layers":12', '"layers":"\u0661\u0662"'), "layers"),
    (GOOD.replace('"hidden":768', '"hidden":768.5'), "hidden"),
    (GOOD.replace('"layers":12', '"layers":true'), "layers"),
    (GOOD.replace('"seq_len":64.0', '"seq_len":"64"'), "seq_len"),
    (line(record(name={"a": 1})), "name"),
    (line(record(name=[1])), "name"),
    (line(record(name="x\u001b[2J\u001b[31mowned")), "control character"),
    (line(record(name="a\nb")), "control character"),
    (line(record(name="\u202egnp.exe")), "control character"),
    (line(record(name="n" * 300)), "characters"),
    (line(record(model="bert\u0007")), "control character"),
    (line(record(colour="red")), "unknown field"),
])
def test_a_loose_record_is_skipped(tmp_path, bad, why):
    loaded = store_with(tmp_path, [bad]).load(BOARD)
    assert names(loaded) == ["good"]
    assert len(loaded.skipped) == 1 and why in loaded.skipped[0], loaded.skipped
    assert "\x1b" not in loaded.warning() and "\n" not in loaded.warning()


def test_a_record_of_another_board_is_not_learned(tmp_path):
    """A thor record inside the Nano Super's file votes for nothing there."""
    thor = record(board="thor")
    thor["probes"] = [{"freq_mhz": f, "j_per_step": 2.0 - f / 1000, "s_per_step": 1.0, "windows": 3}
                      for f in (612.0, 918.0)]
    store_with(tmp_path, [line(thor)] * 5)
    d = board_learned(BOARD, SHAPE, profile(BOARD).levels_mhz, data_dir=tmp_path / "runs", log=open(os.devnull, "w"))
    assert d.freq_mhz == 714.0 and d.runs == 1
    check_record(record(name="a name with spaces, é and 中文"))  # printable text is fine


# -- item 8: a FIFO in place of the file is refused, never waited on ------------------------
def test_a_fifo_in_place_of_the_file_is_refused_at_once(tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / f"runs-{BOARD}.jsonl", 0o600)
    fb = build_fake_board(tmp_path / "board", board=BOARD)
    result = {}

    def call():
        with pytest.raises(StoreError, match="not a regular file"):
            RunStore(folder).load(BOARD)
        with pytest.raises(StoreError, match="not a regular file"):
            RunStore(folder).append(record())
        result["status"] = main(["status", "--json", "--sysfs-root", str(fb.root), "--data-dir", str(folder)])
        result["apply"] = main(["apply", "--dry-run", "--json", "--sysfs-root", str(fb.root), "--workload", SPEC,
                                "--data-dir", str(folder)])

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # the old code waits for a writer: open the FIFO's other end to free it
        fd = os.open(folder / f"runs-{BOARD}.jsonl", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(10)
        pytest.fail("reading the store waited on a FIFO")
    assert result == {"status": 0, "apply": 0}
    assert "not a regular file" in capsys.readouterr().err


# -- item 9: reading the store is bounded ---------------------------------------------------
def test_a_huge_store_is_read_only_to_its_bound(tmp_path, monkeypatch):
    folder = tmp_path / "runs"
    RunStore(folder).append(record(name="first"))
    path = folder / f"runs-{BOARD}.jsonl"
    filler = line(record(name="f" * 200)).encode()
    n = MAX_BYTES // len(filler) + 2 * MAX_RUNS  # well over the bound, and over MAX_RUNS records
    with open(path, "ab") as fh:
        fh.write(filler * n)
        for i in range(3):
            fh.write(line(record(name=f"new-{i}")).encode())
    assert os.path.getsize(path) > MAX_BYTES
    seen = []
    parse = RunStore._parse
    monkeypatch.setattr(RunStore, "_parse", staticmethod(lambda data, *a: seen.append(len(data)) or parse(data, *a)))
    loaded = RunStore(folder).load(BOARD)
    assert seen and max(seen) <= MAX_BYTES
    assert names(loaded)[-3:] == ["new-0", "new-1", "new-2"] and "first" not in names(loaded)
    assert "were not read" in loaded.warning()
    # the next append bounds the file again: MAX_RUNS records, the newest
    RunStore(folder).append(record(name="last"))
    loaded = RunStore(folder).load(BOARD)
    assert len(loaded.records) == MAX_RUNS and names(loaded)[-1] == "last" and loaded.warning() is None


def test_more_than_max_runs_short_lines_are_not_all_parsed(tmp_path):
    folder = tmp_path / "runs"
    RunStore(folder).append(record(name="first"))
    with open(folder / f"runs-{BOARD}.jsonl", "a") as fh:
        fh.writelines(line(record(name=f"n{i}")) for i in range(MAX_RUNS + 100))
    loaded = RunStore(folder).load(BOARD)
    assert names(loaded) == [f"n{i}" for i in range(100, MAX_RUNS + 100)]
    assert "were not read" in loaded.warning() and not loaded.skipped


# -- item 10: a link above the store owned by another user is refused -----------------------
def test_nothing_is_made_under_a_folder_others_can_change(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(StoreError, match="can be changed by another user"):
        RunStore(shared / "made" / "store").append(record())
    assert not (shared / "made").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a link owned by another user needs root to make")
@pytest.mark.parametrize("target_owner", ["nobody", "root"])
def test_a_link_above_the_store_owned_by_another_user_is_refused(tmp_path, target_owner):
    nobody = 65534
    os.chmod(tmp_path, 0o755)
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    if target_owner == "nobody":
        os.chown(target, nobody, nobody)
    link = tmp_path / "LINK"
    link.symlink_to(target)
    os.lchown(link, nobody, nobody)
    for call in (lambda s: s.append(record()), lambda s: s.load(BOARD)):
        with pytest.raises(StoreError, match="symbolic link owned by another user"):
            call(RunStore(link / "made-by-root" / "store"))
    assert os.listdir(target) == []
    # a link of one's own (~/.local/share on another disk) is fine
    mine = tmp_path / "MINE"
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    mine.symlink_to(own)
    RunStore(mine / "store").append(record())
    assert (own / "store" / f"runs-{BOARD}.jsonl").exists()


# -- item 6: one record cannot steer the learned clock --------------------------------------
def run_of(curve: dict, **workload) -> dict:
    """A record of one run that measured ``curve`` (MHz -> J/step; s/step 100/f)."""
    r = record(**workload)
    r["probes"] = [{"freq_mhz": f, "j_per_step": j, "s_per_step": 100.0 / f, "windows": 3} for f, j in curve.items()]
    return r


GENUINE = {408.0: 1.10, 510.0: 1.00, 612.0: 1.05}  # best 510


def test_one_record_adding_a_clock_does_not_outvote_ten_runs():
    levels = profile(BOARD).levels_mhz
    runs = [run_of({f: j * (1 + 0.01 * i) for f, j in GENUINE.items()}) for i in range(10)]
    hostile = run_of({510.0: 1.0, 918.0: 0.001})
    got = learn(runs + [hostile], SHAPE, levels)
    assert got.freq_mhz == 510.0
    assert 918.0 not in {f for f, _, _ in got.curve}  # not given to the online search as data either
    table = learned_table(runs + [hostile])
    assert table[0]["best_mhz"] == 510.0 and table[0]["set_aside_mhz"] == [918.0]
    assert {c["freq_mhz"]: c["runs"] for c in table[0]["clocks"]} == {408.0: 10, 510.0: 11, 612.0: 10}
    # a noisy partial run that measured one clock low moves nothing either
    partial = run_of({612.0: 0.5, 714.0: 0.4})
    assert learn(runs + [partial], SHAPE, levels).freq_mhz == 510.0


def test_one_exact_shape_record_does_not_outvote_ten_near_shape_runs():
    levels = profile(BOARD).levels_mhz
    near = [run_of(GENUINE, seq_len=72.0) for _ in range(10)]  # distance 0.17 from SHAPE
    exact = run_of({816.0: 1.0, 918.0: 0.9})
    assert learn(near + [exact], SHAPE, levels).freq_mhz == 510.0
    assert learn(near[:1] + [exact], SHAPE, levels).freq_mhz == 918.0  # one run each: the nearer wins


def test_two_runs_meet_in_the_middle_not_at_the_upper_one():
    levels = profile(BOARD).levels_mhz
    a, b = run_of({612.0: 0.5, 714.0: 1.0}), run_of({612.0: 1.2, 714.0: 1.0})
    for runs in ([a, b], [b, a]):
        got = learn(runs, SHAPE, levels)
        assert got.freq_mhz == 612.0  # 0.85 on average against 1.0
        assert dict((f, j) for f, j, _ in got.curve) == pytest.approx({612.0: 0.85, 714.0: 1.0})


def test_runs_are_compared_clock_to_clock_not_across_their_scales():
    """Two runs of one shape at different J/step scales (another dataset's padding, a warmer
    board), one measuring 612 and 714, the other 612 and 816: 714 is best in the run that
    measured it, 816 is worse than 612 in its; a per-clock median across runs reads the
    second run's scale as 816's merit."""
    levels = profile(BOARD).levels_mhz
    runs = [run_of({612.0: 1.0, 714.0: 0.95, 816.0: 1.02}), run_of({612.0: 2.0, 714.0: 1.9, 816.0: 2.04}),
            run_of({612.0: 0.5, 816.0: 0.51})]
    assert learn(runs, SHAPE, levels).freq_mhz == 714.0

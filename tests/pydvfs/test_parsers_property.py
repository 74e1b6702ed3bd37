"""Property-based pass over every parser that reads outside input (issue 15, "Prove it").

Each test states what a parser may answer for *any* input: a refusal of the documented kind, or
a result that obeys the rules (values in range, nothing made up). A reference model in Python
says which inputs must be accepted. Hypothesis tries the inputs; run with
``--hypothesis-show-statistics`` to see how many each test tried (the last test also checks
the totals). Parsers: the saved state file (C, through the extension), the frequency table (C),
hwmon rail values (C, through the sampler thread), dataset rows, workload specs, CLI numbers
(Python and the govcore binary).
"""
from __future__ import annotations

import collections
import csv
import io
import math
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pydvfs import _core
from pydvfs.characterise.dataset import COLUMN_NAMES, COLUMNS, HEADER_LINE, UNIT_BOUNDS, DatasetWriter
from pydvfs.cli.common import int_range
from pydvfs.device.fake import ORIN_11_LEVELS_HZ, build_fake_board
from pydvfs.errors import InvalidValueError, PydvfsError, StateFileError
from pydvfs.measure.sampler import Sampler
from pydvfs.workload import parse_workload

REPO = Path(__file__).resolve().parents[2]
TRIED: collections.Counter = collections.Counter()  # inputs tried per parser


def profile(max_examples: int) -> settings:
    """No deadline (a busy 2-core machine), module fixtures shared across examples."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


GOVERNORS = ("nvhost_podgov", "userspace", "performance", "simple_ondemand")  # fake.py's list


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One fake board and state folder for the whole module (examples rewrite its files)."""
    base = tmp_path_factory.mktemp("prop")
    board = build_fake_board(base / "board", "jp5")
    state = base / "state"
    state.mkdir(mode=0o700)
    return board, state


# ------------------------------------------------------------------ state files (C) ---

_level = st.sampled_from(ORIN_11_LEVELS_HZ)
_hz_text = st.one_of(_level.map(str), st.integers(-2**70, 2**70).map(str),
                     st.text("0123456789+-abx .e", max_size=24))
_gov_text = st.one_of(st.sampled_from(GOVERNORS + ("", "evil", "nvhost podgov")), st.text(max_size=30))
_state_line = st.one_of(
    st.tuples(st.just("min_hz"), _hz_text), st.tuples(st.just("max_hz"), _hz_text),
    st.tuples(st.just("governor"), _gov_text), st.tuples(st.sampled_from(["sysfs_root", "devfreq_dir",
                                                                          "other", "#x"]), st.text(max_size=20)),
).map(lambda kv: f"{kv[0]}={kv[1]}")
_state_text = st.one_of(
    st.lists(_state_line, max_size=7).map(lambda ls: "# govcore saved GPU clock state\n" + "\n".join(ls) + "\n"),
    st.text(max_size=300),
)


@profile(400)
@given(text=_state_text)
@example(text="# govcore saved GPU clock state\nmin_hz=306000000\nmax_hz=0\ngovernor=nvhost_podgov\n")  # once accepted
def test_state_file_parser(shared, text):
    board, state = shared
    TRIED["state file"] += 1
    b = _core.Board(str(board.root))
    path = Path(b.state_path(str(state)))
    data = text.encode("utf-8", "surrogatepass")
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, data)
    os.close(fd)
    try:
        saved = b.saved_state(str(state))
    except StateFileError as e:
        assert str(e).isprintable()
        return
    assert saved is not None
    lo, hi, gov = saved
    # accepted: exactly our keys, two clocks and a plain governor name; whether the board still
    # offers them (and in that order) is restore's to say: it writes what fits and names the rest
    assert 0 < lo <= 10**11 and 0 < hi <= 10**11
    assert re.fullmatch(r"[A-Za-z0-9_.-]*", gov), gov
    lines = text.split("\n")
    assert f"min_hz={lo}" in lines and f"max_hz={hi}" in lines and f"governor={gov}" in lines


# -------------------------------------------------------------- frequency tables (C) ---

def _table_reference(text: str):
    """What the table parser must accept: whitespace-separated plain decimals, 0 < v <= 1e11,
    at most 64 of them; None where it must refuse."""
    body = text.rstrip(" \t\n\r\0").split("\0")[0]
    tokens = [t for t in re.split(r"[ \t\n]+", body) if t]
    if not tokens or len(tokens) > 64:
        return None
    if not all(t.isascii() and t.isdigit() for t in tokens):
        return None
    values = [int(t) for t in tokens]
    if any(v == 0 or v > 10**11 for v in values):
        return None
    return tuple(sorted(values))


@profile(400)
@given(text=st.one_of(
    st.lists(st.one_of(_level.map(str), st.integers(-10**13, 10**13).map(str),
                       st.text("0123456789-+x. \t\n", min_size=1, max_size=12)),
             max_size=20).map(" ".join),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=200)))
def test_frequency_table_parser(shared, text):
    board, _ = shared
    TRIED["frequency table"] += 1
    table = board.devfreq_dir / "available_frequencies"
    good = table.read_bytes()
    table.write_bytes(text.encode()[:1500])
    text = table.read_bytes().decode(errors="replace")
    want = _table_reference(text) if "\ufffd" not in text else None
    try:
        got = _core.Board(str(board.root)).freqs_hz
    except PydvfsError as e:
        assert want is None, (text, e)
        assert all(0x20 <= ord(c) < 0x7f for c in str(e)), str(e)  # never echoed raw
        return
    finally:
        table.write_bytes(good)  # the other tests share the board
    assert got == want


# ------------------------------------------------------------- hwmon rail values (C) ---

def _int_reference(text: str):
    """gc_parse_int's contract: blanks, an optional sign, digits, then only line-end blanks."""
    if len(text.encode()) >= 32:
        return None
    m = re.fullmatch(r"[ \t]*([+-]?)([0-9]+)[\n \t\r\0]*", text)
    if not m or len(m.group(2)) > 18:
        return None
    return int(m.group(1) + m.group(2))


@profile(150)
@given(text=st.one_of(st.integers(-5000, 5000).map(lambda v: f"{v}\n"),
                      st.text("0123456789-+ \t\nx.", max_size=12),
                      st.text(max_size=40)))
def test_hwmon_value_parser(shared, text):
    board, _ = shared
    TRIED["hwmon value"] += 1
    rail = board.rails["VDD_GPU_SOC"]
    rail.voltage_path.write_text("1000\n")
    rail.current_path.write_bytes(text.encode())
    want = _int_reference(rail.current_path.read_bytes().decode(errors="replace"))
    s = Sampler(rate_hz=2000, sysfs_root=board.root, rails=["VDD_GPU_SOC"])
    with s:
        time.sleep(0.01)  # a few rounds inside the window
    m = s.measurement
    r = "VDD_GPU_SOC"
    assume(m.samples >= 2)  # a starved machine may give none; nothing to check then
    if want is None or abs(want) > 1000000:
        assert m.failed_reads[r] >= 1 and m.energy_j[r] == 0 and not m.readings_ok
        assert m.interpolated_pct[r] > 99.0 and r in m.incomplete_rails
    elif want < 0:
        assert m.negative_readings[r] >= 1 and m.energy_j[r] == 0 and not m.readings_ok
    else:
        assert m.failed_reads[r] == 0 and m.readings_ok
        assert m.avg_power_w[r] == pytest.approx(want / 1000.0, rel=1e-6, abs=1e-9)


# ------------------------------------------------------------------- dataset rows ---

def _cell(col):
    nums = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                     st.just(""), st.sampled_from(["1e308", "inf", "-1", "abc", "0", "1.5"]))
    if col.kind is str:
        return st.one_of(st.text(max_size=8), st.just(""))
    return nums.map(str)


_row = st.fixed_dictionaries({c.name: _cell(c) for c in COLUMNS})


@profile(150)
@given(rows=st.lists(_row, min_size=1, max_size=4), cut=st.integers(0, 40))
def test_dataset_rows_checked(tmp_path_factory, rows, cut):
    from pydvfs.policy.curves import read_dataset

    TRIED["dataset rows"] += 1
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMN_NAMES)
    for r in rows:
        w.writerow([r[c] for c in COLUMN_NAMES])
    lines = buf.getvalue().splitlines()
    short = False
    if cut:  # a truncated last row
        last = next(csv.reader([lines[-1]]))
        keep = max(1, len(last) - cut)
        short = keep < len(COLUMN_NAMES)
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(last[:keep])
        lines[-1] = out.getvalue()
    path = tmp_path_factory.mktemp("rows") / "d.csv"
    path.write_text("\n".join(lines) + "\n")
    try:
        df = read_dataset(path)
    except InvalidValueError as e:
        assert str(path) in str(e)
        return
    assert not short, "a short row was accepted"
    for col in COLUMNS:  # accepted: finite, plausible numbers (empty cells are missing values)
        if col.kind is not str:
            v = pd_numeric(df[col.name]).dropna()
            lo, hi = UNIT_BOUNDS.get(col.unit, (-math.inf, math.inf))
            assert v.map(math.isfinite).all() and (v >= lo).all() and (v <= hi).all()
            if col.kind is int:
                assert (v == v.round()).all()


def pd_numeric(series):
    import pandas as pd

    return pd.to_numeric(series, errors="coerce")


@profile(150)
@given(content=st.one_of(st.binary(max_size=300), st.just(HEADER_LINE + b"a,b"),
                         st.binary(max_size=40).map(lambda b: HEADER_LINE + b)))
def test_dataset_writer_never_changes_a_foreign_file(tmp_path_factory, content):
    TRIED["dataset file"] += 1
    path = tmp_path_factory.mktemp("dw") / "d.csv"
    path.write_bytes(content)
    try:
        DatasetWriter(path).close()
    except InvalidValueError:
        assert path.read_bytes() == content  # refused: untouched
        return
    data = path.read_bytes()
    assert data.startswith(HEADER_LINE) and data.endswith(b"\n")
    assert content == b"" or content.startswith(HEADER_LINE)


# ------------------------------------------------------------------ workload specs ---

_kv = st.tuples(st.sampled_from(["name", "model", "task", "layers", "hidden", "seq_len", "heads", "params",
                                 "batch_size", "bogus", "seq-len"]),
                st.one_of(st.sampled_from(["bert", "pythia", "12", "768", "64.5", "0", "-3", "1e9", "nan",
                                           "inf", "x", ""]), st.text(max_size=6)))


@profile(400)
@given(spec=st.one_of(st.lists(_kv, max_size=8).map(lambda kvs: ",".join(f"{k}={v}" for k, v in kvs)),
                      st.text(max_size=60)))
def test_workload_spec_parser(spec):
    TRIED["workload spec"] += 1
    try:
        w = parse_workload(spec)
    except InvalidValueError:
        return
    assert w["model"] and int(w["layers"]) > 0 and int(w["hidden"]) > 0
    assert math.isfinite(float(w["seq_len"])) and float(w["seq_len"]) > 0
    for key in ("heads", "params", "batch_size"):
        if key in w:
            assert float(w[key]) == int(float(w[key])) > 0


# -------------------------------------------------------------------- CLI numbers ---

@profile(400)
@given(text=st.one_of(st.integers(-10**12, 10**12).map(str), st.text("0123456789+-.e x", max_size=12),
                      st.text(max_size=12)))
def test_cli_bounded_whole_numbers(text):
    import argparse

    TRIED["CLI whole number"] += 1
    parse = int_range(1, 100)
    m = re.fullmatch(r"\s*([+-]?[0-9]+)\s*", text)
    want = int(m.group(1)) if m and text.strip().isascii() else None
    try:
        got = parse(text)
    except argparse.ArgumentTypeError:
        assert want is None or not 1 <= want <= 100
        return
    assert got == want and 1 <= got <= 100


@pytest.fixture(scope="module")
def govcore_bin():
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True, capture_output=True)
    return str(REPO / "govcore" / "govcore")


@profile(150)
@given(text=st.one_of(st.floats(0, 2e6).map(lambda f: f"{f:.3f}"), st.integers(0, 10**7).map(str),
                      st.text("0123456789.xe+- ", min_size=1, max_size=10),
                      st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                              min_size=1, max_size=8)))
def test_govcore_clock_argument(govcore_bin, tmp_path_factory, text):
    TRIED["govcore MHz"] += 1
    assume(not text.startswith("-"))  # an option, not a value
    res = subprocess.run([govcore_bin, "--sysfs-root", "/nonexistent-root", "pin", text],
                         capture_output=True, text=True, errors="replace")
    # the one grammar (gc_parse_mhz, docs/cli.md "Clocks"): digits, an optional fraction of 1..6 digits
    plain = re.fullmatch(r"[0-9]+(\.[0-9]{1,6})?", text) and sum(c.isdigit() for c in text) <= 12
    ok = bool(plain) and 0 < float(text) <= 1e6
    try:  # pydvfs reads it with the same parser, through the extension
        _core.parse_mhz(text)
        assert ok, text
    except InvalidValueError:
        assert not ok, text
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert ("not a clock" in res.stderr) == (not ok), (text, res.stderr)


def test_inputs_tried():
    """The closing tally (hypothesis runs the tests above first, in file order)."""
    print("\ninputs tried per parser:", dict(TRIED), "total", sum(TRIED.values()))
    assert len(TRIED) == 8 and all(n >= 50 for n in TRIED.values()), TRIED

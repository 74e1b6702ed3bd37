"""The GLUE readers parse every shipped task file with the right row and label counts."""
from collections import Counter

import pytest

from pydvfs.errors import InvalidValueError
from pydvfs.workloads import glue

# (task, split) -> (rows, {label: count}); official GLUE counts, or the documented cut.
EXPECTED = {
    ("sst2", "train"): (16000, {0: 7129, 1: 8871}),  # first 16,000 of 67,349 rows
    ("sst2", "dev"): (872, {0: 428, 1: 444}),
    ("cola", "train"): (8551, {0: 2528, 1: 6023}),
    ("cola", "dev"): (1043, {0: 322, 1: 721}),
    ("mrpc", "train"): (3668, {0: 1194, 1: 2474}),
    ("mrpc", "dev"): (408, {0: 129, 1: 279}),
    ("rte", "train"): (2490, {0: 1249, 1: 1241}),  # 0 = entailment
    ("rte", "dev"): (277, {0: 146, 1: 131}),
    ("wnli", "train"): (635, {0: 323, 1: 312}),
    ("wnli", "dev"): (71, {0: 40, 1: 31}),
    ("qnli", "dev"): (4000, {0: 1991, 1: 2009}),  # first 4,000 of 5,463 dev rows
    ("qqp", "train"): (9, {0: 6, 1: 3}),
    ("qqp", "dev"): (9, {0: 5, 1: 4}),
}


@pytest.mark.parametrize("task,split", sorted(EXPECTED))
def test_classification_counts(task, split):
    rows = glue.read_split(task, split)
    n, labels = EXPECTED[(task, split)]
    assert len(rows) == n
    assert dict(Counter(r.label for r in rows)) == labels
    assert all(r.text_a for r in rows)
    pair = glue.TASKS[task].name not in ("sst2", "cola")
    assert all((r.text_b is not None) == pair for r in rows)


def test_stsb_scores_are_floats_in_range():
    for split, n in (("train", 5749), ("dev", 1500)):
        rows = glue.read_split("stsb", split)
        assert len(rows) == n
        scores = [r.label for r in rows]
        assert all(isinstance(s, float) and 0.0 <= s <= 5.0 for s in scores)
    dev = glue.read_split("stsb", "dev")
    assert dev[0].text_a == "A man with a hard hat is dancing." and dev[0].label == 5.0


def test_layout_details():
    # MRPC: the BOM header is skipped, text keeps its quotes (no CSV unquoting).
    mrpc = glue.read_split("mrpc", "dev")
    assert mrpc[0].label == 1 and mrpc[0].text_b.startswith('"The foodservice pie')
    # CoLA has no header: its first line is data.
    cola = glue.read_split("cola", "dev")
    assert cola[0].text_a == "The sailors rode the breeze clear of the rocks."


def test_heldout_split_without_train_is_disjoint():
    train, held = glue.train_and_heldout("qnli", 100)
    assert len(train) == 3900 and len(held) == 100
    assert held[0] is not train[-1] and held[0].text_a != train[-1].text_a
    train, held = glue.train_and_heldout("rte", 50)
    assert len(train) == 2490 and len(held) == 50


def test_bad_input(tmp_path):
    with pytest.raises(InvalidValueError):
        glue.read_split("mnli", "dev")
    with pytest.raises(InvalidValueError):
        glue.read_split("qnli", "train")
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\n")
    with pytest.raises(glue.GlueDataError, match="3 fields"):
        glue.read_split("rte", "dev", glue_dir=str(tmp_path))

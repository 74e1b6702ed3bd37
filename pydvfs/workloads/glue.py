"""Readers for the GLUE task files shipped in ``pydvfs/workloads/glue/`` (see README.md there).

Each GLUE task has its own TSV layout; this module turns every one of them into a list of
:class:`Example` (text_a, optional text_b, label). Files are read as raw tab-separated text
(no CSV quoting), as the GLUE loaders do: quotes inside sentences are part of the text.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional, Union

from ..errors import InvalidValueError, PydvfsError

GLUE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "glue")

Label = Union[int, float]


class GlueDataError(PydvfsError):
    """A GLUE file is missing or a row does not have the task's layout."""


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: Optional[str]
    label: Label  # class index, or the similarity score (0..5) for STS-B


@dataclass(frozen=True)
class TaskSpec:
    """How one task's files look and what its label is."""

    name: str  # our short name, e.g. "sst2"
    folder: str  # GLUE folder name, e.g. "SST-2"
    files: dict  # split ("train", "dev") -> file name in the folder
    header: bool  # first line is a header row
    n_columns: int  # fields per row
    parse: Callable[[list], Example]  # fields -> Example
    num_labels: int  # 1 = regression
    note: str = ""  # what differs from the official split (shown in --json and docs)

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1


def _binary(value: str) -> int:
    if value not in ("0", "1"):
        raise ValueError(f"label {value!r} is not 0 or 1")
    return int(value)


_ENTAILMENT = {"entailment": 0, "not_entailment": 1}  # label order of the GLUE processors


def _entail(value: str) -> int:
    if value not in _ENTAILMENT:
        raise ValueError(f"label {value!r} is not entailment/not_entailment")
    return _ENTAILMENT[value]


TASKS: dict[str, TaskSpec] = {
    "sst2": TaskSpec(
        "sst2", "SST-2", {"train": "train.tsv", "dev": "dev.tsv"}, True, 2,
        lambda f: Example(f[0], None, _binary(f[1])), 2,
        note="train is the first 16,000 of 67,349 rows of the official train set",
    ),
    "cola": TaskSpec(
        "cola", "CoLA", {"train": "train.tsv", "dev": "dev.tsv"}, False, 4,
        lambda f: Example(f[3], None, _binary(f[1])), 2,
    ),
    "mrpc": TaskSpec(
        "mrpc", "MRPC", {"train": "train.tsv", "dev": "dev.tsv"}, True, 5,
        lambda f: Example(f[3], f[4], _binary(f[0])), 2,
    ),
    "stsb": TaskSpec(
        "stsb", "STS-B", {"train": "train.tsv", "dev": "dev.tsv"}, True, 10,
        lambda f: Example(f[7], f[8], float(f[9])), 1,
    ),
    "rte": TaskSpec(
        "rte", "RTE", {"train": "train.tsv", "dev": "dev.tsv"}, True, 4,
        lambda f: Example(f[1], f[2], _entail(f[3])), 2,
    ),
    "wnli": TaskSpec(
        "wnli", "WNLI", {"train": "train.tsv", "dev": "dev.tsv"}, True, 4,
        lambda f: Example(f[1], f[2], _binary(f[3])), 2,
    ),
    "qnli": TaskSpec(
        "qnli", "QNLI", {"dev": "dev.tsv"}, True, 4,
        lambda f: Example(f[1], f[2], _entail(f[3])), 2,
        note=(
            "no train set available: the first 4,000 of 5,463 dev rows are shipped and serve "
            "as both training source and held-out slice (disjoint rows)"
        ),
    ),
    "qqp": TaskSpec(
        "qqp", "QQP", {"train": "train_first9_SAMPLE.tsv", "dev": "dev_first9_SAMPLE.tsv"}, True, 6,
        lambda f: Example(f[3], f[4], _binary(f[5])), 2,
        note="only 9-row samples of train and dev are available: a smoke test, not a workload",
    ),
}


def task_spec(task: str) -> TaskSpec:
    try:
        return TASKS[task.lower()]
    except KeyError:
        raise InvalidValueError(
            f"unknown task {task!r}; known: {', '.join(sorted(TASKS))}"
        ) from None


def read_split(task: str, split: str, glue_dir: str = GLUE_DIR) -> list[Example]:
    """All rows of one split of ``task`` as Examples, in file order."""
    spec = task_spec(task)
    if split not in spec.files:
        raise InvalidValueError(
            f"task {spec.name} has no {split!r} split here (has: {', '.join(spec.files)})"
        )
    path = os.path.join(glue_dir, spec.folder, spec.files[split])
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:  # -sig drops MRPC's BOM
            lines = fh.read().split("\n")
    except OSError as e:
        raise GlueDataError(f"cannot read {path}: {e.strerror}") from e
    if lines and lines[-1] == "":
        lines.pop()
    if spec.header:
        lines = lines[1:]
    out = []
    for lineno, line in enumerate(lines, start=2 if spec.header else 1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != spec.n_columns:
            raise GlueDataError(
                f"{path}:{lineno}: {len(fields)} fields, {spec.name} rows have {spec.n_columns}"
            )
        try:
            out.append(spec.parse(fields))
        except ValueError as e:
            raise GlueDataError(f"{path}:{lineno}: {e}") from e
    return out


def train_and_heldout(task: str, heldout_examples: int, glue_dir: str = GLUE_DIR):
    """(training rows, held-out rows) for ``task``.

    With a train split: train on all of it, hold out the first ``heldout_examples`` dev rows.
    Without one (QNLI): the last ``heldout_examples`` dev rows are held out and the rest trains.
    ``heldout_examples=0`` means no held-out slice.
    """
    if heldout_examples < 0:
        raise InvalidValueError("held-out slice size must be >= 0")
    spec = task_spec(task)
    dev = read_split(spec.name, "dev", glue_dir)
    if "train" in spec.files:
        return read_split(spec.name, "train", glue_dir), dev[:heldout_examples]
    if heldout_examples == 0:
        return dev, []
    if heldout_examples >= len(dev):
        raise InvalidValueError(
            f"{spec.name}: held-out slice of {heldout_examples} leaves no training rows "
            f"(dev has {len(dev)})"
        )
    return dev[:-heldout_examples], dev[-heldout_examples:]

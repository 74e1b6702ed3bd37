"""A model folder's tree read as data: what ``evaluate`` (and any verb that touches no board)
scores with, so that no code from the folder runs, as root or not.

``pydvfs train`` writes the tree twice: ``policy_tree.c`` (the m2cgen C of the fitted tree, the
file ``manifest.txt`` vouches for by its SHA-256) and ``policy.so`` (that file compiled). Loading
``policy.so`` runs its code, so govcore's loader (govcore/policy_load.c) refuses a folder anyone
but root or the caller could have changed when it runs as root; a folder under ``/tmp`` is such
a folder. That check stays where a board is pinned (``apply``, ``run``, ``govcore apply``, the
daemon). A verb that only scores a tree against data reads ``policy_tree.c`` instead: this
module parses the one form :mod:`pydvfs.policy.to_c` writes (m2cgen's ``if (input[i] <= t)``
tree with ``memcpy`` leaves, or a fixed clock's ``output[0] = 1.0``, then the
``gc_tree_model`` initialiser) and walks it. The thresholds are the C file's decimal literals,
read into the same doubles the compiler makes of them; the features come from govcore's
``gc_features`` (:func:`pydvfs._core.tree_features`, float32-rounded) and the class is the first
of the highest score, as ``gc_propose_tree`` takes it: the same clock as the compiled tree for
every workload (``tests/pydvfs/policy/test_tree_data.py`` checks both against each other).

Anything else in the file (a hand edit, another generator) is refused in one line, as is a
``policy_tree.c`` the manifest does not vouch for.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import _core
from ..errors import ManifestMismatchError, PolicyLoadError
from .manifest import MANIFEST_NAME, TREE_C, read_manifest, sha256_file

_TOKEN = re.compile(r'\s+|/\*.*?\*/|//[^\n]*|#[^\n]*|"(?:[^"\\]|\\.)*"|'
                    r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|<=|>=|==|!=|[-+*/<>{}()\[\];,=&]",
                    re.S)
_OPS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
# gc_tree_model's fields in the order of its initialiser (govcore/policy.h; export._model_c)
_FIELDS = ("name", "score", "n_features", "feature_names", "n_classes", "classes_mhz", "default_util_pct",
           "ffg_mhz", "data_file", "data_sha256", "trained_utc", "board_id", "n_levels", "levels_mhz")
# ...then what the tree knows of its own choices (export.py writes them; a folder trained before
# they existed has the fields above only)
_KNOWS_FIELDS = ("origin", "measure", "calibrated", "has_savings", "class_saving_pct", "class_spread_pct",
                 "ffg_saving_pct", "ffg_spread_pct")


class TreeSourceError(PolicyLoadError):
    """policy_tree.c is not in the form ``pydvfs train`` writes."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise TreeSourceError(f"unexpected text at offset {pos}: {text[pos:pos + 20]!r}")
        tok = m.group(0)
        pos = m.end()
        if not (tok.isspace() or tok.startswith(("/*", "//", "#"))):
            out.append(tok)
    return out


def _unquote(tok: str) -> str:
    return re.sub(r"\\(.)", r"\1", tok[1:-1])


class _Parser:
    def __init__(self, tokens: list[str]):
        self.t, self.i = tokens, 0

    def peek(self, k: int = 0) -> str | None:
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self, *want: str) -> str:
        tok = self.peek()
        if tok is None or (want and tok not in want):
            raise TreeSourceError(f"expected {' or '.join(want) or 'more'}, found {tok!r} (token {self.i})")
        self.i += 1
        return tok

    def number(self) -> float:
        tok = self.take()
        try:
            return float(tok)
        except ValueError:
            raise TreeSourceError(f"expected a number, found {tok!r}") from None

    def integer(self) -> int:
        v = self.number()
        if v != int(v):
            raise TreeSourceError(f"expected an integer, found {v!r}")
        return int(v)

    # --- the scoring function -------------------------------------------------------------
    def block(self) -> list:
        self.take("{")
        stmts = []
        while self.peek() != "}":
            stmts.append(self.statement())
        self.take("}")
        return stmts

    def statement(self):
        tok = self.peek()
        if tok == "double":  # double var0[K];
            self.take()
            self.take()
            self.take("[")
            self.integer()
            self.take("]")
            self.take(";")
            return ("nop",)
        if tok == "if":  # if (input[i] OP t) {...} else {...}
            self.take()
            self.take("(")
            self.take("input")
            self.take("[")
            feature = self.integer()
            self.take("]")
            op = self.take(*_OPS)
            threshold = self.number()
            self.take(")")
            then = self.block()
            other = []
            if self.peek() == "else":
                self.take()
                other = self.statement_or_block()
            return ("if", feature, op, threshold, then, other)
        if tok == "memcpy":  # memcpy(DST, (double[]){...} | SRC, K * sizeof(double));
            self.take()
            self.take("(")
            dst = self.take()
            self.take(",")
            if self.peek() == "(":
                self.take("(")
                self.take("double")
                self.take("[")
                self.take("]")
                self.take(")")
                self.take("{")
                values = [self.number()]
                while self.peek() == ",":
                    self.take()
                    values.append(self.number())
                self.take("}")
                src = tuple(values)
            else:
                src = self.take()
            self.take(",")
            n = self.integer()
            self.take("*")
            self.take("sizeof")
            self.take("(")
            self.take("double")
            self.take(")")
            self.take(")")
            self.take(";")
            if isinstance(src, tuple) and len(src) != n:
                raise TreeSourceError(f"a leaf of {len(src)} scores copied as {n}")
            return ("copy", dst, src)
        if tok == "(":  # (void)input;
            self.take()
            self.take("void")
            self.take(")")
            self.take()
            self.take(";")
            return ("nop",)
        if tok == "output":  # output[0] = 1.0;  (a fixed clock: one class)
            self.take()
            self.take("[")
            k = self.integer()
            self.take("]")
            self.take("=")
            v = self.number()
            self.take(";")
            return ("set", k, v)
        raise TreeSourceError(f"unexpected statement at {tok!r}")

    def statement_or_block(self) -> list:
        return self.block() if self.peek() == "{" else [self.statement()]

    # --- the initialisers -----------------------------------------------------------------
    def initialiser(self):
        if self.peek() == "{":
            self.take()
            items = []
            while self.peek() != "}":
                items.append(self.initialiser())
                if self.peek() == ",":
                    self.take()
            self.take("}")
            return items
        tok = self.take()
        if tok.startswith('"'):
            return _unquote(tok)
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            return tok
        return float(tok)


def _run(stmts: list, x: tuple, env: dict, out: dict) -> None:
    for s in stmts:
        kind = s[0]
        if kind == "if":
            _, feature, op, threshold, then, other = s
            _run(then if _OPS[op](x[feature], threshold) else other, x, env, out)
        elif kind == "copy":
            _, dst, src = s
            values = src if isinstance(src, tuple) else env[src]
            if dst == "output":
                out.update(enumerate(values))
            else:
                env[dst] = values
        elif kind == "set":
            out[s[1]] = s[2]


@dataclass(frozen=True)
class TreeData:
    """A tree read from a ``policy_tree.c``: the interface of :class:`pydvfs._core.Tree` that
    scoring needs (``propose``, ``features``, ``ffg_mhz``, ``name``, its training table...)."""

    name: str
    feature_names: tuple
    classes_mhz: tuple
    default_util_pct: tuple
    ffg_mhz: float
    provenance: dict
    board_id: str | None
    levels_mhz: tuple
    body: list = field(repr=False, default_factory=list)

    def features(self, workload: tuple) -> tuple:
        """The feature vector the tree sees (govcore's gc_features)."""
        return _core.tree_features(self.feature_names, self.default_util_pct, workload)

    def scores(self, features) -> list[float]:
        out: dict = {}
        _run(self.body, tuple(features), {}, out)
        if sorted(out) != list(range(len(self.classes_mhz))):
            raise TreeSourceError(f"the tree scored {len(out)} classes, it has {len(self.classes_mhz)}")
        return [out[i] for i in range(len(self.classes_mhz))]

    def propose(self, workload: tuple) -> float:
        """The clock (MHz; 0: MAXN) the tree proposes: the first class of the highest score."""
        p = self.scores(self.features(workload))
        best = 0
        for i in range(1, len(p)):
            if p[i] > p[best]:
                best = i
        return self.classes_mhz[best]


def parse_tree_c(text: str) -> TreeData:
    """A :class:`TreeData` from the text of a ``policy_tree.c`` (the form export.py writes)."""
    p = _Parser(_tokens(text))
    body = None
    arrays: dict = {}
    model = None
    while p.peek() is not None:
        tok = p.take()
        if tok == "gc_tree_score" and p.peek() == "(":
            while p.take() != ")":
                pass
            body = p.block()
        elif tok in ("feature_names", "classes_mhz") and p.peek() == "[":
            p.take("[")
            p.take("]")
            p.take("=")
            arrays[tok] = p.initialiser()
            p.take(";")
        elif tok == "GC_TREE_SYMBOL" and p.peek() == "=":
            p.take("=")
            model = p.initialiser()
            p.take(";")
    if body is None or model is None or set(arrays) != {"feature_names", "classes_mhz"}:
        raise TreeSourceError("no m2cgen scoring function, feature names, class clocks and gc_tree_model "
                              "initialiser found")
    if len(model) not in (len(_FIELDS), len(_FIELDS) + len(_KNOWS_FIELDS)):
        raise TreeSourceError(f"the gc_tree_model initialiser has {len(model)} fields, expected {len(_FIELDS)} "
                              f"or {len(_FIELDS) + len(_KNOWS_FIELDS)}")
    m = dict(zip(_FIELDS + _KNOWS_FIELDS, model))
    names, classes = tuple(arrays["feature_names"]), tuple(float(c) for c in arrays["classes_mhz"])
    if m["n_features"] != len(names) or m["n_classes"] != len(classes) \
            or (m["n_levels"] and m["n_levels"] != len(m["levels_mhz"])):
        raise TreeSourceError("the gc_tree_model initialiser's counts do not match its arrays")
    return TreeData(name=m["name"], feature_names=names, classes_mhz=classes,
                    default_util_pct=tuple(float(u) for u in m["default_util_pct"]), ffg_mhz=float(m["ffg_mhz"]),
                    provenance={"data_file": m["data_file"], "data_sha256": m["data_sha256"],
                                "trained_utc": m["trained_utc"]},
                    board_id=m["board_id"] or None,
                    levels_mhz=tuple(float(f) for f in m["levels_mhz"][:int(m["n_levels"])]), body=body)


def read_tree(model_dir: str | os.PathLike) -> TreeData:
    """The tree of a model folder, read as data from its ``policy_tree.c`` once its manifest
    vouches for that file (its format is this build's, the SHA-256 matches) and the feature
    names and class clocks agree with the manifest's. No code of the folder runs."""
    d = Path(model_dir)
    if not d.is_dir():
        raise PolicyLoadError(f"{d}: no such model folder (a folder written by `pydvfs train`)")
    try:
        fields = read_manifest(d)
    except FileNotFoundError:
        raise ManifestMismatchError(f"{d / MANIFEST_NAME} is missing: not a folder written by `pydvfs train` "
                                    "(train again)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestMismatchError(f"{d / MANIFEST_NAME} cannot be read ({e})") from None
    if fields.get("format") != str(_core.MODEL_FORMAT):
        raise ManifestMismatchError(f"{d / MANIFEST_NAME} is of format {fields.get('format')!r}, this pydvfs reads "
                                    f"{_core.MODEL_FORMAT}: train again")
    src = d / TREE_C
    if not src.is_file():
        raise ManifestMismatchError(f"{src} is missing: train again")
    if fields.get("tree_sha256") != sha256_file(src):
        raise ManifestMismatchError(f"{src} does not match {MANIFEST_NAME} (changed after training?): train again")
    try:
        tree = parse_tree_c(src.read_text())
    except UnicodeDecodeError as e:
        raise TreeSourceError(f"{src} is not text ({e})") from None
    except TreeSourceError as e:
        raise TreeSourceError(f"{src}: {e}") from None
    if " ".join(tree.feature_names) != fields.get("features") or \
            [float(c) for c in fields.get("classes_mhz", "").split()] != list(tree.classes_mhz):
        raise ManifestMismatchError(f"{src}: its feature names or class clocks are not the manifest's: train again")
    return tree


__all__ = ["TreeData", "TreeSourceError", "parse_tree_c", "read_tree"]

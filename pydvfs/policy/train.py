"""Train the frequency model (paper A, steps 3-4): label each workload with its energy-optimal
clock, choose a decision tree's hyper-parameters by leave-one-out CV over workloads, compare it
with the alternatives by *energy regret*, and write a model folder (tree, rules, picture, C).

Regret of a choice = energy at the chosen clock / energy at the best clock - 1, measured on the
held-out workload's own curve. Accuracy (did it hit the exact best level) is reported too, but
on flat-bottomed U-curves a neighbouring level costs almost nothing, so regret decides.
"""
from __future__ import annotations

import abc
import itertools
import json
import pickle
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..errors import InvalidValueError
from .curves import Curve
from .export import compile_policy, tree_to_c
from .features import PAPER_FEATURES, ROOFLINE_FEATURES, feature_vector

# The class that means "leave the board at MAXN" (govcore: a proposal of 0 MHz).
MAXN_CLASS = 0.0
FEATURE_SETS = {"paper": PAPER_FEATURES, "roofline": PAPER_FEATURES + ROOFLINE_FEATURES}
TREE_GRID = {"max_depth": (2, 3, 4, 5, None), "min_samples_leaf": (1, 2, 3),
             "criterion": ("gini", "entropy")}


def default_util(curves: Sequence[Curve]) -> tuple[float, float]:
    """Median measured utilisation per family (encoder, decoder): used when a user's workload
    comes without one."""
    out = []
    for decoder in (False, True):
        u = [c.workload.util_pct for c in curves if c.workload.is_decoder == decoder and c.workload.util_pct is not None]
        u = u or [c.workload.util_pct for c in curves if c.workload.util_pct is not None] or [50.0]
        out.append(float(statistics.median(u)))
    return out[0], out[1]


def features_of(curve: Curve, names, util_default: tuple[float, float]) -> list[float]:
    w = curve.workload
    util = w.util_pct if w.util_pct is not None else util_default[int(w.is_decoder)]
    return feature_vector(names, w.is_decoder, util, w.layers, w.hidden, w.seq_len)


# ------------------------------------------------------------------ the candidates
class Chooser(abc.ABC):
    """Something that, fitted on some workloads' curves, picks a clock for another workload."""

    name = "?"

    def fit(self, curves: Sequence[Curve]) -> "Chooser":
        return self

    @abc.abstractmethod
    def choose(self, curve: Curve) -> float | None:
        """The clock (MHz) for a workload; None means MAXN."""


class FixedClock(Chooser):
    """FFG: the one clock with the lowest mean normalised energy over the training workloads."""

    name = "ffg (best fixed clock)"

    def fit(self, curves):
        common = set(curves[0].freqs_mhz).intersection(*(c.freqs_mhz for c in curves[1:]))
        if not common:
            raise InvalidValueError("the workloads share no measured clock")
        self.mhz = min(sorted(common), key=lambda f: sum(c.energy_at(f) / c.best_energy_j for c in curves))
        return self

    def choose(self, curve):
        return self.mhz


class PaperRules(Chooser):
    """The paper's published rules, as compiled into govcore."""

    name = "rules (paper A)"

    def choose(self, curve):
        from .. import _core
        return _core.propose_rules(curve.workload.as_core())


class MaxN(Chooser):
    name = "maxn (board default)"

    def choose(self, curve):
        return None


class Classifier(Chooser):
    """A classifier from workload features to the best clock."""

    def __init__(self, name: str, make: Callable, features=PAPER_FEATURES):
        self.name, self.make, self.features = name, make, tuple(features)

    def fit(self, curves):
        self.util = default_util(curves)
        X = [features_of(c, self.features, self.util) for c in curves]
        y = [MAXN_CLASS if c.label_mhz is None else c.label_mhz for c in curves]
        self.model = self.make()
        self.model.fit(X, y)
        return self

    def choose(self, curve):
        mhz = float(self.model.predict([features_of(curve, self.features, self.util)])[0])
        return None if mhz == MAXN_CLASS else mhz


class CurveRegression(Chooser):
    """Predict the shape of the energy curve (energy / the workload's mean energy) from features
    and clock, then take its argmin over the workload's clocks."""

    def __init__(self, name: str, make: Callable, features=PAPER_FEATURES):
        self.name, self.make, self.features = name, make, tuple(features)

    def fit(self, curves):
        self.util = default_util(curves)
        X, y = [], []
        for c in curves:
            base = features_of(c, self.features, self.util)
            mean_e = sum(c.energy_j) / len(c.energy_j)
            for f, e in zip(c.freqs_mhz, c.energy_j):
                X.append(base + [f])
                y.append(e / mean_e)
        self.model = self.make()
        self.model.fit(X, y)
        return self

    def choose(self, curve):
        base = features_of(curve, self.features, self.util)
        pred = self.model.predict([base + [f] for f in curve.freqs_mhz])
        return curve.freqs_mhz[int(min(range(len(pred)), key=lambda i: pred[i]))]


def tree_maker(**params):
    from sklearn.tree import DecisionTreeClassifier
    return lambda: DecisionTreeClassifier(random_state=0, **params)


# ------------------------------------------------------------------ leave-one-out CV
@dataclass
class Score:
    name: str
    choices_mhz: list
    accuracy: float
    mean_regret_pct: float
    max_regret_pct: float
    mean_saving_pct: float
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "loocv_accuracy": round(self.accuracy, 4),
                "mean_regret_pct": round(self.mean_regret_pct, 3),
                "max_regret_pct": round(self.max_regret_pct, 3),
                "mean_saving_vs_maxn_pct": round(self.mean_saving_pct, 3), "params": self.params}


def score(name: str, curves: Sequence[Curve], choices: Sequence, params=None) -> Score:
    regrets = [c.regret(f) * 100 for c, f in zip(curves, choices)]
    hits = [(f is None and c.label_mhz is None) or
            (f is not None and c.label_mhz is not None and c.nearest_mhz(f) == c.label_mhz)
            for c, f in zip(curves, choices)]
    savings = [c.saving_vs_maxn(f) * 100 for c, f in zip(curves, choices)]
    return Score(name, list(choices), sum(hits) / len(hits), statistics.fmean(regrets), max(regrets),
                 statistics.fmean(savings), params or {})


def loocv(make_chooser: Callable[[], Chooser], curves: Sequence[Curve]) -> list:
    """Each workload's choice by a chooser fitted on all the others."""
    out = []
    for i, held_out in enumerate(curves):
        rest = [c for j, c in enumerate(curves) if j != i]
        out.append(make_chooser().fit(rest).choose(held_out))
    return out


def select_tree(curves: Sequence[Curve], feature_sets=("paper", "roofline")) -> tuple[Score, dict[str, Score]]:
    """The tree hyper-parameters (and feature set) with the lowest LOOCV mean regret; ties go
    to the simpler tree. Also returns the best score per feature set, to show what features buy."""
    best_per_set: dict[str, Score] = {}
    for set_name in feature_sets:
        feats = FEATURE_SETS[set_name]
        for depth, leaf, crit in itertools.product(*TREE_GRID.values()):
            params = {"max_depth": depth, "min_samples_leaf": leaf, "criterion": crit}
            choices = loocv(lambda: Classifier("tree", tree_maker(**params), feats), curves)
            s = score(f"tree ({set_name} features)", curves, choices, {**params, "features": set_name})
            key = (round(s.mean_regret_pct, 6), depth or 99, -leaf)
            cur = best_per_set.get(set_name)
            if cur is None or key < (round(cur.mean_regret_pct, 6), cur.params["max_depth"] or 99,
                                     -cur.params["min_samples_leaf"]):
                best_per_set[set_name] = s
    best = min(best_per_set.values(), key=lambda s: (round(s.mean_regret_pct, 6),
                                                      list(FEATURE_SETS).index(s.params["features"])))
    return best, best_per_set


def compare(curves: Sequence[Curve]) -> tuple[Score, list[Score]]:
    """Every candidate by LOOCV over workloads; the tree's hyper-parameters selected inside."""
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    tree, per_set = select_tree(curves)
    rows = [score("maxn (board default)", curves, [None] * len(curves)),
            score("ffg (best fixed clock)", curves, loocv(FixedClock, curves)),
            score("rules (paper A)", curves, [PaperRules().choose(c) for c in curves])]
    rows += sorted(per_set.values(), key=lambda s: s.name)
    others = {
        "knn (k=3)": lambda: Classifier("knn", lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(3))),
        "random forest": lambda: Classifier("rf", lambda: RandomForestClassifier(50, random_state=0)),
        "gradient boosting": lambda: Classifier("gb", lambda: GradientBoostingClassifier(n_estimators=30, random_state=0)),
        "curve regression (random forest, argmin)": lambda: CurveRegression(
            "rf-curve", lambda: RandomForestRegressor(50, random_state=0)),
        "curve regression (gradient boosting, argmin)": lambda: CurveRegression(
            "gb-curve", lambda: GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=0)),
    }
    for name, make in others.items():
        rows.append(score(name, curves, loocv(make, curves)))
    rows.append(score("labels (best clock; MAXN where spiky)", curves, [c.label_mhz for c in curves]))
    rows.append(score("oracle (best clock per workload)", curves, [c.best_mhz for c in curves]))
    return tree, rows


# ------------------------------------------------------------------ the model folder
def train(curves: Sequence[Curve], out_dir: str | Path, source: str, cc: str | None = None) -> dict:
    """Select, fit on all workloads, and write the model folder. Returns the metrics."""
    if len(curves) < 3:
        raise InvalidValueError(f"need at least 3 workloads to train with leave-one-out CV, got {len(curves)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tree_score, table = compare(curves)
    params = {k: v for k, v in tree_score.params.items() if k != "features"}
    feats = FEATURE_SETS[tree_score.params["features"]]
    chooser = Classifier("tree", tree_maker(**params), feats).fit(curves)
    clf = chooser.model
    ffg = FixedClock().fit(curves).mhz
    util = default_util(curves)

    with open(out / "model.pkl", "wb") as f:
        pickle.dump(clf, f)
    meta = {
        "features": list(feats),
        "classes_mhz": [float(c) for c in clf.classes_],
        "ffg_mhz": ffg,
        "default_util_pct": list(util),
        "tree_params": params,
        "trained_on": [c.name for c in curves],
        "source": source,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    from sklearn.tree import export_text
    rules = export_text(clf, feature_names=list(feats), class_names=class_names(clf), decimals=1)
    (out / "rules.txt").write_text(rules)
    c_src = tree_to_c(clf, feats, util, ffg, name=f"trained: {source}", source=source, tool="pydvfs train")
    (out / "policy_tree.c").write_text(c_src)
    compile_policy(out / "policy_tree.c", out / "policy.so", cc)
    _plot_tree(clf, feats, out)
    metrics = {
        "n_workloads": len(curves),
        "selected": tree_score.to_dict(),
        "table": [s.to_dict() for s in table],
        "loocv_choices": {c.name: {"best_mhz": c.best_mhz, "label_mhz": c.label_mhz, "tree_mhz": f}
                          for c, f in zip(curves, tree_score.choices_mhz)},
        "ffg_mhz": ffg,
        "rules": rules,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def class_names(clf) -> list[str]:
    return ["MAXN" if c == MAXN_CLASS else f"{c:g} MHz" for c in clf.classes_]


def _plot_tree(clf, feats, out: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from sklearn.tree import plot_tree
    except ImportError:
        return  # plots are optional (extra `plot`)
    depth = clf.get_depth()
    fig, ax = plt.subplots(figsize=(max(8, 3 * 2 ** min(depth, 4) / 2), 2 + 1.6 * depth))
    plot_tree(clf, feature_names=list(feats), class_names=class_names(clf),
              filled=True, impurity=False, rounded=True, fontsize=8, ax=ax)
    ax.set_title("Energy-optimal GPU clock: learned decision tree\n"
                 f"value = workloads per class, in this order: {', '.join(class_names(clf))}", fontsize=10)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out / f"tree.{ext}", dpi=120)
    plt.close(fig)


def format_table(rows: list[dict]) -> str:
    head = f"{'policy':46s} {'LOOCV acc':>9s} {'regret mean':>11s} {'regret max':>10s} {'saving vs MAXN':>14s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['name']:46s} {r['loocv_accuracy']:9.2f} {r['mean_regret_pct']:10.2f}% "
                     f"{r['max_regret_pct']:9.2f}% {r['mean_saving_vs_maxn_pct']:13.2f}%")
    return "\n".join(lines)

"""Train the frequency model (paper A, steps 3-4): label each workload with its energy-optimal
clock, choose a decision tree's hyper-parameters by leave-one-out CV over workloads, compare it
with the alternatives by *energy regret*, and write a model folder (tree, rules, picture, C).

Labels and scores come from each workload's fitted physical curve (:mod:`pydvfs.model.curve`),
not from its raw noisy means. Regret of a choice = energy at the chosen level / energy at the
best level - 1, on the held-out workload's fitted curve. Accuracy counts a choice within noise
of the best as a hit; on flat-bottomed U-curves a neighbouring level costs almost nothing, so
regret decides.

Selection is honest: FFG (the best fixed clock) is a candidate like every model, and the tree is
shipped only when it beats FFG's LOOCV regret beyond the noise (a paired Wilcoxon signed-rank
test over workloads, per-workload differences within the curves' noise counted as ties);
otherwise the model folder's policy is FFG. Leave-one-*model*-out CV (every task of an
architecture held out at once) is scored beside leave-one-workload-out.
"""
from __future__ import annotations

import abc
import functools
import itertools
import json
import pickle
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import InvalidValueError
from ..eta import track
from ..model.curve import DEFAULT_VF, VFCurve
from ..model.features import METHOD_FEATURES, PAPER_FEATURES, ROOFLINE_FEATURES, workload_features
from . import manifest
from .curves import Curve, noise_summary
from .to_c import compile_policy, constant_to_c, tree_to_c

# Classes are clocks in integer kHz (114.75 MHz -> 114750), whatever the board's table: a
# classifier needs discrete labels. The class that means "leave the board at MAXN" is 0
# (govcore: a proposal of 0 MHz).
MAXN_CLASS = 0
SIGNIFICANCE = 0.05  # the tree must beat FFG with a one-sided p below this
FEATURE_SETS = {"paper": PAPER_FEATURES, "roofline": PAPER_FEATURES + ROOFLINE_FEATURES,
                "method": PAPER_FEATURES + ROOFLINE_FEATURES + METHOD_FEATURES}


def feature_sets_for(curves) -> tuple:
    """The feature sets worth a LOOCV on ``curves``: the method features (how a workload trains)
    only where the workloads do not all train the same way (else they are constant)."""
    kinds = {(c.workload.peft, c.workload.precision, c.workload.weight_bits_effective) for c in curves}
    return ("paper", "roofline", "method") if len(kinds) > 1 else ("paper", "roofline")
TREE_GRID = {"max_depth": (2, 3, 4, 5, None), "min_samples_leaf": (1, 2, 3),
             "criterion": ("gini", "entropy")}


def mhz_to_class(mhz: float | None) -> int:
    """The class of a clock: integer kHz; MAXN (None) is class 0."""
    return MAXN_CLASS if mhz is None else round(float(mhz) * 1000.0)


def class_to_mhz(cls) -> float | None:
    k = int(cls)
    return None if k == MAXN_CLASS else k / 1000.0


def classes_mhz(clf) -> list[float]:
    """The classifier's classes as clocks in MHz, in its order (0.0: MAXN), as exported to C."""
    return [int(c) / 1000.0 for c in clf.classes_]


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
    return workload_features(names, w, util)


# ------------------------------------------------------------------ the candidates
class Chooser(abc.ABC):
    """Something that, fitted on some workloads' curves, picks a clock for another workload."""

    name = "?"

    def fit(self, curves: Sequence[Curve]) -> Chooser:
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
        y = [mhz_to_class(c.label_mhz) for c in curves]
        self.constant = y[0] if len(set(y)) == 1 else None  # one label: nothing to learn
        self.model = self.make()
        try:
            self.model.fit(X, y)  # a tree takes a single class (train exports it); not all do
        except ValueError:
            if self.constant is None:
                raise
        return self

    def choose(self, curve):
        if self.constant is not None:
            return class_to_mhz(self.constant)
        return class_to_mhz(self.model.predict([features_of(curve, self.features, self.util)])[0])


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
            e_fit = c.fitted_energy_j
            mean_e = sum(e_fit) / len(e_fit)
            for f, e in zip(c.freqs_mhz, e_fit):
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
def architecture_of(curve: Curve) -> str:
    """The architecture a workload runs (every task of it is held out together in LOMO)."""
    w = curve.workload
    return f"{w.model}-L{w.layers}-H{w.hidden}"


@dataclass
class Score:
    name: str
    choices_mhz: list
    accuracy: float
    mean_regret_pct: float
    max_regret_pct: float
    mean_saving_pct: float
    params: dict = field(default_factory=dict)
    regrets_pct: list = field(default_factory=list)
    share_of_oracle: float | None = None
    lomo: Score | None = None  # the same candidate under leave-one-model-out CV
    make: Callable | None = field(default=None, repr=False, compare=False)  # a fresh chooser

    def to_dict(self) -> dict:
        d = {"name": self.name, "loocv_accuracy": round(self.accuracy, 4),
             "mean_regret_pct": round(self.mean_regret_pct, 3),
             "max_regret_pct": round(self.max_regret_pct, 3),
             "mean_saving_vs_maxn_pct": round(self.mean_saving_pct, 3),
             "share_of_oracle": None if self.share_of_oracle is None else round(self.share_of_oracle, 4),
             "params": self.params}
        if self.lomo is not None:
            d.update({"lomo_accuracy": round(self.lomo.accuracy, 4),
                      "lomo_mean_regret_pct": round(self.lomo.mean_regret_pct, 3),
                      "lomo_max_regret_pct": round(self.lomo.max_regret_pct, 3),
                      "lomo_mean_saving_vs_maxn_pct": round(self.lomo.mean_saving_pct, 3),
                      "lomo_share_of_oracle": None if self.lomo.share_of_oracle is None
                      else round(self.lomo.share_of_oracle, 4)})
        return d


def score(name: str, curves: Sequence[Curve], choices: Sequence, params=None) -> Score:
    regrets = [c.regret(f) * 100 for c, f in zip(curves, choices)]
    hits = [c.is_hit(f) for c, f in zip(curves, choices)]
    savings = [c.saving_vs_maxn(f) * 100 for c, f in zip(curves, choices)]
    oracle = statistics.fmean(c.saving_vs_maxn(c.oracle_mhz) * 100 for c in curves)
    mean_saving = statistics.fmean(savings)
    return Score(name, list(choices), sum(hits) / len(hits), statistics.fmean(regrets), max(regrets),
                 mean_saving, params or {}, regrets, mean_saving / oracle if oracle > 0 else None)


def loocv(make_chooser: Callable[[], Chooser], curves: Sequence[Curve]) -> list:
    """Each workload's choice by a chooser fitted on all the others."""
    out = []
    for i, held_out in enumerate(curves):
        rest = [c for j, c in enumerate(curves) if j != i]
        out.append(make_chooser().fit(rest).choose(held_out))
    return out


def lomo(make_chooser: Callable[[], Chooser], curves: Sequence[Curve], group=None) -> list:
    """Each workload's choice by a chooser fitted on the other architectures only (all tasks of
    the held-out model left out): how a policy does on a model it has never seen. Workloads of
    an architecture that is the only one in the data get no held-out fit: fitted on all."""
    archs = [(group or architecture_of)(c) for c in curves]
    out: list = [None] * len(curves)
    for a in sorted(set(archs)):
        rest = [c for c, x in zip(curves, archs) if x != a]
        chooser = make_chooser().fit(rest if len(rest) >= 2 else list(curves))
        for i, x in enumerate(archs):
            if x == a:
                out[i] = chooser.choose(curves[i])
    return out


def cross_validate(name: str, make_chooser: Callable[[], Chooser], curves: Sequence[Curve], params=None,
                   group=None) -> Score:
    """LOOCV and LOMO scores of a candidate (``group``: curve -> architecture, for LOMO)."""
    s = score(name, curves, loocv(make_chooser, curves), params)
    s.lomo = score(name, curves, lomo(make_chooser, curves, group), params)
    return s


def paired_test(curves: Sequence[Curve], a: Score, b: Score) -> dict:
    """Does candidate ``a`` have lower regret than ``b`` beyond the noise? Per workload, the
    difference of their regrets (on the fitted curve); a difference within 2 standard deviations
    of that curve's noise is a tie. One-sided Wilcoxon signed-rank test over workloads."""
    diffs = []
    for c, fa, fb in zip(curves, a.choices_mhz, b.choices_mhz):
        d = c.regret(fa) - c.regret(fb)
        diffs.append(0.0 if abs(d) <= 2.0 * c.diff_noise(fa, fb) else d)
    nonzero = [d for d in diffs if d != 0.0]
    p = 1.0
    if nonzero and statistics.fmean(diffs) < 0:
        from scipy.stats import wilcoxon
        p = float(wilcoxon(nonzero, alternative="less").pvalue)
    return {"mean_diff_pct": 100 * statistics.fmean(diffs), "better": sum(d < 0 for d in diffs),
            "worse": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs), "p_value": p,
            "significant": p < SIGNIFICANCE}


def _tree_chooser(params: dict, feats) -> Classifier:
    return Classifier("tree", tree_maker(**params), feats)


def select_tree(curves: Sequence[Curve], feature_sets=None) -> tuple[Score, dict[str, Score]]:
    """The tree hyper-parameters (and feature set) with the lowest LOOCV mean regret; ties go
    to the simpler tree. Also returns the best score per feature set, to show what features buy.
    ``feature_sets``: default :func:`feature_sets_for` the curves."""
    feature_sets = feature_sets_for(curves) if feature_sets is None else feature_sets
    best_per_set: dict[str, Score] = {}
    for set_name in feature_sets:
        feats = FEATURE_SETS[set_name]
        grid = list(itertools.product(*TREE_GRID.values()))
        for depth, leaf, crit in track(grid, f"LOOCV, {set_name} features: {len(grid)} trees x {len(curves)} folds"):
            params = {"max_depth": depth, "min_samples_leaf": leaf, "criterion": crit}
            make = functools.partial(_tree_chooser, params, feats)
            s = score(f"tree ({set_name} features)", curves, loocv(make, curves), {**params, "features": set_name})
            s.make = make
            key = (round(s.mean_regret_pct, 6), depth or 99, -leaf)
            cur = best_per_set.get(set_name)
            if cur is None or key < (round(cur.mean_regret_pct, 6), cur.params["max_depth"] or 99,
                                     -cur.params["min_samples_leaf"]):
                best_per_set[set_name] = s
    best = min(best_per_set.values(), key=lambda s: (round(s.mean_regret_pct, 6),
                                                      list(FEATURE_SETS).index(s.params["features"])))
    return best, best_per_set


def compare(curves: Sequence[Curve], vf: VFCurve = DEFAULT_VF, group=None) -> tuple[Score, list[Score]]:
    """Every candidate by LOOCV and LOMO; the tree's hyper-parameters selected by LOOCV inside
    (LOMO then scores the selected tree of each feature set). ``vf``: the board's V/f shape
    (for the roofline model); ``group``: curve -> architecture for LOMO (default
    :func:`architecture_of`)."""
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .roofline_curve import RooflineChooser, fit_board

    board = fit_board(curves, vf)  # a warm start for the folds' fits (each fold still fits its own data)
    tree, per_set = select_tree(curves)
    for s in per_set.values():
        s.lomo = score(s.name, curves, lomo(s.make, curves, group), s.params)
    n = len(curves)
    rows = [score("maxn (board default)", curves, [None] * n),
            cross_validate("ffg (best fixed clock)", FixedClock, curves, group=group),
            score("rules (paper A)", curves, [PaperRules().choose(c) for c in curves])]
    rows[0].lomo, rows[2].lomo = rows[0], rows[2]  # nothing fitted: the same under any split
    rows += sorted(per_set.values(), key=lambda s: s.name)
    others = {
        "knn (k=3)": lambda: Classifier("knn", lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(3))),
        "random forest": lambda: Classifier("rf", lambda: RandomForestClassifier(50, random_state=0)),
        "gradient boosting": lambda: Classifier("gb", lambda: GradientBoostingClassifier(n_estimators=30, random_state=0)),
        "curve regression (random forest, argmin)": lambda: CurveRegression(
            "rf-curve", lambda: RandomForestRegressor(50, random_state=0)),
        "curve regression (gradient boosting, argmin)": lambda: CurveRegression(
            "gb-curve", lambda: GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=0)),
        "roofline model (physics, argmin)": lambda: RooflineChooser(vf, start=board),
    }
    for name, make in track(list(others.items()), f"LOOCV and LOMO of the other models: {len(curves)} folds each"):
        rows.append(cross_validate(name, make, curves, group=group))
    labels = score("labels (fitted best; MAXN within noise)", curves, [c.label_mhz for c in curves])
    oracle = score("oracle (best clock per workload)", curves, [c.oracle_mhz for c in curves])
    labels.lomo, oracle.lomo = labels, oracle
    rows += [labels, oracle]
    return tree, rows


def find_row(rows: Sequence[Score], prefix: str) -> Score:
    return next(r for r in rows if r.name.startswith(prefix))


def ship_decision(curves: Sequence[Curve], tree: Score, rows: Sequence[Score]) -> dict:
    """Ship the tree only when it beats FFG's LOOCV regret beyond the noise and is not worse
    than FFG on held-out architectures (LOMO); else FFG."""
    ffg = find_row(rows, "ffg")
    test = paired_test(curves, tree, ffg)
    lomo_worse = (tree.lomo is not None and ffg.lomo is not None
                  and tree.lomo.mean_regret_pct > ffg.lomo.mean_regret_pct)
    if test["significant"] and lomo_worse:
        shipped = "ffg"
        reason = (f"the tree beats FFG by LOOCV ({tree.mean_regret_pct:.2f} % vs {ffg.mean_regret_pct:.2f} %, "
                  f"Wilcoxon p = {test['p_value']:.3g}) but not on held-out architectures (LOMO regret "
                  f"{tree.lomo.mean_regret_pct:.2f} % vs {ffg.lomo.mean_regret_pct:.2f} %): the model's policy "
                  "is the best fixed clock")
    elif test["significant"]:
        shipped = "tree"
        reason = (f"the tree beats FFG: LOOCV regret {tree.mean_regret_pct:.2f} % vs {ffg.mean_regret_pct:.2f} %, "
                  f"better on {test['better']} workloads, worse on {test['worse']}, {test['ties']} within "
                  f"noise (one-sided Wilcoxon p = {test['p_value']:.3g} < {SIGNIFICANCE})")
    else:
        shipped = "ffg"
        reason = (f"the tree does not beat FFG beyond the noise: LOOCV regret {tree.mean_regret_pct:.2f} % vs "
                  f"{ffg.mean_regret_pct:.2f} %, better on {test['better']} workloads, worse on "
                  f"{test['worse']}, {test['ties']} within noise (one-sided Wilcoxon p = "
                  f"{test['p_value']:.3g}, needs < {SIGNIFICANCE}): the model's policy is the best fixed clock")
    return {"shipped": shipped, "reason": reason, "test": test}


# ------------------------------------------------------------------ what a policy knows of its choices
def _sd(xs) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def expected_savings(curves: Sequence[Curve], choices: Sequence, classes_mhz_: Sequence[float],
                     ffg_mhz: float) -> dict:
    """What a policy's training data says each of its choices saves against MAXN (%), for
    govcore's gate (policy.h, GC_SAVING_MARGIN_SD): per class clock (0.0: MAXN), the mean and
    spread (standard deviation) of the saving at that clock of the workloads the fitted policy
    sends there (``choices``: its clock per curve, None for MAXN); a class with one workload
    takes the spread over all workloads of their own choices' savings; a class with none, the
    saving at its clock over all workloads. And the same of the FFG clock over all workloads."""
    pooled = _sd([c.saving_vs_maxn(f) * 100 for c, f in zip(curves, choices)])
    means, spreads, counts = [], [], []
    for k in classes_mhz_:
        mhz = class_to_mhz(round(float(k) * 1000.0))
        group = [c for c, f in zip(curves, choices) if f == mhz]
        s = [c.saving_vs_maxn(mhz) * 100 for c in (group or curves)]
        means.append(statistics.fmean(s))
        spreads.append(_sd(s) if len(s) > 1 else pooled)
        counts.append(len(group))
    ffg = [c.saving_vs_maxn(ffg_mhz) * 100 for c in curves]
    return {"class_saving_pct": means, "class_spread_pct": spreads, "class_workloads": counts,
            "ffg_saving_pct": statistics.fmean(ffg), "ffg_spread_pct": _sd(ffg)}


GATE_TREE = {"max_depth": 3, "min_samples_leaf": 1, "criterion": "gini"}


def gate_fixed_clock(curves: Sequence[Curve], mhz: float, features) -> Classifier | None:
    """A fixed clock (FFG) where the training data says it clearly saves against MAXN
    (:meth:`Curve.clearly_saves`, the labels' rule), MAXN elsewhere: a small tree (``GATE_TREE``)
    fitted on those two labels, so that the workloads where the fixed clock loses (a tiny,
    host-bound model, whose MAXN already idles the GPU) stay with the board's own governor.
    None where the clock clearly saves for every workload, or for none (then the expected
    saving of the fixed clock decides, in govcore)."""
    labels = [mhz_to_class(mhz if c.clearly_saves(mhz) else None) for c in curves]
    if len(set(labels)) < 2:
        return None
    chooser = Classifier("ffg, gated", tree_maker(**GATE_TREE), features)
    chooser.util = default_util(curves)
    chooser.constant = None
    chooser.model = chooser.make()
    chooser.model.fit([features_of(c, chooser.features, chooser.util) for c in curves], labels)
    return chooser


# ------------------------------------------------------------------ the model folder
def train(curves: Sequence[Curve], out_dir: str | Path, source: str, cc: str | None = None,
          data_path: str | Path | None = None, board_id: str | None = None, measure: str | None = None) -> dict:
    """Select, fit on all workloads, and write the model folder. Returns the metrics.
    ``data_path``: the training data file, hashed into the folder's manifest. ``board_id``: the
    board the data came from (pydvfs.device.table id; None: unknown), named in the manifest with the
    data's clock table (docs/policy.md, "On another board"). ``measure``: the energy the labels
    minimise (module, cpu-gpu; None: another column), named in the manifest with what each
    choice is expected to save (:func:`expected_savings`)."""
    from .roofline_curve import fit_board, write_roofline

    if len(curves) < 3:
        raise InvalidValueError(f"need at least 3 workloads to train with leave-one-out CV, got {len(curves)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tree_score, table = compare(curves)
    decision = ship_decision(curves, tree_score, table)
    params = {k: v for k, v in tree_score.params.items() if k != "features"}
    feats = FEATURE_SETS[tree_score.params["features"]]
    chooser = Classifier("tree", tree_maker(**params), feats).fit(curves)
    clf = prune_same_class(chooser.model)  # the same decisions, exported and printed without dead splits
    ffg = FixedClock().fit(curves).mhz
    util = default_util(curves)
    board = fit_board(curves)
    noise = noise_summary(curves)

    with open(out / "model.pkl", "wb") as f:
        pickle.dump(clf, f)
    meta = {
        "features": list(feats),
        "classes_mhz": classes_mhz(clf),
        "ffg_mhz": ffg,
        "shipped": decision["shipped"],
        "default_util_pct": list(util),
        "tree_params": params,
        "trained_on": [c.name for c in curves],
        "levels_mhz": sorted({f for c in curves for f in c.freqs_mhz}),
        "source": source,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    tree_rules = rules_text(clf, feats)
    prov = manifest.provenance(data_path, source)
    if decision["shipped"] == "tree":
        rules = tree_rules
        shipped_classes = classes_mhz(clf)
        c_src = tree_to_c(clf, feats, util, ffg, name=f"trained: {source}", source=source,
                          provenance=prov, tool="pydvfs train", classes_mhz=shipped_classes,
                          board_id=board_id or "", levels_mhz=meta["levels_mhz"])
    else:
        rules = f"|--- class: {ffg:g} MHz (the best fixed clock; {decision['reason']})\n"
        shipped_classes = [ffg]
        c_src = constant_to_c(ffg, feats, util, name=f"trained: {source} (ffg {ffg:g} MHz)", source=source,
                              provenance=prov, tool="pydvfs train", board_id=board_id or "",
                              levels_mhz=meta["levels_mhz"])
    (out / "rules.txt").write_text(rules)
    (out / "policy_tree.c").write_text(c_src)
    compile_policy(out / "policy_tree.c", out / "policy.so", cc)
    choices = [chooser.choose(c) for c in curves] if decision["shipped"] == "tree" else [ffg] * len(curves)
    knows = expected_savings(curves, choices, shipped_classes, ffg)
    manifest.write_manifest(out, feats, shipped_classes, prov, board_id, meta["levels_mhz"], measure, knows)
    write_roofline(board, out / "roofline.txt", source=source)
    _plot_tree(clf, feats, out)
    metrics = {
        "n_workloads": len(curves),
        "n_architectures": len({architecture_of(c) for c in curves}),
        "levels_mhz": meta["levels_mhz"],
        "selected": tree_score.to_dict(),
        "shipped": decision["shipped"],
        "ship_reason": decision["reason"],
        "ship_test": decision["test"],
        "table": [s.to_dict() for s in table],
        "loocv_choices": {c.name: {"best_mhz": c.best_mhz, "raw_best_mhz": c.raw_best_mhz,
                                   "within_noise_mhz": list(c.within_mhz), "label_mhz": c.label_mhz,
                                   "tree_mhz": f, "too_noisy": c.too_noisy}
                          for c, f in zip(curves, tree_score.choices_mhz)},
        "ffg_mhz": ffg,
        "expected_savings": {"classes_mhz": shipped_classes, **knows, "measure": measure},
        "noise": noise.to_dict(),
        "roofline": board.to_dict(),
        "rules": rules,
        "candidate_tree_rules": tree_rules,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def class_names(clf) -> list[str]:
    return ["MAXN" if c == 0.0 else f"{c:g} MHz" for c in classes_mhz(clf)]


def prune_same_class(clf):
    """A copy of a fitted tree in which a split whose leaves all give one class is a leaf: the
    same decision for every input (a node's class shares are its leaves' weighted mix, so the
    class they all give stays its largest; checked), fewer rules to print and compile. A split
    can lower the impurity without changing the class, so scikit-learn keeps such splits."""
    import copy

    import numpy as np

    clf = copy.deepcopy(clf)
    t = clf.tree_
    left, right = t.children_left, t.children_right  # views of the tree's nodes: written in place

    def single_class(node: int):
        if left[node] == -1:
            return int(np.argmax(t.value[node][0]))
        a, b = single_class(left[node]), single_class(right[node])
        if a is None or a != b or int(np.argmax(t.value[node][0])) != a:
            return None
        left[node] = right[node] = -1  # a leaf (scikit-learn's TREE_LEAF)
        t.feature[node], t.threshold[node] = -2, -2.0  # with no split (TREE_UNDEFINED), as its leaves
        return a

    single_class(0)
    return clf


def rules_text(clf, feats) -> str:
    """The tree's rules as text (scikit-learn's export_text), split with one class pruned."""
    from sklearn.tree import export_text

    return export_text(prune_same_class(clf), feature_names=list(feats), class_names=class_names(clf), decimals=1)


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
    head = (f"{'policy':46s} {'LOOCV acc':>9s} {'regret':>8s} {'max':>7s} {'LOMO regret':>11s} "
            f"{'saving vs MAXN':>14s} {'of oracle':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lomo = r.get("lomo_mean_regret_pct")
        share = r.get("share_of_oracle")
        lines.append(f"{r['name']:46s} {r['loocv_accuracy']:9.2f} {r['mean_regret_pct']:7.2f}% "
                     f"{r['max_regret_pct']:6.2f}% {'' if lomo is None else f'{lomo:10.2f}%':>11s} "
                     f"{r['mean_saving_vs_maxn_pct']:13.2f}% {'' if share is None else f'{100 * share:8.1f}%':>9s}")
    return "\n".join(lines)

"""The C tree (m2cgen output, compiled) and scikit-learn agree on every training point and on
>= 10,000 random feature vectors, float32 thresholds and class order included."""
from __future__ import annotations

import json
import pickle
import random

from c_tree import CTree

from pydvfs import _core
from pydvfs.policy.curves import curves_from_frame, read_dataset
from pydvfs.policy.train import default_util, features_of


def _random_vectors(names, n, seed=1):
    rnd = random.Random(seed)
    span = {"is_decoder": lambda: float(rnd.randint(0, 1)), "gpu_util_pct": lambda: rnd.uniform(0, 100),
            "layers": lambda: float(rnd.randint(1, 48)), "hidden": lambda: float(rnd.choice([64, 128, 256, 512, 768, 1024, 2048])),
            "seq_len": lambda: rnd.uniform(1, 512), "log10_c_tok": lambda: rnd.uniform(4, 12),
            "intensity": lambda: rnd.uniform(100, 50000)}
    return [[span[f]() for f in names] for _ in range(n)]


def test_trained_tree_c_equals_sklearn(trained, syn_csv):
    out, _ = trained
    clf = pickle.loads((out / "model.pkl").read_bytes())
    meta = json.loads((out / "meta.json").read_text())
    tree = _core.Tree(out)
    assert list(tree.feature_names) == meta["features"]
    assert list(tree.classes_mhz) == meta["classes_mhz"]
    assert tree.ffg_mhz == meta["ffg_mhz"]

    curves = curves_from_frame(read_dataset(syn_csv), tasks=["sst2", "qnli", "mrpc"])
    util = default_util(curves)
    train_X = [features_of(c, meta["features"], util) for c in curves]
    random_X = _random_vectors(meta["features"], 10_000)
    # exactly on a threshold: where float32 rounding matters most
    thresholds = [t for t in clf.tree_.threshold if t != -2]
    edge_X = []
    for t in thresholds:
        for f in range(len(meta["features"])):
            for x in (t, t + 1e-9, t - 1e-9):
                row = list(random_X[len(edge_X) % len(random_X)])
                row[f] = x
                edge_X.append(row)
    c_tree = CTree(out)
    assert c_tree.feature_names == tree.feature_names and c_tree.classes_mhz == tree.classes_mhz
    for X in (train_X, random_X, edge_X):
        expected = [int(v) / 1000.0 for v in clf.predict(X)]  # classes are kHz
        assert c_tree.predict_features(X) == expected


def test_c_features_equal_python_features(trained):
    out, _ = trained
    meta = json.loads((out / "meta.json").read_text())
    import numpy as np

    from pydvfs.model.features import PAPER_FEATURES, ROOFLINE_FEATURES, feature_vector
    tree = _core.Tree(out)
    for wl in [(False, 55.0, 12, 768, 64.0), (True, None, 16, 2048, 37.5), (False, 10.0, 2, 128, 11.0)]:
        util = wl[1] if wl[1] is not None else meta["default_util_pct"][int(wl[0])]
        py = feature_vector(meta["features"], wl[0], util, *wl[2:])
        assert tree.features(wl) == tuple(float(np.float32(v)) for v in py)
    assert set(PAPER_FEATURES + ROOFLINE_FEATURES) >= set(meta["features"])

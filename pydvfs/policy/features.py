"""Feature vectors for the frequency model: the Python twin of gc_features() in govcore/policy.c.

A tree is trained on named features; the C side computes each name the same way (a golden test
checks they agree), so the order can never silently differ.
"""
from __future__ import annotations

import math

from ..roofline.proxies import compute_per_token

# The paper's five features.
PAPER_FEATURES = ("is_decoder", "gpu_util_pct", "layers", "hidden", "seq_len")
# Roofline features (paper B's proxies): compute per token and arithmetic-intensity proxy.
ROOFLINE_FEATURES = ("log10_c_tok", "intensity")


# Compute per token of the layer stack, 12 L d^2 + 3 L S d (paper B): the roofline law's proxy,
# one definition for both (govcore/policy.c has the C twin, checked by the golden test).
c_tok = compute_per_token


def feature_value(name: str, is_decoder: bool, util_pct: float, layers: float, hidden: float,
                  seq_len: float) -> float:
    if name == "is_decoder":
        return 1.0 if is_decoder else 0.0
    if name == "gpu_util_pct":
        return float(util_pct)
    if name == "layers":
        return float(layers)
    if name == "hidden":
        return float(hidden)
    if name == "seq_len":
        return float(seq_len)
    if name == "log10_c_tok":
        return math.log10(c_tok(layers, hidden, seq_len))
    if name == "intensity":
        return c_tok(layers, hidden, seq_len) / (hidden * layers)
    raise ValueError(f"unknown feature {name!r}")


def feature_vector(names, is_decoder, util_pct, layers, hidden, seq_len) -> list[float]:
    return [feature_value(n, is_decoder, util_pct, layers, hidden, seq_len) for n in names]

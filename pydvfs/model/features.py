"""Feature vectors for the frequency model: the Python twin of gc_features() in govcore/features.c.

A tree is trained on named features; the C side computes each name the same way (a golden test
checks they agree), so the order can never silently differ.
"""
from __future__ import annotations

import math

from ..roofline.proxies import compute_per_token
from ..workload import effective_weight_bits, trainable_share

# The paper's five features.
PAPER_FEATURES = ("is_decoder", "gpu_util_pct", "layers", "hidden", "seq_len")
# Roofline features (paper B's proxies): compute per token and arithmetic-intensity proxy.
ROOFLINE_FEATURES = ("log10_c_tok", "intensity")
# How the workload trains (issue 28): the trained share of the layer stack's weights, the bits of
# the weights the GEMMs read, and the bits of the compute (32 fp32, 16 fp16/bf16 autocast).
METHOD_FEATURES = ("trainable_share", "weight_bits", "compute_bits")
ALL_FEATURES = PAPER_FEATURES + ROOFLINE_FEATURES + METHOD_FEATURES

# Compute per token of the layer stack, 12 L d^2 + 3 L S d (paper B): the roofline law's proxy,
# one definition for both (govcore/features.c has the C twin, checked by the golden test).
c_tok = compute_per_token


def feature_value(name: str, is_decoder: bool, util_pct: float, layers: float, hidden: float,
                  seq_len: float, peft: str = "none", rank: int | None = None,
                  trainable_params: int | None = None, weight_bits: int | None = None,
                  precision: str = "fp32") -> float:
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
    if name == "trainable_share":
        return trainable_share(peft, rank, trainable_params, layers, hidden)
    if name == "weight_bits":
        return float(effective_weight_bits(peft, weight_bits, precision))
    if name == "compute_bits":
        return 32.0 if precision == "fp32" else 16.0
    raise ValueError(f"unknown feature {name!r}")


def feature_vector(names, is_decoder, util_pct, layers, hidden, seq_len, peft="none", rank=None,
                   trainable_params=None, weight_bits=None, precision="fp32") -> list[float]:
    """The features ``names`` of a workload; the training-method keywords default to full fp32
    fine-tuning (what every workload was before issue 28)."""
    return [feature_value(n, is_decoder, util_pct, layers, hidden, seq_len, peft, rank,
                          trainable_params, weight_bits, precision) for n in names]


def workload_features(names, workload, util_pct: float) -> list[float]:
    """The features ``names`` of a :class:`pydvfs.Workload` with ``util_pct`` resolved."""
    w = workload
    return feature_vector(names, w.is_decoder, util_pct, w.layers, w.hidden, w.seq_len, w.peft,
                          w.rank, w.trainable_params, w.weight_bits, w.precision)

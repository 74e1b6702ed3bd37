"""Closed-form proxies of a BERT-style encoder (paper B, section "lightweight proxies").

All are proportionalities: constant factors (2 FLOPs per multiply-add, bytes per element,
forward+backward multipliers) only shift log kappa in the fitted law, so they are left out.

Symbols: L layers, d hidden width, ff feed-forward width, S sequence length (tokens), B batch
(sequences per step), h attention heads, steps optimiser steps in the measured run.
"""
from __future__ import annotations

import math

# Tensor-core tile on Ampere/Turing GEMMs. A width that is not a multiple of it is padded by the
# kernels, so it costs what the next multiple costs (seen in the A100 data: d=64 costs like 128).
GEMM_TILE = 128


def params_n(layers, hidden, ff):
    """Non-embedding parameters: N ~ L (12 d^2 + 2 d ff) (the paper's formula, taken as given)."""
    return layers * (12.0 * hidden**2 + 2.0 * hidden * ff)


def compute_per_token(layers, hidden, seq_len):
    """FLOPs per token: C_tok ~ 12 L d^2 + 3 L S d (dense projections + attention)."""
    return 12.0 * layers * hidden**2 + 3.0 * layers * seq_len * hidden


def total_compute(layers, hidden, seq_len, batch, steps=1):
    """Total compute of a run: C = C_tok * tokens, tokens = B * S * steps."""
    return compute_per_token(layers, hidden, seq_len) * batch * seq_len * steps


def memory_traffic(batch, seq_len, hidden, layers, steps=1):
    """Activation traffic of a run: M ~ B S d L per step."""
    return batch * seq_len * hidden * layers * steps


def attention_traffic(batch, seq_len, layers, steps=1):
    """Traffic of the S x S attention-score maps: A ~ B S^2 L per step.

    Not in the paper. Softmax, masking and dropout read and write these maps; they grow with S^2
    where M grows with S, which is what the paper's two proxies miss on long sequences.
    """
    return batch * seq_len**2 * layers * steps


def tile_width(hidden, tile=GEMM_TILE):
    """The width the GEMM kernels actually compute with: d rounded up to a multiple of ``tile``."""
    if tile is None or tile <= 1:
        return hidden
    return _ceil_div(hidden, tile) * tile


def arithmetic_intensity(compute, traffic):
    """Compute per unit of memory traffic (C / M), the roofline's x axis."""
    return compute / traffic


def _ceil_div(a, b):
    # Works for Python numbers and numpy arrays alike.
    try:
        return -(-a // b)
    except TypeError:  # pragma: no cover - exotic numeric types
        return math.ceil(a / b)

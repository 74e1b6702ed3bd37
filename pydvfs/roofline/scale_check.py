"""Order-of-magnitude checks against published training energies (as paper B does).

These are *consistency checks, not validations*: the laws are fitted on small single-node runs,
the published figures come from other hardware (V100 clusters, TPUs), data-centre overheads and
precisions. A check passes when the estimate is within a factor of 10 of the published figure.

The estimate uses the additive decomposition E = eps_comp*C + eps_mem*M (+E0, negligible here),
which is linear in the work and so the only one of our forms that may be extrapolated over ten
orders of magnitude; a power law with exponents < 1 would not be. Since T5-11B's feed-forward is
far wider than 4d, its per-token compute uses the published parameter count in place of 12 L d^2.

Published figures (Patterson et al. 2021, "Carbon emissions and large neural network training",
arXiv:2104.10350, table 4): GPT-3 175B 1287 MWh; T5 11B 85.7 MWh.
"""
from __future__ import annotations

J_PER_MWH = 3.6e9

MODELS = {
    # name: family fit to use, layers, hidden, seq_len, params (non-embedding, approx.), tokens,
    #       published energy (MWh)
    "GPT-3 175B": {"family": "gpt", "layers": 96, "hidden": 12288, "seq_len": 2048,
                   "params": 174.6e9, "tokens": 300e9, "published_mwh": 1287.0},
    "T5 11B": {"family": "bert", "layers": 48, "hidden": 1024, "seq_len": 512,
               "params": 11e9, "tokens": 1.0e12, "published_mwh": 85.7},
}


def estimate(decomp: dict, model: dict) -> float:
    """Energy (J) of training ``model`` under a fitted decomposition (``Decomposition.to_dict``)."""
    L, d, S, tok = model["layers"], model["hidden"], model["seq_len"], model["tokens"]
    c = (model["params"] + 3.0 * L * S * d) * tok
    m = tok * d * L
    return decomp["eps_comp_j"] * c + decomp["eps_mem_j"] * m


def run(decomps: dict) -> list:
    """``decomps``: group name ("family/hardware") -> decomposition dict.

    One labelled record per (model, fitted group of the model's family).
    """
    out = []
    for (name, model), (group, dec) in ((m, g) for m in MODELS.items() for g in decomps.items()):
        if group.split("/")[0] != model["family"]:
            continue
        e_mwh = estimate(dec, model) / J_PER_MWH
        ratio = e_mwh / model["published_mwh"]
        out.append({"model": name, "label": "order-of-magnitude check, not a validation",
                    "fit_group": group, "estimate_mwh": e_mwh,
                    "published_mwh": model["published_mwh"], "ratio": ratio,
                    "within_10x": bool(0.1 <= ratio <= 10.0)})
    return out

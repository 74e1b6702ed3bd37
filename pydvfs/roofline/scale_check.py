"""Order-of-magnitude checks against published training energies (as paper B does).

These are *consistency checks, not validations*: the laws are fitted on small single-node runs,
the published figures come from other hardware (V100 clusters, TPUs), data-centre overheads and
precisions. A check passes when the estimate is within a factor of 10 of the published figure.

Two estimates, both linear in the work (a power law with exponents < 1 must not be extrapolated
over ten orders of magnitude):

- ``compute_floor``: energy per unit of compute proxy measured on the group's most compute-
  intense runs (top decile of C/M), times the model's C. At large width training is compute-
  bound, and on those runs E/C is closest to the roofline's compute floor (it still carries some
  memory and fixed energy, so it errs high).
- ``decomposition``: eps_comp*C + eps_mem*M from the NNLS fit. On small models C and M are nearly
  collinear, so the split between eps_comp and eps_mem is poorly determined; shown for contrast.

Since T5-11B's feed-forward is far wider than 4d, its per-token compute uses the published
parameter count in place of 12 L d^2.

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


def work(model: dict):
    """(C, M) proxies of training ``model`` on its token budget."""
    L, d, S, tok = model["layers"], model["hidden"], model["seq_len"], model["tokens"]
    return (model["params"] + 3.0 * L * S * d) * tok, tok * d * L


def compute_floor_j(df) -> float:
    """Median E/C over the top decile of arithmetic intensity (J per unit of compute proxy)."""
    import numpy as np

    top = df[df["intensity"] >= np.quantile(df["intensity"], 0.9)]
    return float(np.median(top["energy_j"] / top["compute"]))


def run(groups: dict) -> list:
    """``groups``: name ("family/hardware") -> {"decomposition": dict, "j_per_compute": float}.

    One labelled record per (model, fitted group of the model's family).
    """
    out = []
    for (name, model), (group, g) in ((m, x) for m in MODELS.items() for x in groups.items()):
        if group.split("/")[0] != model["family"]:
            continue
        c, m = work(model)
        dec = g["decomposition"]
        e_floor = g["j_per_compute"] * c / J_PER_MWH
        e_dec = (dec["eps_comp_j"] * c + dec["eps_mem_j"] * m) / J_PER_MWH
        ratio = e_floor / model["published_mwh"]
        out.append({"model": name, "label": "order-of-magnitude check, not a validation",
                    "fit_group": group, "estimate_mwh": e_floor,
                    "estimate_decomposition_mwh": e_dec,
                    "published_mwh": model["published_mwh"], "ratio": ratio,
                    "within_10x": bool(0.1 <= ratio <= 10.0)})
    return out

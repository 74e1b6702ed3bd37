"""Additive roofline decomposition E = eps_comp * C + eps_mem * M + E0, by non-negative LS.

The coefficients are energies per unit of proxy (J per proxy-FLOP, J per proxy-byte) and a fixed
overhead E0 (J). Non-negativity keeps them physical. A configuration is compute-bound when its
compute term is the larger of the two, memory-bound otherwise; the break-even arithmetic
intensity is eps_mem / eps_comp.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Decomposition:
    eps_comp_j: float      # J per unit of C
    eps_mem_j: float       # J per unit of M
    e0_j: float            # fixed energy per run, J
    ridge_intensity: float  # C/M where both terms are equal (inf if eps_comp is 0)
    r2: float              # in linear space
    r2_log: float          # of log E, for comparison with the log-linear laws
    n_compute_bound: int
    n_memory_bound: int

    def to_dict(self):
        return dict(self.__dict__)


def fit(df, compute_col: str = "compute", memory_col: str = "memory") -> Decomposition:
    import numpy as np
    from scipy.optimize import nnls

    c = df[compute_col].to_numpy(float)
    m = df[memory_col].to_numpy(float)
    e = df["energy_j"].to_numpy(float)
    # Scale the columns to unit size so nnls is well conditioned; undo it afterwards.
    sc, sm = c.mean(), m.mean()
    X = np.column_stack([c / sc, m / sm, np.ones_like(c)])
    coef, _ = nnls(X, e)
    eps_c, eps_m, e0 = coef[0] / sc, coef[1] / sm, coef[2]
    pred = X @ coef
    r2 = 1.0 - np.sum((e - pred) ** 2) / np.sum((e - e.mean()) ** 2)
    le, lp = np.log(e), np.log(np.maximum(pred, 1e-12))
    r2_log = 1.0 - np.sum((le - lp) ** 2) / np.sum((le - le.mean()) ** 2)
    comp_bound = regime(c, m, eps_c, eps_m) == "compute"
    ridge = float(eps_m / eps_c) if eps_c > 0 else float("inf")
    return Decomposition(float(eps_c), float(eps_m), float(e0), ridge, float(r2), float(r2_log),
                         int(comp_bound.sum()), int((~comp_bound).sum()))


def regime(compute, memory, eps_comp, eps_mem):
    """'compute' where eps_comp*C >= eps_mem*M, else 'memory' (arrays in, array of str out)."""
    import numpy as np

    return np.where(eps_comp * np.asarray(compute) >= eps_mem * np.asarray(memory), "compute", "memory")

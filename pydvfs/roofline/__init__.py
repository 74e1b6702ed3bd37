"""Paper B: a roofline-inspired energy scaling law for transformer fine-tuning.

One module per job:

- ``proxies``        closed-form proxies (parameters N, compute C, memory traffic M, intensity)
- ``sweep_csv``      read a CSV (our schema or the ML-energy A100 file), validate, add proxies
- ``decomposition``  E = eps_comp*C + eps_mem*M + E0 by non-negative least squares; regimes
- ``speedup``        TP / FSDP speedup laws fitted to measured times; eta_h = S(N)/N
- ``law``            the reduced log-linear law, OLS with CIs, grouped cross-validation
- ``multigpu_sim``   a multi-GPU node simulator with known exponents (RTX 2080 Ti-like)
- ``collect``        real runs with torchrun (FSDP2 / tensor parallel), same CSV schema
- ``pipeline``       everything ``pydvfs roofline fit`` reports, as one dict
- ``plots``          predicted vs measured, residuals, speedup curves, the roofline
- ``cli``            the ``pydvfs roofline`` verbs

Nothing here imports numpy/pandas/statsmodels/torch at ``import pydvfs`` time.

Imports: the root modules.
"""

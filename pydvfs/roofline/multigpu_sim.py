"""A simulated 8-GPU node (RTX 2080 Ti-like, PCIe ring) that produces a sweep shaped like paper B's.

What is mechanistic and what is calibrated:

- Single-device step time is a calibrated response surface,
  ``t1 = T_REF_S * (C/C_REF)^A_C * (M/M_REF)^A_M`` (sub-linear: bigger problems use the GPU
  better). This stands in for kernel-level timing and is where the exponents come from.
- Parallel step time is mechanistic: per-GPU work on its share (TP splits the GEMMs and pays a
  kernel-fragmentation cost, FSDP splits the batch), plus NCCL-like ring collectives
  (TP: all-reduce of activations 4x per layer per step; FSDP: all-gather of the parameters for
  forward and backward, reduce-scatter of the gradients, partly overlapped with compute).
  Ring cost of moving ``b`` bytes among N GPUs: all-reduce 2(N-1)/N b/BW + 2(N-1) alpha,
  all-gather or reduce-scatter (N-1)/N b/BW + (N-1) alpha.
- Energy = sum over the N GPUs of mean power x time, with mean power per GPU
  ``P_IDLE_W + duty * (P_MAX_W - P_IDLE_W)`` and one duty factor per strategy (NCCL kernels
  busy-wait, so TP's many collectives keep the GPUs near active power).

Hence E = P(strategy) * N * t_N = P(strategy) * t1 / eta_h exactly (eta_h = t1 / (N t_N)), i.e.

    log E = log kappa + A_C log C + A_M log M + A_ETA log eta_h + Psi_strategy

with the values in ``KNOWN`` below. Each architecture also gets a fixed power factor ``exp(u)``,
``u ~ N(0, arch_noise)``, on its GPUs' mean power (its GEMM shapes draw more or less power; no
proxy sees it, and it makes errors correlated within an architecture, which is why the law's
CIs are clustered by architecture). It scales power, not time, so eta_h stays independent of it.
Measured times get 2 % and energies ``energy_noise`` log-normal noise. Everything is drawn from
one ``numpy.random.Generator(seed)``.
"""
from __future__ import annotations

import math

from . import proxies

# RTX 2080 Ti-like node (FP32 training, PCIe 3.0 x16 ring, no NVLink across all 8).
PEAK_FLOPS = 13.4e12          # FLOP/s (reported as a column, for the roofline plot)
MEM_BW_B_PER_S = 616e9        # GDDR6, bytes/s
LINK_BW_B_PER_S = 10e9        # effective ring link bandwidth, bytes/s
LINK_LATENCY_S = 15e-6        # per ring hop
BYTES_PER_ELEMENT = 4
P_IDLE_W = 20.0
P_MAX_W = 250.0
DUTY = {"single": 0.60, "tp": 0.72, "fsdp": 0.55}
TP_FRAGMENTATION = 0.06       # extra per-GPU time per added TP device (smaller, more kernels)
FSDP_OVERLAP = 0.5            # share of the per-GPU work that hides FSDP communication

# Calibration of the single-device time: BERT-base, S=128, B=32 takes 0.25 s a step.
A_C, A_M = 0.20, 0.60
T_REF_S = 0.25
C_REF = proxies.total_compute(12, 768, 128, 32)
M_REF = proxies.memory_traffic(32, 128, 768, 12)
STEPS = 50


def power_w(strategy: str) -> float:
    """Mean power of one GPU during a run of ``strategy``, idle power included."""
    return P_IDLE_W + DUTY[strategy] * (P_MAX_W - P_IDLE_W)


KNOWN = {
    "a_C": A_C,
    "a_M": A_M,
    "a_eta": -1.0,
    "psi_strategy[tp]": math.log(power_w("tp") / power_w("single")),
    "psi_strategy[fsdp]": math.log(power_w("fsdp") / power_w("single")),
}
# Map from the law's coefficient names to KNOWN.
KNOWN_BY_TERM = {"log_C": "a_C", "log_M": "a_M", "log_eta": "a_eta",
                 "psi_strategy[tp]": "psi_strategy[tp]", "psi_strategy[fsdp]": "psi_strategy[fsdp]"}

# The sweep grid (BERT-style encoders).
GRID = {
    "layers": (2, 4, 6, 8, 12, 16, 24),
    "hidden": (128, 256, 384, 512, 768, 1024, 1280),
    "heads": (8, 16),
    "ff_mult": (2, 4),
    "seq_len": (64, 128, 256, 512, 1024, 2048),
    "batch": (8, 16, 32, 64),
}
DEVICES = (2, 4, 8)


def single_step_s(layers, hidden, seq_len, batch):
    c = proxies.total_compute(layers, hidden, seq_len, batch)
    m = proxies.memory_traffic(batch, seq_len, hidden, layers)
    return T_REF_S * (c / C_REF) ** A_C * (m / M_REF) ** A_M


def ring_allreduce_s(nbytes, n):
    return 2 * (n - 1) / n * nbytes / LINK_BW_B_PER_S + 2 * (n - 1) * LINK_LATENCY_S


def ring_gather_s(nbytes, n):
    """All-gather or reduce-scatter of ``nbytes`` in total."""
    return (n - 1) / n * nbytes / LINK_BW_B_PER_S + (n - 1) * LINK_LATENCY_S


def parallel_step(strategy, n, layers, hidden, ff, seq_len, batch):
    """(per-GPU work s, communication s, step time s) of one step on ``n`` GPUs."""
    t1 = single_step_s(layers, hidden, seq_len, batch)
    if strategy == "single" or n == 1:
        return t1, 0.0, t1
    if strategy == "tp":
        # GEMMs split n ways (compute share only), activations stay whole on every GPU.
        work = t1 * n ** (-A_C) * (1 + TP_FRAGMENTATION * (n - 1))
        act_bytes = batch * seq_len * hidden * BYTES_PER_ELEMENT
        comm = 4 * layers * ring_allreduce_s(act_bytes, n)
        return work, comm, work + comm
    if strategy == "fsdp":
        # Each GPU runs batch/n sequences with 1/n of the parameters resident.
        work = single_step_s(layers, hidden, seq_len, batch / n)
        p_bytes = proxies.params_n(layers, hidden, ff) * BYTES_PER_ELEMENT
        comm = 3 * layers * ring_gather_s(p_bytes / layers, n)
        return work, comm, work + max(0.0, comm - FSDP_OVERLAP * work)
    raise ValueError(strategy)


def sweep(seed: int = 0, n_configs: int = 410, energy_noise: float = 0.12,
          time_noise: float = 0.02, arch_noise: float = 0.2):
    """A DataFrame in the pydvfs schema: ``n_configs`` runs over the grid, 1-8 GPUs."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    runs_per_base = 1 + 2 * len(DEVICES)
    n_base = -(-n_configs // runs_per_base)
    rows = []
    seen = set()
    arch_factor = {}
    while len(seen) < n_base:
        base = tuple(int(rng.choice(v)) for v in GRID.values())
        L, d, h, ffm, S, B = base
        ff = ffm * d
        if (L, d, h, ff) in arch_factor:   # one configuration per architecture
            continue
        seen.add(base)
        if (L, d, h, ff) not in arch_factor:
            arch_factor[(L, d, h, ff)] = math.exp(rng.normal(0, arch_noise))
        k = arch_factor[(L, d, h, ff)]
        t1_meas = STEPS * single_step_s(L, d, S, B) * math.exp(rng.normal(0, time_noise))
        for strategy, n in [("single", 1)] + [(s, n) for s in ("tp", "fsdp") for n in DEVICES]:
            work, comm, step = parallel_step(strategy, n, L, d, ff, S, B)
            t_true = STEPS * step
            t_meas = t1_meas if n == 1 else t_true * math.exp(rng.normal(0, time_noise))
            e_true = k * power_w(strategy) * n * t_true
            rows.append({
                "family": "bert", "strategy": strategy, "n_devices": n, "layers": L,
                "hidden": d, "heads": h, "ff": ff, "seq_len": S, "batch": B, "steps": STEPS,
                "time_s": t_meas, "speedup": t1_meas / t_meas,
                "energy_j": e_true * math.exp(rng.normal(0, energy_noise)),
                "hardware": "rtx2080ti-sim", "campaign": "main",
                "work_s": STEPS * work, "comm_s": STEPS * comm, "power_w": k * power_w(strategy),
            })
    df = pd.DataFrame(rows)
    extra = len(df) - n_configs
    if extra > 0:  # drop a few parallel runs at random to hit the requested size
        drop = rng.choice(df.index[df["n_devices"] > 1], size=extra, replace=False)
        df = df.drop(index=drop).reset_index(drop=True)
    from .sweep_csv import arch_id
    df.insert(1, "arch", [arch_id(*r) for r in df[["family", "layers", "hidden", "heads", "ff"]].itertuples(index=False)])
    return df

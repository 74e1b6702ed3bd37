"""A family of perturbed simulators: boards whose physics the online searches were not fitted to.

The joint model of :mod:`pydvfs.model.joint` has the simulator's own structure (additive memory
time, a CPU power law of exponent 1.5, a fixed share of CUDA's wait spinning, an EMC whose power
is split one way), so a replay on the default simulator measures a floor. Each member of the
family moves one or more of those away from the structure the model assumes:

- ``cpu_vf_exp``: the CPU core power law's exponent (f/f_max)^x (default 1.5);
- ``cpu_spin_share``: the share of the GPU phase the main thread spins in CUDA's wait (0.5);
- ``mem_overlap``: how much of the memory time compute hides (0: none; the model adds them);
- ``emc_dram_rate_share`` / ``emc_ctrl_w``: how the EMC's power splits between the DRAM base
  that follows the rate and the controller on the SoC rail (0.6 / 1.0 W);
- ``mode_spread_pct``: a per-mode deviation fixed for the run (each mode's step time and power
  off by a Gaussian of this relative size, split evenly, drawn once from ``seed``): what no
  smooth model can express (a real board's table is not exactly smooth).

:func:`family` lists the members; :func:`perturbed_params` gives a member's simulator
parameters; :func:`mode_factors` its fixed per-mode (time, power) factors. Used by the joint
replay (:mod:`pydvfs.governor.replay`), bench/bench_joint_search.py and the tests.
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import asdict, dataclass

from .model import SimParams, default_params


@dataclass(frozen=True)
class Perturbation:
    """One simulator of the family: the parameters it changes (None: the default's) and the
    per-mode spread fixed for a run. ``name`` says which."""

    name: str
    cpu_vf_exp: float | None = None
    cpu_spin_share: float | None = None
    mem_overlap: float | None = None
    emc_dram_rate_share: float | None = None
    emc_ctrl_w: float | None = None
    mode_spread_pct: float = 0.0
    seed: int = 0

    def updates(self) -> dict:
        """The simulator parameters this member changes."""
        keys = ("cpu_vf_exp", "cpu_spin_share", "mem_overlap", "emc_dram_rate_share", "emc_ctrl_w")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT = Perturbation("default")


def family(spread_pct: float = 1.5) -> list:
    """The default simulator and the perturbed ones: each physical knob to either side of its
    default, two corners where several move at once, and a per-mode spread of ``spread_pct``
    (fixed per run) on every perturbed member."""
    s = spread_pct
    return [
        DEFAULT,
        Perturbation("cpu-exp-1.0", cpu_vf_exp=1.0, mode_spread_pct=s, seed=1),
        Perturbation("cpu-exp-2.5", cpu_vf_exp=2.5, mode_spread_pct=s, seed=2),
        Perturbation("spin-0.0", cpu_spin_share=0.0, mode_spread_pct=s, seed=3),
        Perturbation("spin-1.0", cpu_spin_share=1.0, mode_spread_pct=s, seed=4),
        Perturbation("mem-hidden-0.6", mem_overlap=0.6, mode_spread_pct=s, seed=5),
        Perturbation("emc-ctrl-heavy", emc_dram_rate_share=0.2, emc_ctrl_w=2.0, mode_spread_pct=s, seed=6),
        Perturbation("emc-dram-heavy", emc_dram_rate_share=0.9, emc_ctrl_w=0.4, mode_spread_pct=s, seed=7),
        Perturbation("corner-a", cpu_vf_exp=2.5, cpu_spin_share=1.0, mem_overlap=0.6, emc_dram_rate_share=0.2,
                     emc_ctrl_w=2.0, mode_spread_pct=s, seed=8),
        Perturbation("corner-b", cpu_vf_exp=1.0, cpu_spin_share=0.0, mem_overlap=0.3, emc_dram_rate_share=0.9,
                     emc_ctrl_w=0.4, mode_spread_pct=s, seed=9),
    ]


def member(name: str, spread_pct: float = 1.5) -> Perturbation:
    """The family member called ``name`` (ValueError lists the names)."""
    for m in family(spread_pct):
        if m.name == name:
            return m
    raise ValueError(f"no perturbed simulator {name!r}: one of {', '.join(m.name for m in family())}")


def perturbed_params(pert: Perturbation, base: SimParams | None = None) -> SimParams:
    """``base`` (default: the calibrated parameters) with the member's changes."""
    return (base or default_params()).with_updates(**pert.updates())


def mode_factors(pert: Perturbation, mode, run_seed: int = 0) -> tuple:
    """(time factor, power factor) of ``mode`` on this member for run ``run_seed``: 1 each
    without a spread; else Gaussian, together of ``mode_spread_pct`` relative size, fixed for the
    run (a hash of the member's seed, the run's and the mode's clocks: no global random state)."""
    if pert.mode_spread_pct <= 0:
        return 1.0, 1.0
    key = f"{pert.seed}:{run_seed}:" + ":".join(f"{float(x):g}" for x in mode)
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    sd = pert.mode_spread_pct / 100.0 / math.sqrt(2.0)
    return 1.0 + sd * rng.gauss(0, 1), 1.0 + sd * rng.gauss(0, 1)


__all__ = ["DEFAULT", "Perturbation", "family", "member", "mode_factors", "perturbed_params"]

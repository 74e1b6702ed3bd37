"""Real U-curves for the policies: the Perseus (SOSP'24) stage profiles of GPT-3 175B and
BLOOM 176B on A100 and A40 (pydvfs/data/real/perseus_sosp24/, see its README.md).

Each file holds, per pipeline stage and instruction (forward / backward), the time and energy
of one micro-batch at every SM clock the GPU allows. Stages 0-6 of a model are identical
profiles (the same transformer blocks); stage 7 carries the output head. So a GPU has, per
model, four distinct workloads (stage 0-6 or 7, forward or backward): eight per GPU, two
architectures (leave-one-model-out = fit on one model, predict the other).

What the policies need of a workload is its architecture (layers, hidden, tokens per sample):
the published shapes (GPT-3 175B: 96 layers, d 12288; BLOOM 176B: 70 layers, d 14336; both
2048-token sequences) split over 8 pipeline stages; a backward pass counts as twice the
layers of a forward one (about twice the FLOPs and traffic). The V/f shape of these GPUs is not
published: the Orin-like default is stretched to the GPU's top clock (an assumption, reported
as such in docs/policy.md). The GPU's default is its top clock, which plays MAXN's part.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import InvalidValueError
from ..model.curve import DEFAULT_VF, VFCurve
from ..package_data import package_file
from ..workload import Workload
from .curves import Curve

DATA_DIR = package_file("data", "real", "perseus_sosp24")
# model -> (model type, layers, hidden, sequence length), from the published configurations
ARCHITECTURES = {"gpt3-175b": ("gpt", 96, 12288, 2048.0), "bloom": ("bloom", 70, 14336, 2048.0)}
GPUS = ("a100_sxm_bf16", "a40_bf16")
STAGES = 8


def stage_layers(layers: int, stage: int) -> int:
    """Layers of a pipeline stage: an even split, the last stage taking what is left."""
    per = -(-layers // STAGES)
    return per if stage < STAGES - 1 else layers - per * (STAGES - 1)


def gpu_vf(top_mhz: float) -> VFCurve:
    """The default (Orin-like) V/f shape stretched so that its top level is the GPU's (the
    roofline fit then moves its knee to where the data puts it)."""
    from .roofline_curve import base_knee_mhz, stretched_vf
    scale = top_mhz / DEFAULT_VF.freqs_mhz[-1]
    return stretched_vf(DEFAULT_VF, base_knee_mhz(DEFAULT_VF) * scale, top_mhz)


def perseus_curves(gpu: str, data_dir: Path = DATA_DIR) -> tuple[list[Curve], VFCurve]:
    """The distinct workloads of both models on one GPU, as raw measured curves (no fit: these
    are averaged profiles, scored on their own points), and the GPU's assumed V/f shape."""
    if gpu not in GPUS:
        raise InvalidValueError(f"unknown Perseus GPU {gpu!r}; expected one of {', '.join(GPUS)}")
    curves, top = [], 0.0
    for model, (mtype, layers, hidden, seq) in ARCHITECTURES.items():
        path = data_dir / f"{model}+{gpu}.csv"
        if not path.is_file():
            raise InvalidValueError(f"no Perseus profile {path}")
        df = pd.read_csv(path)
        for stage in (0, STAGES - 1):  # 0..6 are the same profile
            for instr in ("forward", "backward"):
                g = df[(df["stage"] == stage) & (df["instruction"] == instr)].groupby("frequency")[
                    ["time", "energy"]].mean().sort_index()
                mult = 2 if instr == "backward" else 1
                wl = Workload(model=mtype, layers=stage_layers(layers, stage) * mult, hidden=hidden,
                              seq_len=seq, name=f"{model}/{gpu}/stage{stage}/{instr}")
                freqs = tuple(float(f) for f in g.index)
                top = max(top, freqs[-1])
                curves.append(Curve(workload=wl, task=instr, params=float("nan"), freqs_mhz=freqs,
                                    energy_j=tuple(float(e) for e in g["energy"]),
                                    maxn_energy_j=float(g["energy"].iloc[-1]), fit=None,
                                    time_s=tuple(float(t) for t in g["time"])))
    return curves, gpu_vf(top)


def model_of(curve: Curve) -> str:
    """The LOMO group of a Perseus workload: its model (all stages and passes together)."""
    return (curve.name or "").split("/")[0]

"""The simulated board over whole power modes (GPU x EMC x CPU clocks): full sweeps, probes
with run-to-run noise, and the joint model's error against the full sweep (docs/power-modes.md).

Steady state of a pinned mode, no podgov: every clock fixed, so a mode is one operating point.
Energies are per training step and by rail role of the board (module, CPU+GPU), summed by
:func:`pydvfs.device.table.energies`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.joint import VFSet, design_probes, fit_joint, mape
from .catalogue import SimRun
from .model import SimParams, default_params, operating_point, run_noise, vf_table
from .profiles import DEFAULT_BOARD, profile


@dataclass(frozen=True)
class ModePoint:
    gpu_mhz: float
    emc_mhz: float
    cpu_mhz: float
    t_step_s: float
    module_w: float
    cpu_gpu_w: float
    load: float

    @property
    def module_j(self) -> float:
        return self.module_w * self.t_step_s

    @property
    def cpu_gpu_j(self) -> float:
        return self.cpu_gpu_w * self.t_step_s


def mode_grid(board: str = DEFAULT_BOARD, cpu_clocks=None) -> list:
    """Every (GPU level, EMC rate, CPU clock) of the board: its table's GPU levels and EMC rates
    and the profile's few CPU clocks (``cpu_clocks`` replaces them)."""
    prof = profile(board)
    cpus = tuple(cpu_clocks) if cpu_clocks else prof.sweep_cpu_mhz
    return [(g, e, c) for g in prof.levels_mhz for e in prof.emc_rates_mhz for c in cpus]


def mode_point(w: SimRun, gpu_mhz: float, emc_mhz: float, cpu_mhz: float, board: str = DEFAULT_BOARD,
               p: SimParams | None = None) -> ModePoint:
    op = operating_point(w, "fixed", gpu_mhz, p or default_params(), board=board, emc_mhz=emc_mhz,
                         cpu_mhz=cpu_mhz)
    roles = op.role_power_w
    return ModePoint(op.freq_mhz, emc_mhz, cpu_mhz, op.t_step_s, roles["module"], roles["cpu_gpu"], op.load)


def full_sweep(w: SimRun, board: str = DEFAULT_BOARD, p: SimParams | None = None, cpu_clocks=None) -> list:
    p = p or default_params()
    return [mode_point(w, g, e, c, board, p) for g, e, c in mode_grid(board, cpu_clocks)]


def probe(w: SimRun, modes, board: str = DEFAULT_BOARD, p: SimParams | None = None, seed: int = 0,
          noise: bool = True) -> list:
    """Measure ``modes`` as runs would: each with the simulator's run-to-run noise and spikes."""
    p = p or default_params()
    out = []
    for g, e, c in modes:
        m = mode_point(w, g, e, c, board, p)
        tf, pf = (1.0, 1.0)
        if noise:
            tf, pf = run_noise(p, 1.0 - m.load, seed, w.name, f"joint:{board}:{e:g}:{c:g}", g, 0)
        # noise and spikes stretch the run at its mean power (as simulate_run does)
        out.append(ModePoint(g, e, c, m.t_step_s * tf, m.module_w * pf, m.cpu_gpu_w * pf, m.load))
    return out


def board_vf(board: str, p: SimParams | None = None) -> VFSet:
    """The joint model's V/f: the simulated board's GPU table; CPU and EMC the model's defaults."""
    from ..model.curve import VFCurve

    pairs = [(f, mv / 1000.0) for f, mv in vf_table(p or default_params(), board)]
    return VFSet(gpu=VFCurve.from_pairs(pairs))


def evaluate_joint_model(w: SimRun, board: str = DEFAULT_BOARD, p: SimParams | None = None, seed: int = 0,
                         noise: bool = True, sweep: list | None = None) -> dict:
    """Probe the designed modes (noisy), fit the joint model for module and CPU+GPU power, and
    compare its predictions with the full sweep (noiseless truth): MAPE of time, power, energy,
    and the energy lost by running the model's best mode instead of the true best."""
    p = p or default_params()
    prof = profile(board)
    sweep = sweep or full_sweep(w, board, p)
    modes = design_probes(prof.levels_mhz, prof.emc_rates_mhz, prof.sweep_cpu_mhz)
    probes = probe(w, modes, board, p, seed, noise)
    vf = board_vf(board, p)
    g = [m.gpu_mhz for m in sweep]
    e = [m.emc_mhz for m in sweep]
    c = [m.cpu_mhz for m in sweep]
    out = {"workload": w.name, "board": board, "probes": len(probes), "modes": len(sweep)}
    for role in ("module", "cpu_gpu"):
        fit = fit_joint([m.gpu_mhz for m in probes], [m.emc_mhz for m in probes], [m.cpu_mhz for m in probes],
                        [m.t_step_s for m in probes], [getattr(m, f"{role}_w") for m in probes], vf)
        t_true = [m.t_step_s for m in sweep]
        p_true = [getattr(m, f"{role}_w") for m in sweep]
        e_true = [a * b for a, b in zip(t_true, p_true)]
        e_pred = fit.energy_j(g, e, c)
        best_pred = int(e_pred.argmin())
        e_best = min(e_true)
        out[role] = {
            "time_mape_pct": mape(fit.time_s(g, e, c), t_true),
            "power_mape_pct": mape(fit.power_w(g, e, c), p_true),
            "energy_mape_pct": mape(e_pred, e_true),
            "chosen_mode": [g[best_pred], e[best_pred], c[best_pred]],
            "chosen_regret_pct": 100.0 * (e_true[best_pred] / e_best - 1.0),
            "fit": fit.to_dict(),
        }
    return out

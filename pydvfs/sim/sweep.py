"""The paper's characterisation sweep on the simulated board, in virtual time, and its plots.

Every model-task pair x every OPP (fixed) + MAXN (podgov) [+ nvpmodel power modes] x repeats,
each run measured with noise; rows follow :mod:`pydvfs.characterise.dataset`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from ..characterise.dataset import DatasetWriter
from ..device import table as boards
from ..device.fake import ORIN_MODEL
from ..errors import InvalidValueError
from .catalogue import CHARACTERISATION_TASKS, HOST_BOUND, PAPER_MODELS, get_method, get_workload
from .model import DEFAULT_BOARD as ORIN_BOARD
from .model import ORIN_LEVELS_MHZ, RAILS, default_params, idle_board_power_w, operating_point, simulate_run


def maxn_setting(board: str) -> str:
    """The simulator's setting for MAXN, the board's own governor, on ``board``: the AGX Orin's
    ``maxn`` mode; on another board podgov over the whole table at the top CPU and EMC clocks
    (its unconstrained mode)."""
    return "maxn" if board == ORIN_BOARD else "podgov"


def sweep_rows(models: Iterable[str] = PAPER_MODELS, tasks: Iterable[str] = CHARACTERISATION_TASKS,
               repeats: int = 1, seed: int = 0, freqs_mhz: Iterable[float] | None = None,
               power_modes: Iterable[str] = (), batch_size: int = 16, epochs: float = 1.0,
               host_bound: bool = False, p=None, knobs=("gpu",), mode_extra: int = 16,
               methods: Iterable[str] = ("full-fp32",), board: str = ORIN_BOARD) -> Iterator[dict]:
    """``methods``: how each pair trains (tags of :data:`METHODS`: full-fp32, lora-bf16,
    qlora-bf16, ...; each not full-fp32 is named ``model/task@tag``).
    ``host_bound``: also every model-task pair as a host-bound run (``HOST_BOUND``: small
    batches, exposed host time), named ``model/task+hostbound``. ``knobs`` with ``emc`` and/or
    ``cpu``: the fixed runs cover a designed subset of the modes (:func:`sweep_modes`: every GPU
    level of ``freqs_mhz`` at the top EMC rate and CPU clock, an L9 design and a Latin hypercube
    of ``mode_extra`` modes), each row carrying its ``emc_mhz``/``cpu_mhz``. ``board``: the
    simulator profile swept (pydvfs/sim/profiles.py; default the calibrated AGX Orin), its whole
    GPU table unless ``freqs_mhz``; MAXN is the board's unconstrained podgov (on the AGX Orin its
    ``maxn`` mode). Only the AGX Orin's rails have dataset columns: another board's rows carry
    its role sums (energy_module_j, energy_cpu_gpu_j)."""
    from .profiles import profile

    p = p or default_params()
    orin = board == ORIN_BOARD
    if not orin and tuple(knobs) != ("gpu",):
        raise InvalidValueError(f"a joint (EMC/CPU) sweep is simulated on the AGX Orin only, not {board}")
    freqs_mhz = ORIN_LEVELS_MHZ if freqs_mhz is None and orin else freqs_mhz
    freqs_mhz = profile(board).levels_mhz if freqs_mhz is None else freqs_mhz
    modes = sweep_modes(freqs_mhz, knobs, mode_extra, seed)
    # the board the simulator stands for (the AGX Orin: named by the model string its fake board
    # carries): its rails' roles (the board table) make the module and CPU+GPU energies
    table_board = boards.identify(ORIN_MODEL) if orin else boards.board(board)
    idle = idle_board_power_w(p, board)
    idle_cpu_gpu_w = boards.energies(idle, table_board)["cpu_gpu"]
    models, tasks = list(models), list(tasks)
    methods = [get_method(t) for t in methods]
    workloads = [get_workload(m, t, batch_size, epochs, method=me) for m in models for t in tasks for me in methods]
    if host_bound:
        workloads += [get_workload(m, t, batch_size, epochs, host=HOST_BOUND, method=me)
                      for m in models for t in tasks for me in methods]
    for w in workloads:
        maxn_op = operating_point(w, maxn_setting(board), None, p, board=board)
        util_pct = 100.0 * maxn_op.load
        settings = [("fixed", m) for m in modes] + [("maxn", None)] + [(pm, None) for pm in power_modes]
        for setting, mode in settings:
            f, emc, cpu = mode if mode else (None, None, None)
            op = maxn_op if setting == "maxn" else operating_point(w, setting, f, p, emc_mhz=emc, cpu_mhz=cpu,
                                                                  board=board)
            for r in range(repeats):
                res = simulate_run(w, setting, f, repeat=r, seed=seed, p=p, op=op)
                if emc is not None or cpu is not None:  # a mode's own noise draw (the GPU clock's is keyed on it alone)
                    res = _mode_noise(res, op, p, seed, w.name, emc, cpu, r)
                e = res.role_energy_j  # by the board table's rail roles
                a = w.arch
                row = {
                    "workload": w.name, "model": a.family, "model_size": a.size,
                    "task": w.task.name, "layers": a.layers, "hidden": a.hidden,
                    "heads": a.heads, "params": a.params, "seq_len": w.task.avg_tokens,
                    "batch_size": w.batch_size, "gpu_util_pct": round(util_pct, 2),
                    "freq_mhz": res.freq_mhz, "setting": setting, "repeat": r,
                    "duration_s": res.duration_s,
                    **({f"energy_j_{rail}": res.energy_j[rail] for rail in RAILS} if orin else {}),
                    "energy_module_j": e["module"], "energy_cpu_gpu_j": e["cpu_gpu"],
                    "avg_power_w": e["cpu_gpu"] / res.duration_s,
                    "avg_gpu_load_pct": res.avg_gpu_load_pct,
                    "samples": 0, "sampler_errors": 0, "exit_status": 0, "source": "sim", "board": table_board.id,
                    "emc_mhz": emc, "cpu_mhz": cpu,
                    "idle_power_w": idle_cpu_gpu_w,
                    **_method_columns(w),
                }
                yield row


def _method_columns(w) -> dict:
    """The dataset's columns of how ``w`` trains (empty for full fp32, as datasets before them)."""
    if w.method.is_default:
        return {}
    return {**w.workload().method_columns(), "trainable_params": w.trainable_params}


def sweep_modes(freqs_mhz, knobs=("gpu",), extra: int = 16, seed: int = 0) -> list:
    """The (gpu, emc, cpu) modes of a sweep: GPU-only, (f, None, None) per clock (the stock EMC
    and CPU); with ``emc``/``cpu`` among ``knobs`` the designed subset of
    :func:`pydvfs.model.joint.sweep_modes` over the AGX Orin's EMC rates and the profile's CPU
    clocks (a knob left out: None, the stock mode's)."""
    from ..model.joint import sweep_modes as design
    from .profiles import profile

    knobs = tuple(knobs)
    if knobs == ("gpu",):
        return [(float(f), None, None) for f in freqs_mhz]
    prof = profile(ORIN_BOARD)
    emcs = prof.emc_rates_mhz if "emc" in knobs else (prof.emc_max_mhz,)
    cpus = prof.sweep_cpu_mhz if "cpu" in knobs else (prof.cpu_max_mhz,)
    return [(g, e if "emc" in knobs else None, c if "cpu" in knobs else None)
            for g, e, c in design(freqs_mhz, emcs, cpus, extra, seed)]


def _mode_noise(res, op, p, seed: int, name: str, emc, cpu, repeat: int):
    """``res`` (run without noise at a mode) with the mode's own run-to-run noise and spikes."""
    from dataclasses import replace

    from .model import run_noise

    key = f"fixed:emc{emc}:cpu{cpu}"
    tf, pf = run_noise(p, op.cpu_exposed_share, seed, name, key, op.freq_mhz, repeat)
    k = tf / res.time_factor
    return replace(res, duration_s=res.duration_s * k,
                   energy_j={r: e * k * pf / res.power_factor for r, e in res.energy_j.items()},
                   avg_gpu_load_pct=res.avg_gpu_load_pct * res.time_factor / tf, time_factor=tf, power_factor=pf)


def write_sweep(out: str | Path, **kw) -> int:
    with DatasetWriter(out) as wr:
        for row in sweep_rows(**kw):
            wr.write(row)
        return wr.rows_written


def plot_curves(rows: list[dict], out_dir: str | Path) -> list[Path]:
    """U-curves per workload: energy, time and CPU+GPU power vs clock, MAXN as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_wl: dict = {}
    for r in rows:
        by_wl.setdefault(r["workload"], []).append(r)
    written = []
    for wl, rs in by_wl.items():
        fixed = [r for r in rs if r["setting"] == "fixed"]
        maxn = [r for r in rs if r["setting"] == "maxn"]
        fs = sorted({r["freq_mhz"] for r in fixed})

        def mean(sel, key):
            return sum(r[key] for r in sel) / len(sel)

        series = {
            "energy_cpu_gpu_j": ("energy (kJ)", 1e-3),
            "duration_s": ("time (s)", 1.0),
            "avg_power_w": ("CPU+GPU power (W)", 1.0),
        }
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        for ax, (key, (label, k)) in zip(axes, series.items()):
            ys = [k * mean([r for r in fixed if r["freq_mhz"] == f], key) for f in fs]
            ax.plot(fs, ys, "o-", label="pinned")
            if key == "energy_cpu_gpu_j":
                best = fs[ys.index(min(ys))]
                ax.axvline(best, color="g", lw=0.8, ls=":", label=f"best {best:.0f} MHz")
            if maxn:
                ax.axhline(k * mean(maxn, key), color="r", ls="--", label="MAXN (podgov)")
            ax.set_xlabel("GPU clock (MHz)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{wl} (simulated AGX Orin)")
        fig.tight_layout()
        stem = wl.replace("/", "_")
        for ext in ("png", "svg"):
            path = out_dir / f"{stem}.{ext}"
            fig.savefig(path)
            written.append(path)
        plt.close(fig)
    return written

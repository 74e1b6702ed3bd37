"""A synthetic characterisation dataset with known optima, for testing the training machinery
(not a model of any board: the simulator is pydvfs.sim). Curves have the physical U shape
(time a/f + b, power p0 + c f V^2) with the non-clock share chosen to put each workload's
optimum where the rule says."""
from __future__ import annotations

import csv
import random

LEVELS = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
LEVELS_13 = tuple(114.75 + 102.0 * i for i in range(12)) + (1300.5,)  # JetPack 5's other table
COLUMNS = ("workload", "model", "task", "layers", "hidden", "seq_len", "params", "freq_mhz", "setting",
           "repeat", "duration_s", "energy_cpu_gpu_j", "avg_gpu_load_pct", "exit_status")


def true_optimum(layers: int, seq_len: float, levels=LEVELS) -> float:
    """The rule behind the data: deeper models and longer sequences want higher clocks (on
    another table: the level nearest to the 11-level rule's clock)."""
    if layers <= 6:
        f = 510.0 if seq_len <= 32 else 612.0
    else:
        f = 714.0 if seq_len <= 53 else 816.0
    return min(levels, key=lambda x: abs(x - f))


P0_W, C_W = 12.0, 10.0  # static power, switched capacitance (W per GHz V^2)


def _power_w(f_mhz: float) -> float:
    from pydvfs.model.curve import DEFAULT_VF
    return P0_W + C_W * f_mhz / 1000 * float(DEFAULT_VF.voltage_v(f_mhz)) ** 2


def time_s(f: float, f_opt: float, scale: float, levels) -> float:
    """Run time t = scale (1/f + r), f in GHz, with the clock-independent share r chosen so that
    energy = t P(f) is lowest at the level f_opt (the middle of the r-range that puts it there)."""
    return scale * (1000.0 / f + _ratio(f_opt, tuple(levels)))


_RATIOS: dict = {}


def _ratio(f_opt: float, levels: tuple) -> float:
    key = (f_opt, levels)
    if key not in _RATIOS:
        grid = [10 ** (-3 + 5 * i / 999) for i in range(1000)]
        ok = [r for r in grid if min(levels, key=lambda f: (1000.0 / f + r) * _power_w(f)) == f_opt]
        if not ok:
            raise ValueError(f"no U-curve has its optimum at {f_opt} MHz on this table")
        _RATIOS[key] = (ok[0] * ok[-1]) ** 0.5
    return _RATIOS[key]


def energy(f: float, f_opt: float, scale: float, levels=LEVELS) -> float:
    return time_s(f, f_opt, scale, levels) * _power_w(f)


def write(path, seed: int = 0, tasks=("sst2", "qnli", "mrpc", "rte", "cola"), levels=LEVELS,
          optimum=None, noise: float = 0.002) -> list[dict]:
    """``optimum(layers, seq_len, levels)``: the rule behind the data (default true_optimum)."""
    optimum = optimum or true_optimum
    rnd = random.Random(seed)
    task_len = {"sst2": 25.0, "qnli": 50.0, "mrpc": 53.5, "rte": 70.0, "cola": 11.0, "wnli": 40.0}
    models = [("bert", 2, 128), ("bert", 4, 256), ("bert", 6, 512), ("bert", 12, 768), ("bert", 24, 1024),
              ("pythia", 6, 512), ("pythia", 12, 768), ("pythia", 16, 1024)]
    rows = []
    for model, layers, hidden in models:
        for task in tasks:
            s = task_len[task] * (1.2 if model == "pythia" else 1.0)
            name = f"{model}-L{layers}-{task}"
            f_opt = optimum(layers, s, levels)
            scale = layers * hidden / 1000
            base = dict(workload=name, model=model, task=task, layers=layers, hidden=hidden, seq_len=s,
                        params=12 * layers * hidden * hidden, exit_status=0,
                        avg_gpu_load_pct=60 + layers)
            for rep in range(2):
                for f in levels:
                    t = time_s(f, f_opt, scale, levels) * (1 + rnd.gauss(0, noise))
                    rows.append({**base, "freq_mhz": f, "setting": "fixed", "repeat": rep, "duration_s": t,
                                 "energy_cpu_gpu_j": t * _power_w(f) * (1 + rnd.gauss(0, noise))})
                t = time_s(levels[-1], f_opt, scale, levels)
                rows.append({**base, "freq_mhz": "", "setting": "maxn", "repeat": rep, "duration_s": t,
                             "energy_cpu_gpu_j": energy(levels[-1], f_opt, scale, levels) * 0.97})
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return rows

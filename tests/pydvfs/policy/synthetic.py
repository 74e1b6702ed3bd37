"""A synthetic characterisation dataset with known optima, for testing the training machinery
(not a model of any board: the simulator is pydvfs.sim)."""
from __future__ import annotations

import csv
import random

LEVELS = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
LEVELS_13 = tuple(114.75 + 102.0 * i for i in range(12)) + (1300.5,)  # JetPack 5's other table
COLUMNS = ("workload", "model", "task", "layers", "hidden", "seq_len", "params", "freq_mhz", "setting",
           "repeat", "energy_cpu_gpu_j", "avg_gpu_load_pct", "exit_status")


def true_optimum(layers: int, seq_len: float, levels=LEVELS) -> float:
    """The rule behind the data: deeper models and longer sequences want higher clocks (on
    another table: the level nearest to the 11-level rule's clock)."""
    if layers <= 6:
        f = 510.0 if seq_len <= 32 else 612.0
    else:
        f = 714.0 if seq_len <= 53 else 816.0
    return min(levels, key=lambda x: abs(x - f))


def energy(f: float, f_opt: float, scale: float) -> float:
    # E = a/f + b f^2 has its minimum at f = (a / 2b)^(1/3); choose b so that it is at f_opt.
    a = 1.0e3
    b = a / (2 * f_opt ** 3)
    return scale * (a / f + b * f * f)


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
                    rows.append({**base, "freq_mhz": f, "setting": "fixed", "repeat": rep,
                                 "energy_cpu_gpu_j": energy(f, f_opt, scale) * (1 + rnd.gauss(0, noise))})
                rows.append({**base, "freq_mhz": "", "setting": "maxn", "repeat": rep,
                             "energy_cpu_gpu_j": energy(levels[-1], f_opt, scale) * 0.97})
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return rows

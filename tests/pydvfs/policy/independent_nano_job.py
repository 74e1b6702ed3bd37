"""A training job whose steps and rail powers follow the independent Orin Nano Super
(independent_nano.py), animating a fake board in (scaled) real time as the simulator's job does.

    PYTHONPATH=REPO python tests/pydvfs/policy/independent_nano_job.py --physics cpu-heavy \
        --sysfs-root DIR --model bert-base --task SST-2 --steps N [--time-scale 20] [--progress-file F]

The loop, the files it writes and its summary are pydvfs.sim.train_process's (its options, but
``--board`` is the Orin Nano Super's and ``--member`` is refused); only the physics differ: at a
pinned clock the independent physics' step at that clock, between limits its podgov's settled
clock (the lowest level in them whose load meets podgov's target, the highest where none does).
No run noise: the physics are the independent model's alone. For benches (bench/bench_first_run.py)
and tests; production code never imports it.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import independent_nano as nano

from pydvfs.sim import train_process


@dataclass(frozen=True)
class _Op:
    """What train_process's loop reads of an operating point."""

    setting: str
    freq_mhz: float
    t_step_s: float
    load: float
    power_w: dict
    clock_trace_mhz: tuple = ()

    @property
    def mean_freq_mhz(self) -> float:
        return self.freq_mhz


class Points:
    """The independent physics' operating point of the GPU limits (Hz); EMC and CPU pins are
    not modelled (the independent Nano has none): a GPU-only search never writes them."""

    def __init__(self, physics: nano.NanoPhysics, model: str, task: str):
        self.p, self.model, self.task = physics, model, task
        self.cache: dict = {}

    def clock(self, lo_mhz: float, hi_mhz: float) -> tuple[str, float]:
        inside = [f for f in nano.LEVELS if lo_mhz - 0.5 <= f <= hi_mhz + 0.5] or [nano.LEVELS[0]]
        if len(inside) == 1:
            return "fixed", inside[0]
        ok = [f for f in inside if nano.step(self.p, self.model, self.task, f).load <= self.p.podgov_target]
        return "podgov", ok[0] if ok else inside[-1]

    def __call__(self, lo_hz: int, hi_hz: int, emc_mhz=None, cpu_mhz=None):
        key = (lo_hz, hi_hz)
        if key not in self.cache:
            setting, f = self.clock(min(lo_hz, hi_hz) / 1e6, hi_hz / 1e6)
            s = nano.step(self.p, self.model, self.task, f)
            power = {"VDD_IN": s.module_w, "VDD_CPU_GPU_CV": s.cpu_gpu_w, "VDD_SOC": s.soc_w}
            self.cache[key] = (_Op(setting, f, s.t_s, s.load, power), 1.0, 1.0)
        return self.cache[key]


def main(argv: list[str] | None = None) -> int:
    ap = train_process.build_parser()
    ap.prog = "independent_nano_job.py"
    ap.add_argument("--physics", required=True, choices=sorted(nano.PHYSICS))
    args = ap.parse_args(argv)
    if args.member or args.board not in (train_process.DEFAULT_BOARD, nano.BOARD) or not args.sysfs_root:
        print(f"independent_nano_job: error: the {nano.BOARD} of independent_nano.py, with --sysfs-root, and no "
              "--member", file=sys.stderr)
        return 2
    args.board = nano.BOARD
    summary = train_process.run(args, Points(nano.PHYSICS[args.physics], args.model, args.task))
    print(json.dumps(summary))
    return 130 if summary["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())

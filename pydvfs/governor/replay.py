"""The online searches replayed window by window against the simulator's whole mode grid
(no board, no real time): the joint search (GPU x EMC x CPU) and the GPU-only model search (EMC
and CPU left at the stock mode's), on the same window noise. Used by
bench/bench_joint_search.py, the demo's "joint" stage and the tests.

Window noise: a window's step time is off by a Gaussian 0.5 %, its power by 1 %, and with
probability 5 % a spike stretches its time by 5-15 % at the same power; each mode change costs
``settle_s`` unmeasured at the new mode; a run is ``minutes`` of training at the oracle's speed.
"""
from __future__ import annotations

import random
from functools import cached_property

from .joint_search import JointParams, JointSearch
from .mode_search import CurveParams, CurveSearch, SearchPrior


class Grid:
    """A workload's modes on one board: true module J/step and s/step per (gpu, emc, cpu).

    ``pert``: the simulator of the perturbed family (:mod:`pydvfs.sim.perturbed`; default: the
    default simulator); ``run_seed``: the run whose per-mode spread (fixed for the run) applies."""

    def __init__(self, board: str, workload, pert=None, run_seed: int = 0):
        from ..sim.joint import full_sweep
        from ..sim.model import operating_point, power_modes
        from ..sim.perturbed import DEFAULT, mode_factors, perturbed_params
        from ..sim.profiles import profile

        self.pert = pert or DEFAULT
        p = perturbed_params(self.pert)
        self.board, self.name = board, workload.name
        pts = full_sweep(workload, board, p)
        self.j, self.s, smooth = {}, {}, {}
        for m in pts:
            key = (m.gpu_mhz, m.emc_mhz, m.cpu_mhz)
            tf, pf = mode_factors(self.pert, key, run_seed)
            self.j[key] = m.module_j * tf * pf
            self.s[key] = m.t_step_s * tf
            smooth[key] = m.module_j
        self.modes = sorted(self.j)
        # the member's physics without the run's per-mode spread (module J/step), and its best
        # mode: what knowing the physics exactly, and nothing of this run's spread, would choose
        self.smooth = smooth
        self.smooth_best = min(self.modes, key=smooth.get)
        prof = profile(board)
        self.stock = max(self.modes)  # every clock at its top
        self.levels = sorted({m[0] for m in self.modes})
        self.best = min(self.modes, key=self.j.get)
        self.gpu_best = min((m for m in self.modes if m[1:] == self.stock[1:]), key=self.j.get)
        self.nvpmodel = {}
        for k in power_modes(board):  # the stock modes under podgov (docs/power-modes.md)
            op = operating_point(workload, k, None, p, board=board)
            self.nvpmodel[k] = {"module_j": op.role_power_w["module"] * op.t_step_s, "t_s": op.t_step_s}
        self.calibrated = prof.calibrated
        self._params = p
        self._workload = workload

    @cached_property
    def policy_mhz(self) -> float:
        """The built-in policy's GPU clock for this workload on this board (:func:`policy_start`)."""
        return policy_start(self.board, self._workload, self._params)[0]


def window_noise(rng: random.Random) -> tuple:
    """A replayed window's (time, power) factors: 0.5 % time and 1 % power noise, and one window
    in 20 lengthened 5-15 % by interference (the replays of bench/ and of the demo share it)."""
    tf = 1 + 0.005 * rng.gauss(0, 1)
    pf = 1 + 0.01 * rng.gauss(0, 1)
    if rng.random() < 0.05:
        tf *= 1 + rng.uniform(0.05, 0.15)
    return tf, pf

def replay(grid: Grid, search, gpu_only: bool, minutes: float, window_s: float, settle_s: float, seed: int,
           noise=window_noise, told: bool = True) -> dict:
    """One run of ``search`` on ``grid``; ``noise(rng)``: a window's (time, power) factors;
    ``told``: the search is told the windows left before each window (a run of known length)."""
    n_steps = minutes * 60.0 / grid.s[grid.best]
    rng = random.Random(seed)
    steps = energy = t = 0.0
    top_rest = grid.stock[1:]

    def mode_of(target):
        return (target,) + top_rest if gpu_only else tuple(target)

    target = search.target_mhz if gpu_only else search.target_mode
    while steps < n_steps:
        m = mode_of(target)
        j_f, s_f = grid.j[m], grid.s[m]
        n = min(window_s / s_f, n_steps - steps)
        steps += n
        energy += n * j_f
        t += window_s
        tf, pf = noise(rng)
        if told:
            search.remaining_windows = int((n_steps - steps) * s_f / window_s)
        nxt = search.observe(target, j_f * tf * pf, t, s_f * tf)
        if nxt != target and steps < n_steps:
            target = nxt
            m = mode_of(target)
            n = min(settle_s / grid.s[m], n_steps - steps)
            steps += n
            energy += n * grid.j[m]
            t += settle_s
    settled = mode_of(search.best_mhz if gpu_only else search.best_mode)
    base = grid.j[grid.stock]
    oracle = 1 - grid.j[grid.best] / base
    saving = 1 - energy / (n_steps * base)
    probes = len({p.freq_mhz for p in search.probes}) if gpu_only else search.probed_modes
    return {"settled": list(settled), "gap_pct": 100 * (grid.j[settled] / grid.j[grid.best] - 1),
            "probes": probes, "saving_pct": 100 * saving, "oracle_saving_pct": 100 * oracle,
            "share_pct": 100 * saving / oracle if oracle > 0 else None,
            "t_rel": grid.s[settled] / grid.s[grid.stock], "j_rel": grid.j[settled] / base}


_FAKE_BOARDS: dict = {}


def policy_start(board: str, workload, p=None) -> tuple:
    """(GPU MHz, source): where production starts a run of ``workload`` on ``board`` without a
    record of its own runs (:func:`pydvfs.governor.loop.choose_start`: the board's built-in
    policy deciding on a fake layout of the board, as ``pydvfs apply`` decides), the workload
    described as the policy's scoring describes it (:func:`pydvfs.policy.score.truth`: its
    GPU load at MAXN measured on the simulator ``p``, perturbed or not)."""
    import tempfile
    from pathlib import Path

    from ..device import open_device
    from ..device.fake import build_fake_board
    from ..sim.model import default_params, operating_point
    from ..sim.sweep import maxn_setting
    from .loop import choose_start

    if board not in _FAKE_BOARDS:  # one fake layout per board and process (read only)
        tmp = tempfile.TemporaryDirectory(prefix="pydvfs-replay-")
        fake = build_fake_board(Path(tmp.name) / board, board=board)
        _FAKE_BOARDS[board] = (tmp, open_device(fake.root, str(Path(tmp.name) / "state")))
    dev = _FAKE_BOARDS[board][1]
    maxn = operating_point(workload, maxn_setting(board), None, p or default_params(), board=board)
    a = workload.arch
    desc = {"model": a.family, "layers": a.layers, "hidden": a.hidden, "seq_len": workload.task.avg_tokens,
            "util_pct": round(100.0 * maxn.load, 2)}
    mhz, source, _ = choose_start(dev, desc)
    return mhz, source


def make(name: str, grid: Grid, warm: bool = False):
    """The search ``name`` ("joint", "gpu-only") from the stock mode; ``warm``: given the start a
    run has in production (:func:`policy_start`: the built-in policy's GPU clock), as the joint
    search's prior start (the EMC and CPU at the stock mode's) and as the GPU-only search's centre."""
    start = grid.policy_mhz if warm else None
    if name == "joint":
        prior = SearchPrior(start=(start,) + tuple(grid.stock[1:]), source="the built-in policy") if warm else None
        return JointSearch(grid.modes, grid.stock, JointParams(reprobe_s=float("inf")), prior=prior)
    prior = SearchPrior(start=start, source="the built-in policy") if warm else None
    return CurveSearch(grid.levels, grid.stock[0], CurveParams(reprobe_s=float("inf")), prior=prior)




__all__ = ["Grid", "make", "policy_start", "replay"]

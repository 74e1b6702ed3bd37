"""Measured runs: launch ``collect_worker`` under torchrun for each configuration and strategy.

``torchrun`` is started as ``python -m torch.distributed.run`` from this interpreter, so the
workers use the same environment. Each configuration first runs on one process (the baseline
for the speedup), then with TP and/or FSDP on each requested device count. Rows follow
``dataset.SCHEMA_COLUMNS``; energy is NaN wherever no sensor exists (CPU runs): never invented.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from ..errors import InvalidValueError, PydvfsError

_KEYS = {"L": "layers", "d": "hidden", "h": "heads", "ff": "ff", "S": "seq_len", "B": "batch"}
DEFAULT_CONFIGS = "L=2,d=64,h=4,ff=128,S=32,B=8;L=2,d=128,h=4,ff=256,S=64,B=8"


@dataclass(frozen=True)
class Config:
    layers: int
    hidden: int
    heads: int
    ff: int
    seq_len: int
    batch: int


def parse_configs(text: str) -> list:
    """``"L=2,d=64,h=4,ff=128,S=32,B=8;..."`` -> [Config, ...]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        vals = {}
        for kv in part.split(","):
            k, sep, v = kv.partition("=")
            k = k.strip()
            if not sep or k not in _KEYS:
                raise InvalidValueError(f"bad config item {kv!r} (keys: {', '.join(_KEYS)})")
            try:
                vals[_KEYS[k]] = int(v)
            except ValueError:
                raise InvalidValueError(f"bad config value {kv!r}: not an integer") from None
            if vals[_KEYS[k]] <= 0:
                raise InvalidValueError(f"bad config value {kv!r}: must be positive")
        missing = [k for k, col in _KEYS.items() if col not in vals]
        if missing:
            raise InvalidValueError(f"config {part!r} lacks {', '.join(missing)}")
        if vals["hidden"] % vals["heads"]:
            raise InvalidValueError(f"config {part!r}: d must be a multiple of h")
        out.append(Config(**vals))
    if not out:
        raise InvalidValueError("no configurations given")
    return out


def _repo_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))


def run_group(cfg: Config, strategies, n: int, steps: int, warmup: int,
              timeout_s: float = 600.0, slurm: dict | None = None) -> dict:
    """Launch the runs of ``strategies`` on ``n`` processes (one launch); strategy -> record.

    ``n == 1`` runs the worker as a plain process (a process group of one, no launcher: saves
    the launcher's start-up); otherwise ``python -m torch.distributed.run --standalone``.
    ``slurm`` (:func:`pydvfs.integrations.slurm.allocation`, its ``launcher``): each launch is a job step of the
    allocation, the processes spread over its nodes through torchrun's rendezvous; the result
    goes through a folder every node sees (``slurm["shared_dir"]``).
    """
    label = f"{','.join(strategies)} x{n}"
    with tempfile.TemporaryDirectory(prefix="pydvfs-collect-", dir=slurm["shared_dir"] if slurm else None) as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ)
        if slurm is not None:
            launcher = slurm["launcher"](n, _free_port(), label) + ["pydvfs.roofline.collect_worker"]
        elif n == 1:
            launcher = [sys.executable, "-m", "pydvfs.roofline.collect_worker"]
        else:
            launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                        f"--nproc_per_node={n}", "-m", "pydvfs.roofline.collect_worker"]
        if n == 1:
            env.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
        cmd = launcher + [
               "--strategies", ",".join(strategies), "--layers", str(cfg.layers), "--hidden", str(cfg.hidden),
               "--heads", str(cfg.heads), "--ff", str(cfg.ff), "--seq-len", str(cfg.seq_len),
               "--batch", str(cfg.batch), "--steps", str(steps), "--warmup", str(warmup),
               "--out", out]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_repo_root(), env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise PydvfsError(f"{label} run timed out after {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not os.path.isfile(out):
            tail = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            why = tail[-1] if tail else f"exit {proc.returncode}"
            raise PydvfsError(f"{label} run failed: {why}")
        with open(out) as f:
            return json.load(f)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def collect(configs, strategies=("tp", "fsdp"), devices=(2,), steps: int = 3, warmup: int = 3,
            family: str = "bert", log=None, slurm: dict | None = None):
    """Run everything; returns a DataFrame in our schema (plus ``first_loss``, ``backend``).
    ``slurm``: as job steps of that allocation (:func:`run_group`)."""
    import pandas as pd

    from .sweep_csv import SCHEMA_COLUMNS, arch_id

    rows = []
    for cfg in configs:
        done = [("single", 1, run_group(cfg, ["single"], 1, steps, warmup, slurm=slurm)["single"])]
        for n in devices:
            recs = run_group(cfg, list(strategies), n, steps, warmup, slurm=slurm)
            done += [(s, n, recs[s]) for s in strategies]
        t_single = done[0][2]["time_s"]
        for strategy, n, rec in done:
            if log:
                log(f"{arch_id(family, cfg.layers, cfg.hidden, cfg.heads, cfg.ff)} S={cfg.seq_len} "
                    f"B={cfg.batch} {strategy} x{n}: {rec['time_s']:.3f} s")
            e = rec.get("energy_j")
            rows.append({
                "family": family, "arch": arch_id(family, cfg.layers, cfg.hidden, cfg.heads, cfg.ff),
                "strategy": strategy, "n_devices": n, "layers": cfg.layers, "hidden": cfg.hidden,
                "heads": cfg.heads, "ff": cfg.ff, "seq_len": cfg.seq_len, "batch": cfg.batch,
                "steps": steps, "time_s": rec["time_s"], "speedup": t_single / rec["time_s"],
                "energy_j": float("nan") if e is None else float(e), "hardware": rec["hardware"],
                "campaign": "main", "first_loss": rec["first_loss"], "backend": rec["backend"],
            })
    df = pd.DataFrame(rows)
    return df[SCHEMA_COLUMNS + ["first_loss", "backend"]]

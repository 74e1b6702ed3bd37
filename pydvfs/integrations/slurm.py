"""pydvfs on Slurm (docs/slurm.md): sweeps as array jobs (``pydvfs sweep --slurm``, its tasks and
``--merge``) and the job steps of ``pydvfs roofline collect --slurm`` (:func:`allocation`,
:func:`step_launcher`).

A sweep folder holds ``plan.json`` (the workloads, clocks, repeats, command, board options), one
dataset per workload in ``parts/`` (``parts/W.csv``, written by the array task of index W with
:func:`pydvfs.sweep.run_sweep`, which resumes a part: a resubmitted task runs only the cells its
part lacks), beside it ``parts/W.nodes.csv`` (which node and board ran each row) and
``parts/W.json`` (how many cells the sweep planned, what each attempt ran), and, once merged, ``sweep.csv``
(one dataset, ``pydvfs train`` takes it) and ``nodes.csv``.
"""
from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ..dataset import DatasetWriter, iter_rows
from ..errors import InvalidValueError
from ..sweep import parse_workload, run_key

PLAN = "plan.json"
PARTS = "parts"
MERGED = "sweep.csv"
NODES = "nodes.csv"
NODE_COLUMNS = ("workload", "setting", "freq_mhz", "repeat", "node", "board", "board_model", "serial_number",
                "job")
SUBMIT_TIMEOUT_S = 60  # an sbatch that hangs (no controller) is an error, not a wait


def allocation(shared_dir: str | os.PathLike) -> dict:
    """The Slurm allocation this process runs in (``$SLURM_JOB_ID``): its nodes and the address
    of the first (the rendezvous host); ``shared_dir``: a folder every node sees; ``launcher``: its
    :func:`step_launcher` (what pydvfs.roofline.collect calls, without importing this layer)."""
    job, nodelist = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_JOB_NODELIST")
    if not job or not nodelist:
        raise InvalidValueError("--slurm runs inside an allocation: salloc -N 2 pydvfs roofline collect --slurm ... "
                                "(or in an sbatch script)")
    nodes = _scontrol("show", "hostnames", nodelist).split()
    fields = dict(f.split("=", 1) for f in _scontrol("show", "node", "-o", nodes[0]).split() if "=" in f)
    alloc = {"job": job, "nodes": nodes, "addr": fields.get("NodeAddr", nodes[0]), "shared_dir": str(shared_dir)}
    alloc["launcher"] = lambda n_procs, port, label: step_launcher(alloc, n_procs, port, label)
    return alloc


def _scontrol(*args: str) -> str:
    try:
        cp = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        raise InvalidValueError(f"scontrol {args[0]} {args[1]}: {e}") from None
    if cp.returncode != 0:
        raise InvalidValueError(f"scontrol failed: {(cp.stderr.strip().splitlines() or ['no message'])[-1]}")
    return cp.stdout


def step_launcher(alloc: dict, n_procs: int, port: int, label: str) -> list[str]:
    """The command prefix (up to ``-m``) of one job step running ``n_procs`` processes over the
    allocation's nodes: one process alone, else torchrun on each of k nodes (n_procs / k each)
    meeting through its c10d rendezvous on the first node."""
    step = ["srun", "--kill-on-bad-exit=1", "--job-name", f"pydvfs-collect {label}"]
    if n_procs == 1:
        return [*step, "--nodes=1", "--ntasks=1", sys.executable, "-m"]
    k = max(d for d in range(1, min(len(alloc["nodes"]), n_procs) + 1) if n_procs % d == 0)
    return [*step, f"--nodes={k}", f"--ntasks={k}", "--ntasks-per-node=1", sys.executable, "-m",
            "torch.distributed.run", f"--nnodes={k}", f"--nproc_per_node={n_procs // k}", "--rdzv_backend=c10d",
            f"--rdzv_endpoint={alloc['addr']}:{port}", f"--rdzv_id={alloc['job']}-{port}", "-m"]


def node_path(path: str | None, node: str) -> str | None:
    """A board option with ``%n`` replaced by the node's name (a test cluster's own board per node)."""
    return None if path is None else path.replace("%n", node)


def _plan_of(workloads: Sequence[str], cmd: Sequence[str], options: dict) -> dict:
    specs = [parse_workload(w) for w in workloads]
    names = [s["name"] for s in specs]
    if len(set(names)) != len(names):
        raise InvalidValueError(f"two workloads have the same name: {sorted(n for n in names if names.count(n) > 1)}")
    return {"workloads": specs, "cmd": list(cmd), **options}


def missing_workloads(folder: Path, plan: dict) -> list[int]:
    """Indices of the workloads whose part is not complete: no attempt has finished it (an attempt
    that ends records in parts/W.json how many cells its sweep planned)."""
    out = []
    for i in range(len(plan["workloads"])):
        meta = folder / PARTS / f"{i}.json"
        part = folder / PARTS / f"{i}.csv"
        if not meta.exists() or not part.exists():
            out.append(i)
            continue
        planned = json.loads(meta.read_text())["planned"]
        # every row counts, a failed run's too: run_sweep does not run a cell its part holds
        done = {run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"]) for r in iter_rows(part)}
        if len(done) < planned:
            out.append(i)
    return out


def _sbatch(args: list[str]) -> int:
    try:
        cp = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                            timeout=SUBMIT_TIMEOUT_S)
    except FileNotFoundError:
        raise InvalidValueError("sbatch not found: --slurm submits with Slurm's sbatch (slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise InvalidValueError(f"sbatch did not answer in {SUBMIT_TIMEOUT_S} s (is slurmctld up?)") from None
    if cp.returncode != 0:
        raise InvalidValueError(f"sbatch failed: {(cp.stderr.strip().splitlines() or ['no message'])[-1]}")
    return int(cp.stdout.strip().split(";")[0])


def submit(folder: str | os.PathLike, workloads: Sequence[str], cmd: Sequence[str], options: dict,
           partition: str | None = None, constraint: str | None = None, max_parallel: int | None = None) -> dict:
    """Write (or check) the plan, submit an array of the workloads not yet complete and a merge
    job after it. Submitting the same sweep again runs only the missing cells."""
    folder = Path(folder)
    plan = _plan_of(workloads, cmd, options)
    plan_path = folder / PLAN
    if plan_path.exists():
        old = json.loads(plan_path.read_text())
        if old != plan:
            raise InvalidValueError(f"{folder} holds another sweep (its {PLAN} differs): give a new folder")
    else:
        (folder / PARTS).mkdir(parents=True, exist_ok=True)
        plan_path.write_text(json.dumps(plan, indent=1) + "\n")
    todo = missing_workloads(folder, plan)
    summary = {"folder": str(folder), "workloads": len(plan["workloads"]), "submitted": todo,
               "array_job": None, "merge_job": None}
    if not todo:
        return summary
    (folder / "logs").mkdir(exist_ok=True)
    common = [*(["--partition", partition] if partition else []),
              *(["--constraint", constraint] if constraint else [])]
    me = shlex.join([sys.executable, "-m", "pydvfs", "sweep"])
    array = ",".join(map(str, todo)) + (f"%{max_parallel}" if max_parallel else "")
    summary["array_job"] = _sbatch([*common, f"--array={array}", "--job-name=pydvfs-sweep",
                                    "-o", str(folder / "logs" / "%A_%a.out"),
                                    "--wrap", f"exec {me} --slurm-task {shlex.quote(str(folder))}"])
    summary["merge_job"] = _sbatch([*common, f"--dependency=afterany:{summary['array_job']}",
                                    "--job-name=pydvfs-merge", "-o", str(folder / "logs" / "merge-%j.out"),
                                    "--wrap", f"exec {me} --merge {shlex.quote(str(folder))}"])
    return summary


def _identity(dev, node: str) -> dict:
    serial = Path(dev.sysfs_root, "proc/device-tree/serial-number")
    try:
        serial_number = serial.read_bytes().rstrip(b"\0\n").decode("ascii", "replace") or None
    except OSError:
        serial_number = None
    return {"node": node, "board": dev.board.id if dev.board else "", "board_model": dev.model,
            "serial_number": serial_number}


def run_task(folder: str | os.PathLike, index: int | None = None, node: str | None = None) -> dict:
    """One array task: sweep workload ``index`` ($SLURM_ARRAY_TASK_ID) on this node's board into
    its part, resuming it."""
    from ..device import open_device
    from ..sweep import run_sweep

    folder = Path(folder)
    if not (folder / PLAN).exists():
        raise InvalidValueError(f"{folder} is not a sweep folder of `pydvfs sweep --slurm` (no {PLAN})")
    plan = json.loads((folder / PLAN).read_text())
    if index is None:
        task = os.environ.get("SLURM_ARRAY_TASK_ID", "")
        if not task.isdigit() or int(task) >= len(plan["workloads"]):
            raise InvalidValueError("--slurm-task runs inside the array job `pydvfs sweep --slurm` submits "
                                    f"($SLURM_ARRAY_TASK_ID 0..{len(plan['workloads']) - 1}, got {task!r})")
        index = int(task)
    node = node or os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '')}_{index}"
    spec = plan["workloads"][index]
    sysfs_root = node_path(plan.get("sysfs_root"), node)
    state_dir = node_path(plan.get("state_dir"), node)
    dev = open_device(sysfs_root, state_dir)
    ident = _identity(dev, node)
    meta_path = folder / PARTS / f"{index}.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"workload": spec["name"], "attempts": []}
    nodes_path = folder / PARTS / f"{index}.nodes.csv"
    new = not nodes_path.exists()
    with open(nodes_path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=NODE_COLUMNS, lineterminator="\n")
        if new:
            w.writeheader()

        def on_row(row: dict) -> None:
            w.writerow({**{k: row[k] for k in NODE_COLUMNS[:4]}, **ident, "job": job})
            f.flush()

        summary = run_sweep(plan["cmd"], spec, folder / PARTS / f"{index}.csv", freqs=plan["freqs"],
                            repeats=plan["repeats"], settle_s=plan["settle"], idle_s=plan["idle"],
                            rate_hz=plan["rate"], seed=plan["seed"], sysfs_root=sysfs_root, state_dir=state_dir,
                            on_row=on_row)
    meta["planned"] = summary["planned"]
    meta["attempts"].append({**ident, "job": job, "runs": summary["runs"], "skipped": summary["skipped"]})
    tmp = meta_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n")
    tmp.replace(meta_path)
    return summary


def merge(folder: str | os.PathLike) -> dict:
    """One dataset (sweep.csv) and one provenance table (nodes.csv) from the parts, in workload
    order; says which workloads are not complete (submit the sweep again to fill them)."""
    folder = Path(folder)
    if not (folder / PLAN).exists():
        raise InvalidValueError(f"{folder} is not a sweep folder of `pydvfs sweep --slurm` (no {PLAN})")
    plan = json.loads((folder / PLAN).read_text())
    out, nodes_out = folder / MERGED, folder / NODES
    for path in (out, nodes_out):
        path.unlink(missing_ok=True)  # ours: rewritten whole from the parts
    seen: set = set()
    rows = 0
    with DatasetWriter(out) as writer, open(nodes_out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=NODE_COLUMNS, lineterminator="\n")
        w.writeheader()
        for i in range(len(plan["workloads"])):
            part = folder / PARTS / f"{i}.csv"
            if not part.exists():
                continue
            for row in iter_rows(part):
                key = run_key(row["workload"], row["setting"], row["freq_mhz"], row["repeat"])
                if key not in seen:
                    seen.add(key)
                    writer.write(row)
                    rows += 1
            with open(folder / PARTS / f"{i}.nodes.csv", newline="", encoding="utf-8") as nf:
                w.writerows(csv.DictReader(nf))
    incomplete = [plan["workloads"][i]["name"] for i in missing_workloads(folder, plan)]
    return {"out": str(out), "nodes": str(nodes_out), "rows": rows, "incomplete": incomplete}

"""pydvfs on Slurm (docs/slurm.md): sweeps as array jobs (``pydvfs sweep --slurm``, its tasks and
``--merge``) and the job steps of ``pydvfs roofline collect --slurm`` (:func:`allocation`,
:func:`step_launcher`).

A sweep folder holds ``plan.json`` (the workloads, clocks, repeats, command, board options),
``jobs.json`` (the array jobs submitted for it), one dataset per workload in ``parts/``
(``parts/W.csv``, written by the array task of index W with :func:`pydvfs.characterise.sweep.run_sweep`, which
resumes a part: a resubmitted task runs only the cells its part lacks or failed), beside it
``parts/W.nodes.csv`` (which node and board ran each row) and ``parts/W.json`` (how many cells
the sweep planned, what each attempt ran), and, once merged, ``sweep.csv`` (one dataset,
``pydvfs train`` takes it) and ``nodes.csv``.

The array's tasks run the plan's command as the user who submitted it (root too): the folder is
trusted only as a private one. It, every folder above it and ``parts/``/``logs/`` must be
changeable by no one but root and that user (owned by them, no group or other write, no link
another user owns on the way), every file read or written there a regular file of that user,
reached through no link, read to a bound; and a task runs a plan only if it is the one submitted
(its SHA-256 is on the task's command line). Checked at submission, in every task and in the merge.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ..characterise.dataset import DatasetWriter, iter_rows
from ..characterise.sweep import cell_command, run_key
from ..command import check_command
from ..errors import InvalidValueError
from ..progress import check_folders_above, read_capped, replace_atomically
from ..workload import parse_workload

PLAN = "plan.json"
JOBS = "jobs.json"
PARTS = "parts"
LOGS = "logs"
MERGED = "sweep.csv"
NODES = "nodes.csv"
NODE_COLUMNS = ("workload", "setting", "freq_mhz", "repeat", "node", "board", "board_model", "serial_number",
                "job")
SUBMIT_TIMEOUT_S = 60  # an sbatch that hangs (no controller) is an error, not a wait
MAX_JSON_BYTES = 4 << 20  # plan.json, jobs.json, parts/W.json: read to this bound
ACTIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")
SERIAL_PATH = "/proc/device-tree/serial-number"


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


def _client(prog: str, *args: str) -> str:
    """A Slurm client's output; one line (InvalidValueError) where it is missing, hangs or fails."""
    try:
        cp = subprocess.run([prog, *args], capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    except FileNotFoundError:
        raise InvalidValueError(f"{prog} not found: --slurm uses Slurm's clients (slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise InvalidValueError(f"{prog} did not answer in {SUBMIT_TIMEOUT_S} s (is slurmctld up?)") from None
    if cp.returncode != 0:
        raise InvalidValueError(f"{prog} failed: {(cp.stderr.strip().splitlines() or ['no message'])[-1]}")
    return cp.stdout


def _scontrol(*args: str) -> str:
    return _client("scontrol", *args)


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


# --- the sweep folder: private to the user the tasks run as -------------------------------------

def _private(path: Path, what: str) -> None:
    """InvalidValueError unless ``path`` is a real folder (no link) of this user that no one
    else may write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise InvalidValueError(f"{path} is not a sweep folder of `pydvfs sweep --slurm` (it does not exist)") from None
    me = os.geteuid()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise InvalidValueError(f"refusing {what} {path}: it is a symbolic link or not a folder")
    if st.st_uid != me or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InvalidValueError(f"refusing {what} {path}: it must be owned by you (uid {me}) and writable by no one "
                                f"else (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):03o}): the sweep's "
                                f"tasks run its command as you")


def check_folder(folder: Path, create: bool = False) -> None:
    """The sweep folder, every folder above it and its ``parts/`` and ``logs/``: changeable by no
    one but root and this user (made 0755 where ``create`` and missing)."""
    check_folders_above(str(folder), "the sweep folder")
    if create:
        for d in (folder, folder / PARTS, folder / LOGS):
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                pass
            except OSError as e:
                raise InvalidValueError(f"cannot create the sweep folder {d}: {e.strerror}") from None
    _private(folder, "the sweep folder")
    for sub in (PARTS, LOGS):
        if create or os.path.lexists(folder / sub):
            _private(folder / sub, "the sweep folder's")


def _ours(path: Path) -> bool:
    """True where ``path`` is a regular file of this user that no one else may write (False:
    missing); InvalidValueError for anything else there (a link, a folder, another user's file)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InvalidValueError(f"refusing {path}: not a regular file of yours that only you may write (a link, a "
                                f"folder, or another user's file was put there)")
    return True


def _read(path: Path, cap: int = MAX_JSON_BYTES) -> bytes:
    """A file of ours, read through no link, to ``cap`` bytes (InvalidValueError beyond)."""
    _ours(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InvalidValueError(f"cannot read {path}: {e.strerror}") from None
    try:
        data = read_capped(fd, cap)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise InvalidValueError(f"{path} is over {cap} bytes: not a file of this sweep")
    return data


def _read_json(path: Path) -> dict:
    try:
        out = json.loads(_read(path))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidValueError(f"{path} is damaged ({e})") from None
    if not isinstance(out, dict):
        raise InvalidValueError(f"{path} is damaged (not a JSON object)")
    return out


def _write_json(path: Path, obj: dict) -> None:
    _ours(path)  # nothing else is replaced
    replace_atomically(path, json.dumps(obj, indent=1) + "\n")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_plan(folder: Path, sha256: str | None = None) -> dict:
    """The sweep's plan, after the folder's checks; with ``sha256`` only the plan submitted."""
    folder = Path(os.path.abspath(folder))  # the checks walk it from /
    check_folder(folder)
    if not os.path.lexists(folder / PLAN):
        raise InvalidValueError(f"{folder} is not a sweep folder of `pydvfs sweep --slurm` (no {PLAN})")
    data = _read(folder / PLAN)
    if sha256 is not None and digest(data) != sha256:
        raise InvalidValueError(f"{folder / PLAN} is not the plan submitted (its SHA-256 differs): refusing to run its "
                                "command; submit the sweep again")
    try:
        plan = json.loads(data)
        specs = plan["workloads"]
        if not (isinstance(specs, list) and all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in specs)
                and isinstance(plan["cmd"], list) and plan["cmd"] and all(isinstance(a, str) for a in plan["cmd"])):
            raise ValueError("workloads or cmd malformed")
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidValueError(f"{folder / PLAN} is damaged ({e}): give a new folder") from None
    return plan


def _plan_of(workloads: Sequence[str], cmd: Sequence[str], options: dict) -> dict:
    specs = [parse_workload(w) for w in workloads]
    names = [s["name"] for s in specs]
    if len(set(names)) != len(names):
        raise InvalidValueError(f"two workloads have the same name: {sorted(n for n in names if names.count(n) > 1)}")
    for spec in specs:  # a {placeholder} the spec cannot fill is refused now, not in every task
        cell_command(cmd, spec)
    return {"workloads": specs, "cmd": list(cmd), **options}


# --- what is done, what runs -------------------------------------------------------------------

def _part_state(folder: Path, i: int) -> tuple[set, set, int | None, str | None]:
    """(cells done, cells whose last row failed, cells planned or None, why the part is damaged
    or None) of workload ``i``'s part. A torn last row (a task killed mid-row) is not a cell."""
    part, meta = folder / PARTS / f"{i}.csv", folder / PARTS / f"{i}.json"
    done, failed = set(), set()
    try:
        if not _ours(part) or not _ours(meta):
            return done, failed, None, None
        planned = _read_json(meta).get("planned")
        if not isinstance(planned, int):
            return done, failed, None, f"{meta} is damaged (no count of planned cells)"
        for row in iter_rows(part, torn_tail=True):
            key = run_key(row["workload"], row["setting"], row["freq_mhz"], row["repeat"])
            done.add(key)
            (failed.add if row["exit_status"] not in (0, None) else failed.discard)(key)
    except (InvalidValueError, ValueError, KeyError, OSError) as e:
        return set(), set(), None, f"{part}: {e}"
    return done, failed, planned, None


def missing_workloads(folder: Path, plan: dict) -> list[int]:
    """Indices of the workloads whose part is not complete: no attempt has finished it (an attempt
    that ends records in parts/W.json how many cells its sweep planned), a cell is missing, or a
    cell's last run failed (its task runs it again)."""
    out = []
    for i in range(len(plan["workloads"])):
        done, failed, planned, _ = _part_state(folder, i)
        if planned is None or len(done) < planned or failed:
            out.append(i)
    return out


def _ranges(indices: Sequence[int]) -> str:
    """0,1,2,3,7,9,10 -> "0-3,7,9-10": an array spec sbatch takes whatever the count."""
    out, start = [], None
    for k, i in enumerate(indices):
        if start is None:
            start = i
        if k + 1 == len(indices) or indices[k + 1] != i + 1:
            out.append(str(start) if start == i else f"{start}-{i}")
            start = None
    return ",".join(out)


def _active(folder: Path) -> set[int]:
    """Workload indices whose task of an earlier submission is pending or running (squeue)."""
    if not _ours(folder / JOBS):
        return set()
    jobs = [j["array_job"] for j in _read_json(folder / JOBS).get("submissions", [])
            if isinstance(j, dict) and isinstance(j.get("array_job"), int)]
    if not jobs:
        return set()
    out = set()
    for line in _client("squeue", "-h", "-r", "-t", "all", "-j", ",".join(map(str, jobs)), "-o", "%F %K %T").splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1].isdigit() and fields[2] in ACTIVE_STATES:
            out.add(int(fields[1]))
    return out


def _sbatch(args: list[str]) -> int:
    return int(_client("sbatch", "--parsable", *args).strip().split(";")[0])


def _max_array_size() -> int | None:
    for line in _scontrol("show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return int(value)
    return None


def _plugin_options() -> list[str]:
    """``--dvfs=off`` where the pydvfs SPANK plugin is installed (sbatch lists its options): the
    sweep pins each cell itself, a plugstack ``default=auto`` must not pin its steps."""
    return ["--dvfs=off"] if "--dvfs" in _client("sbatch", "--help") else []


def _gres(partition: str | None) -> list[str]:
    """``--gres=gpu:1`` where the partition's nodes declare a GPU GRES, else nothing."""
    args = ["-h", "-o", "%G", *(["-p", partition] if partition else [])]
    return ["--gres=gpu:1"] if any(g.startswith("gpu") for g in _client("sinfo", *args).split()) else []


def submit(folder: str | os.PathLike, workloads: Sequence[str], cmd: Sequence[str], options: dict,
           partition: str | None = None, constraint: str | None = None, max_parallel: int | None = None,
           exclusive: bool = True) -> dict:
    """Write (or check) the plan, submit an array of the workloads not yet complete and not
    already pending or running, and a merge job after it. Submitting the same sweep again runs
    only the missing or failed cells. ``exclusive``: each task owns its node (the default: a
    measuring task shares the module's rails with nothing); else it asks for the GPU's GRES where
    the nodes declare one."""
    folder = Path(os.path.abspath(folder))  # the checks walk it from /
    check_command(cmd)  # on this host: a command missing here would fail every task
    plan = _plan_of(workloads, cmd, options)
    check_folder(folder, create=True)
    plan_path = folder / PLAN
    new_plan = not _ours(plan_path)
    if not new_plan and read_plan(folder) != plan:
        raise InvalidValueError(f"{folder} holds another sweep (its {PLAN} differs): give a new folder")
    limit = _max_array_size()
    if limit is not None and len(plan["workloads"]) > limit:
        raise InvalidValueError(f"{len(plan['workloads'])} workloads: the cluster's MaxArraySize is {limit} (array "
                                f"indices 0..{limit - 1}); split the sweep into folders of at most {limit}")
    if new_plan:
        _write_json(plan_path, plan)
    sha = digest(_read(plan_path))
    try:
        active = _active(folder)
        todo = [i for i in missing_workloads(folder, plan) if i not in active]
        summary = {"folder": str(folder), "workloads": len(plan["workloads"]), "submitted": todo,
                   "running": sorted(active), "array_job": None, "merge_job": None}
        if not todo:
            return summary
        common = [*(["--partition", partition] if partition else []),
                  *(["--constraint", constraint] if constraint else []), *_plugin_options()]
        me = shlex.join([sys.executable, "-m", "pydvfs", "sweep"])
        array = _ranges(todo) + (f"%{max_parallel}" if max_parallel else "")
        place = ["--exclusive"] if exclusive else _gres(partition)
        summary["array_job"] = _sbatch([*common, *place, f"--array={array}", "--job-name=pydvfs-sweep",
                                        "-o", str(folder / LOGS / "%A_%a.out"), "--wrap",
                                        f"exec {me} --slurm-task {shlex.quote(str(folder))} --plan-sha256 {sha}"])
    except BaseException:
        if new_plan and not any(os.scandir(folder / PARTS)):
            os.unlink(plan_path)  # ours, just written: no sweep was submitted with it
        raise
    jobs = _read_json(folder / JOBS) if _ours(folder / JOBS) else {"submissions": []}
    jobs["submissions"].append({"array_job": summary["array_job"], "indices": todo})
    _write_json(folder / JOBS, jobs)
    summary["merge_job"] = _sbatch([*common, f"--dependency=afterany:{summary['array_job']}",
                                    "--job-name=pydvfs-merge", "-o", str(folder / LOGS / "merge-%j.out"), "--wrap",
                                    f"exec {me} --merge {shlex.quote(str(folder))} --plan-sha256 {sha}"])
    return summary


# --- the array task and the merge ----------------------------------------------------------------

def _identity(dev, node: str) -> dict:
    """The node, its board's table id and device-tree model, and its serial number, read as
    every board file is (under the sysfs root, bounded, through no link out of it)."""
    from .. import _core

    raw = _core.read_board_file(dev.sysfs_root, SERIAL_PATH)
    return {"node": node, "board": dev.board.id if dev.board else "", "board_model": dev.model,
            "serial_number": _core.board_text(raw) if raw else None}


def run_task(folder: str | os.PathLike, index: int | None = None, node: str | None = None,
             plan_sha256: str | None = None) -> dict:
    """One array task: sweep workload ``index`` ($SLURM_ARRAY_TASK_ID) on this node's board into
    its part, resuming it (a cell whose last run failed runs again)."""
    from ..characterise.sweep import run_sweep
    from ..device import open_device

    folder = Path(os.path.abspath(folder))  # the checks walk it from /
    plan = read_plan(folder, plan_sha256)
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
    part, nodes_path = folder / PARTS / f"{index}.csv", folder / PARTS / f"{index}.nodes.csv"
    _ours(part)  # written by path below: the folder is ours, the entries must be too
    meta = {}
    if _ours(meta_path):  # a link or another user's file there is refused
        try:
            meta = _read_json(meta_path)
        except InvalidValueError:
            pass  # damaged: rewritten whole below (its attempts before are lost, not its rows)
    if not isinstance(meta.get("attempts"), list):
        meta = {"workload": spec["name"], "attempts": []}
    new = not _ours(nodes_path)
    with open(nodes_path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=NODE_COLUMNS, lineterminator="\n")
        if new:
            w.writeheader()
        elif f.tell() and not _ends_with_newline(nodes_path):
            f.write("\n")  # a row torn by a killed task ends here; the merge skips it

        def on_row(row: dict) -> None:
            w.writerow({**{k: row[k] for k in NODE_COLUMNS[:4]}, **ident, "job": job})
            f.flush()

        summary = run_sweep(plan["cmd"], spec, part, freqs=plan["freqs"], repeats=plan["repeats"],
                            settle_s=plan["settle"], idle_s=plan["idle"], rate_hz=plan["rate"], seed=plan["seed"],
                            sysfs_root=sysfs_root, state_dir=state_dir, on_row=on_row, retry_failed=True)
    meta["planned"] = summary["planned"]
    meta["attempts"].append({**ident, "job": job, "runs": summary["runs"], "skipped": summary["skipped"]})
    _write_json(meta_path, meta)
    return summary


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def merge(folder: str | os.PathLike, plan_sha256: str | None = None) -> dict:
    """One dataset (sweep.csv) and one provenance table (nodes.csv) from the parts, in workload
    order, each cell's last run; names the workloads not complete, the cells whose last run
    failed, and the parts it skipped as damaged (submit the sweep again to fill or rerun them)."""
    folder = Path(os.path.abspath(folder))  # the checks walk it from /
    plan = read_plan(folder, plan_sha256)
    out, nodes_out = folder / MERGED, folder / NODES
    for path in (out, nodes_out):
        if _ours(path):
            os.unlink(path)  # ours: rewritten whole from the parts
    rows, damaged, failed = 0, [], []
    with DatasetWriter(out) as writer, open(nodes_out, "x", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=NODE_COLUMNS, lineterminator="\n")
        w.writeheader()
        for i, spec in enumerate(plan["workloads"]):
            part = folder / PARTS / f"{i}.csv"
            try:
                if not _ours(part):
                    continue
                last = {run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"]): r for r in iter_rows(part, torn_tail=True)}
                provenance = _node_rows(folder / PARTS / f"{i}.nodes.csv")
            except (InvalidValueError, ValueError, KeyError, OSError) as e:
                damaged.append(f"{spec['name']}: {e}")
                continue
            for key, row in last.items():
                writer.write(row)
                rows += 1
                if row["exit_status"] not in (0, None):
                    failed.append({"workload": key[0], "setting": key[1], "freq_mhz": key[2], "repeat": key[3],
                                   "exit_status": row["exit_status"]})
                if key in provenance:
                    w.writerow(provenance[key])
    incomplete = [plan["workloads"][i]["name"] for i in missing_workloads(folder, plan)]
    return {"out": str(out), "nodes": str(nodes_out), "rows": rows, "incomplete": incomplete, "failed": failed,
            "damaged": damaged}


def _node_rows(path: Path) -> dict:
    """parts/W.nodes.csv by cell, the last row of each (a torn row, or one not of our columns,
    is skipped)."""
    out = {}
    if not _ours(path):
        return out
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != NODE_COLUMNS:
            raise InvalidValueError(f"{path} is not a node table of this sweep (its columns differ)")
        for r in reader:
            if None in r.values() or None in r:
                continue
            try:
                out[run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"])] = r
            except ValueError:
                continue
    return out

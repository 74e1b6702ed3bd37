"""A Slurm job's energy from the SPANK plugin's files (govcore/spank/spank_pydvfs.c, docs/slurm.md),
per node and in total.

Each governed step writes ``slurm-JOB.STEP.NODE.dvfs.json`` in the job's submit folder.
:func:`summary` adds them up per node: a step the plugin marks ``"policy": "outer step"`` (an
``srun`` inside a governed batch script on the same node) measured a window the outer step's
already holds and is not counted again; a refused step measured nothing.

:func:`record` keeps the summary in the job's own record, its ``AdminComment`` (as sites keep job
statistics there), so ``scontrol show job`` and, with accounting, ``sacct -o AdminComment`` show
it. Slurm refuses that update once the job has finished (an epilog is too late), so the plugin
runs it at the batch step's end on its node (plugstack's ``record=``), while the job still runs,
after the job's other steps have ended. :func:`job_energy` reads the record, or the files (the
job's WorkDir, or a folder given).
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import time
from pathlib import Path

from ..errors import InvalidValueError

ENERGY_FIELDS = ("module_j", "cpu_gpu_j")  # the energy file's (govcore's rail roles) summed per node
NESTED_POLICY = "outer step"  # the plugin's policy of a step that only measured inside a governed one
RECORD_PREFIX = "pydvfs-energy:"  # an AdminComment that holds a summary: this, then its JSON
STEPS_WAIT_S = 10  # the job's other steps' ends (their energy files) that a record waits for
CLIENT_TIMEOUT_S = 60
MAX_FILE_BYTES = 1 << 16  # an energy file is one line of a few hundred bytes
MAX_FILES = 10_000
MAX_TEXT = 128  # a name or reason read from a file: cut to this (the user writes the files)
MAX_RECORD_BYTES = 64 << 10  # the AdminComment a record writes
_JOB = re.compile(r"[0-9]{1,10}")


def check_job(job: str) -> str:
    """A job id as Slurm gives it (digits); one line otherwise."""
    if not _JOB.fullmatch(job or ""):
        raise InvalidValueError(f"not a job id: {job!r} (a number, as squeue shows it)")
    return job


def _client(prog: str, *args: str) -> str:
    try:
        cp = subprocess.run([prog, *args], capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    except FileNotFoundError:
        raise InvalidValueError(f"{prog} not found: this reads the job's record with Slurm's clients "
                                "(slurm-client); --dir reads the energy files without them") from None
    except subprocess.TimeoutExpired:
        raise InvalidValueError(f"{prog} did not answer in {CLIENT_TIMEOUT_S} s (is slurmctld up?)") from None
    if cp.returncode != 0:
        raise InvalidValueError(f"{prog} {args[0]} failed: {(cp.stderr.strip().splitlines() or ['no message'])[-1]}")
    return cp.stdout


def job_fields(job: str) -> dict[str, str]:
    """WorkDir (the job's folder, where the plugin writes) and AdminComment of the job as
    slurmctld holds them ("" where not set). One line where slurmctld knows no such job
    (MinJobAge past its end: give the folder)."""
    try:
        out = _client("scontrol", "show", "job", check_job(job))
    except InvalidValueError as e:
        raise InvalidValueError(f"job {job}: no record of it in Slurm ({e}); --dir DIR reads the energy "
                                "files in the job's folder") from None
    fields = {"WorkDir": "", "AdminComment": ""}
    for line in out.splitlines():  # each on its own line: a folder may hold blanks
        key, _, value = line.strip().partition("=")
        if key in fields:
            fields[key] = value
    if not fields["WorkDir"]:
        raise InvalidValueError(f"job {job}: scontrol show job names no WorkDir; --dir DIR reads the energy files")
    return fields


def _read_file(path: Path) -> dict | None:
    """An energy file: a regular file reached through no link, read to a bound; None if it is
    not one or holds no JSON object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_FILE_BYTES + 1)
    try:
        obj = json.loads(data) if len(data) <= MAX_FILE_BYTES else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def energy_files(job: str, folder: str | os.PathLike) -> list[dict]:
    """The job's energy files in folder (the plugin's names), by node and step."""
    check_job(job)
    d = Path(folder)
    try:
        names = sorted(p.name for p in d.iterdir() if p.name.startswith(f"slurm-{job}.")
                       and p.name.endswith(".dvfs.json"))[:MAX_FILES]
    except OSError as e:
        raise InvalidValueError(f"cannot read the folder {d}: {e.strerror or e}") from None
    files = [f for f in (_read_file(d / n) for n in names) if f is not None and str(f.get("job")) == job]
    return sorted(files, key=lambda f: (str(f.get("node")), str(f.get("step"))))


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _text(v) -> str:
    return v[:MAX_TEXT] if isinstance(v, str) else ""


def summary(job: str, files: list[dict]) -> dict:
    """Per node and in total: the energy of the steps that measured (module and CPU+GPU, J; null
    where a counted step's board did not give it: never a partial sum), their time, and the
    modes, policies and clocks the node ran at. ``not_governed``: the first reason a step of the
    node was not governed."""
    nodes: dict[str, dict] = {}
    for f in files:
        node = _text(f.get("node")) or "?"
        n = nodes.setdefault(node, {"node": node, "steps": 0, "mode": [], "policy": [], "level_mhz": [],
                                    "duration_s": 0.0, **dict.fromkeys(ENERGY_FIELDS, 0.0), "not_governed": None})
        if f.get("not_governed") and n["not_governed"] is None:
            n["not_governed"] = _text(f.get("not_governed"))
        if f.get("governed") is True:
            for key, value in (("mode", _text(f.get("mode"))), ("policy", _text(f.get("policy"))),
                               ("level_mhz", _number(f.get("level_mhz")))):
                if value not in n[key]:
                    n[key].append(value)
        if f.get("policy") == NESTED_POLICY or _number(f.get("duration_s")) is None:
            continue  # inside a step counted already, or nothing measured (refused)
        n["steps"] += 1
        n["duration_s"] += _number(f.get("duration_s"))
        for key in ENERGY_FIELDS:
            j = _number(f.get(key))
            n[key] = None if j is None or n[key] is None else n[key] + j
    total = {key: (None if any(n[key] is None for n in nodes.values()) else sum(n[key] for n in nodes.values()))
             for key in ENERGY_FIELDS}
    return {"job": int(job), "nodes": list(nodes.values()), "total": total}


def _other_steps(job: str) -> list[str]:
    out = _client("squeue", "-h", "-s", "-j", job, "-o", "%i")
    return [s for s in out.split() if s not in (f"{job}.batch", f"{job}.extern")]


def record(job: str, folder: str | os.PathLike) -> dict:
    """Write the job's summary (its energy files in folder) into its AdminComment, once its
    other steps have ended (STEPS_WAIT_S at most): as root or SlurmUser, while the job runs (the
    plugin's batch step end). The summary."""
    deadline = time.monotonic() + STEPS_WAIT_S
    while _other_steps(check_job(job)) and time.monotonic() < deadline:
        time.sleep(0.1)
    s = summary(job, energy_files(job, folder))
    if not s["nodes"]:
        raise InvalidValueError(f"job {job}: no slurm-{job}.*.dvfs.json in {folder}: nothing to record")
    kept = {**s, "nodes": [{k: v for k, v in n.items() if k != "not_governed"} for n in s["nodes"]]}
    text = json.dumps(kept, separators=(",", ":"))  # one word: scontrol show job keeps it on its line
    if len(text) > MAX_RECORD_BYTES:
        raise InvalidValueError(f"job {job}: its summary ({len(s['nodes'])} nodes) is larger than "
                                f"{MAX_RECORD_BYTES} bytes: not recorded; read it from the files")
    _client("scontrol", "update", f"job={job}", "AdminComment=" + RECORD_PREFIX + text.replace(" ", "_"))
    return s


def job_energy(job: str, folder: str | os.PathLike | None = None) -> tuple[dict, str]:
    """The job's summary and where it came from: the energy files in folder where given, else the
    job's record (AdminComment, written by :func:`record`), else the files in its WorkDir."""
    if folder is None:
        fields = job_fields(job)
        if fields["AdminComment"].startswith(RECORD_PREFIX):
            try:
                s = json.loads(fields["AdminComment"][len(RECORD_PREFIX):])
            except json.JSONDecodeError:
                raise InvalidValueError(f"job {job}: the energy record in its AdminComment is damaged") from None
            for n in s.get("nodes", []):
                n.setdefault("not_governed", None)
            return s, "the job's record (AdminComment)"
        folder = fields["WorkDir"]
    files = energy_files(job, folder)
    if not files:
        raise InvalidValueError(f"job {job}: no energy record: no slurm-{job}.*.dvfs.json in {folder} "
                                "(a job with --dvfs=off, or another folder)")
    return summary(job, files), f"the energy files in {folder}"


def table(s: dict, where: str) -> str:
    """The summary as text: one line a node and the total."""
    def j(v):
        return "-" if v is None else f"{v:.1f}"

    rows = [("node", "steps", "mode", "policy", "clock MHz", "time s", "module J", "cpu+gpu J")]
    for n in s["nodes"]:
        clocks = ",".join("maxn" if not v else f"{v:g}" for v in n["level_mhz"]) or "-"
        rows.append((n["node"], str(n["steps"]), ",".join(n["mode"]) or "-", ",".join(n["policy"]) or "-", clocks,
                     f"{n['duration_s']:.1f}", j(n["module_j"]), j(n["cpu_gpu_j"])))
    rows.append(("total", "", "", "", "", "", j(s["total"]["module_j"]), j(s["total"]["cpu_gpu_j"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"job {s['job']}: energy per node, from {where}"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += [f"{n['node']}: not governed: {n['not_governed']}" for n in s["nodes"] if n["not_governed"]]
    return "\n".join(lines)

"""pydvfs on a real Slurm cluster (tests/pydvfs/integrations/slurm_cluster.py): the SPANK plugin
(govcore/spank/spank_pydvfs.c) and `pydvfs roofline collect --slurm` (the sweep's array jobs:
test_slurm_sweep.py). One
cluster for the module (about two minutes, most of it the time-limit job's wait, which the
roofline runs fill); every client call has a timeout."""
from __future__ import annotations

import contextlib
import json
import os
import pwd
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import REPO, missing, start, stop, wait_for

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=128"


@pytest.fixture(scope="module")
def cluster(test_tmp):
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "spank"], check=True, capture_output=True, timeout=300)
    c = start(test_tmp, REPO / "govcore" / "build" / "spank_pydvfs.so")
    # The time-limit job first: Slurm's limits are whole minutes, checked every 30 s, so it runs
    # on n4 while the other tests run (test_time_limit_restores, the last, checks it).
    c.timed_job = c.sbatch("-w", "n4", "--time=1", "--dvfs=auto", "-o", "timed-%j.out", "--wrap", "sleep 600")
    yield c
    stop(c)


def _devfreq(c, node: str) -> str:
    b = c.boards[node]
    return str(b.devfreq_dir)


def _energy(c, job: int, step: str, node: str) -> dict:
    return json.loads((c.dir / "work" / f"slurm-{job}.{step}.{node}.dvfs.json").read_text())


def _policy_level_hz(govcore_bin, c, node: str, *args: str) -> int:
    out = subprocess.run([govcore_bin, "--sysfs-root", str(c.boards[node].root), "apply", *args,
                          "--dry-run", "--json"], capture_output=True, text=True, check=True, timeout=60).stdout
    return round(json.loads(out)["freq_mhz"] * 1e6)


def test_auto_pins_each_node_and_restores(cluster, govcore_bin):
    c = cluster
    nodes = ("n1", "n2")
    original = {n: c.board_files(n) for n in nodes}
    want_hz = _policy_level_hz(govcore_bin, c, "n1", "--workload", WORKLOAD)
    assert want_hz != original["n1"][1]
    read = f"echo $SLURMD_NODENAME $(cat {c.dir}/boards/$SLURMD_NODENAME/{c.boards['n1'].devfreq_dir.relative_to(c.boards['n1'].root)}/max_freq)"
    job = c.sbatch("-N2", "-w", "n1,n2", "--dvfs=auto", f"--dvfs-workload={WORKLOAD}", "-o", "auto-%j.out",
                   "--wrap", f"srun sh -c '{read}'; echo batch; {read}")
    assert c.wait(job) == "COMPLETED"
    lines = (c.dir / "work" / f"auto-{job}.out").read_text().split("\n")
    seen = {tuple(line.split()) for line in lines if line.startswith("n")}
    assert seen == {("n1", str(want_hz)), ("n2", str(want_hz))}, lines
    for n in nodes:
        c.assert_restored(n, original[n])
    outer, inner, n2 = (_energy(c, job, s, n) for s, n in (("batch", "n1"), ("0", "n1"), ("0", "n2")))
    assert outer["governed"] and outer["restored"] and outer["policy"] == "mlg"
    assert n2["governed"] and n2["restored"] and n2["level_mhz"] * 1e6 == want_hz
    assert not inner["governed"]  # the batch step owns n1's board; its srun step only measures
    # the fake rails hold a constant power: every window's energy is that power times its length
    watts = [e["module_j"] / e["duration_s"] for e in (outer, inner, n2)]
    assert min(watts) > 0 and max(watts) / min(watts) < 1.05, watts
    # the epilog finds the energy files through the environment
    env = (c.dir / "epilog" / f"{job}.n2").read_text()
    assert f"SPANK_PYDVFS_ENERGY_DIR={c.dir / 'work'}" in env.splitlines()


def test_scancel_mid_step_restores(cluster):
    c = cluster
    original = c.board_files("n3")
    job = c.sbatch("-w", "n3", "--dvfs=700", "-o", "cancel-%j.out", "--wrap", "sleep 600")
    wait_for(lambda: c.board_files("n3")[1] == 714_000_000, what="the pin")
    c.run("scancel", str(job))
    assert c.wait(job) == "CANCELLED"
    c.assert_restored("n3", original)
    e = _energy(c, job, "batch", "n3")
    assert e["restored"] and e["level_mhz"] == 714 and e["module_j"] > 0


def test_energy_file_is_written_as_the_jobs_user(cluster):
    """A job of another user (root may submit as one): its energy file is created by that user,
    not by root, in the folder the job names."""
    c = cluster
    nobody = pwd.getpwnam("nobody")
    job = c.sbatch("--uid=nobody", "-w", "n2", "--dvfs=700", "-o", "/dev/null", "--wrap", "true")
    assert c.wait(job) == "COMPLETED"
    path = c.dir / "work" / f"slurm-{job}.batch.n2.dvfs.json"
    assert path.stat().st_uid == nobody.pw_uid and json.loads(path.read_text())["restored"]
    # a folder the user may not write: no file (root would have been able to)
    closed = c.dir / "work" / "closed"
    closed.mkdir(mode=0o755, exist_ok=True)
    job = c.sbatch("--uid=nobody", "-w", "n2", "--dvfs=700", "-o", "/dev/null", "--wrap", "true", cwd=closed)
    assert c.wait(job) == "COMPLETED"
    assert not any(closed.iterdir())
    assert f"cannot write {closed}/slurm-{job}.batch.n2.dvfs.json: Permission denied" in \
        (c.dir / "log" / "slurmd-n2.log").read_text()


def test_killed_task_restores(cluster):
    c = cluster
    original = c.board_files("n3")
    cp = c.run("srun", "-w", "n3", "--dvfs=700", "sh", "-c", "kill -9 $$", check=False)
    assert cp.returncode != 0
    c.assert_restored("n3", original)


def test_killed_slurmstepd_left_to_the_epilog(cluster):
    """The step's slurmstepd itself killed (SIGKILL: no exit hook): its lock dies with it and the
    job's epilog restores the saved state."""
    c = cluster
    original = c.board_files("n3")
    pidfile = c.dir / "work" / "orphan.pid"
    job = c.sbatch("-w", "n3", "--dvfs=700", "-o", "orphan-%j.out", "--wrap", f"echo $$ > {pidfile}; exec sleep 600")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the job's script")
    st = c.boards["n3"].devfreq_dir.stat()
    holder = int((c.dir / "locks" / f"gpu-{st.st_dev:x}-{st.st_ino:x}.lock").read_text().split()[0])
    assert Path(f"/proc/{holder}/cmdline").read_bytes().startswith(f"slurmstepd: [{job}.batch]".encode())
    os.kill(holder, signal.SIGKILL)
    try:
        assert c.board_files("n3")[1] == 714_000_000  # nothing restored it yet
        c.run("scancel", str(job))
        c.wait(job)
        c.assert_restored("n3", original)  # by the epilog
    finally:  # the script's process outlived its slurmstepd: ours to stop
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("partitions, pinned", [("debug", True), ("gpu,other", False)])
def test_plugstack_default_auto_for_a_partition(cluster, govcore_bin, partitions, pinned):
    """default=auto in plugstack.conf governs a job that gives no --dvfs, in the partitions named."""
    c = cluster
    conf = c.dir / "plugstack.conf"
    saved = conf.read_text()
    original = c.board_files("n1")
    ffg_hz = _policy_level_hz(govcore_bin, c, "n1", "--policy", "ffg", "--workload", WORKLOAD)
    conf.write_text(saved.rstrip("\n") + f" default=auto default_partitions={partitions}\n")
    try:
        out = c.run("srun", "-w", "n1", "sh", "-c", f"cat {_devfreq(c, 'n1')}/max_freq").stdout.strip()
    finally:
        conf.write_text(saved)
    assert out == str(ffg_hz if pinned else original[1])
    c.assert_restored("n1", original)


@pytest.mark.parametrize("opt, says", [
    ("--dvfs=fast", "pydvfs: --dvfs: expected auto, online, off or a clock in MHz"),
    ("--dvfs-workload=model=bert", "pydvfs: --dvfs-workload needs model="),
    ("--dvfs-workload=model=bert,layers=x,hidden=1,seq_len=1", "pydvfs: workload layers: not a plain decimal number"),
])
def test_bad_option_refused_before_the_job(cluster, opt, says):
    c = cluster
    before = c.board_files("n1")
    cp = c.run("srun", "-w", "n1", opt, "true", check=False)
    assert cp.returncode != 0 and says in cp.stderr
    assert c.board_files("n1") == before


def test_off_and_far_clock(cluster):
    c = cluster
    original = c.board_files("n2")
    read = f"cat {_devfreq(c, 'n2')}/max_freq"
    assert c.run("srun", "-w", "n2", "--dvfs=off", "sh", "-c", read).stdout.strip() == str(original[1])
    marker = c.dir / "work" / "far-clock-ran"
    cp = c.run("srun", "-w", "n2", "--dvfs=99999", "touch", str(marker), check=False)
    # outside the table: refused on the node, as by `govcore pin`; the step does not start
    assert "launch failed: Plugin initialization failed" in cp.stderr and not marker.exists()
    assert "99999 MHz is outside the board's table" in (c.dir / "log" / "slurmd-n2.log").read_text()
    c.assert_restored("n2", original)


def test_online_job_governs_and_the_step_end_restores(cluster, govcore_bin):
    """--dvfs=online: the job's own governor gets the node's board (here `govcore pin`, which
    leaves its pin and saved state behind); the step's end puts the board back."""
    c = cluster
    original = c.board_files("n3")
    out = c.run("srun", "-w", "n3", "--dvfs=online", "sh", "-c",
                f"{govcore_bin} pin 700 >/dev/null && cat {_devfreq(c, 'n3')}/max_freq").stdout
    assert out.strip() == "714000000"
    c.assert_restored("n3", original)


def test_roofline_collect_on_two_nodes_is_the_one_host_collect(cluster):
    """`roofline collect --slurm` in a 2-node allocation (each parallel run: one torchrun per node,
    c10d rendezvous, gloo) gives the rows of the same collect on one host."""
    import pandas as pd

    from pydvfs.roofline import collect

    c = cluster
    config = "L=2,d=64,h=4,ff=128,S=32,B=8"
    out = c.dir / "work" / "collect" / "runs.csv"
    args = ["roofline", "collect", "--slurm", "--out", str(out), "--configs", config, "--strategies", "tp,fsdp",
            "--devices", "2", "--steps", "1", "--warmup", "1"]
    job = c.sbatch("-N2", "-w", "n1,n2", "-o", "collect-%j.out", "--wrap",
                   f"PYTHONPATH={REPO} exec {sys.executable} -m pydvfs {shlex.join(args)}")
    here = collect.collect(collect.parse_configs(config), ["tp", "fsdp"], [2], 1, 1)
    assert c.wait(job, timeout=300) == "COMPLETED", (c.dir / "work" / f"collect-{job}.out").read_text()
    there = pd.read_csv(out)
    key = ["arch", "strategy", "n_devices", "layers", "hidden", "seq_len", "batch", "steps", "backend", "hardware"]
    assert there[key].to_dict("records") == here[key].to_dict("records")
    assert there["first_loss"].tolist() == pytest.approx(here["first_loss"].tolist(), abs=1e-5)
    log = (c.dir / "log" / "slurmd-n2.log").read_text()
    assert f"launch task StepId={job}." in log  # the parallel runs reached the second node


def test_time_limit_restores(cluster):
    """The job submitted with the cluster (--time=1, --dvfs=auto on n4) was pinned by the ffg
    policy and is ended by its time limit; the board is restored and its energy file is there."""
    c = cluster
    job = c.timed_job
    assert c.wait(job, timeout=150) == "TIMEOUT"
    e = _energy(c, job, "batch", "n4")
    assert e["governed"] and e["restored"] and e["policy"] == "ffg" and e["level_mhz"] > 0
    assert e["duration_s"] >= 55 and e["module_j"] > 0
    c.assert_restored("n4", (c.boards["n4"].levels_hz[0], c.boards["n4"].levels_hz[-1]))

"""pydvfs on a real Slurm cluster (tests/pydvfs/integrations/slurm_cluster.py): the SPANK plugin
(govcore/spank/spank_pydvfs.c) and `pydvfs roofline collect --slurm` (the sweep's array jobs:
test_slurm_sweep.py). One
cluster for the module (about two minutes, most of it the time-limit job's wait, which the
roofline runs fill); every client call has a timeout."""
from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import DEFAULT_AUTO_PARTITION, REPO, missing, start, stop, wait_for

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
    conf = c.dir / "plugstack.conf"
    saved = conf.read_text()
    # record=: the batch step's end keeps the job's energy in its AdminComment
    conf.write_text(saved.rstrip("\n") + f" record={Path(sys.executable).parent / 'pydvfs'}\n")
    try:
        job = c.sbatch("-N2", "-w", "n1,n2", "--dvfs=auto", f"--dvfs-workload={WORKLOAD}", "-o", "auto-%j.out",
                       "--wrap", f"srun sh -c '{read}'; echo batch; {read}")
        assert c.wait(job) == "COMPLETED"
    finally:
        conf.write_text(saved)
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
    # `pydvfs slurm-energy JOB`: the job's record (scontrol show job), per node (n1: the batch
    # step, its srun inside it not counted twice) and in total; the same from the files
    assert "AdminComment=pydvfs-energy:{" in c.run("scontrol", "show", "job", str(job)).stdout
    cli = [sys.executable, "-m", "pydvfs", "slurm-energy"]
    env = {**c.env, "PYTHONPATH": str(REPO)}
    got = json.loads(c.run(*cli, str(job), "--json", env=env).stdout)
    files = json.loads(c.run(*cli, str(job), "--dir", str(c.dir / "work"), "--json", env=env).stdout)
    assert got["source"] == "the job's record (AdminComment)"
    assert files["source"] == f"the energy files in {c.dir / 'work'}"
    assert got["nodes"] == files["nodes"] and got["total"] == files["total"]
    per_node = {n["node"]: n for n in got["nodes"]}
    assert per_node["n1"]["module_j"] == pytest.approx(outer["module_j"])
    assert per_node["n2"]["module_j"] == pytest.approx(n2["module_j"])
    assert got["total"]["module_j"] == pytest.approx(outer["module_j"] + n2["module_j"])
    assert per_node["n2"]["level_mhz"] == [want_hz / 1e6] and per_node["n2"]["mode"] == ["auto"]
    text = c.run(*cli, str(job), env=env).stdout
    assert text.startswith(f"job {job}: energy per node") and "total" in text
    cp = c.run(*cli, "999999", env=env, check=False)
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "job 999999: no record of it in Slurm" in cp.stderr


def test_refused_batch_job_says_why_and_the_node_stays_up(cluster):
    """A batch job refused on its node (a clock outside the table; a GPU another job governs:
    the time-limit job's on n4) fails with the reason in its output and a non-zero exit; the
    node is not drained. Under plugstack's default the job runs ungoverned and says why."""
    c = cluster
    far = c.sbatch("-w", "n2", "--dvfs=1", "-o", "far-%j.out", "--wrap", "echo ran")
    busy = c.sbatch("-w", "n4", "--dvfs=auto", "-o", "busy-%j.out", "--wrap", "echo ran")
    default = c.run("srun", "-p", DEFAULT_AUTO_PARTITION, "-w", "n4", "echo", "ran")
    assert c.wait(far) == "FAILED" and c.wait(busy) == "FAILED"
    for job, name, code, says in (
            (far, "far", 2, "--dvfs=1: not governed: 1 MHz is outside the board's table"),
            (busy, "busy", 75, f"--dvfs=auto: not governed: the GPU is governed by job {c.timed_job}'s step")):
        out = (c.dir / "work" / f"{name}-{job}.out").read_text()
        assert says in out and "ran" not in out, out
        assert f"ExitCode={code}:0" in c.run("scontrol", "show", "job", str(job)).stdout
    assert default.stdout == "ran\n"
    assert f"not governed: the GPU is governed by job {c.timed_job}'s step" in default.stderr
    assert "the step runs ungoverned" in default.stderr
    states = c.node_states()
    assert not any("drain" in s for s in states.values()), states


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


def _member_of_a_supplementary_group():
    """A user (not root) and a group of the group database that is not the user's primary one."""
    for g in grp.getgrall():
        for name in g.gr_mem:
            with contextlib.suppress(KeyError):
                pw = pwd.getpwnam(name)
                if pw.pw_uid != 0 and pw.pw_gid != g.gr_gid:
                    return pw, g
    return None


def test_energy_file_in_a_shared_group_folder(cluster):
    """A lab's shared folder: sticky, writable through a supplementary group of the job's user.
    The energy file is written with the job's groups; a file another user planted at its name
    stays, and the job's output says its energy could not be recorded there."""
    found = _member_of_a_supplementary_group()
    if found is None:
        pytest.skip("no user of this host has a supplementary group")
    pw, g = found
    c = cluster
    shared = c.dir / "work" / "shared"
    shared.mkdir()
    os.chown(shared, 0, g.gr_gid)
    shared.chmod(0o1770)
    job = c.sbatch(f"--uid={pw.pw_name}", "-w", "n2", "--dvfs=700", "-o", "/dev/null", "--wrap", "true", cwd=shared)
    held = c.sbatch("--hold", f"--uid={pw.pw_name}", "-w", "n2", "--dvfs=700", "-o", "planted-%j.out",
                    "--wrap", "echo ran", cwd=shared)
    planted = shared / f"slurm-{held}.batch.n2.dvfs.json"
    planted.write_text("root's\n")
    c.run("scontrol", "release", str(held))
    assert c.wait(job) == "COMPLETED" and c.wait(held) == "COMPLETED"
    path = shared / f"slurm-{job}.batch.n2.dvfs.json"
    assert path.stat().st_uid == pw.pw_uid and json.loads(path.read_text())["restored"]
    assert planted.read_text() == "root's\n"
    out = (shared / f"planted-{held}.out").read_text()
    assert "ran" in out and f"{planted} is there already (not this step's)" in out, out
    assert f"cannot write {planted}: a file of that name is there already" in out, out


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


@pytest.mark.parametrize("partition, pinned", [(DEFAULT_AUTO_PARTITION, True), ("debug", False)])
def test_plugstack_default_auto_for_a_partition(cluster, govcore_bin, partition, pinned):
    """default=auto in plugstack.conf governs a job that gives no --dvfs, in the partitions named;
    the epilog finds its energy files through the environment as for a job that asked."""
    c = cluster
    original = c.board_files("n1")
    ffg_hz = _policy_level_hz(govcore_bin, c, "n1", "--policy", "ffg", "--workload", WORKLOAD)
    out = c.run("srun", "-p", partition, "-w", "n1", "sh", "-c",
                f"echo $SLURM_JOB_ID; cat {_devfreq(c, 'n1')}/max_freq").stdout.split()
    assert out[1] == str(ffg_hz if pinned else original[1])
    c.assert_restored("n1", original)
    if pinned:
        wait_for(lambda: (c.dir / "epilog" / f"{out[0]}.n1").exists(), what="the epilog")
        env = (c.dir / "epilog" / f"{out[0]}.n1").read_text().splitlines()
        assert f"SPANK_PYDVFS_ENERGY_DIR={c.dir / 'work'}" in env


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
    # above every board of govcore's table: refused by srun itself
    cp = c.run("srun", "-w", "n2", "--dvfs=99999", "touch", str(marker), check=False)
    assert cp.returncode != 0 and "above the top GPU clock of every board" in cp.stderr and not marker.exists()
    # outside this node's table: refused on the node, as by `govcore pin`; the step's task says
    # why and exits 2 (srun's status), the job's program does not run
    cp = c.run("srun", "-w", "n2", "--dvfs=1", "touch", str(marker), check=False)
    assert cp.returncode == 2 and not marker.exists()
    assert "pydvfs: n2: --dvfs=1: not governed: 1 MHz is outside the board's table" in cp.stderr
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


def test_a_pin_made_outside_slurm_stays(cluster, govcore_bin):
    """root's `govcore pin` on a node (its saved state in the node's state folder, no job's):
    a job's epilog leaves it, even a --dvfs=off job's; a job that asks to govern the board is
    refused, one under plugstack's default runs ungoverned; both say why."""
    c = cluster
    original = c.board_files("n3")
    gc = [govcore_bin, "--sysfs-root", str(c.boards["n3"].root), "--state-dir", str(c.dir / "state" / "n3")]
    env = {**os.environ, "PYDVFS_LOCK_DIR": str(c.dir / "locks")}
    subprocess.run([*gc, "pin", "408"], check=True, capture_output=True, timeout=60, env=env)
    try:
        off = c.sbatch("-w", "n3", "--dvfs=off", "-o", "/dev/null", "--wrap", "true")
        asked = c.run("srun", "-w", "n3", "--dvfs=700", "echo", "ran", check=False)
        default = c.run("srun", "-p", DEFAULT_AUTO_PARTITION, "-w", "n3", "echo", "ran")
        assert c.wait(off) == "COMPLETED"  # and its epilog has run (COMPLETING until then)
        assert asked.returncode == 1 and asked.stdout == ""
        assert default.stdout == "ran\n"
        for cp in (asked, default):
            assert "not governed: the board holds a pin made outside Slurm" in cp.stderr, cp.stderr
        assert c.board_files("n3") == (408_000_000, 408_000_000)
    finally:
        subprocess.run([*gc, "restore"], check=True, capture_output=True, timeout=60, env=env)
    c.assert_restored("n3", original)


def test_govcore_says_reach_the_job_and_the_energy_file(cluster, govcore_bin):
    """A decision that leaves the board to its own governor says why (gc_kept_reason); a job that
    lowers max_freq during its pin leaves the board capped (govcore's restore follows what it
    takes for a power-mode change) and the warning is in the job's output and energy file."""
    c = cluster
    original = c.board_files("n1")
    low = WORKLOAD + ",util_pct=1"
    kept = json.loads(subprocess.run(
        [govcore_bin, "--json", "--sysfs-root", str(c.boards["n1"].root), "apply", "--workload", low, "--dry-run"],
        capture_output=True, text=True, check=True, timeout=60).stdout)["kept_reason"]
    assert kept
    cp = c.run("srun", "-w", "n1", "--dvfs=auto", f"--dvfs-workload={low}", "true")
    assert f"pydvfs: n1: --dvfs=auto (mlg) {kept}" in cp.stderr
    job = c.sbatch("-w", "n1", "--dvfs=714", "-o", "capped-%j.out", "--wrap",
                   f"echo 408000000 > {_devfreq(c, 'n1')}/max_freq")
    assert c.wait(job) == "COMPLETED"
    try:
        assert c.board_files("n1") == (306_000_000, 408_000_000)
        e = _energy(c, job, "batch", "n1")
        assert e["restored"] and any("the power mode lowered the GPU's max_freq to 408 MHz" in w
                                     for w in e["warnings"]), e
        assert "pydvfs: n1: restore: the power mode lowered" in (c.dir / "work" / f"capped-{job}.out").read_text()
    finally:
        b = c.boards["n1"]
        (b.devfreq_dir / "max_freq").write_text(f"{original[1]}\n")
        (b.devfreq_dir / "min_freq").write_text(f"{original[0]}\n")


@pytest.mark.parametrize("arg, says", [
    ("rate_hz=inf", "rate_hz= is 0 (the sensor's rate) or 0.01..100000 samples a second, not 'inf'"),
    ("rate_hz=1e-300", "not '1e-300'"),
    ("sysfs_root=", "sysfs_root= is an absolute folder"),
    ("record=pydvfs", "record= is the pydvfs program's absolute path, not 'pydvfs'"),
])
def test_plugstack_bad_argument_refused_at_init(cluster, arg, says):
    """A rate that integrates nothing, an empty sysfs root: the plugin's init refuses them (srun
    loads plugstack.conf too, and says so)."""
    c = cluster
    conf = c.dir / "plugstack.conf"
    saved = conf.read_text()
    conf.write_text(saved.rstrip("\n") + f" {arg}\n")
    try:
        cp = c.run("srun", "-w", "n1", "true", check=False)
    finally:
        conf.write_text(saved)
    assert cp.returncode != 0 and "pydvfs: plugstack.conf: " in cp.stderr and says in cp.stderr, cp.stderr


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

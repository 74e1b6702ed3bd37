"""A real Slurm cluster in a temp folder, for the tests (Debian's slurmctld, slurmd, munge).

Four ``slurmd -N nX`` on this host (NodeAddr 127.0.0.1, the four ports after slurmctld's), each
node with several CPUs (as a Jetson has 6-14 cores: jobs share a node unless they ask for it whole)
and its own fake board (the SPANK plugin's ``sysfs_root=.../%n``), munged run as the munge
user, the pydvfs SPANK plugin ``required`` in plugstack.conf with ``default=auto`` in the partition
``jetson`` (``debug``, the default partition, has no default), and an epilog that records its
environment. Every daemon
is started here and stopped here by the pid it wrote; every client call has a timeout (an srun
against a node in state INVAL waits forever).
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydvfs.device.fake import FakeBoard, build_fake_board

REPO = Path(__file__).resolve().parents[3]
NODES = ("n1", "n2", "n3", "n4")
BASE_PORTS = range(17000, 17400, 5)  # slurmctld at a base, the four slurmd after it
DAEMONS = ("slurmctld", "slurmd", "munged")
NODE_CPUS = 4  # a node of a lab's cluster: several jobs fit unless one asks for the node (--exclusive)
CLIENT_TIMEOUT_S = 60  # every srun/sbatch/squeue call
DEFAULT_AUTO_PARTITION = "jetson"  # plugstack's default=auto governs a job without --dvfs here
INSTALL_HINT = "Slurm and munge are not installed (`make slurm-tools` installs them as root with apt)"


def missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "the Slurm test cluster runs its daemons as root (and munged as user munge)"
    for prog in ("slurmctld", "slurmd", "sbatch", "srun", "munged"):
        if shutil.which(prog) is None and not Path("/usr/sbin", prog).exists():
            return INSTALL_HINT
    if not Path("/usr/include/slurm/spank.h").exists():
        return "Slurm's spank.h is not installed (libslurm-dev; `make slurm-tools`)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no munge user (the munge package makes it)"
    return None


def _sbin(prog: str) -> str:
    return shutil.which(prog) or str(Path("/usr/sbin", prog))


@dataclass
class Cluster:
    dir: Path
    boards: dict[str, FakeBoard]
    env: dict[str, str]
    port_lock: socket.socket  # held while this cluster lives: its ports are taken
    pids: dict[str, int] = field(default_factory=dict)

    def run(self, *argv: str, timeout: float = CLIENT_TIMEOUT_S, cwd: Path | None = None,
            check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        cp = subprocess.run(list(argv), env=env or self.env, cwd=cwd or self.dir / "work", capture_output=True,
                            text=True, timeout=timeout)
        if check and cp.returncode != 0:
            raise AssertionError(f"{argv}: rc {cp.returncode}: {cp.stderr.strip()}")
        return cp

    def sbatch(self, *args: str, cwd: Path | None = None) -> int:
        return int(self.run("sbatch", "--parsable", *args, cwd=cwd).stdout.strip().split(";")[0])

    def state(self, job: int) -> str:
        """The job's state while squeue knows it, else "" (MinJobAge keeps finished jobs)."""
        out = self.run("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T", check=False).stdout.split()
        return out[0] if out else ""

    def wait(self, job: int, timeout: float = 120) -> str:
        """Wait until every task of the job has ended; its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.run("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T", check=False).stdout.split()
            if states and all(s not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for s in states):
                return states[0]
            time.sleep(0.2)
        raise AssertionError(f"job {job} did not end within {timeout} s")

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo's long form gives it ("idle", "mixed", "drained", ...)."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout.split("\n")
        return dict(line.split() for line in out if line.strip())

    def board_files(self, node: str) -> tuple[int, int]:
        """The node's (min_freq, max_freq), Hz; read again when caught between a writer's
        truncate and write (a fake board's files are plain files)."""
        b = self.boards[node]
        for _ in range(100):
            try:
                return b.read_hz("min_freq"), b.read_hz("max_freq")
            except ValueError:
                time.sleep(0.01)
        return b.read_hz("min_freq"), b.read_hz("max_freq")

    def assert_restored(self, node: str, original: tuple[int, int]) -> None:
        """The board back as it was and no state left; srun returns once the tasks have ended, a
        moment before slurmstepd's exit hook restores, so this waits (10 s at most) for it."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (self.board_files(node) != original
                                               or any((self.dir / "state" / node).glob("*"))):
            time.sleep(0.05)
        assert self.board_files(node) == original
        assert not any((self.dir / "state" / node).glob("*")), "state left behind"


def wait_for(pred, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _conf(d: Path, base: int) -> str:
    host = os.uname().nodename
    return f"""# written by tests/pydvfs/integrations/slurm_cluster.py
ClusterName=pydvfstest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={base}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/sock
CredType=cred/munge
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/pid/slurmctld.pid
SlurmdPidFile={d}/pid/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
PlugStackConfig={d}/plugstack.conf
Epilog={d}/epilog.sh
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
KillWait=2
InactiveLimit=0
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=n[1-4] NodeHostname={host} NodeAddr=127.0.0.1 Port=[{base + 1}-{base + len(NODES)}] CPUs={NODE_CPUS} Features=agx-orin State=UNKNOWN
PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
PartitionName={DEFAULT_AUTO_PARTITION} Nodes=n[1-4] MaxTime=INFINITE State=UP
"""


def _stop(pids: list[int]) -> None:
    """SIGTERM to each, then SIGKILL to any still there after 5 s."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    for pid in pids:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)


def _read_pid(path: Path, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def _free(base: int) -> bool:
    for port in range(base, base + 1 + len(NODES)):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the daemons: TIME_WAIT is no owner
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _take_ports() -> tuple[int, socket.socket]:
    """A base port whose five ports are free, and a socket bound to a name for that base (Linux's
    abstract namespace: gone with the process) that keeps a second test cluster, of a test run
    racing this one, off them while this one lives. A daemon that cannot bind says so only in its
    log: the ports are checked here."""
    for base in BASE_PORTS:
        lock = socket.socket(socket.AF_UNIX)
        try:
            lock.bind(f"\0pydvfs-test-slurm-{base}")
        except OSError:
            lock.close()
            continue
        if _free(base):
            return base, lock
        lock.close()
    raise AssertionError(f"no five free ports from {BASE_PORTS.start} to {BASE_PORTS.stop} for the test cluster")


def start(base: Path, plugin: Path) -> Cluster:
    """Start a cluster under a new folder in base (which munge's user must be able to traverse)."""
    port, port_lock = _take_ports()
    d = Path(tempfile.mkdtemp(prefix="slurm-", dir=base))
    d.chmod(0o755)
    for sub in ("ctld", "pid", "log", "work", "epilog", "state", "locks"):
        (d / sub).mkdir()
    (d / "work").chmod(0o777)
    for n in NODES:
        (d / "spool" / n).mkdir(parents=True)
    boards = {n: build_fake_board(d / "boards" / n, "jp5") for n in NODES}
    for b in boards.values():  # a constant 2 W a rail: energy follows time
        for rail in b.rails:
            b.set_rail(rail, 5000, 400)
    munge = pwd.getpwnam("munge")
    (d / "munge").mkdir(mode=0o755)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    for p in (d / "munge", key):
        os.chown(p, munge.pw_uid, munge.pw_gid)
    (d / "slurm.conf").write_text(_conf(d, port))
    (d / "plugstack.conf").write_text(
        f"required {plugin} sysfs_root={d}/boards/%n state_dir={d}/state/%n lock_dir={d}/locks "
        f"default=auto default_partitions={DEFAULT_AUTO_PARTITION}\n")
    epilog = d / "epilog.sh"
    epilog.write_text(f'#!/bin/sh\nenv > "{d}/epilog/$SLURM_JOB_ID.$SLURMD_NODENAME"\n')
    epilog.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin", "SLURM_CONF": str(d / "slurm.conf"),
           "LANG": "C.UTF-8"}
    c = Cluster(d, boards, env, port_lock)
    try:
        subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged"), f"--key-file={key}",
                        f"--socket={d}/munge/sock", f"--pid-file={d}/munge/munged.pid",
                        f"--log-file={d}/munge/log", f"--seed-file={d}/munge/seed"],
                       env=env, check=True, timeout=30, capture_output=True)
        c.pids["munged"] = _read_pid(d / "munge" / "munged.pid")
        subprocess.run([_sbin("slurmctld"), "-i"], env=env, check=True, timeout=30, capture_output=True)
        c.pids["slurmctld"] = _read_pid(d / "pid" / "slurmctld.pid")
        for n in NODES:
            subprocess.run([_sbin("slurmd"), "-N", n], env=env, check=True, timeout=30, capture_output=True)
            c.pids[f"slurmd-{n}"] = _read_pid(d / "pid" / f"slurmd-{n}.pid")
        deadline = time.monotonic() + 60
        while True:
            states = c.node_states()
            if len(states) == len(NODES) and all(s == "idle" for s in states.values()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes not idle: {states}; see {d}/log")
            time.sleep(0.2)
    except BaseException:
        stop(c)
        raise
    return c


def stop(c: Cluster) -> None:
    """Cancel what is left, stop every daemon by its pid, remove the folder."""
    if "slurmctld" in c.pids:
        c.run("scancel", "--full", "-u", "root", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and c.run("squeue", "-h", check=False).stdout.strip():
            time.sleep(0.2)
    _stop([pid for name, pid in c.pids.items() if name.startswith("slurmd-")])
    _stop([c.pids[name] for name in ("slurmctld", "munged") if name in c.pids])
    shutil.rmtree(c.dir, ignore_errors=True)
    c.port_lock.close()

"""`pydvfs sweep --slurm` on a real Slurm cluster shaped like a lab's
(tests/pydvfs/integrations/slurm_cluster.py: nodes of several CPUs, the plugin `required` with
`default=auto` on the partition the sweeps run in, a second user): the array of workloads, its merge, a resubmission, and what another user can do to
a sweep folder. One cluster for the module; every client call has a timeout."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
from slurm_cluster import DEFAULT_AUTO_PARTITION, REPO, missing, start, stop, wait_for

from pydvfs.characterise.dataset import iter_rows
from pydvfs.characterise.sweep import parse_workload, run_key, run_sweep
from pydvfs.device.fake import build_fake_board

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def cluster(test_tmp):
    subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "spank"], check=True, capture_output=True, timeout=300)
    c = start(test_tmp, REPO / "govcore" / "build" / "spank_pydvfs.so")
    (c.dir / "sweeps").mkdir(mode=0o755)  # root's own folder for root's sweeps
    yield c
    stop(c)


def _pydvfs(c, *args: str) -> subprocess.CompletedProcess:
    env = {**c.env, "PYTHONPATH": str(REPO), "PYDVFS_LOCK_DIR": str(c.dir / "locks")}  # the jobs inherit it
    return subprocess.run([sys.executable, "-m", "pydvfs", *args], env=env, cwd=c.dir / "work", capture_output=True,
                          text=True, timeout=120)


def _in_cell(c, task: str, mhz: int, timeout: float) -> str:
    """The node of array task ``task`` once its board is pinned at ``mhz`` (its cell runs)."""
    def node() -> str:
        return c.run("squeue", "-h", "-j", task, "-o", "%N", check=False).stdout.strip()

    wait_for(lambda: node() in c.boards and c.board_files(node())[1] == mhz * 1_000_000, timeout=timeout,
             what=f"task {task} in its {mhz} MHz cell")
    return node()


def _keys(path) -> set:
    return {run_key(r["workload"], r["setting"], r["freq_mhz"], r["repeat"]) for r in iter_rows(path)}


def test_sweep_array_merge_and_resubmit(cluster, tmp_path):
    """8 workloads x the board's levels as an array over the nodes; one task cancelled mid-cell
    leaves its board restored; submitting again runs only its missing cells; the merged dataset
    has the cells of the same sweep on one board."""
    c = cluster
    folder, release = c.dir / "sweeps" / "sweep", c.dir / "work" / "release"
    cells = c.dir / "sweeps" / "cells"
    cells.mkdir()
    specs = [f"name=w{i},model=bert,layers={2 + i},hidden=64,seq_len=16" for i in range(8)]
    (c.dir / "work" / "workloads.txt").write_text("\n".join(specs) + "\n")
    # each cell records the workload it was given; w3 blocks in its 714 MHz cell until released
    cmd = ["sh", "-c", f'echo "$PYDVFS_WORKLOAD" > {cells}/{{name}}-$PYDVFS_SETTING-$PYDVFS_FREQ_MHZ; '
                       f'[ {{name}} != w3 ] || [ "$PYDVFS_FREQ_MHZ" != 714 ] || [ -e {release} ] || exec sleep 600']
    submit = ["sweep", "--slurm", "--out", str(folder), "--workloads", "workloads.txt", "--settle", "0", "--idle", "0",
              "--partition", DEFAULT_AUTO_PARTITION, "--constraint", "agx-orin", "--max-parallel", "4",
              "--sysfs-root", f"{c.dir}/boards/%n", "--state-dir", f"{c.dir}/state/%n", "--json", "--", *cmd]
    cp = _pydvfs(c, *submit)
    assert cp.returncode == 0, cp.stderr
    first = json.loads(cp.stdout)
    assert first["submitted"] == list(range(8))
    task3 = f"{first['array_job']}_3"

    node = _in_cell(c, task3, 714, timeout=60)
    # each task asks for its node whole (the plugin's default=auto pinning them would fail every cell)
    assert "OverSubscribe=NO" in c.run("scontrol", "show", "job", task3).stdout
    # resubmitted while task 3 runs: nothing submitted twice
    cp = _pydvfs(c, *submit)
    assert cp.returncode == 0, cp.stderr
    during = json.loads(cp.stdout)
    assert 3 in during["running"] and 3 not in during["submitted"] and during["submitted"] == [], during
    c.run("scancel", task3)
    c.wait(first["merge_job"])
    c.assert_restored(node, (c.boards[node].levels_hz[0], c.boards[node].levels_hz[-1]))
    merged = folder / "sweep.csv"
    missing_before = 12 - len({k for k in _keys(merged) if k[0] == "w3"})
    assert len(_keys(merged)) == 8 * 12 - missing_before and missing_before > 0

    release.touch()
    cp = _pydvfs(c, *submit)
    assert cp.returncode == 0, cp.stderr
    second = json.loads(cp.stdout)
    assert second["submitted"] == [3]
    assert c.wait(second["merge_job"]) == "COMPLETED"
    attempt = json.loads((folder / "parts" / "3.json").read_text())["attempts"][-1]
    assert attempt["runs"] == missing_before and attempt["skipped"] == 12 - missing_before

    # the same sweep on one board, here
    board = build_fake_board(tmp_path / "one", "jp5")
    one = tmp_path / "one.csv"
    for spec in specs:
        run_sweep(["true"], parse_workload(spec), one, settle_s=0, idle_s=0, sysfs_root=str(board.root),
                  state_dir=str(tmp_path / "state"))
    assert _keys(merged) == _keys(one)
    # what `pydvfs train --data DIR/sweep.csv` reads: a curve of every workload
    from pydvfs.policy.curves import curves_from_frame, read_dataset

    assert len(curves_from_frame(read_dataset(merged), "energy_module_j")) == 8
    assert all(r["exit_status"] == 0 for r in iter_rows(merged))
    nodes = list(csv.DictReader(open(folder / "nodes.csv")))
    assert len(nodes) == 8 * 12 and {r["node"] for r in nodes} <= set(c.boards) and len({r["node"] for r in nodes}) >= 3
    assert {r["board"] for r in nodes} == {"agx-orin"}
    # eight workloads measured, each cell with its own (w3's resubmitted cells too)
    seen = {p.name: p.read_text().strip() for p in cells.iterdir()}
    assert len(seen) == 8 * 12
    assert all(text == specs[int(name[1])] for name, text in seen.items())
    # the node never drained (the plugin's default=auto did not fail the tasks' launch)
    assert set(c.run("sinfo", "-h", "-N", "-o", "%t").stdout.split()) <= {"idle", "mix", "alloc"}
    # the array's own merge job ran pydvfs sweep --merge; by hand it says what it merged
    cp = _pydvfs(c, "sweep", "--merge", str(folder), "--json")
    assert json.loads(cp.stdout)["incomplete"] == [] and json.loads(cp.stdout)["rows"] == 96




def test_a_folder_another_user_can_change_is_refused(cluster):
    """The critical defect: another user's 0777 folder (or a parent any group member may write)
    let that user swap plan.json while the array was pending: its command ran as root."""
    import pwd

    c = cluster
    nobody = pwd.getpwnam("nobody")
    theirs = c.dir / "work" / "theirs"
    theirs.mkdir()
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    theirs.chmod(0o777)
    shared = c.dir / "shared"  # a lab's group-writable folder, not sticky
    shared.mkdir(mode=0o775)
    shared.chmod(0o2775)
    for out, says in ((theirs, "refusing the sweep folder"), (theirs / "sweep", "above it can be changed by another"),
                      (shared / "sweep", "above it can be changed by another")):
        cp = _pydvfs(c, "sweep", "--slurm", "--out", str(out), "--workload", "name=w0,model=bert,layers=2,hidden=64,"
                     "seq_len=16", "--", "true")
        assert cp.returncode == 2 and says in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
        assert not (out / "plan.json").exists()
    assert not c.run("squeue", "-h", "-n", "pydvfs-sweep").stdout.strip()


def test_more_workloads_than_the_array_takes_is_one_line(cluster):
    c = cluster
    folder = c.dir / "sweeps" / "big"
    (c.dir / "work" / "big.txt").write_text("".join(f"name=w{i},model=bert,layers=2,hidden=64,seq_len=16\n"
                                                    for i in range(1002)))
    cp = _pydvfs(c, "sweep", "--slurm", "--out", str(folder), "--workloads", "big.txt", "--", "true")
    assert cp.returncode == 2 and "MaxArraySize is 1001" in cp.stderr, cp.stderr
    assert not (folder / "plan.json").exists()


def test_three_workloads_on_four_nodes_rank_clocks_as_the_boards_truth(cluster):
    """Issue 50's bar: three workloads on four nodes of several CPUs, each cell a simulated
    fine-tuning (pydvfs.sim.train_process animating its node's fake board, the physics known),
    one task cancelled mid-cell and the same command resubmitted: each cell once, every board
    restored, and each workload's measured curve ranks the clocks as the simulator's truth does."""
    from pydvfs.sim.catalogue import get_workload
    from pydvfs.sim.model import energy_per_step_j

    c = cluster
    folder = c.dir / "sweeps" / "truth"
    from pydvfs.workloads.models import model_spec

    workloads = {"bert-base/SST-2": 150, "pythia-160m/MRPC": 80, "bert-mini/SST-2": 1000}  # steps: ~1 s at the top
    seq_len = {"SST-2": 13.32, "MRPC": 53.24}
    specs = []
    for w in workloads:
        m = model_spec(w.split("/")[0])
        specs.append(f"name={w},model={m.family},layers={m.layers},hidden={m.hidden},seq_len={seq_len[w.split('/')[1]]},"
                     f"model_size={m.name},task={w.split('/')[1]}")
    (c.dir / "work" / "truth.txt").write_text("\n".join(specs) + "\n")
    steps = " ".join(f"{w.split('/')[0]}) n={n};;" for w, n in workloads.items())
    cmd = ["sh", "-c", f"case {{model_size}} in {steps} esac; exec {sys.executable} -m pydvfs.sim.train_process "
                       f"--sysfs-root {c.dir}/boards/$SLURMD_NODENAME --model {{model_size}} --task {{task}} "
                       "--steps $n --time-scale 25"]
    submit = ["sweep", "--slurm", "--out", str(folder), "--workloads", "truth.txt", "--freqs", "306,612,1300.5",
              "--partition", DEFAULT_AUTO_PARTITION,
              "--settle", "0", "--idle", "0", "--sysfs-root", f"{c.dir}/boards/%n", "--state-dir", f"{c.dir}/state/%n",
              "--json", "--", *cmd]
    cp = _pydvfs(c, *submit)
    assert cp.returncode == 0, cp.stderr
    first = json.loads(cp.stdout)
    task1 = f"{first['array_job']}_1"

    node = _in_cell(c, task1, 306, timeout=120)
    c.run("scancel", task1)
    c.wait(first["merge_job"], timeout=180)
    c.assert_restored(node, (c.boards[node].levels_hz[0], c.boards[node].levels_hz[-1]))
    cp = _pydvfs(c, *submit)
    second = json.loads(cp.stdout)
    assert second["submitted"] == [1], second
    assert c.wait(second["merge_job"], timeout=180) == "COMPLETED"
    for n in c.boards:
        c.assert_restored(n, (c.boards[n].levels_hz[0], c.boards[n].levels_hz[-1]))

    rows = list(iter_rows(folder / "sweep.csv"))
    assert sorted(_keys(folder / "sweep.csv")) == sorted({run_key(w, s, f, 0) for w in workloads for s, f in
                                                          (("fixed", 306), ("fixed", 612), ("fixed", 1300.5),
                                                           ("maxn", None))})
    assert len(rows) == 12 and all(r["exit_status"] == 0 for r in rows)
    for name, steps in workloads.items():
        model, task = name.split("/")
        w = get_workload(model, task)
        measured = {r["freq_mhz"]: r["energy_module_j"] for r in rows if r["workload"] == name and r["freq_mhz"]}
        truth = {f: energy_per_step_j(w, "fixed", f, energy="module") * steps for f in measured}
        assert min(measured, key=measured.get) == min(truth, key=truth.get), (name, measured, truth)
        for a in truth:
            for b in truth:
                if truth[a] > 1.2 * truth[b]:  # a clear difference in truth is one in the measurement
                    assert measured[a] > measured[b], (name, a, b, measured, truth)

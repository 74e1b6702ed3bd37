"""Latency of one policy decision and of apply, against baselines measured in the same run.

- tree_c:         gc_propose_tree() (features + m2cgen tree + argmax) in a C loop
                  (bench/propose_loop.c, built here against govcore/)
- tree_py_api:    the same through Python (``_core.Tree.propose``)
- sklearn:        ``DecisionTreeClassifier.predict`` on one sample, the same tree
- decide:         ``pydvfs.decide`` (discovery of the board included), nothing written
- apply_core:     ``_core.apply`` on an open board: decide + pin (two writes, read-back)
- apply:          ``pydvfs.apply`` end to end on a fake board (discovery, state file, pin)

The tree is trained by ``pydvfs train`` on a simulated characterisation, so sklearn and C hold
the very same tree. Medians over --repeats; results in bench/results/policy.json.

    PYTHONPATH=. python bench/bench_policy.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import pickle
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydvfs  # noqa: E402
from pydvfs import _core  # noqa: E402
from pydvfs.device.fake import build_fake_board  # noqa: E402
from pydvfs.policy.curves import curves_from_frame, read_dataset  # noqa: E402
from pydvfs.policy.train import features_of, train  # noqa: E402
from pydvfs.sim.sweep import write_sweep  # noqa: E402

WORKLOAD = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64.0, "util_pct": 80.0}


REPO = Path(__file__).resolve().parents[1]


def build_propose_loop(out_dir: Path) -> Path:
    """Compile bench/propose_loop.c with govcore's sources (the C loop stays out of _core)."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("bench_policy: needs a C compiler for bench/propose_loop.c")
    src = [str(p) for p in sorted((REPO / "govcore").glob("*.c")) if p.name != "main.c"]
    exe = out_dir / "propose_loop"
    subprocess.run([cc, "-std=c99", "-D_GNU_SOURCE", "-O2", f"-I{REPO / 'govcore'}", "-o", str(exe),
                    str(REPO / "bench" / "propose_loop.c"), *src, "-lpthread", "-lm", "-ldl"], check=True)
    return exe


def c_loop_ns(exe: Path, model_dir: Path, wl, n: int) -> float:
    import subprocess

    is_dec, util, layers, hidden, seq_len = wl.as_core()[:5]  # the C loop times full fp32 workloads
    out = subprocess.run([str(exe), str(model_dir), str(int(is_dec)), str(util), str(layers), str(hidden),
                          str(seq_len), str(n)], capture_output=True, text=True, check=True).stdout
    return float(out.split()[0])


def per_call_ns(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "policy.json"))
    args = ap.parse_args(argv)

    # The fake board lives in tmpfs where there is one: like sysfs, in memory, and no journal
    # to pay for on every write (on ext4 an O_TRUNC write costs tens of microseconds).
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    # The model folder stays under the checkout's build/: /dev/shm and /tmp are world-writable,
    # and as root a policy.so loads only from a folder no one else can write (docs/policy.md).
    build_dir = Path(__file__).resolve().parents[1] / "build"
    build_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=shm) as tmp, tempfile.TemporaryDirectory(dir=build_dir) as models:
        tmp, model_dir = Path(tmp), Path(models) / "model"
        write_sweep(tmp / "sim.csv", tasks=("SST-2", "QNLI", "MRPC"), repeats=2, seed=0)
        curves = curves_from_frame(read_dataset(tmp / "sim.csv"))
        train(curves, model_dir, source="bench")
        clf = pickle.loads((model_dir / "model.pkl").read_bytes())
        tree = _core.Tree(model_dir)
        wl = pydvfs.Workload(**{k: v for k, v in WORKLOAD.items()})
        x = [features_of(curves[0], tree.feature_names, (50.0, 50.0))]
        fb = build_fake_board(tmp / "board", "jp6")
        board = _core.Board(str(fb.root))
        state = str(tmp / "state")

        loop = build_propose_loop(tmp)
        runs = {k: [] for k in ("tree_c", "tree_py_api", "sklearn", "decide", "apply_core", "apply")}
        for _ in range(args.repeats):
            runs["tree_c"].append(c_loop_ns(loop, tmp / "model", wl, 200_000))
            runs["tree_py_api"].append(per_call_ns(lambda: tree.propose(wl.as_core()), 20_000))
            runs["sklearn"].append(per_call_ns(lambda: clf.predict(x), 300))
            runs["decide"].append(per_call_ns(lambda: pydvfs.decide(wl, sysfs_root=fb.root, state_dir=state), 300))
            # alternate two clocks so that every apply really writes
            flip = iter([0, 1] * 2000)
            runs["apply_core"].append(per_call_ns(
                lambda: _core.apply(board, tree, "rules", (False, 80.0, 2 if next(flip) else 12, 768, 64.0), state), 2000))
            runs["apply"].append(per_call_ns(
                lambda: pydvfs.apply({**WORKLOAD, "layers": 2 if next(flip) else 12}, policy="rules",
                                     sysfs_root=fb.root, state_dir=state), 1000))
            pydvfs.restore(sysfs_root=fb.root, state_dir=state)

    med = {k: statistics.median(v) for k, v in runs.items()}
    result = {
        "what": "one policy decision and apply; ns per call, medians over repeats",
        "machine": {"python": platform.python_version(), "processor": platform.machine(),
                    "fake_board_fs": "tmpfs" if shm else "disk"},
        "repeats": args.repeats,
        "median_ns": {k: round(v, 1) for k, v in med.items()},
        "ratios": {
            "sklearn_over_tree_c": round(med["sklearn"] / med["tree_c"], 1),
            "sklearn_over_tree_py_api": round(med["sklearn"] / med["tree_py_api"], 1),
        },
        "targets": {"sklearn_over_tree_c >= 1000": med["sklearn"] / med["tree_c"] >= 1000,
                    "apply <= 100 us": med["apply"] <= 100_000,
                    "apply_core <= 100 us": med["apply_core"] <= 100_000},
        "raw_ns": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    for k, v in med.items():
        print(f"{k:12s} {v / 1000:10.3f} us")
    print(json.dumps(result["ratios"]), json.dumps(result["targets"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

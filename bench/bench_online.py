"""The online governor on the animated simulated Orin: where it lands and what it saves.

For each workload and each search (``--searches``: the model search and the hill climb):
`pydvfs run --policy online` from the top clock (the hardest start) and from the default start
(FFG, no workload given), and `pydvfs run --policy maxn`, each driving
`python -m pydvfs.sim.train_process` on a fresh fake JetPack 6 tree. Compared with the
simulator's own J/step at every clock (its seeded noise included, divided by the time scale).
Writes bench/results/online.json and prints a table.

    PYTHONPATH=. python bench/bench_online.py [--models bert-base bert-large ...] [--scale 400]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.device.fake import build_fake_board  # noqa: E402
from pydvfs.sim.catalogue import get_workload  # noqa: E402
from pydvfs.sim.model import ORIN_LEVELS_MHZ, default_params, energy_per_step_j, operating_point, run_noise  # noqa: E402

TASK = "SST-2"


def truth(model: str, setting: str, freq, scale: float) -> tuple[float, float]:
    """(J/step in real J, real s/step) of the animated process at a setting."""
    p = default_params()
    w = get_workload(model, TASK)
    op = operating_point(w, setting, freq, p)
    tf, _ = run_noise(p, op.cpu_exposed_share, 0, w.name, op.setting, op.freq_mhz, 0)
    return energy_per_step_j(w, setting, freq, p=p) / scale, op.t_step_s * tf / scale


def pydvfs_run(root: Path, model: str, steps: int, scale: float, extra: list[str]) -> dict:
    progress = root / "steps"
    report = root / f"report-{len(list(root.glob('report-*')))}.json"
    cmd = [sys.executable, "-m", "pydvfs", "run", "--sysfs-root", str(root), "--json", "-o", str(report),
           "--progress-file", str(progress), "--rate", "1000", *extra, "--",
           sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(root), "--model", model,
           "--task", TASK, "--steps", str(steps), "--time-scale", str(scale), "--tick-ms", "1",
           "--progress-file", str(progress)]
    env = dict(os.environ, PYTHONPATH=str(REPO), PYDVFS_STATE_DIR=str(root / "state"))
    subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(report.read_text())  # the report: -o FILE (CMD keeps stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["bert-base", "bert-large", "pythia-160m", "bert-small", "bert-tiny"])
    ap.add_argument("--scale", type=float, default=400.0)
    ap.add_argument("--seconds", type=float, default=20.0, help="real seconds of training per online run")
    ap.add_argument("--window", type=float, default=0.5, help="real seconds per measuring window")
    ap.add_argument("--searches", nargs="+", default=["model", "hill"])
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "online.json"))
    args = ap.parse_args()
    rows = []
    for model in args.models:
        table = {f: truth(model, "fixed", f, args.scale) for f in ORIN_LEVELS_MHZ}
        f_opt = min(table, key=lambda f: table[f][0])
        steps = int(args.seconds / table[f_opt][1])
        min_steps = str(max(20, int(args.window / table[f_opt][1])))
        fast = ["--window", str(args.window), "--min-steps", min_steps, "--settle", "0.05"]
        row = {"model": model, "task": TASK, "scale": args.scale, "steps": steps,
               "sim_optimum_mhz": f_opt, "sim_j_per_step": {f: v[0] for f, v in table.items()},
               "sim_maxn_j_per_step": truth(model, "maxn", None, args.scale)[0]}
        with tempfile.TemporaryDirectory() as tmp:
            runs = [(f"{search}_{start}", ["--search", search] + extra) for search in args.searches
                    for start, extra in (("from_top", ["--start", "1300.5"]), ("default", []))]
            for label, extra in runs:
                root = Path(tmp) / label
                build_fake_board(root, "jp6")
                r = pydvfs_run(root, model, steps, args.scale, fast + extra)
                row[label] = {k: r[k] for k in ("start_mhz", "start_source", "chosen_mhz", "converged", "search_kind",
                                                "j_per_step", "cpu_gpu_energy_j", "duration_s",
                                                "energy_at_start_clock_j", "saving_vs_start_pct")}
                row[label]["probes"] = len(r["search"]["probes"])
                row[label]["converged_at_s"] = next((w["t_s"] for w in r["trajectory"] if w["phase"] == "hold"), None)
            root = Path(tmp) / "maxn"
            build_fake_board(root, "jp6")
            r = pydvfs_run(root, model, max(200, steps // 4), args.scale, ["--policy", "maxn"])
            row["maxn_j_per_step"] = r["j_per_step"]
        labels = [label for label, _ in runs]
        for label in labels:
            o = row[label]
            o["saving_vs_maxn_pct"] = 100.0 * (1.0 - o["j_per_step"] / row["maxn_j_per_step"])
            o["chosen_vs_optimum_pct"] = (None if o["chosen_mhz"] is None else
                                          100.0 * (table[o["chosen_mhz"]][0] / table[f_opt][0] - 1.0))
        rows.append(row)
        print(f"{model:12s} optimum {f_opt:g} MHz | "
              + " | ".join(f"{label}: {row[label]['start_mhz']:g} -> {row[label]['chosen_mhz']} MHz "
                           f"(+{row[label]['chosen_vs_optimum_pct'] or 0:.1f} % J/step over the optimum), "
                           f"{row[label]['probes']} probes, run J/step {row[label]['saving_vs_maxn_pct']:.1f} % "
                           f"below MAXN" for label in labels), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

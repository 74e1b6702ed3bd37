"""Draw the Grafana dashboard's panels (docs/grafana/pydvfs-dashboard.json) with matplotlib, from
the same queries run against a real Prometheus scraping ``pydvfs exporter`` on a fake AGX Orin:
the simulated fine-tuning of BERT-base governed by ``pydvfs run --policy online`` (its status
file published for the exporter), scraped every second. Writes docs/grafana/dashboard-panels.png
and the query answers beside it (dashboard-panels.json).

    PYTHONPATH=. python tools/dashboard_panels.py [--seconds 90]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydvfs.device.promserver import Exporter, PromServer, governed_board  # noqa: E402

DASHBOARD = REPO / "docs" / "grafana" / "pydvfs-dashboard.json"
SCALE = {"hertz": (1e6, "MHz"), "watt": (1.0, "W"), "watth": (1.0, "Wh"), "joule": (1.0, "J"), "none": (1.0, "")}


def legend(fmt: str, metric: dict) -> str:
    out = fmt
    for k, v in metric.items():
        out = out.replace("{{" + k + "}}", v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="how long the governed run is scraped")
    ap.add_argument("--out", default=str(REPO / "docs" / "grafana" / "dashboard-panels.png"))
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dash = json.loads(DASHBOARD.read_text())
    with tempfile.TemporaryDirectory(prefix="pydvfs-panels-") as tmp:
        tmp = Path(tmp)
        (tmp / "locks").mkdir(mode=0o700)
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYDVFS_LOCK_DIR": str(tmp / "locks"),
               "PYDVFS_STATE_DIR": str(tmp / "state")}
        (tmp / "state").mkdir(mode=0o700)
        gov = governed_board(tmp / "board", "jp6")
        status, progress = tmp / "governor.json", tmp / "steps"
        train = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(gov.root), "--model",
                 "bert-base", "--task", "SST-2", "--steps", "10000000", "--time-scale", "100", "--tick-ms", "2",
                 "--progress-file", str(progress), "--seed", "0"]
        exporter = Exporter("orin-sim", gov.root, tmp / "exporter.log", "--rate", "250",
                            "--governor-status", str(status), env=env)
        prom = PromServer(tmp / "prom", [exporter.addr], scrape_s=1.0)
        time.sleep(5)  # the idle board first, as a dashboard would show a run begin
        run = subprocess.Popen(
            [sys.executable, "-m", "pydvfs", "run", "--sysfs-root", str(gov.root), "--start", "1224", "--search",
             "hill", "--progress-file", str(progress), "--window", "1", "--min-steps", "20", "--settle", "0.2",
             "--rate", "500", "--", *train],
            env={**env, "PYDVFS_GOVERNOR_STATUS": str(status)}, stdout=subprocess.DEVNULL,
            stderr=open(tmp / "run.log", "wb"))
        t0 = time.time() - 5
        try:
            time.sleep(args.seconds)
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=60)
            time.sleep(3)
            t1 = time.time()
            answers = []
            panels = [p for p in dash["panels"] if p.get("targets")]
            for p in panels:
                series = []
                for t in p["targets"]:
                    expr = t["expr"].replace("$board", "orin-sim")
                    for r in prom.query_range(expr, t0, t1, 1.0):
                        series.append({"legend": legend(t.get("legendFormat", ""), r["metric"]),
                                       "t": [float(x) - t0 for x, _ in r["values"]],
                                       "v": [float(v) for _, v in r["values"]]})
                answers.append({"title": p["title"], "unit": p["fieldConfig"]["defaults"]["unit"],
                                "exprs": [t["expr"] for t in p["targets"]], "series": series})
            prom.stop()
            exporter.stop()
    cols = 3
    rows = (len(answers) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.2 * rows), squeeze=False)
    for ax, a in zip(axes.flat, answers):
        div, unit = SCALE.get(a["unit"], (1.0, a["unit"]))
        for s in a["series"]:
            ax.plot(s["t"], [v / div for v in s["v"]], label=s["legend"], lw=1.2,
                    drawstyle="steps-post")
        ax.set_title(a["title"], fontsize=10)
        ax.set_xlabel("s")
        if unit:
            ax.set_ylabel(unit)
        if a["series"]:
            ax.legend(fontsize=7, loc="best")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(answers):]:
        ax.axis("off")
    fig.suptitle("pydvfs dashboard, board orin-sim: simulated BERT-base fine-tuning under pydvfs run "
                 "--policy online --start 1224 (the idle board for the first 5 s)", fontsize=11)
    fig.tight_layout()
    out = Path(args.out)
    fig.savefig(out, dpi=80)
    out.with_suffix(".json").write_text(json.dumps({"t0_unix_s": t0, "panels": [
        {k: a[k] for k in ("title", "unit", "exprs")} | {"series": len(a["series"])} for a in answers]},
        indent=2) + "\n")
    print(f"wrote {out} ({len(answers)} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fit the simulated Orin's parameters; write pydvfs/sim/paper_fit_params.py and a report.

    PYTHONPATH=. /work/main/.venv/bin/python tools/fit_sim_to_papers.py [--quick]

Objective (scipy least_squares, parameters in log space, bounded):
- log errors of the published real-Orin energies (SPEC 5) at every pinned clock, each run's
  length profiled out in closed form, plus the MAXN energy of each run (weight 1.5) and, for
  Gemma-2B, its reported MAXN clock (~1293 MHz);
- hinge penalties that keep the catalogue on the paper's findings (SPEC 2): > 22 % mean saving
  vs MAXN above 70M parameters, optima mostly in 510..816 MHz and none outside 510..1122 MHz,
  (the paper's 918..1122 MHz optima are not a fit target: see the note in residuals()).
The fitted values, the per-run nuisances and the residual table are written to
pydvfs/sim/paper_fit_params.py (generated, do not edit) and docs/sim-calibration-fit.json;
docs/sim-calibration.md discusses them.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydvfs.sim import paper_fit as cal  # noqa: E402
from pydvfs.sim.model import SimParams  # noqa: E402

# (name, lower, upper): shared hardware parameters fitted; the rest keep their physical priors.
FIT = (
    ("cdyn_w_per_v2_ghz", 8.0, 60.0),
    ("soc_base_w", 1.0, 8.0),
    ("leak_w_at_vmax", 0.3, 8.0),
    ("v_max_mv", 850.0, 1050.0),
    ("v_knee_mhz", 400.0, 900.0),
    ("v_curve_exp", 0.8, 2.5),
    ("eff_max", 0.2, 0.9),
    ("dram_efficiency", 0.3, 0.9),
    ("act_idle", 0.01, 0.3),
    ("cpu_base_w", 0.8, 4.0),
    ("launch_us_per_kernel", 8.0, 60.0),
    ("smoothmax_p", 1.5, 8.0),
)
HOST_MS_BOUNDS = (1.0, 5000.0)  # per real run


def unpack(x):
    vals = {name: float(math.exp(v)) for (name, _, _), v in zip(FIT, x[:len(FIT)])}
    host = [float(math.exp(v)) for v in x[len(FIT):]]
    return SimParams().with_updates(**vals), host


def residuals(x, with_findings=True):
    p, host = unpack(x)
    res = []
    for run, h in zip(cal.REAL_RUNS, host):
        fit = cal.fit_run(run, p, h)
        res += [math.log1p(e) for e in fit.rel_err.values()]
        res.append(1.5 * math.log1p(fit.maxn_rel_err))
        if run.maxn_clock_mhz:
            res.append(0.5 * (fit.sim_maxn_clock_mhz - run.maxn_clock_mhz) / 100.0)
    if with_findings:
        f = cal.findings(cal.paper_curves(p))
        res.append(3.0 * max(0.0, 24.0 - f["mean_saving_big_pct"]) / 10.0)
        res.append(3.0 * max(0.0, 0.75 - f["share_opt_in_510_816"]))
        res.append(3.0 * max(0.0, f["opt_smooth_max_mhz"] - 1122.0) / 200.0)
        res.append(3.0 * max(0.0, 480.0 - f["opt_smooth_min_mhz"]) / 200.0)
        # Not fitted: the paper's optima at 918..1122 MHz for low-utilisation workloads. A hinge
        # on them (tried) pulled every published curve off by 10..30 % without reaching them;
        # see docs/sim-calibration.md, "What the calibration does not reach".
    return np.array(res)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke run)")
    ap.add_argument("--out", default="pydvfs/sim/paper_fit_params.py")
    ap.add_argument("--report", default="docs/sim-calibration-fit.json")
    args = ap.parse_args(argv)

    d = SimParams()
    x0 = [math.log(getattr(d, n)) for n, _, _ in FIT] + [math.log(v) for v in (300.0, 30.0, 30.0)]
    lo = [math.log(a) for _, a, _ in FIT] + [math.log(HOST_MS_BOUNDS[0])] * 3
    hi = [math.log(b) for _, _, b in FIT] + [math.log(HOST_MS_BOUNDS[1])] * 3
    x0 = np.clip(x0, np.array(lo) + 1e-6, np.array(hi) - 1e-6)
    t0 = time.time()
    sol = least_squares(residuals, x0, bounds=(lo, hi), diff_step=0.03,
                        max_nfev=10 if args.quick else 60, x_scale=1.0)
    p, host = unpack(sol.x)
    fitted = {n: round(getattr(p, n), 6) for n, _, _ in FIT}
    runs = {}
    for run, h in zip(cal.REAL_RUNS, host):
        fit = cal.fit_run(run, p, h)
        runs[run.name] = {
            "host_ms_per_step": round(h, 3), "scale_steps": round(fit.scale, 1),
            "published_j": run.energy_j, "sim_j": {m: round(v) for m, v in fit.sim_j.items()},
            "rel_err": {m: round(v, 4) for m, v in fit.rel_err.items()},
            "rms": round(fit.rms, 4), "max_abs": round(fit.max_abs, 4),
            "published_maxn_j": run.maxn_energy_j, "sim_maxn_j": round(fit.sim_maxn_j),
            "maxn_rel_err": round(fit.maxn_rel_err, 4),
            "sim_maxn_clock_mhz": round(fit.sim_maxn_clock_mhz, 1),
        }
    f = cal.findings(cal.paper_curves(p))
    report = {"fitted": fitted, "runs": runs, "findings": f, "cost": float(sol.cost),
              "nfev": int(sol.nfev), "seconds": round(time.time() - t0, 1)}
    Path(args.report).write_text(json.dumps(report, indent=1, default=str) + "\n")
    lines = [
        "# Generated by tools/fit_sim_to_papers.py; do not edit. See docs/sim-calibration.md.",
        '"""Fitted parameters of the simulated Orin (the rest keep SimParams defaults)."""',
        "",
        "PARAMS = {",
        *[f"    {n!r}: {v!r}," for n, v in fitted.items()],
        "}",
        "",
        "# Per published run: host time per step (ms) and length (steps) fitted as nuisances.",
        "CALIBRATION_RUNS = {",
        *[f"    {n!r}: {{'host_ms_per_step': {r['host_ms_per_step']!r}, "
          f"'scale_steps': {r['scale_steps']!r}}}," for n, r in runs.items()],
        "}",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``pydvfs demo``: the whole pipeline on a simulated AGX Orin, ending in a report.

Each stage is a function ``stage(ctx) -> dict``: it prints what it does and returns what the
report shows. Stages run the same verbs a user runs (through :meth:`DemoContext.verb`, with
``--json``), on the simulated board: nothing here is special to the demo except the choice of
inputs. The command line that runs the demo hands it its own dispatcher (``DemoContext.cli``):
the demo sits below the command line and does not import it.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import PydvfsError
from ..measure.energy import COLUMN, DEFAULT_MEASURE, LABEL
from ..package_data import package_file


@dataclass
class DemoContext:
    out_dir: Path
    seed: int
    quick: bool
    cli: Callable[[list[str]], int]  # the command line's main(argv) -> exit status: runs a verb
    results: dict = field(default_factory=dict)

    def say(self, text: str) -> None:
        """Progress goes to stderr: stdout carries the result (--json)."""
        print(f"[demo] {text}", file=sys.stderr, flush=True)

    def path(self, *parts: str) -> Path:
        return self.out_dir.joinpath(*parts)

    def rel(self, path: Path) -> str:
        return str(Path(path).relative_to(self.out_dir))

    def verb(self, *args: str) -> dict:
        """Run a pydvfs verb in this process with --json; return its JSON output (a verb that wraps
        a command writes it to ``-o FILE``: the command keeps standard output)."""
        args = [str(a) for a in args]
        cut = args.index("--") if "--" in args else len(args)  # options go before a command
        buf = io.StringIO()
        with tempfile.TemporaryDirectory(prefix="pydvfs-demo-") as tmp:
            report = os.path.join(tmp, "report.json")
            extra = ["-o", report] if cut < len(args) else []
            with contextlib.redirect_stdout(buf), _command_output_discarded(bool(extra)):
                rc = self.cli([*args[:cut], "--json", *extra, *args[cut:]])
            if rc != 0:
                raise PydvfsError(f"`pydvfs {' '.join(args)}` failed (exit {rc})")
            return json.loads(Path(report).read_text() if extra else buf.getvalue())


# One energy per figure, named (issue 26): the demo labels, trains, scores, governs and measures by
# the module's energy, what a user pays for (pydvfs's default, pydvfs/measure/energy.py). Paper A labels,
# trains and scores by CPU+GPU energy: its replication (the ledger, stage_replication) tells every
# verb so, and shows the module's figures beside it where both are shown.
DEMO_ENERGY = DEFAULT_MEASURE
PAPER_MEASURE = "cpu-gpu"
PAPER_ENERGY = ("--energy", PAPER_MEASURE)


@contextlib.contextmanager
def _command_output_discarded(on: bool):
    """A wrapped command keeps standard output (issue 27 item 11): the demo's simulated training
    job would print into the demo's own --json output, so its fd 1 is /dev/null meanwhile."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def stage_board(ctx: DemoContext) -> dict:
    """A fake AGX Orin (JetPack 6 tree): discover it, pin a clock, restore."""
    from ..device import open_device
    from ..device.fake import build_fake_board

    root = ctx.path("board")
    shutil.rmtree(root, ignore_errors=True)
    build_fake_board(root, "jp6")
    dev = open_device(root, state_dir=str(ctx.path("state")))
    ctx.say(f"board: {dev.model}, GPU {dev.gpu_name}, {len(dev.available_frequencies_mhz)} levels, "
            f"rails {', '.join(r.name for r in dev.rails)}")
    before = dev.state()
    try:
        pinned = dev.pin(700)
        ctx.say(pinned.describe())
    finally:
        dev.restore()
    after = dev.state()
    if (after.min_mhz, after.max_mhz) != (before.min_mhz, before.max_mhz):
        raise PydvfsError("the board was not restored")
    ctx.say(f"restored: min {after.min_mhz:g} MHz, max {after.max_mhz:g} MHz, governor {after.governor}")
    return {"model": dev.model, "levels_mhz": list(dev.available_frequencies_mhz),
            "rails": [r.name for r in dev.rails], "pinned_mhz": pinned.freq_mhz}


def stage_characterise(ctx: DemoContext) -> dict:
    """Paper A steps 1-2 on the simulated Orin: every model on the characterisation tasks (SST-2,
    QNLI, MRPC) and, separately, on the six unseen evaluation tasks; U-curve analysis."""
    from ..sim.catalogue import CHARACTERISATION_TASKS, EVALUATION_TASKS

    repeats = 1 if ctx.quick else 3
    out = {}
    # one seed for both: the simulator's noise is drawn per workload, so they stay independent
    for name, tasks, seed in (("characterisation", CHARACTERISATION_TASKS, ctx.seed),
                              ("evaluation", EVALUATION_TASKS, ctx.seed)):
        csv = ctx.path(f"{name}.csv")
        csv.unlink(missing_ok=True)
        r = ctx.verb("sweep", "--sim", "--out", csv, "--repeats", repeats, "--seed", seed, "--tasks", *tasks)
        ctx.say(f"{name}: {r['rows']} simulated runs ({len(r['best_mhz'])} workloads x 11 clocks + MAXN "
                f"x {repeats}) -> {ctx.rel(csv)}")
        out[name] = {"csv": ctx.rel(csv), "rows": r["rows"], "tasks": list(tasks)}
    a = ctx.verb("analyse", "--data", ctx.path("characterisation.csv"), "--out", ctx.path("ucurves"),
                 "--energy", DEMO_ENERGY)
    out["energy_measure"] = DEMO_ENERGY
    out["analysis"] = s = _ucurve_summary(a["workloads"], ctx.path("characterisation.csv"))
    out["plots"] = sorted(ctx.rel(p) for p in ctx.path("ucurves").rglob("*.png"))
    ctx.say(f"U-curves: sweet spots {s['sweet_spot_range_mhz'][0]:g}-{s['sweet_spot_range_mhz'][1]:g} MHz, "
            f"{s['u_shaped']}/{s['n']} U-shaped; the best clock saves {s['mean_saving_pct']:.1f} % "
            f"{LABEL[DEMO_ENERGY]} energy vs MAXN "
            f"on average, {s['mean_saving_large_pct']:.1f} % above 70M parameters")
    return out


def _ucurve_summary(workloads: list, csv: Path) -> dict:
    import pandas as pd

    from ..sim.catalogue import SMALL_MODEL_MAX_PARAMS

    params = pd.read_csv(csv).groupby("workload")["params"].first().to_dict()
    spots = [w["sweet_spot"] for w in workloads]
    saving = [w["savings_vs_maxn_pct"] for w in workloads]
    large = [w["savings_vs_maxn_pct"] for w in workloads if params.get(w["workload"], 0) > SMALL_MODEL_MAX_PARAMS]
    return {
        "n": len(workloads),
        "sweet_spot_range_mhz": [min(spots), max(spots)],
        "u_shaped": sum(1 for w in workloads if w["u_shaped"]),
        "spiky": sorted(w["workload"] for w in workloads if w["spiky"]),
        "mean_saving_pct": sum(saving) / len(saving),
        "mean_saving_large_pct": sum(large) / len(large) if large else float("nan"),
        "per_workload": [{"workload": w["workload"], "sweet_spot_mhz": w["sweet_spot"],
                          "saving_vs_maxn_pct": w["savings_vs_maxn_pct"],
                          "time_penalty_vs_maxn_pct": w.get("time_penalty_vs_maxn_pct"), "flags": w["flags"]}
                         for w in workloads],
    }


def stage_train(ctx: DemoContext) -> dict:
    """Paper A steps 3-4: the tree, chosen by leave-one-out CV (energy regret), exported to C."""
    m = ctx.verb("train", "--data", ctx.path("characterisation.csv"), "--out", ctx.path("model"),
                 "--energy", DEMO_ENERGY)
    sel = m["selected"]
    ctx.say(m["noise"]["advice"])
    ctx.say(f"tree: {sel['params']} - LOOCV accuracy {sel['loocv_accuracy']:.2f}, mean regret "
            f"{sel['mean_regret_pct']:.2f} % ({LABEL[DEMO_ENERGY]} energy); compiled to "
            f"{ctx.rel(ctx.path('model', 'policy.so'))}")
    ctx.say(f"shipped: {m['shipped']} - {m['ship_reason']}")
    roof = next(r for r in m["table"] if r["name"].startswith("roofline"))
    ffg = next(r for r in m["table"] if r["name"].startswith("ffg"))
    ctx.say(f"roofline model: LOOCV regret {roof['mean_regret_pct']:.2f} %, leave-one-model-out "
            f"{roof['lomo_mean_regret_pct']:.2f} % (FFG {ffg['mean_regret_pct']:.2f} % / "
            f"{ffg['lomo_mean_regret_pct']:.2f} %)")
    return {"selected": sel, "table": m["table"], "rules": m["rules"], "ffg_mhz": m["ffg_mhz"],
            "shipped": m["shipped"], "ship_reason": m["ship_reason"], "noise": m["noise"],
            "roofline": m["roofline"], "tree_png": ctx.rel(ctx.path("model", "tree.png")),
            "energy_measure": DEMO_ENERGY}


def stage_evaluate(ctx: DemoContext) -> dict:
    """Paper A step 5: policies on the six unseen tasks, against MAXN (the trained tree read as
    data, the built-in policies in C), by the demo's energy; each decision's time from the data."""
    from .replication import evaluation_breakdown

    r = ctx.verb("evaluate", "--data", ctx.path("evaluation.csv"), "--model-dir", ctx.path("model"),
                 "--energy", DEMO_ENERGY)
    breakdown = evaluation_breakdown(r, ctx.path("evaluation.csv"))  # adds each pick's time_penalty_pct
    s = r["summary"]
    if "roofline" in s:
        ctx.say(f"unseen tasks: the roofline policy saves {s['roofline']['mean_saving_pct']:.2f} % "
                f"({100 * s['roofline']['share_of_oracle']:.1f} % of the oracle)")
    for policy, why in r.get("left_out", {}).items():
        ctx.say(f"unseen tasks: the {policy} policy is left out: {why}")
    ctx.say(f"unseen tasks: MLG saves {s['mlg']['mean_saving_pct']:.2f} % on average (max "
            f"{s['mlg']['max_saving_pct']:.2f} %, min {s['mlg']['min_saving_pct']:.2f} %), "
            f"{100 * s['mlg']['share_of_oracle']:.1f} % of the oracle; FFG {s['ffg']['mean_saving_pct']:.2f} % "
            f"({LABEL[DEMO_ENERGY]} energy; {s['mlg']['worse_than_maxn']} workloads lose against MAXN)")
    plot = _plot_savings(r, ctx.path("evaluation_savings"))
    return {"summary": s, "workloads": r["workloads"], "per_workload": breakdown["per_workload"],
            "energy_measure": DEMO_ENERGY, "plot": ctx.rel(plot) if plot else None,
            "left_out": r.get("left_out", {})}


def _plot_savings(result: dict, stem: Path) -> Path | None:
    """Each policy's saving per model, over its unseen tasks: the mean as a horizontal bar, the
    range (least to most) as a whisker, the oracle's mean as a tick (72 workloads' labels side by
    side could not be read; the summary table lists every workload)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    by_model: dict = {}
    for r in result["workloads"]:
        by_model.setdefault(r["workload"].split("/")[0], []).append(r)
    models = sorted(by_model)
    tasks = max(len(v) for v in by_model.values())
    policies = (("mlg", "tab:green"), ("ffg", "tab:orange"), ("rules", "tab:blue"))
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(models)))
    height = 0.27
    for i, (pol, colour) in enumerate(policies):
        ys = [y + (1 - i) * height for y in range(len(models))]
        vals = [[r["policies"][pol]["saving_pct"] for r in by_model[m]] for m in models]
        means = [sum(v) / len(v) for v in vals]
        ax.barh(ys, means, height, color=colour, label=pol,
                xerr=[[mu - min(v) for mu, v in zip(means, vals)], [max(v) - mu for mu, v in zip(means, vals)]],
                error_kw={"elinewidth": 0.8, "capsize": 2})
    oracle = [sum(r["oracle_saving_pct"] for r in by_model[m]) / len(by_model[m]) for m in models]
    ax.plot(oracle, list(range(len(models))), "k|", markersize=14, label="oracle (mean)")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(list(range(len(models))))
    ax.set_yticklabels(models, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{LABEL[DEMO_ENERGY]} energy saving vs MAXN (%): mean over the model's {tasks} unseen tasks, "
                  "whisker least to most", fontsize=8)
    ax.set_title(f"Unseen GLUE tasks on the simulated AGX Orin: {LABEL[DEMO_ENERGY]} energy saved by each "
                 "policy vs MAXN", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(fig, stem)


def _save(fig, stem: Path) -> Path:
    """PNG (for the report) and SVG (for print) of a figure; returns the PNG."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{stem}.{ext}", dpi=110)
    plt.close(fig)
    return Path(f"{stem}.png")


def stage_governed_run(ctx: DemoContext) -> dict:
    """A governed run on the animated board: the simulated training process writes the rails in
    scaled real time; the C sampler measures it under MAXN and under the learned policy.

    The learned policy's clock is decided from the model folder's tree read as data (the clock
    its policy.so gives, pydvfs/policy/tree_data.py) and pinned: loading the folder's code as
    root would be refused where others can write above it (a checkout under /tmp), and the
    demo's board is a fake one in its own output folder."""
    from .. import Sampler, pin, restore
    from ..device.fake import ORIN_MODEL, build_fake_board
    from ..device.table import identify
    from ..policy.tree_data import read_tree
    from ..sim.board import BoardFiles
    from ..sim.catalogue import get_workload
    from ..sim.model import default_params, idle_board_power_w

    root = ctx.path("animated-board")
    shutil.rmtree(root, ignore_errors=True)
    build_fake_board(root, "jp6")
    BoardFiles.discover(root).write_power(idle_board_power_w(default_params()))  # an idle board
    state = str(ctx.path("state"))
    sw = get_workload("bert-base", "SST-2")
    wl = sw.workload()
    steps, scale = (400, 100) if ctx.quick else (1000, 100)
    board = identify(ORIN_MODEL)  # the board the fake one stands for, by its model string
    runs = {}
    tree = read_tree(ctx.path("model"))
    try:
        for policy in ("maxn", "mlg"):
            mhz = (tree.propose(wl.as_core()) or None) if policy == "mlg" else None  # 0: the tree says MAXN
            if mhz is None:
                restore(sysfs_root=root, state_dir=state)  # MAXN: the board's own governor
            else:
                pin(mhz, sysfs_root=root, state_dir=state)
            cmd = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(root), "--model",
                   "bert-base", "--task", "SST-2", "--steps", str(steps), "--time-scale", str(scale)]
            with Sampler(rate_hz=1000, sysfs_root=root) as s:
                s.begin_window("run")
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                m = s.end_window("run")
                trace = s.trace()
            e = {"module": m.module_energy_j, "cpu-gpu": m.cpu_gpu_energy_j}  # the sampler's, by rail role
            runs[policy] = {"freq_mhz": mhz, "duration_s": m.duration_s, "energy_module_j": e["module"],
                            "energy_cpu_gpu_j": e["cpu-gpu"],
                            "avg_power_w": e[DEMO_ENERGY] / m.duration_s, "samples": m.samples,
                            "rate_hz": m.rate_hz, "read_errors": m.read_errors,
                            "trace": _trace_series(trace, board)}
            ctx.say(f"{policy}: {'MAXN' if mhz is None else f'{mhz:g} MHz'} - "
                    f"module {e['module']:.1f} J, CPU+GPU {e['cpu-gpu']:.1f} J (x{scale} simulated) in "
                    f"{m.duration_s:.2f} s, "
                    f"{m.samples} samples at {m.rate_hz:.0f} Hz")
    finally:
        restore(sysfs_root=root, state_dir=state)
    saving = 1 - runs["mlg"]["energy_module_j"] / runs["maxn"]["energy_module_j"]
    saving_cpu_gpu = 1 - runs["mlg"]["energy_cpu_gpu_j"] / runs["maxn"]["energy_cpu_gpu_j"]
    ctx.say(f"measured by the C sampler: the learned policy saves {100 * saving:.1f} % module energy (the "
            f"measure it was trained on) vs MAXN; {100 * saving_cpu_gpu:.1f} % of the CPU+GPU rails' energy")
    plot = _plot_traces(runs, ctx.path("governed_run_power"))
    for r in runs.values():
        del r["trace"]
    return {"workload": "bert-base/SST-2", "steps": steps, "time_scale": scale, "runs": runs,
            "energy_measure": DEMO_ENERGY, "saving_pct": 100 * saving, "saving_module_pct": 100 * saving,
            "saving_cpu_gpu_pct": 100 * saving_cpu_gpu, "plot": ctx.rel(plot) if plot else None}


def _trace_series(trace, board) -> dict:
    """The demo's energy's power in a trace (the board table's rails of its role: the module's),
    thinned to ~2000 points."""
    from ..measure.energy import rails_of

    t0 = trace.t_ns[0] if len(trace) else 0
    step = max(1, len(trace) // 2000)
    rails = [trace.power_mw[r] for r in rails_of(board, DEMO_ENERGY)]
    return {"t_s": [(t - t0) / 1e9 for t in trace.t_ns[::step]],
            "power_w": [sum(r[i] for r in rails) / 1000 for i in range(0, len(trace), step)]}


def _plot_traces(runs: dict, stem: Path) -> Path | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for policy, r in runs.items():
        clock = "MAXN" if r["freq_mhz"] is None else f"{r['freq_mhz']:g} MHz"
        label = f"{policy} ({clock}): {LABEL[DEMO_ENERGY]} {r[COLUMN[DEMO_ENERGY]]:.0f} J"
        ax.plot(r["trace"]["t_s"], r["trace"]["power_w"], label=label, linewidth=0.8)
    ax.set_xlabel("time (s, scaled)")
    ax.set_ylabel(f"{LABEL[DEMO_ENERGY]} power (W)")
    ax.set_title("bert-base / SST-2 on the animated board, sampled by govcore at 1 kHz")
    ax.legend()
    return _save(fig, stem)


def stage_online(ctx: DemoContext) -> dict:
    """The online governor (`pydvfs run --policy online`) on the animated board: it starts at the
    top clock, knowing nothing of the workload, and searches energy per step while it trains."""
    from ..device.fake import build_fake_board
    from ..sim.catalogue import get_workload
    from ..sim.model import ORIN_LEVELS_MHZ, energy_per_step_j

    root = ctx.path("online-board")
    shutil.rmtree(root, ignore_errors=True)
    build_fake_board(root, "jp6")
    progress = ctx.path("online-steps")
    # half-second windows: shorter ones on a loaded machine scatter by more than the 1-2 % that
    # separates the levels next to the optimum (the model search then cannot tell them apart)
    steps, scale = (30000, 400) if ctx.quick else (60000, 400)
    r = ctx.verb("run", "--policy", "online", "--start", "1300.5", "--sysfs-root", root,
                 "--state-dir", ctx.path("state"), "--progress-file", progress,
                 "--window", "0.5", "--min-steps", "100", "--settle", "0.05", "--rate", "1000",
                 "--energy", DEMO_ENERGY, "--",  # the demo's measure, as the simulator's truth below
                 sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", root, "--model", "bert-base",
                 "--task", "SST-2", "--steps", steps, "--time-scale", scale, "--progress-file", progress)
    # the simulator's own energy per step (the demo's measure) at each level: where the bottom of
    # the U really is
    w = get_workload("bert-base", "SST-2")
    truth = {f: energy_per_step_j(w, "fixed", f, energy=DEMO_ENERGY) for f in ORIN_LEVELS_MHZ}
    best = min(truth, key=truth.get)
    gap_pct = 100 * (truth[r["final_mhz"]] / truth[best] - 1) if r["final_mhz"] in truth else None
    ctx.say(f"online: started at 1300.5 MHz, settled at {r['final_mhz']:g} MHz after {len(r['switches'])} moves "
            f"(the simulator's optimum: {best:g} MHz"
            + ("" if gap_pct is None or gap_pct < 0.05 else f"; {gap_pct:.1f} % more energy per step there")
            + f"); {r['saving_vs_start_pct']:.1f} % less {LABEL[r['energy_measure']]} energy than staying at "
            "the start clock")
    plot = _plot_online(r, ctx.path("online_search"))
    return {"workload": w.name, "final_mhz": r["final_mhz"], "converged": r["converged"],
            "switches": r["switches"],
            "simulated_optimum_mhz": best, "gap_to_optimum_pct": gap_pct,
            "simulated_j_per_step": {f"{f:g}": e for f, e in truth.items()},
            "steps": r["steps"], "cpu_gpu_energy_j": r["cpu_gpu_energy_j"],
            "module_energy_j": r["module_energy_j"], "energy_measure": r["energy_measure"],
            "saving_vs_start_pct": r["saving_vs_start_pct"], "j_per_step": r["j_per_step"],
            "trajectory": r["trajectory"], "plot": ctx.rel(plot) if plot else None}


JOINT_WORKLOADS = ("bert-base/SST-2", "pythia-1b/SST-2", "bert-tiny/SST-2")


def stage_joint(ctx: DemoContext) -> dict:
    """The whole power mode (issue 23): the joint online search (GPU x EMC x CPU) beside the
    GPU-only one, replayed window by window against the simulated AGX Orin's every mode (a 60-min
    run, 10-s windows with noise), and the mode sweep's energy picture over GPU x EMC."""
    from ..governor.replay import Grid, make, replay
    from ..sim.catalogue import get_workload

    rows = []
    for name in JOINT_WORKLOADS:
        model, task = name.split("/")
        grid = Grid("agx-orin", get_workload(model, task))
        row = {"workload": grid.name, "modes": len(grid.modes), "best_mode": list(grid.best),
               "best_saving_pct": 100 * (1 - grid.j[grid.best] / grid.j[grid.stock]),
               "gpu_only_best_saving_pct": 100 * (1 - grid.j[grid.gpu_best] / grid.j[grid.stock]),
               "gpu_only_best_mhz": grid.gpu_best[0],
               # this simulator's module J/step per GPU clock, EMC and CPU at the top (the report
               # sets it beside the 1-D simulator's: two models, two optima)
               "gpu_only_j_per_step": {f"{m[0]:g}": grid.j[m] for m in grid.modes if m[1:] == grid.stock[1:]}}
        for label in ("gpu-only", "joint"):
            r = replay(grid, make(label, grid), label == "gpu-only", 60.0, 10.0, 2.0, ctx.seed)
            row[label] = {"settled": r["settled"], "probes": r["probes"], "gap_pct": r["gap_pct"],
                          "saving_pct": r["saving_pct"], "share_pct": r["share_pct"],
                          "time_pct": 100 * (r["t_rel"] - 1)}
        row["joint_adds_pct"] = row["joint"]["saving_pct"] - row["gpu-only"]["saving_pct"]
        rows.append(row)
        g, j = row["gpu-only"], row["joint"]
        ctx.say(f"joint: {grid.name}: GPU-only settled {'/'.join(f'{x:g}' for x in g['settled'])} "
                f"({g['saving_pct']:.1f} % saved over the run, {g['probes']} probes); joint settled "
                f"{'/'.join(f'{x:g}' for x in j['settled'])} ({j['saving_pct']:.1f} %, {j['probes']} modes probed; "
                f"{j['gap_pct']:.2f} % from the best of {row['modes']} modes)")
    sweep_dir = ctx.path("modes")
    shutil.rmtree(sweep_dir, ignore_errors=True)
    sw = ctx.verb("sweep", "--sim", "--knobs", "gpu,emc,cpu", "--models", "bert-base", "--tasks", "SST-2",
                  "--out", sweep_dir / "modes.csv", "--plot", sweep_dir / "plots")
    heat = next((p for p in sw["plots"] if p.endswith("_modes.png")), None)
    return {"board": "agx-orin", "minutes": 60.0, "workloads": rows, "energy_measure": "module",
            "sweep_modes": sw["modes"], "heatmap": ctx.rel(Path(heat)) if heat else None}


def _plot_online(r: dict, stem: Path) -> Path | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = [p["t_s"] for p in r["trajectory"]]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 4.5), sharex=True)
    a1.step(t, [p["freq_mhz"] for p in r["trajectory"]], where="post")
    a1.set_ylabel("GPU clock (MHz)")
    a1.set_title("pydvfs run --policy online: bert-base / SST-2 on the animated board")
    a2.plot(t, [1000 * p["j_per_step"] for p in r["trajectory"]], "o", markersize=3)
    a2.set_ylabel(f"{LABEL[r['energy_measure']]} energy per step (mJ)")
    a2.set_xlabel("time (s, scaled)")
    return _save(fig, stem)


def stage_real_data(ctx: DemoContext) -> dict:
    """The same U-curve analysis on real measurements from other hardware (Perseus, Zeus)."""
    out = {}
    real_data = package_file("data", "real")
    perseus = real_data / "perseus_sosp24" / "gpt3-175b+a100_sxm_bf16.csv"
    zeus = real_data / "zeus_nsdi23" / "summary_power_v100.csv"
    for name, path, extra in (("perseus_gpt3_a100", perseus, ["--perseus-by", "total"]),
                              ("zeus_bert_v100", zeus, ["--workloads", "*bert*"])):
        if not path.is_file():
            ctx.say(f"{name}: {path} not found, skipped")
            out.setdefault("left_out", {})[name] = f"{path} not found (the package's data)"
            continue
        a = ctx.verb("analyse", "--data", path, "--out", ctx.path("real", name), *extra)
        out[name] = [{"workload": w["workload"], "knob": w["knob"], "sweet_spot": w["sweet_spot"],
                      "top": w["top"], "savings_vs_top_pct": w["savings_vs_top_pct"],
                      "time_penalty_vs_top_pct": w["time_penalty_vs_top_pct"], "flags": w["flags"]}
                     for w in a["workloads"]]
        out[name + "_plots"] = sorted(ctx.rel(p) for p in ctx.path("real", name).rglob("*.png"))
        saves = [w["savings_vs_top_pct"] for w in out[name]]
        ctx.say(f"{name}: {len(saves)} workloads, sweet spots save {min(saves):.1f}-{max(saves):.1f} % "
                f"vs the top setting")
    return out


def stage_roofline(ctx: DemoContext) -> dict:
    """Paper B: the roofline energy law on a simulated multi-GPU sweep and on real A100 data."""
    sim = ctx.path("roofline", "multigpu.csv")
    sim.parent.mkdir(parents=True, exist_ok=True)
    ctx.verb("roofline", "simulate", "--out", sim, "--seed", ctx.seed)
    fit_sim = ctx.verb("roofline", "fit", "--data", sim, "--plot", ctx.path("roofline", "sim"))
    real = package_file("roofline", "data", "mlenergy_a100.csv")
    fit_real = ctx.verb("roofline", "fit", "--data", real, "--plot", ctx.path("roofline", "a100"))
    ctx.say("roofline law fitted on the simulated 8-GPU sweep and on real A100 runs")
    return {"simulated": fit_sim, "a100": fit_real,
            "plots": sorted(ctx.rel(p) for p in ctx.path("roofline").rglob("*.png"))}


def stage_replication(ctx: DemoContext) -> dict:
    """Both papers number by number (docs/replication.md): paper A's own 27-configuration
    protocol, leave-one-model-out CV, savings by model size and on RTE with the time they cost,
    host-bound workloads and the utilisation branch, latency-vs-clock forms; paper B's FSDP-vs-TP
    energy by model size and the law on data from a generator of another form."""
    from ..sim.catalogue import PAPER_A_MODELS
    from . import replication as rep

    out: dict = {}
    # paper A's protocol: its nine models on the three characterisation tasks (27 configurations)
    d = ctx.path("paper-protocol")
    d.mkdir(parents=True, exist_ok=True)
    n = rep.protocol_dataset(ctx.path("characterisation.csv"), d / "characterisation.csv", PAPER_A_MODELS)
    rep.protocol_dataset(ctx.path("evaluation.csv"), d / "evaluation.csv", PAPER_A_MODELS)
    m = ctx.verb("train", "--data", d / "characterisation.csv", "--out", d / "model", *PAPER_ENERGY)
    e = ctx.verb("evaluate", "--data", d / "evaluation.csv", "--model", d / "model", *PAPER_ENERGY)
    metrics = json.loads((d / "model" / "metrics.json").read_text())
    out["protocol"] = {
        "models": list(PAPER_A_MODELS), "configurations": n, "selected": m["selected"],
        "ffg_mhz": m["ffg_mhz"], "rules": m["rules"], "labels": rep.labels_table(metrics),
        "lomo": rep.leave_one_model_out(d / "characterisation.csv", m["selected"]["params"]),
        "evaluate": {"summary": e["summary"], **rep.evaluation_breakdown(e, d / "evaluation.csv")}}
    ctx.say(f"paper A's protocol: {n} configurations, LOOCV accuracy {m['selected']['loocv_accuracy']:.2f} "
            f"(paper 0.62), leave-one-model-out {out['protocol']['lomo']['accuracy']:.2f}")
    # our extended catalogue by paper A's measure: a CPU+GPU tree of the same data as the demo's
    # (module) model; the ledger sets the demo's module figures beside it
    x = ctx.path("paper-extended")
    x.mkdir(parents=True, exist_ok=True)
    mx = ctx.verb("train", "--data", ctx.path("characterisation.csv"), "--out", x / "model", *PAPER_ENERGY)
    ext = json.loads((x / "model" / "metrics.json").read_text())
    ev = ctx.verb("evaluate", "--data", ctx.path("evaluation.csv"), "--model-dir", x / "model", *PAPER_ENERGY)
    main_ev = ctx.results.get("evaluate", {})
    out["extended"] = {
        "energy_measure": PAPER_MEASURE, "selected": mx["selected"], "summary": ev["summary"],
        "labels": rep.labels_table(ext),
        "lomo": rep.leave_one_model_out(ctx.path("characterisation.csv"), ext["selected"]["params"]),
        "evaluate": rep.evaluation_breakdown(ev, ctx.path("evaluation.csv")),
        # the demo's own policy (model/, module energy) on the same tasks, for the side-by-side
        "module": {"energy_measure": main_ev.get("energy_measure"),
                   "mean_saving_pct": main_ev.get("summary", {}).get("mlg", {}).get("mean_saving_pct"),
                   "worse_than_maxn": main_ev.get("summary", {}).get("mlg", {}).get("worse_than_maxn")}}
    out["sweet_spot_range_mhz"] = rep.sweet_spot_range(ctx.path("characterisation.csv"))  # paper A's measure
    # host-bound workloads: does a tree with the selected hyper-parameters meet util <= 22 % -> 1020?
    hb = ctx.path("hostbound.csv")
    hb.unlink(missing_ok=True)
    ctx.verb("sweep", "--sim", "--out", hb, "--repeats", 1, "--seed", ctx.seed, "--host-bound")
    out["host_bound"] = hb_out = rep.host_bound_branch(hb, ext["selected"]["params"])
    ctx.say(f"host-bound: {hb_out['low_util']} workloads at <= 22 % utilisation, best clocks "
            f"{hb_out['low_util_best_mhz']} MHz; the tree "
            f"{'meets' if hb_out['meets_1020_branch'] else 'does not meet'} the paper's 1020 MHz branch")
    perseus = sorted((package_file("data", "real") / "perseus_sosp24").glob("*.csv"))
    out["latency"] = {"simulated": rep.latency_fits_sim(ctx.path("characterisation.csv")),
                      "real": rep.latency_fits_perseus(perseus) if perseus else None}
    out["fsdp_vs_tp"] = rep.fsdp_vs_tp(ctx.path("roofline", "multigpu.csv"))
    out["other_form"] = rep.other_form_check(ctx.seed)
    rf = ctx.results.get("roofline", {})
    out["rmse_cut_pct"] = {src: rep.rmse_cut_pct(rf[src]) for src in ("simulated", "a100") if src in rf}
    out["calibration"] = rep.calibration_check()
    g = ctx.results.get("governed_run")
    if g:
        mx_run, mlg = g["runs"]["maxn"], g["runs"]["mlg"]
        # both measures of one governed run (its policy minimised the module's), side by side
        out["governed"] = {"saving_pct": g.get("saving_cpu_gpu_pct", g["saving_pct"]),
                           "saving_module_pct": g.get("saving_module_pct"),
                           "time_penalty_pct": 100.0 * (mlg["duration_s"] / mx_run["duration_s"] - 1.0)}
    return out


STAGES: list[tuple[str, Callable[[DemoContext], dict]]] = [
    ("board", stage_board),
    ("characterise", stage_characterise),
    ("train", stage_train),
    ("evaluate", stage_evaluate),
    ("governed_run", stage_governed_run),
    ("online", stage_online),
    ("joint", stage_joint),
    ("real_data", stage_real_data),
    ("roofline", stage_roofline),
    ("replication", stage_replication),
]

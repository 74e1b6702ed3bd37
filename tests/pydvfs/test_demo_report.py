"""The demo and its report (issue 37 items 22, 23): the demo writes only under its folder, and the
report says which measure, search and model each "best" clock is, with legible figures. Cheap:
single stages or hand-made results, never the whole demo (tests/test_packaging.py runs it once)."""
from __future__ import annotations

import os
from pathlib import Path

from pydvfs.cli import demo as cli_demo
from pydvfs.cli import main
from pydvfs.studies.demo import stage_board


def test_the_demo_takes_its_locks_in_its_own_folder(tmp_path, monkeypatch):
    """As root the default lock folder is the host's /run/pydvfs/locks: the demo's fake boards
    lock in OUT/locks instead (here the default is the session's lock folder, which must stay
    untouched)."""
    host_locks = Path(os.environ["PYDVFS_LOCK_DIR"])
    before = sorted(host_locks.iterdir())
    monkeypatch.setattr(cli_demo, "STAGES", [("board", stage_board)])
    assert main(["demo", "--out", str(tmp_path / "out"), "--json"]) == 0
    assert sorted(host_locks.iterdir()) == before
    assert any((tmp_path / "out" / "locks").iterdir())


def test_a_split_whose_leaves_give_one_clock_is_pruned_with_the_same_decisions():
    """scikit-learn keeps a split that lowers the impurity without changing the class (the
    report once printed a split whose two leaves were both 816 MHz): printed and exported
    pruned, deciding the same everywhere."""
    import m2cgen
    import numpy as np
    from sklearn.tree import DecisionTreeClassifier

    from pydvfs.policy.train import prune_same_class, rules_text

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 100, (400, 2))
    # left of 50: 90 % 816 MHz; right: 60 % 816 MHz, and 918 MHz only where the second feature is high
    y = np.where(x[:, 0] < 50, np.where(rng.random(400) < 0.9, 816000, 714000),
                 np.where(x[:, 1] > 80, 918000, np.where(rng.random(400) < 0.6, 816000, 714000)))
    clf = DecisionTreeClassifier(max_depth=3, random_state=0).fit(x, y)
    leaves = clf.tree_.children_left == -1
    classes = clf.classes_[np.argmax(clf.tree_.value[:, 0], axis=1)]
    parents = [n for n in range(clf.tree_.node_count) if not leaves[n]
               and leaves[clf.tree_.children_left[n]] and leaves[clf.tree_.children_right[n]]
               and classes[clf.tree_.children_left[n]] == classes[clf.tree_.children_right[n]]]
    assert parents  # the case exists before pruning
    pruned = prune_same_class(clf)
    grid = rng.uniform(-10, 110, (4000, 2))
    assert (pruned.predict(grid) == clf.predict(grid)).all()
    text = rules_text(clf, ["a", "b"])
    assert text.count("class:") < int(leaves.sum())
    for i, line in enumerate(lines := text.splitlines()):  # no split's two leaves give one clock
        if "class:" in line and i + 2 < len(lines) and lines[i + 2] == line:
            raise AssertionError(text)
    assert m2cgen.export_to_c(pruned).count("if (") < m2cgen.export_to_c(clf).count("if (")
    assert clf.tree_.children_left.tolist() != pruned.tree_.children_left.tolist()  # a copy: clf unchanged


def _figures(monkeypatch, module):
    """The figures a plotting function makes, instead of writing them."""
    figs = []
    monkeypatch.setattr(module, "_save", lambda fig, *a: figs.append(fig) or [])
    return figs


def _texts(fig) -> str:
    return " | ".join(t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()))


def test_the_figures_name_the_energy_measure(monkeypatch):
    """U-curve axes say which energy ("module energy (J)", not "energy (J)"); the joint heat
    map's title names the measure, not the column energy_module_j (issue 37 items 15, 23)."""
    import pandas as pd

    from pydvfs.characterise import plots, ucurve

    df = pd.DataFrame([dict(workload="w", freq_mhz=f, setting="fixed", repeat=0, duration_s=600 / f + 0.5,
                            energy_module_j=(600 / f + 0.5) * (0.02 * f + 6)) for f in (306, 612, 918, 1300.5)])
    figs = _figures(monkeypatch, plots)
    (res,), curves = ucurve.analyse(df, energy_column="energy_module_j")
    plots.plot_workload(res, curves, "unused", "energy_module_j")
    assert "module energy (J)" in _texts(figs[-1]) and "module power" in _texts(figs[-1])
    plots.plot_workload(res, curves, "unused", "energy_j")  # another study's column: named as it is
    assert "energy (energy_j) (J)" in _texts(figs[-1])
    rows = [dict(workload="w", setting="fixed", freq_mhz=g, emc_mhz=e, cpu_mhz=c, energy_cpu_gpu_j=g / e + c)
            for g in (612, 918) for e in (2133, 3199) for c in (1113.6, 2201.6)]
    plots.plot_mode_heatmap(rows, "unused", "energy_cpu_gpu_j")
    title = figs[-1].axes[0].get_title()
    assert "CPU+GPU energy" in title and "energy_cpu_gpu_j" not in title, title


def test_the_savings_chart_has_one_label_per_model(monkeypatch):
    """72 workloads' labels side by side could not be read: one row per model, bars across."""
    from pydvfs.studies import demo

    figs = _figures(monkeypatch, demo)
    models, tasks = [f"model-{i}" for i in range(12)], ["CoLA", "MNLI", "QQP", "RTE", "STS-B", "WNLI"]
    rows = [{"workload": f"{m}/{t}", "oracle_saving_pct": 20.0,
             "policies": {p: {"saving_pct": 10.0 + i} for i, p in enumerate(("mlg", "ffg", "rules"))}}
            for m in models for t in tasks]
    demo._plot_savings({"workloads": rows}, Path("unused"))
    ax = figs[-1].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == sorted(models)
    assert "module energy" in _texts(figs[-1])


def test_the_report_says_why_one_workload_has_several_best_clocks():
    """bert-base/SST-2 got four "best" clocks in one report with nothing saying why: one table
    names each stage's measure, search and model, and what each clock costs on each curve."""
    from pydvfs.report import results as report

    sim = {"612": 4.80, "714": 4.617, "816": 4.635, "918": 4.585, "1020": 4.79}
    grid = {"612": 4.795, "714": 4.667, "816": 4.654, "918": 4.726, "1020": 4.87}
    results = {
        "characterise": {"energy_measure": "module", "analysis": {"per_workload": [
            {"workload": "bert-base/SST-2", "sweet_spot_mhz": 714.0}]}},
        "governed_run": {"workload": "bert-base/SST-2", "energy_measure": "module",
                         "runs": {"mlg": {"freq_mhz": 714.0}}},
        "online": {"workload": "bert-base/SST-2", "final_mhz": 918.0, "simulated_optimum_mhz": 918.0,
                   "simulated_j_per_step": sim},
        "joint": {"workloads": [{"workload": "bert-base/SST-2", "modes": 176, "best_mode": [714.0, 3199.0, 1113.6],
                                 "gpu_only_best_mhz": 816.0, "gpu_only_j_per_step": grid,
                                 "gpu-only": {"settled": [816.0, 3199.0, 2201.6]}}]}}
    md = "\n".join(report.best_clocks_section(results))
    assert md.startswith("## One workload, several best clocks: bert-base/SST-2")
    assert "**module** energy" in md and "joint simulator" in md and "priors" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| stage |")]
    assert [r.split(" | ")[3] for r in rows] == ["714 MHz", "714 MHz", "918 MHz", "918 MHz", "816 MHz",
                                                 "714/3199/1113.6"]
    assert "| 714 MHz | +0.7 % | +0.3 % |" in md and "| 816 MHz | +1.1 % | +0.0 % |" in md

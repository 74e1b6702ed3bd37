"""``pydvfs sweep --sim --knobs gpu,emc,cpu``: a designed subset of the modes, rows that carry
the mode (emc_mhz, cpu_mhz), the heat map, resume by mode, and datasets from before the mode
columns loading as the stock mode."""
from __future__ import annotations

import csv
import json

import pytest

from pydvfs import cli
from pydvfs.characterise import dataset as ds
from pydvfs.model.joint import sweep_modes
from pydvfs.sim.profiles import profile


def test_designed_subset_covers_the_gpu_curve_and_every_domain():
    prof = profile("agx-orin")
    modes = sweep_modes(prof.levels_mhz, prof.emc_rates_mhz, prof.sweep_cpu_mhz, extra=16, seed=0)
    full = len(prof.levels_mhz) * len(prof.emc_rates_mhz) * len(prof.sweep_cpu_mhz)
    assert len(modes) == len(set(modes)) and len(modes) < full / 3  # a subset, not the product
    top_e, top_c = prof.emc_rates_mhz[-1], prof.sweep_cpu_mhz[-1]
    assert all((g, top_e, top_c) in modes for g in prof.levels_mhz)  # the GPU-only curve
    for i, axis in enumerate((prof.levels_mhz, prof.emc_rates_mhz, prof.sweep_cpu_mhz)):
        assert {m[i] for m in modes} == set(axis)  # every value of every domain is swept
    assert sweep_modes(prof.levels_mhz, [top_e], [top_c]) == [(g, top_e, top_c) for g in prof.levels_mhz]


def test_sim_sweep_with_knobs_writes_modes_and_a_heat_map(tmp_path, capsys):
    out, plots = tmp_path / "m.csv", tmp_path / "plots"
    args = ["sweep", "--sim", "--knobs", "gpu,emc,cpu", "--models", "bert-base", "--tasks", "SST-2",
            "--out", str(out), "--plot", str(plots), "--json"]
    assert cli.main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = ds.read_rows(out)
    fixed = [r for r in rows if r["setting"] == "fixed"]
    assert summary["knobs"] == ["gpu", "emc", "cpu"] and summary["modes"] == len(fixed) > 20
    assert all(r["emc_mhz"] is not None and r["cpu_mhz"] is not None for r in fixed)
    assert len({r["emc_mhz"] for r in fixed}) == 4 and len({r["cpu_mhz"] for r in fixed}) == 4
    maxn = [r for r in rows if r["setting"] == "maxn"]
    assert maxn and maxn[0]["emc_mhz"] is None  # MAXN: the board's own clocks
    # the same GPU clock at two modes: two runs, two energies
    at612 = {(r["emc_mhz"], r["cpu_mhz"]): r["energy_module_j"] for r in fixed if r["freq_mhz"] == 612.0}
    assert len(at612) >= 2 and len(set(at612.values())) == len(at612)
    assert (plots / "bert-base_SST-2_modes.png").stat().st_size > 0
    best = summary["best_mode"]["bert-base/SST-2"]
    assert best["energy_j"] == pytest.approx(min(r["energy_module_j"] for r in fixed), rel=1e-9)
    # a rerun resumes by mode: nothing new
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == len(rows)


def test_gpu_only_sweep_leaves_the_mode_empty(tmp_path, capsys):
    out = tmp_path / "g.csv"
    assert cli.main(["sweep", "--sim", "--models", "bert-tiny", "--tasks", "SST-2", "--out", str(out), "--json"]) == 0
    rows = ds.read_rows(out)
    assert rows and all(r["emc_mhz"] is None and r["cpu_mhz"] is None for r in rows)


def test_a_dataset_from_before_the_mode_columns_loads_as_stock(tmp_path):
    src = tmp_path / "new.csv"
    assert cli.main(["sweep", "--sim", "--models", "bert-tiny", "--tasks", "SST-2", "--out", str(src)]) == 0
    old = tmp_path / "old.csv"
    with open(src, newline="") as f, open(old, "w", newline="") as g:
        w = csv.DictWriter(g, fieldnames=ds.PRE_MODE_COLUMN_NAMES, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        for r in csv.DictReader(f):
            w.writerow(r)
    rows = ds.read_rows(old)
    assert rows and all(r["emc_mhz"] is None and r["cpu_mhz"] is None for r in rows)
    df = ds.read_dataframe(old)
    assert list(df.columns) == list(ds.COLUMN_NAMES) and df["emc_mhz"].isna().all()
    with pytest.raises(ds.InvalidValueError, match="emc_mhz"):
        ds.DatasetWriter(old)


@pytest.mark.parametrize("knobs,message", [("gpu,mem", "unknown knob 'mem'"), ("emc", "GPU clock must be among"),
                                           ("gpu,gpu", "twice")])
def test_bad_knobs_one_line_exit_2(tmp_path, capsys, knobs, message):
    rc = cli.main(["sweep", "--sim", "--knobs", knobs, "--out", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_board_sweep_with_emc_knob_is_refused(tmp_path, capsys):
    rc = cli.main(["sweep", "--knobs", "gpu,emc,cpu", "--out", str(tmp_path / "x.csv"), "--", "true"])
    err = capsys.readouterr().err
    assert rc == 2 and "--sim" in err and len(err.strip().splitlines()) == 1

"""Energy as the board draws it: the module's energy by default, CPU+GPU (the papers' measure)
beside it, both summed by the board table's rail roles and never over "all rails"; the
``--energy module|cpu-gpu`` choice where an objective is chosen; the dataset's two columns."""
from __future__ import annotations

import csv
import io
import json
import math
import sys
import warnings

import pytest
from wrapped import report

import pydvfs
from pydvfs.characterise import dataset as ds
from pydvfs.device.fake import ORIN_MODEL, build_fake_board
from pydvfs.device.table import board, boards, energies, identify
from pydvfs.errors import InvalidValueError
from pydvfs.governor.engine import OnlineEngine, WindowParams, window_energy_j
from pydvfs.governor.search import HillClimb, SearchParams
from pydvfs.measure.energy import (
    MEASURES,
    ROLE,
    check_measure,
    describe,
    report_fields,
    require,
)
from pydvfs.measure.energy import of as energy_of
from pydvfs.policy.objective import Objective
from pydvfs.sim.sweep import sweep_rows

ORIN = board("agx-orin")
UNKNOWN_MODEL = "Acme Devboard 3000"


@pytest.fixture
def orin(powered_orin):
    """The powered AGX Orin (10 W GPU, 2 W CPU) with the rest of its module drawing too."""
    powered_orin.set_rail("VIN_SYS_5V0", 5000, 800)  # 4 W
    powered_orin.set_rail("VDDQ_VDD2_1V8AO", 1800, 500)  # 0.9 W
    return powered_orin


def by_measure(per_rail, b) -> dict:
    """{measure: J} of a per-rail mapping, by the board table's roles (what the sampler does)."""
    e = energies(per_rail, b)
    return {m: e[ROLE[m]] for m in MEASURES}


class Window:
    """A sampler window as the sampler gives it: per-rail energies and the role sums."""

    def __init__(self, per_rail, b, duration_s=1.0):
        e = energies(per_rail, b)
        self.energy_j, self.duration_s, self.board = dict(per_rail), duration_s, None if b is None else b.id
        self.module_energy_j, self.cpu_gpu_energy_j, self.gpu_energy_j = e["module"], e["cpu_gpu"], e["gpu"]


# -- sums by role ------------------------------------------------------------------------------
def test_each_board_sums_its_roles_rails_each_once():
    for b in boards().values():
        per_rail = {r: 1.0 for r in b.rails}
        e = by_measure(per_rail, b)
        assert e["module"] == len(set(b.role_rails("module"))), b.id
        assert e["cpu-gpu"] == len(set(b.role_rails("cpu_gpu"))), b.id
    # Orin Nano: the module is its input rail alone; the CPU+GPU rail is part of it, not added
    nano = board("orin-nano-super")
    e = by_measure({"VDD_IN": 9.0, "VDD_CPU_GPU_CV": 4.0, "VDD_SOC": 2.0}, nano)
    assert e == {"module": 9.0, "cpu-gpu": 4.0}


def test_an_unknown_board_yields_none_never_a_sum_of_its_rails():
    rails = {"VDD_GPU_SOC": 10.0, "VDD_CPU_CV": 2.0, "VIN_SYS_5V0": 4.0, "VDDQ_VDD2_1V8AO": 1.0}
    assert identify(UNKNOWN_MODEL) is None
    assert by_measure(rails, None) == {"module": None, "cpu-gpu": None}
    f = report_fields(Window(rails, None), "module")
    assert f["board"] is None and f["module_energy_j"] is None and f["cpu_gpu_energy_j"] is None
    assert describe(f) == "module unknown (CPU+GPU unknown)"
    assert window_energy_j(Window(rails, None), "module") is None
    assert window_energy_j(Window(rails, None), "cpu-gpu") is None
    with pytest.raises(InvalidValueError, match="not in pydvfs's board table"):
        require(None, "module", UNKNOWN_MODEL)


def test_a_rail_not_read_leaves_its_role_unknown():
    e = by_measure({"VDD_GPU_SOC": 10.0, "VDD_CPU_CV": 2.0, "VDDQ_VDD2_1V8AO": 1.0}, ORIN)  # no VIN_SYS_5V0
    assert e == {"module": None, "cpu-gpu": 12.0}
    with pytest.raises(InvalidValueError, match="VIN_SYS_5V0.*--energy cpu-gpu"):
        require(ORIN, "module", ORIN_MODEL, rails=("VDD_GPU_SOC", "VDD_CPU_CV", "VDDQ_VDD2_1V8AO"))
    require(ORIN, "cpu-gpu", ORIN_MODEL, rails=("VDD_GPU_SOC", "VDD_CPU_CV", "VDDQ_VDD2_1V8AO"))


def test_the_agx_orin_module_without_its_optional_rail_is_partial_not_unknown():
    """Issue 52: the AGX Orin's VDDQ_VDD2_1V8AO is optional in the table (disabled on some
    releases): without it the module is the sum of the rails present, flagged, and can be minimised."""
    e = by_measure({"VDD_GPU_SOC": 10.0, "VDD_CPU_CV": 2.0, "VIN_SYS_5V0": 4.0}, ORIN)
    assert e == {"module": 16.0, "cpu-gpu": 12.0}
    require(ORIN, "module", ORIN_MODEL, rails=("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"))


def test_the_measure_names_and_the_objective():
    assert MEASURES == ("module", "cpu-gpu") and Objective().energy == "module"
    assert Objective(energy="cpu-gpu").describe().startswith("CPU+GPU energy per step")
    assert Objective().describe().startswith("module energy per step")
    for bad in ("total", "all", "cpu_gpu", None):
        with pytest.raises(InvalidValueError, match="expected module or cpu-gpu"):
            check_measure(bad)
        with pytest.raises(InvalidValueError):
            Objective(energy=bad)


# -- the online engine settles by the measure it is given ----------------------------------------
LEVELS = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)


def step_s(f: float) -> float:
    return 3.0 / f + 0.004


def rail_power_w(f: float) -> dict:
    """A curve where the two measures part: the GPU's power rises steeply with the clock, while the
    rest of the module (8 W) draws for as long as a step lasts, which favours a faster clock."""
    return {"VDD_GPU_SOC": 1.0 + 14.0 * (f / 1300.5) ** 3, "VDD_CPU_CV": 2.0,
            "VIN_SYS_5V0": 6.0, "VDDQ_VDD2_1V8AO": 2.0}


def best_by(measure: str) -> float:
    cost = {f: by_measure(rail_power_w(f), ORIN)[measure] * step_s(f) for f in LEVELS}
    return min(cost, key=cost.get)


class CurveBoard:
    """The engine's device and sampler in one, on the curve above: the clock pinned sets each
    rail's power; a window's energy is what the rails drew while it was open."""

    model = ORIN_MODEL

    def __init__(self):
        self.mhz = LEVELS[-1]
        self.now_s = 0.0
        self.drawn = dict.fromkeys(rail_power_w(1.0), 0.0)
        self.open: dict = {}

    def pin(self, mhz):
        self.mhz = mhz

    def restore(self):
        self.mhz = LEVELS[-1]

    def step(self):
        dt = step_s(self.mhz)
        for r, w in rail_power_w(self.mhz).items():
            self.drawn[r] += w * dt
        self.now_s += dt

    def begin_window(self, name):
        self.open[name] = (self.now_s, dict(self.drawn))

    def end_window(self, name):
        t0, e0 = self.open.pop(name)

        return Window({r: self.drawn[r] - e0[r] for r in self.drawn}, ORIN, self.now_s - t0)


@pytest.mark.parametrize("measure", MEASURES)
def test_the_search_settles_on_the_least_energy_of_its_measure(measure):
    want = {"module": best_by("module"), "cpu-gpu": best_by("cpu-gpu")}
    assert want["module"] == 714.0 and want["cpu-gpu"] == 510.0  # the curve parts them
    b = CurveBoard()
    search = HillClimb(LEVELS, 1300.5, SearchParams(margin_pct=0.0, samples=1, max_samples=1), 0.0)
    engine = OnlineEngine(b, b, search, WindowParams(min_window_s=0.5, min_steps=5, settle_s=0.0),
                          "the test", objective=Objective(energy=measure))
    count = 0
    while not search.converged and count < 20000:
        b.step()
        count += 1
        engine.tick(b.now_s, count)
    assert search.converged and search.best_mhz == want[measure], (measure, search.best_mhz)
    r = engine.report()
    assert r["objective"]["energy"] == measure


# -- front ends ----------------------------------------------------------------------------------
def test_run_reports_both_energies_and_minimises_the_one_chosen(cli, orin):
    root = str(orin.root)
    cmd = ["--", sys.executable, "-c", "import time; time.sleep(0.3)"]
    res = cli("run", "--sysfs-root", root, "--policy", "maxn", "--json", *cmd)
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert r["energy_measure"] == "module" and r["board"] == "agx-orin"
    assert r["module_energy_j"] == pytest.approx(sum(r["energy_j"].values()))  # AGX Orin: its four rails
    assert r["cpu_gpu_energy_j"] == pytest.approx(r["energy_j"]["VDD_CPU_CV"] + r["energy_j"]["VDD_GPU_SOC"])
    assert r["module_energy_j"] > r["cpu_gpu_energy_j"] > 0 and "energy_basis" not in r
    text = cli("run", "--sysfs-root", root, "--policy", "maxn", *cmd)
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stderr.splitlines() if x.startswith("energy "))
    assert line.startswith("energy    module ") and "(CPU+GPU " in line
    text = cli("run", "--sysfs-root", root, "--policy", "maxn", "--energy", "cpu-gpu", *cmd)
    line = next(x for x in text.stderr.splitlines() if x.startswith("energy "))
    assert line.startswith("energy    CPU+GPU ") and "(module " in line


def test_a_bad_energy_is_one_line_and_exit_2(cli, orin):
    for verb in (["run", "--sysfs-root", str(orin.root), "--energy", "total", "--", "true"],
                 ["sweep", "--sim", "--out", "x.csv", "--energy", "all"],
                 ["train", "--data", "x.csv", "--out", "m", "--energy", "cpu_gpu"],
                 ["analyse", "x.csv", "--out", "a", "--energy", "gpu"]):
        res = cli(*verb)
        assert res.returncode == 2, (verb, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
        assert "--energy" in res.stderr and "module" in res.stderr and "cpu-gpu" in res.stderr
    assert orin.read_hz("max_freq") == 1300500000


def test_an_online_search_on_an_unknown_board_refuses_before_any_change(cli, tmp_path):
    b = build_fake_board(tmp_path / "acme", "jp6", model=UNKNOWN_MODEL)
    before = b.read_hz("max_freq"), b.read_hz("min_freq")
    res = cli("run", "--sysfs-root", str(b.root), "--progress-file", str(tmp_path / "p"), "--", "true")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "module energy is unknown" in res.stderr and UNKNOWN_MODEL in res.stderr
    assert (b.read_hz("max_freq"), b.read_hz("min_freq")) == before
    with pytest.raises(InvalidValueError, match="board table"):
        pydvfs.OnlineGovernor(sysfs_root=b.root, log=None)
    # a static policy still runs there, and says what it cannot know
    res = cli("run", "--sysfs-root", str(b.root), "--policy", "maxn", "--json", "--", "true")
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert r["board"] is None and r["module_energy_j"] is None and r["cpu_gpu_energy_j"] is None
    assert r["j_per_step"] is None and sum(r["energy_j"].values()) >= 0  # the rails were read, not summed
    res = cli("run", "--sysfs-root", str(b.root), "--policy", "maxn", "--", "true")
    assert "energy    module unknown (CPU+GPU unknown)" in res.stderr


def test_the_governor_and_callbacks_take_energy(orin):
    gov = pydvfs.OnlineGovernor(sysfs_root=orin.root, energy="cpu-gpu", log=None)
    assert gov.objective.energy == "cpu-gpu"
    with pytest.raises(InvalidValueError, match="expected module or cpu-gpu"):
        pydvfs.OnlineGovernor(sysfs_root=orin.root, energy="total", log=None)
    lightning = pytest.importorskip("pydvfs.integrations.lightning")
    with pytest.raises(InvalidValueError, match="expected module or cpu-gpu"):
        lightning.GovernorCallback(energy="total")
    assert lightning.GovernorCallback(energy="cpu-gpu").options["energy"] == "cpu-gpu"


def test_the_governor_minimises_module_energy_and_reports_both(orin):
    gov = pydvfs.OnlineGovernor("maxn", sysfs_root=orin.root, log=None)
    with gov:
        for _ in range(5):
            gov.step()
    r = gov.report
    assert r["energy_measure"] == "module" and r["board"] == "agx-orin"
    assert r["j_per_step"] == pytest.approx(r["module_energy_j"] / 5)
    assert r["module_energy_j"] > r["cpu_gpu_energy_j"] > 0


# -- datasets ------------------------------------------------------------------------------------
def sim_rows():
    return list(sweep_rows(models=["bert-mini"], tasks=["RTE"], repeats=1, seed=0))


def test_sim_rows_record_both_energies_and_the_board():
    rows = sim_rows()
    for r in rows:
        rails = [r[f"energy_j_{x}"] for x in ds.RAILS]
        assert r["board"] == "agx-orin"
        assert r["energy_module_j"] == pytest.approx(sum(rails))  # AGX Orin: its four rails, each once
        assert r["energy_cpu_gpu_j"] == pytest.approx(r["energy_j_VDD_CPU_CV"] + r["energy_j_VDD_GPU_SOC"])
        assert r["energy_module_j"] > r["energy_cpu_gpu_j"]
    assert {"energy_module_j", "energy_cpu_gpu_j", "board"} <= set(ds.COLUMN_NAMES)


def test_a_row_needs_one_energy_but_not_both():
    row = sim_rows()[0]
    ds.validate_row({**row, "energy_module_j": None})
    ds.validate_row({**row, "energy_cpu_gpu_j": None, "avg_power_w": None})
    with pytest.raises(InvalidValueError, match="energy_module_j or energy_cpu_gpu_j"):
        ds.validate_row({**row, "energy_module_j": None, "energy_cpu_gpu_j": None})


def write_legacy(path, rows) -> None:
    """A dataset as pydvfs wrote it before module energy: no energy_module_j, no board column."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=ds.LEGACY_COLUMN_NAMES, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ds.validate_row(r)[k] for k in ds.LEGACY_COLUMN_NAMES})


def test_an_old_dataset_loads_and_says_so(tmp_path):
    rows = sim_rows()
    old = tmp_path / "old.csv"
    write_legacy(old, rows)
    with pytest.warns(UserWarning, match="before pydvfs recorded module energy"):
        back = ds.read_rows(old)
    assert len(back) == len(rows)
    assert all(r["energy_module_j"] is None and r["board"] is None for r in back)
    assert back[0]["energy_cpu_gpu_j"] == pytest.approx(rows[0]["energy_cpu_gpu_j"], rel=1e-6)
    with pytest.warns(UserWarning, match="before pydvfs recorded module energy"):
        df = ds.read_dataframe(old)
    assert tuple(df.columns) == ds.COLUMN_NAMES and df["energy_module_j"].isna().all()
    with pytest.raises(InvalidValueError, match="write them to a new file"):
        ds.DatasetWriter(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.write_rows(tmp_path / "new.csv", rows)
        assert len(ds.read_rows(tmp_path / "new.csv")) == len(rows)


def test_train_and_analyse_on_an_old_dataset_say_which_energy_it_has(cli, tmp_path):
    pytest.importorskip("pandas")
    old = tmp_path / "old.csv"
    write_legacy(old, sim_rows())
    for verb in (["analyse", str(old), "--out", str(tmp_path / "a"), "--no-plots"],
                 ["train", "--data", str(old), "--out", str(tmp_path / "m")]):
        res = cli(*verb)
        assert res.returncode == 2, (verb, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "--energy cpu-gpu" in res.stderr, res.stderr
    res = cli("analyse", str(old), "--out", str(tmp_path / "a"), "--no-plots", "--energy", "cpu-gpu", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["energy_column"] == "energy_cpu_gpu_j"


def test_the_sim_sweep_picks_each_workloads_best_by_the_measure(cli, tmp_path):
    out = {}
    for m in MEASURES:
        res = cli("sweep", "--sim", "--out", str(tmp_path / f"{m}.csv"), "--models", "bert-base", "pythia-70m",
                  "--tasks", "SST-2", "--energy", m, "--json")
        assert res.returncode == 0, res.stderr
        out[m] = json.loads(res.stdout)
    for m in MEASURES:
        s = out[m]
        assert s["energy_measure"] == m
        for wl, best in s["best"].items():
            assert s["best_mhz"][wl] == best[m]["freq_mhz"]
            assert set(best) == set(MEASURES) and best[m]["saving_vs_maxn_pct"] > 0
    assert out["module"]["best"] == out["cpu-gpu"]["best"]
    # where the rest of the module draws for the whole step, its best clock is no lower
    for wl, best in out["module"]["best"].items():
        assert best["module"]["freq_mhz"] >= best["cpu-gpu"]["freq_mhz"], wl
    text = cli("sweep", "--sim", "--out", str(tmp_path / "t.csv"), "--models", "bert-base", "--tasks", "SST-2")
    assert "by module energy (by CPU+GPU beside it)" in text.stdout and "saves" in text.stdout


def test_measured_logs_module_and_cpu_gpu(orin):
    log = io.StringIO()
    with pydvfs.measured("x", sysfs_root=orin.root, log=log) as m:
        pass
    line = log.getvalue()
    assert line.startswith("pydvfs: x: module ") and "(CPU+GPU " in line and "all rails" not in line
    assert not math.isnan(m.energies["module"])


def test_the_chosen_measure_is_read_from_the_measurement_never_summed_again():
    """energy.of and report_fields read a Measurement's role fields (the sampler's sums): a
    Measurement whose per-rail energies would sum to something else still reports its fields."""
    from pydvfs.measure.sampler import Measurement

    m = Measurement(duration_s=2.0, energy_j={"VDD_IN": 20.0, "VDD_CPU_GPU_CV": 8.0, "VDD_SOC": 4.0},
                    avg_power_w={}, cpu_gpu_energy_j=8.0, gpu_util_pct=None, samples=10, read_errors=0,
                    rate_hz=5.0, module_energy_j=20.0, board="orin-nano-super")
    assert energy_of(m, "module") == 20.0 and energy_of(m, "cpu-gpu") == 8.0  # not 32 J of all rails
    f = report_fields(m, "cpu-gpu")
    assert f == {"energy_measure": "cpu-gpu", "board": "orin-nano-super", "module_energy_j": 20.0,
                 "cpu_gpu_energy_j": 8.0}
    assert describe(f) == "CPU+GPU 8.000 J (module 20.000 J)"
    with pytest.raises(InvalidValueError):
        energy_of(m, "total")

"""Simulator profiles per board (issue 21 item 5) and the EMC/CPU clocks in the model (issue 23
item 5): each board's rails are the table's and add up by role; the AGX Orin is unchanged at the
top EMC rate and CPU clock."""
import pytest

from pydvfs.device import table as boards
from pydvfs.errors import InvalidValueError
from pydvfs.sim.catalogue import HOST_BOUND, get_workload
from pydvfs.sim.model import (
    ORIN_LEVELS_MHZ,
    POWER_MODES,
    RAILS,
    default_params,
    idle_board_power_w,
    operating_point,
    power_modes,
    power_scales,
    simulate_run,
)
from pydvfs.sim.profiles import board_ids, mode_key, profile

BOARDS = board_ids()


def test_every_board_of_the_table_has_a_profile():
    assert set(BOARDS) == set(boards.boards())
    for b in BOARDS:
        prof = profile(b)
        assert prof.levels_mhz == boards.board(b).gpu_levels_mhz
        assert prof.calibrated == (b == "agx-orin")
    assert profile("agx-orin").levels_mhz == ORIN_LEVELS_MHZ
    assert profile("agx-orin").rail_names == RAILS
    with pytest.raises(InvalidValueError):
        profile("tx2")


@pytest.mark.parametrize("board", BOARDS)
def test_rails_are_the_tables_and_roles_add_up(board):
    prof = profile(board)
    b = boards.board(board)
    w = get_workload("bert-base", "QNLI")
    for f in (prof.levels_mhz[0], prof.levels_mhz[len(prof.levels_mhz) // 2], prof.levels_mhz[-1]):
        op = operating_point(w, "fixed", f, board=board)
        assert tuple(op.power_w) == b.rails  # every rail of the board, in the table's order
        assert all(v > 0 for v in op.power_w.values())
        roles = op.role_power_w
        assert roles["module"] > roles["cpu_gpu"] > 0
        if len(b.role_rails("module")) == 1:  # an input rail: the module draws more than its other rails
            inp = b.role_rails("module")[0]
            others = sum(v for r, v in op.power_w.items() if r != inp)
            assert op.power_w[inp] > others
        else:  # no input rail: the module is the sum of all rails, each once
            assert roles["module"] == pytest.approx(sum(op.power_w.values()))
        if roles["gpu"] is not None:
            assert roles["gpu"] < roles["cpu_gpu"]
    idle = idle_board_power_w(default_params(), board)
    assert set(idle) == set(b.rails)
    assert boards.energies(idle, b)["module"] < roles["module"]


@pytest.mark.parametrize("board", BOARDS)
def test_a_run_reports_energy_by_role(board):
    w = get_workload("pythia-160m", "SST-2")
    r = simulate_run(w, "fixed", profile(board).levels_mhz[3], seed=1, board=board)
    e = r.role_energy_j
    assert e["module"] > e["cpu_gpu"] == pytest.approx(r.energy_cpu_gpu_j)
    assert r.avg_power_w * r.duration_s == pytest.approx(r.energy_cpu_gpu_j)


def test_scaled_boards_follow_their_specs():
    w = get_workload("bert-base", "QNLI")
    t = {b: operating_point(w, "fixed", profile(b).levels_mhz[-1], board=b).t_step_s for b in BOARDS}
    assert t["thor"] < t["agx-orin"] < t["orin-nx"] < t["orin-nano-super"] < t["nano"]
    # the GPU-bound reference at the top draws the top mode's share of the AGX Orin's module power
    ref = operating_point(w, "fixed", 1300.5).role_power_w["module"]
    for b in BOARDS:
        prof = profile(b)
        mod = operating_point(w, "fixed", prof.top_mhz, board=b).role_power_w["module"]
        assert mod == pytest.approx(ref * prof.tdp_top_w / 60.0, rel=1e-6)
        assert power_scales(b).gpu > 0


def test_power_modes_take_the_tables_gpu_caps():
    """The simulator's settings are the table's modes under stable names (MODE_30W -> 30w,
    MAXN_SUPER -> maxn-super) with the table's caps; a mode the profile does not model (no GPU
    cap, or no CPU/EMC clocks in the public record) is no setting, and says why."""
    for b in BOARDS:
        prof = profile(b)
        caps = {mode_key(m.name): m.gpu_cap_mhz for m in boards.board(b).power_modes if m.name in prof.modes}
        assert {k: m.gpu_max_mhz for k, m in power_modes(b).items()} == caps
        assert None not in caps.values()
        assert {m.name for m in boards.board(b).power_modes} == set(prof.modes) | set(prof.modes_not_simulated)
    assert profile("thor").modes_not_simulated["90W"].startswith("its GPU cap is not")
    assert (mode_key("MODE_30W"), mode_key("MAXN_SUPER"), mode_key("MAXN SUPER")) == ("30w", "maxn-super", "maxn-super")
    assert list(POWER_MODES) == ["maxn", "15w", "30w", "50w"]
    w = get_workload("bert-large", "SST-2")
    for mode, cap in (("15w", 612), ("25w", 918), ("maxn-super", 1020)):
        assert operating_point(w, mode, board="orin-nano-super").mean_freq_mhz <= cap + 1
    with pytest.raises(InvalidValueError):
        operating_point(w, "30w", board="orin-nano-super")


# ---- AGX Orin unchanged -------------------------------------------------------------------------
# Reference numbers of the calibrated AGX Orin before profiles and EMC/CPU clocks existed
# (commit fc3137b): the defaults (top EMC rate, top CPU clock) must reproduce them exactly.
REFERENCE = {
    ("bert-base/QNLI", 714.0): (0.705035325372017, 9.545681809293326),
    ("bert-tiny/SST-2", 510.0): (0.012996444651337386, 4.888391933404151),
    ("pythia-1b/MRPC", 1300.5): (2.7529787539170187, 24.629645528598218),
}


def test_agx_orin_reference_numbers_unchanged():
    for (name, f), (t, gpu_w) in REFERENCE.items():
        model, task = name.split("/")
        op = operating_point(get_workload(model, task), "fixed", f)
        assert op.t_step_s == t
        assert op.power_w["VDD_GPU_SOC"] == gpu_w
        same = operating_point(get_workload(model, task), "fixed", f, emc_mhz=3199.0, cpu_mhz=2201.6)
        assert same.t_step_s == t and same.power_w == op.power_w


def test_agx_orin_energy_optimum_is_714_for_the_demo_workload():
    w = get_workload("bert-base", "SST-2")
    e = {f: operating_point(w, "fixed", f).cpu_gpu_power_w * operating_point(w, "fixed", f).t_step_s
         for f in ORIN_LEVELS_MHZ}
    assert min(e, key=e.get) == 714.0


# ---- EMC and CPU clocks -------------------------------------------------------------------------
def test_memory_bound_step_slows_at_low_emc_and_compute_bound_less():
    def slowdown(model, task):
        w = get_workload(model, task)
        top = operating_point(w, "fixed", 1300.5)
        low = operating_point(w, "fixed", 1300.5, emc_mhz=665.6)
        return low.t_step_s / top.t_step_s

    mem = slowdown("pythia-1b", "SST-2")  # optimizer traffic of 1B parameters, short sequences
    comp = slowdown("bert-xlarge", "QNLI")  # long sequences, big GEMMs
    assert mem > 1.5 and comp > 1.0
    assert mem > comp + 0.2


def test_emc_power_follows_the_rate():
    w = get_workload("bert-base", "QNLI")
    ops = [operating_point(w, "fixed", 714, emc_mhz=e) for e in (204.0, 665.6, 2133.0, 3199.0)]
    ddr = [o.power_w["VDDQ_VDD2_1V8AO"] for o in ops]
    assert ddr == sorted(ddr)
    with pytest.raises(InvalidValueError):
        operating_point(w, "fixed", 714, emc_mhz=4000.0)


def test_host_part_follows_the_cpu_clock():
    w = get_workload("bert-mini", "SST-2", host=HOST_BOUND)
    fast = operating_point(w, "fixed", 612)
    slow = operating_point(w, "fixed", 612, cpu_mhz=1113.6)
    assert slow.t_step_s > 1.6 * fast.t_step_s  # host-bound: the CPU clock sets the pace
    assert slow.power_w["VDD_CPU_CV"] < fast.power_w["VDD_CPU_CV"]
    gpu_bound = get_workload("pythia-1b", "QNLI")
    assert operating_point(gpu_bound, "fixed", 612, cpu_mhz=1113.6).t_step_s == pytest.approx(
        operating_point(gpu_bound, "fixed", 612).t_step_s, rel=0.02)
    with pytest.raises(InvalidValueError):
        operating_point(w, "fixed", 612, cpu_mhz=3000.0)


def test_cpu_spinning_draws_power_while_the_gpu_runs():
    w = get_workload("bert-base", "QNLI")
    p = default_params()
    half = operating_point(w, "fixed", 714, p)
    spin = operating_point(w, "fixed", 714, p.with_updates(cpu_spin_share=1.0))
    assert spin.t_step_s == half.t_step_s
    assert spin.power_w["VDD_CPU_CV"] > half.power_w["VDD_CPU_CV"]


# ---- animating another board's layout ------------------------------------------------------------
def _orin_nano_tree(root):
    """An Orin Nano Super's sysfs layout: the JetPack 6 tree with the Nano's clock table and its
    one INA3221 (1-0040: VDD_IN, VDD_CPU_GPU_CV, VDD_SOC; nothing at 1-0041)."""
    from pydvfs.device.fake import build_fake_board

    levels = tuple(int(round(f * 1e6)) for f in profile("orin-nano-super").levels_mhz)
    b = build_fake_board(root, layout="jp6", levels_hz=levels,
                         model="NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super")
    names = {"VDD_GPU_SOC": "VDD_IN", "VDD_CPU_CV": "VDD_CPU_GPU_CV", "VIN_SYS_5V0": "VDD_SOC",
             "VDDQ_VDD2_1V8AO": "NC"}
    for old, new in names.items():
        v = b.rails[old].voltage_path
        (v.parent / v.name.replace("_input", "_label")).write_text(new + "\n")
        if new == "NC":
            (v.parent / v.name.replace("_input", "_enable")).write_text("0\n")
    return b


def test_animated_orin_nano_writes_its_own_rails(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pydvfs.sim.model import run_noise

    b = _orin_nano_tree(tmp_path / "root")
    hz = 612_000_000
    (b.devfreq_dir / "min_freq").write_text(f"{hz}\n")
    (b.devfreq_dir / "max_freq").write_text(f"{hz}\n")
    log_path = tmp_path / "writes.json"
    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(b.root), "--board",
         "orin-nano-super", "--model", "bert-base", "--task", "SST-2", "--steps", "10",
         "--time-scale", "200", "--seed", "2", "--write-log", str(log_path)],
        env=dict(os.environ, PYTHONPATH=str(repo)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["board"] == "orin-nano-super"
    log = json.loads(log_path.read_text())
    assert set(log["rails"]) == {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"}
    w = get_workload("bert-base", "SST-2")
    op = operating_point(w, "fixed", 612, board="orin-nano-super")
    _, pf = run_noise(default_params(), op.cpu_exposed_share, 2, w.name, "fixed", 612.0, 0)
    nano = boards.board("orin-nano-super")
    for values in log["power_w"][:-1]:  # every active write: the model's power, to the mA
        written = dict(zip(log["rails"], values))
        for rail, watts in written.items():
            assert watts == pytest.approx(op.power_w[rail] * pf, abs=0.005), rail
        roles = boards.energies(written, nano)
        assert roles["module"] > roles["cpu_gpu"] > 0
    idle = dict(zip(log["rails"], log["power_w"][-1]))  # the idle board's values at exit
    assert idle == pytest.approx(idle_board_power_w(default_params(), "orin-nano-super"), abs=0.005)
    assert b.read_hz("cur_freq") == hz


def test_animator_refuses_a_mode_the_board_lacks(tmp_path):
    from pydvfs.sim import train_process

    b = _orin_nano_tree(tmp_path / "root")
    rc = train_process.main(["--sysfs-root", str(b.root), "--board", "orin-nano-super", "--model", "bert-base",
                             "--task", "SST-2", "--steps", "1", "--power-mode", "30w"])
    assert rc == 2


# ---- the studies (tools/sim_study.py) -------------------------------------------------------------
def test_module_optimum_sits_at_or_above_the_cpu_gpu_one():
    from pydvfs.studies.sim_studies import module_vs_cpu_gpu, module_vs_cpu_gpu_markdown

    ws = [get_workload("bert-base", "QNLI"), get_workload("bert-mini", "SST-2")]
    res = module_vs_cpu_gpu(boards=("agx-orin", "orin-nano-super"), workloads=ws)
    for r in res["boards"].values():
        for row in r["rows"]:
            assert row["module_best_mhz"] >= row["cpu_gpu_best_mhz"]
            assert row["cost_pct"] >= 0.0
    nano = res["boards"]["orin-nano-super"]
    assert nano["max_cost_pct"] > res["boards"]["agx-orin"]["max_cost_pct"]  # a smaller CPU+GPU share
    md = module_vs_cpu_gpu_markdown(res)
    assert "| bert-base/QNLI |" in md and "VDD_IN" in md


def test_a_spinning_cpu_does_not_send_host_bound_work_to_1020():
    """Issue 23 item 5 (docs/power-modes.md): with CUDA's spin-wait modelled (the CPU spins
    through all of the GPU's time), the low-utilisation host-bound optima stay low."""
    p = default_params().with_updates(cpu_spin_share=1.0)
    for model, task in (("bert-tiny", "SST-2"), ("bert-mini", "QNLI"), ("pythia-31m", "SST-2")):
        w = get_workload(model, task, host=HOST_BOUND)
        assert operating_point(w, "maxn", None, p).load <= 0.22
        e = {f: operating_point(w, "fixed", f, p).cpu_gpu_power_w * operating_point(w, "fixed", f, p).t_step_s
             for f in ORIN_LEVELS_MHZ}
        assert min(e, key=e.get) <= 612.0
        assert e[1020.0] > 1.1 * min(e.values())


def test_study_tool_refuses_an_unknown_study(capsys):
    from repo_scripts import load

    mod = load("tools/sim_study.py")
    assert mod.main(["--only", "boards,nonsense"]) == 2
    assert "unknown study nonsense" in capsys.readouterr().err

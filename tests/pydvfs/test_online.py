"""`pydvfs run` end to end: the simulated training process animates a fake Orin (it follows the
pinned clock and writes its step count) while the real pinning code, the C sampler and the
online search run against it."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from wrapped import report

from pydvfs.device.fake import build_fake_board
from pydvfs.device.table import board
from pydvfs.measure.energy import ROLE
from pydvfs.sim.catalogue import get_workload
from pydvfs.sim.model import ORIN_LEVELS_MHZ, default_params, operating_point, run_noise

SCALE = 400.0  # simulated seconds per real second
SEED = 0
FULL = (306000000, 1300500000)  # the board's own (min, max): the state every run must leave
FAST = ["--window", "0.15", "--min-steps", "100", "--settle", "0.05", "--rate", "1000"]
# The search test's windows: long enough that the step count's lag on a busy machine (the
# animated process updates the board every 1 ms when idle, every ~10-30 ms when two other jobs
# share the cores) stays a few per cent of a window.
SEARCH = ["--window", "0.4", "--min-steps", "100", "--settle", "0.05", "--rate", "1000"]
BERT_BASE = "model=bert,layers=12,hidden=768,seq_len=13.3,task=SST-2"


@pytest.fixture
def orin(tmp_path):
    return build_fake_board(tmp_path / "board", "jp6")


def train_cmd(orin, progress, steps, model="bert-base", write_log=None):
    return [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(orin.root),
            "--model", model, "--task", "SST-2", "--steps", str(steps), "--time-scale", str(SCALE),
            "--tick-ms", "1", "--progress-file", str(progress), "--seed", str(SEED)] + (
                ["--write-log", str(write_log)] if write_log else [])


def stall_s(write_log) -> float:
    """The animated process's longest pause between two updates of the board (its own log):
    how far behind real time its step count could be at any instant."""
    t = json.loads(write_log.read_text())["t_ns"]
    return max((b - a) / 1e9 for a, b in zip(t, t[1:]))


ORIN = board("agx-orin")  # the board the fake one stands for: its rails' roles


def sim_j_per_step(model="bert-base", setting="fixed", freq=None, measure="module") -> float:
    """The J/step (the module's: what the online search minimises by default; or CPU+GPU) the
    animated process produces at a setting (its seeded noise included), in real joules:
    simulated energy / SCALE."""
    p = default_params()
    w = get_workload(model, "SST-2")
    op = operating_point(w, setting, freq, p)
    tf, pf = run_noise(p, op.cpu_exposed_share, SEED, w.name, op.setting, op.freq_mhz, 0)
    return op.role_power_w[ROLE[measure]] * pf * op.t_step_s * tf / SCALE


def limits(orin) -> tuple[int, int]:
    return orin.read_hz("min_freq"), orin.read_hz("max_freq")


def test_online_finds_the_simulated_optimum_and_beats_maxn(cli, orin, tmp_path):
    progress = tmp_path / "steps"
    truth = {f: sim_j_per_step(freq=f) for f in ORIN_LEVELS_MHZ}
    f_opt = min(truth, key=truth.get)

    # Start on the steep side of the U: between 1300.5 and 1224 MHz the simulated J/step differs
    # by 0.9 %, less than the search's 2 % margin, so from 1300.5 whether it leaves at all is a
    # coin flip decided by measurement noise; 1224 -> 1122 is 8.8 %.
    res = cli("run", "--sysfs-root", str(orin.root), "--json", "--start", "1224", "--search", "hill",
              "--progress-file", str(progress), *SEARCH, "--",
              *train_cmd(orin, progress, 40000, write_log=tmp_path / "writes.json"))
    assert res.returncode == 0, res.stderr
    r = report(res)
    # A window's J/step is its energy over the steps counted in it; the count read at each end
    # lags real time by at most the process's longest stall, so a window of W seconds can be
    # off by 2 x stall / W. On an idle machine that is under 1 %; on a busy one it is what the
    # process's own log shows, and the bounds below widen by exactly that, no more.
    shortest_s = {}
    for w in r["trajectory"]:
        shortest_s[w["freq_mhz"]] = min(shortest_s.get(w["freq_mhz"], 1e9), w["duration_s"])
    noise = {f: 2 * stall_s(tmp_path / "writes.json") / d for f, d in shortest_s.items()}
    worst = max(noise.values())
    assert limits(orin) == FULL and r["restored"]
    assert r["start_mhz"] == 1224 and r["start_source"] == "--start"
    assert r["converged"] and r["fallback"] is None and r["steps"] == 40000, (r["fallback"], r["search"]["estimates"], noise)
    chosen = r["chosen_mhz"]
    # near the bottom of the U, levels within the search margin (2 %) plus the noise of short
    # windows on a shared 2-core machine are all good answers: judge by true energy per step
    assert truth[chosen] <= truth[f_opt] * (1.05 + 2 * worst), (chosen, f_opt, worst)
    # every probe measured what the simulator produces at that clock
    for e in r["search"]["estimates"]:
        assert e["j_per_step"] == pytest.approx(truth[e["freq_mhz"]], rel=0.04 + noise[e["freq_mhz"]]), e
    # it walked down the U without turning back, then held
    moves = r["search"]["moves"]
    assert moves and all(m["to_mhz"] < m["from_mhz"] for m in moves)
    assert r["trajectory"][-1]["phase"] == "hold" and r["trajectory"][-1]["freq_mhz"] == chosen
    # the run's own J/step (search included) against the start clock and against MAXN
    assert r["energy_at_start_clock_j"] == pytest.approx(40000 * truth[1224.0], rel=0.04 + noise[1224.0])
    assert r["saving_vs_start_pct"] > 10
    maxn_progress = tmp_path / "maxn-steps"
    res = cli("run", "--sysfs-root", str(orin.root), "--json", "--policy", "maxn",
              "--progress-file", str(maxn_progress), "--rate", "1000", "--",
              *train_cmd(orin, maxn_progress, 2000, write_log=tmp_path / "maxn-writes.json"))
    assert res.returncode == 0, res.stderr
    maxn = report(res)
    assert maxn["chosen_mhz"] is None and maxn["steps"] == 2000
    # the whole run's J/step: the simulator's, plus whatever the files held around the steps -
    # the rails read 0 W until the process starts, and its idle values from the moment it stops
    # stepping until it has exited (a slow interpreter exit on a busy machine): judged against
    # what the process wrote, by its own log
    log = json.loads((tmp_path / "maxn-writes.json").read_text())
    stepping_s = (log["t_ns"][-1] - log["t_ns"][0]) / 1e9
    idle_w = sum(log["power_w"][-1][log["rails"].index(rail)] for rail in ORIN.role_rails("module"))
    after_j = idle_w * max(0.0, maxn["duration_s"] - stepping_s)
    maxn_noise = 2 * stall_s(tmp_path / "maxn-writes.json") / stepping_s
    want = sim_j_per_step(setting="maxn")
    assert want * (1 - 0.05 - maxn_noise) <= maxn["j_per_step"] <= (want + after_j / 2000) * (1 + 0.05 + maxn_noise)
    assert r["j_per_step"] < 0.9 * maxn["j_per_step"]
    assert limits(orin) == FULL


def test_static_policy_pins_the_learned_clock(cli, orin, tmp_path):
    progress = tmp_path / "steps"
    res = cli("run", "--sysfs-root", str(orin.root), "--policy", "mlg", "--workload", BERT_BASE,
              "--progress-file", str(progress), "--rate", "1000", "--json", "--",
              *train_cmd(orin, progress, 2000))
    assert res.returncode == 0, res.stderr
    r = report(res)
    # the AGX Orin's built-in policy for module energy (the default): bert-base's module optimum
    assert r["chosen_mhz"] == 816.0 and r["decision"]["policy"] == "mlg"
    assert r["decision"]["origin"] == {"kind": "calibrated", "source": "built-in", "board": "agx-orin",
                                       "measure": "module", "calibrated": True}
    assert r["steps"] == 2000
    # within 6 %: at 816 MHz the animated run (real-time ticks, the idle tail) reads 4-5 % above the
    # steady state on a loaded machine (at 714 MHz it read within 4 %)
    assert r["j_per_step"] == pytest.approx(sim_j_per_step(freq=816.0), rel=0.06)
    assert r["module_energy_j"] == pytest.approx(r["j_per_step"] * 2000)  # the module's, by default
    assert r["energy_measure"] == "module" and r["board"] == "agx-orin"
    assert r["cpu_gpu_energy_j"] == pytest.approx(sum(r["energy_j"][x] for x in ("VDD_CPU_CV", "VDD_GPU_SOC")))
    assert r["module_energy_j"] == pytest.approx(sum(r["energy_j"].values()))  # AGX Orin: its four rails
    assert r["cpu_gpu_energy_j"] < r["module_energy_j"]
    assert limits(orin) == FULL and r["restored"]
    assert '"workload"' in res.stdout  # CMD's stdout stays CMD's (the report is on stderr)


def test_online_starts_where_the_learned_model_points(cli, orin, tmp_path):
    """With a workload the search starts at mlg's clock: the AGX Orin's built-in policy for the
    measure minimised, here CPU+GPU (714 MHz for BERT-base, the simulated CPU+GPU optimum, a
    sharper one than the module's flat 714-816 MHz bottom): it checks both neighbours and ends
    on the bottom of the U (612-816 MHz lie within 1.5 % of each other: on a loaded machine the
    animated run's timing noise can tip the hill climb one level)."""
    progress = tmp_path / "steps"
    res = cli("run", "--sysfs-root", str(orin.root), "--workload", BERT_BASE, "--search", "hill", "--energy",
              "cpu-gpu", "--progress-file", str(progress), *FAST, "--", *train_cmd(orin, progress, 5000))
    assert res.returncode == 0, res.stderr
    out = res.stderr
    assert "started at 714 MHz (mlg)" in out, out
    assert any(f"converged on {f} MHz" in out for f in (612, 714, 816)), out
    assert "trajectory" in out and "board     restored" in out
    assert limits(orin) == FULL


def _wait_for(cond, proc=None, timeout_s=120.0):
    """Until cond() holds; fails at once if proc ended first (generous: a loaded machine starts
    Python slowly)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert proc is None or proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_signal_restores_the_board_and_stops_the_command(orin, tmp_path, sig, status, spawn):
    """...and keeps what was measured: --json prints the partial record, marked partial. The
    training command never outlives the test (spawn kills its process group on every path)."""
    progress = tmp_path / "steps"
    args = [sys.executable, "-m", "pydvfs", "run", "--json", "--sysfs-root", str(orin.root), "--start", "510",
            "--progress-file", str(progress), *FAST, "--", *train_cmd(orin, progress, 10 ** 7)]
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: progress.exists() and limits(orin) == (510000000, 510000000), proc)
    time.sleep(0.3)  # the run lasts that long at least (asserted below), whatever the load
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert "Traceback" not in err and "restored; the report above is partial" in err
    assert limits(orin) == FULL
    r = report(subprocess.CompletedProcess(args, status, out, err))
    assert r["partial"] is True and r["stopped_by"] == signal.Signals(sig).name and r["restored"] is True
    assert r["steps"] > 0 and r["duration_s"] > 0.3 and r["trajectory"] and r["start_mhz"] == 510
    # the training command is gone: its step count no longer moves
    before = progress.read_text()
    time.sleep(0.3)
    assert progress.read_text() == before


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_static_run_stopped_by_a_signal_reports_what_it_measured(orin, tmp_path, sig, status, spawn):
    args = [sys.executable, "-m", "pydvfs", "run", "--sysfs-root", str(orin.root), "--policy", "ffg",
            "--workload", BERT_BASE, "--", "sh", "-c", f"touch {tmp_path / 'started'}; exec sleep 60"]
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: (tmp_path / "started").exists(), proc)  # the command runs: the run is governing
    assert limits(orin)[0] == limits(orin)[1]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status and "Traceback" not in err, err
    assert out == "" and "\ncommand   " in "\n" + err, (out, err)  # the report: on stderr, stdout is CMD's
    assert f"PARTIAL   the run was stopped ({signal.Signals(sig).name})" in err
    assert "board     restored" in err and limits(orin) == FULL


def test_no_progress_file_falls_back_to_the_start_clock(cli, orin, tmp_path):
    progress = tmp_path / "never"
    res = cli("run", "--sysfs-root", str(orin.root), "--start", "612", "--progress-file", str(progress),
              "--window", "0.1", "--stall", "0.3", "--json", "--",
              sys.executable, "-c", "import time; time.sleep(1.2)")
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert "showed no step count" in r["fallback"] and "showed no step count" in res.stderr
    assert r["chosen_mhz"] == 612.0 and r["final_mhz"] == 612.0 and r["trajectory"] == []
    assert r["steps"] is None and r["j_per_step"] is None and r["energy_at_start_clock_j"] is None
    assert limits(orin) == FULL


@pytest.mark.parametrize("rails_on", [True, False], ids=["stalled-count", "dead-rails"])
def test_a_stalled_count_or_dead_rails_fall_back_to_the_start_clock(cli, orin, tmp_path, rails_on):
    """The count advances, then stops: the search had moved off the start clock and goes back.
    With rails that read nothing there is no J/step to compare: back to the start too."""
    progress = tmp_path / "steps"
    if rails_on:  # static rails: every clock looks alike, the search probes a few and holds
        orin.set_rail("VDD_GPU_SOC", 5000, 2000)
        orin.set_rail("VDD_CPU_CV", 5000, 400)
    writer = (
        "import os, sys, time\n"
        "p = sys.argv[1]\n"
        "for i in range(1, 120):\n"
        "    open(p + '.tmp', 'w').write(str(i)); os.replace(p + '.tmp', p); time.sleep(0.01)\n"
        "time.sleep(1.0)\n")
    res = cli("run", "--sysfs-root", str(orin.root), "--start", "918", "--progress-file", str(progress),
              "--window", "0.05", "--min-steps", "3", "--settle", "0", "--samples", "1",
              "--stall", "0.4", "--json", "--", sys.executable, "-c", writer, str(progress))
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert ("stopped advancing" if rails_on else "read no energy") in r["fallback"]
    assert r["final_mhz"] == 918.0 and r["chosen_mhz"] == 918.0
    if rails_on:
        assert len(r["switches"]) >= 2  # it had moved off 918 to probe before the stall
        assert len(r["trajectory"]) >= 2
    else:
        assert r["trajectory"] == []
    assert r["steps"] == 119
    assert limits(orin) == FULL


def test_bad_input_is_one_line_and_leaves_the_board(cli, orin, tmp_path):
    root = ["--sysfs-root", str(orin.root)]
    p = ["--progress-file", str(tmp_path / "steps")]
    cases = [
        ["run", *root, *p],  # no command
        ["run", *root, "--", "true"],  # online without a progress file
        ["run", *root, "--policy", "mlg", "--", "true"],  # static without a workload
        ["run", *root, "--policy", "mlg", "--workload", "model=toaster,layers=1,hidden=1,seq_len=1", "--", "true"],
        ["run", *root, "--policy", "ffg", "--workload", BERT_BASE, "--start", "510", "--", "true"],
        ["run", *root, "--policy", "ffg", "--workload", BERT_BASE, "--window", "1", "--", "true"],
        ["run", *root, *p, "--margin", "-1", "--", "true"],
        ["run", *root, *p, "--window", "0", "--", "true"],
        ["run", *root, *p, "--samples", "0", "--", "true"],
        ["run", *root, *p, "--settle", "inf", "--", "true"],  # nothing was ever probed
        ["run", *root, *p, "--window", "1e308", "--", "true"],
        ["run", *root, *p, "--steps", "\u0661\u0662", "--", "true"],  # Arabic-Indic 12: ASCII digits only
        ["run", *root, *p, "--knobs", "gpu,", "--", "true"],
        ["run", *root, "--policy", "maxn", "-o", "", "--", "true"],  # the report went to stderr, exit 0
        ["run", *root, *p, "--start", "fast", "--", "true"],
        ["run", *root, *p, "--policy", "turbo", "--", "true"],
        ["run", *root, *p, "--", "/no/such/program"],
        ["run", "--sysfs-root", str(tmp_path / "nothing"), *p, "--", "true"],
        # a progress file in no folder: the run went on, and said only that no probe finished
        ["run", *root, "--progress-file", str(tmp_path / "no" / "steps"), "--", "true"],
    ]
    for args in cases:
        res = cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, (args, res.stderr)
        assert limits(orin) == FULL, args


def test_read_progress(tmp_path):
    from pydvfs.governor.loop import read_progress

    f = tmp_path / "steps"
    assert read_progress(f) is None  # not there yet
    for text, value in (("", None), ("  \n", None), ("abc", None), ("-3", None), ("nan", None),
                        ("42\n", 42), ("42.9", 42), ("0", 0)):
        f.write_text(text)
        assert read_progress(f) == value, text
    assert read_progress(tmp_path) is None  # a folder


# -- a board that refuses levels (a power mode), and the saving on a like-for-like basis --------

@pytest.mark.parametrize("start", [["--start", "612"], ["--workload", BERT_BASE]], ids=["from-612", "mlg-714-capped"])
def test_a_power_mode_cap_keeps_the_search_at_or_below_it(cli, orin, tmp_path, start):
    """nvpmodel 30 W caps max_freq at 612 MHz. The search covers only the levels up to the cap
    (bert-base's module optimum, 816 MHz, is above it), a start above it is capped, and the training
    command runs to its end."""
    from pydvfs.device.fake import rewrite_int

    rewrite_int(orin.devfreq_dir / "max_freq", 612000000)
    progress = tmp_path / "steps"
    res = cli("run", "--sysfs-root", str(orin.root), "--json", *start, "--progress-file", str(progress),
              *FAST, "--", *train_cmd(orin, progress, 3000))
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert r["exit_status"] == 0 and r["steps"] == 3000 and r["fallback"] is None and r["dropped"] == []
    assert r["board_max_mhz"] == 612.0 and r["search_levels_mhz"] == [f for f in ORIN_LEVELS_MHZ if f <= 612]
    assert r["start_mhz"] == 612.0
    if start[0] == "--workload":
        assert r["start_source"] == "mlg, capped at the power mode's GPU cap 612 MHz"
    pinned = [s["freq_mhz"] for s in r["switches"]] + [w["freq_mhz"] for w in r["trajectory"]]
    assert max(pinned) == 612.0 and 510.0 in pinned  # it searched, downward only
    assert "the power mode caps the GPU at 612 MHz" in res.stderr
    assert limits(orin) == (306000000, 612000000)


@pytest.mark.parametrize("refuse_after", [False, True], ids=["714-dropped", "everything-refused"])
def test_a_refused_level_is_dropped_and_training_goes_on(orin, tmp_path, monkeypatch, refuse_after):
    """The board refuses 714 MHz the way gc_pin_hz does (the original min/max put back, then
    ClockVerifyError). The level leaves the search for good and the command is not stopped;
    if the board then refuses every clock, even the one that held, the loop leaves the board at
    its own state and the command still runs to its end."""
    import io

    from pydvfs.device import Device
    from pydvfs.errors import ClockVerifyError
    from pydvfs.governor.loop import WindowParams, run_governed

    real_pin, asked = Device.pin, []

    def pin(self, mhz):
        level = self.snap_mhz(mhz)
        asked.append(level)
        if level == 714.0 or (refuse_after and 714.0 in asked):
            self.restore()
            raise ClockVerifyError(f"clock did not take: asked min {level:.2f} max {level:.2f} MHz, board "
                                   "reports min 306.00 max 612.00 MHz (a power-mode cap? check nvpmodel); "
                                   "original clock state restored")
        return real_pin(self, mhz)

    monkeypatch.setattr(Device, "pin", pin)
    progress, log = tmp_path / "steps", io.StringIO()
    r = run_governed(train_cmd(orin, progress, 4000), "online", progress_file=progress, rate_hz=1000,
                     start_mhz=612, window=WindowParams(min_window_s=0.15, min_steps=100, settle_s=0.05),
                     sysfs_root=orin.root, log=log)
    assert r["exit_status"] == 0 and r["steps"] == 4000
    assert asked.count(714.0) == 1 and r["dropped"][0]["freq_mhz"] == 714.0
    assert "dropped from the search" in log.getvalue()
    assert 714.0 not in r["search"]["levels_mhz"] and 714.0 in r["search"]["dropped_mhz"]
    assert 714.0 not in [s["freq_mhz"] for s in r["switches"]] + [w["freq_mhz"] for w in r["trajectory"]]
    assert [d["freq_mhz"] for d in r["dropped"]] == [714.0]
    if refuse_after:  # 714 dropped, then the clock that held (510, probed before 714) refused too
        assert r["fallback"].startswith("the board refused 714 MHz, then 510 MHz, which had held")
        assert "board stays at its own clock state" in log.getvalue()
        assert r["final_mhz"] is None and r["chosen_mhz"] is None and r["switches"][-1]["freq_mhz"] is None
    else:
        assert r["fallback"] is None and r["final_mhz"] in r["search"]["levels_mhz"]
        assert len(r["search"]["probes"]) >= 3  # it went on searching (816 became 612's neighbour)
    assert limits(orin) == FULL


def test_the_saving_vs_start_excludes_the_start_up(cli, orin, tmp_path):
    """Constant power at every clock, a 2 s start-up before the first step, then a steady step
    rate: the start clock would have cost exactly what the run cost, so the saving is ~0 %
    (dividing the whole run's energy by the steps' estimate said about -80 %).

    On a loaded machine the writer and the governor are scheduled late, so one window may count
    more or fewer steps than its time held: the writer's count is a function of the clock (a
    stall skips steps, it never bursts), and the tolerance is the jitter the run itself shows:
    every window's J/step is the same number but for that jitter (power is the same at every
    clock), so the start clock's estimate can be off the run's J/step by at most as much."""
    orin.set_rail("VDD_GPU_SOC", 5000, 2000)
    orin.set_rail("VDD_CPU_CV", 5000, 400)
    progress = tmp_path / "steps"
    writer = (
        "import os, sys, time\n"
        "p = sys.argv[1]\n"
        "time.sleep(2.0)\n"
        "t0 = time.monotonic()\n"
        "i = 0\n"
        "while i < 2000:\n"
        "    time.sleep(0.002)\n"
        "    i = min(2000, int((time.monotonic() - t0) / 0.002))\n"
        "    open(p + '.tmp', 'w').write(str(i)); os.replace(p + '.tmp', p)\n")
    res = cli("run", "--sysfs-root", str(orin.root), "--start", "918", "--progress-file", str(progress),
              "--window", "0.4", "--min-steps", "50", "--settle", "0", "--rate", "1000", "--json", "--",
              sys.executable, "-c", writer, str(progress))
    assert res.returncode == 0, res.stderr
    r = report(res)
    assert r["steps"] == 2000 and r["search"]["start_estimate_j_per_step"] is not None
    span = r["counted_span"]
    assert span["t_begin_s"] > 1.5 and span["steps"] == span["last_count"] - span["first_count"] > 1500
    assert span["energy_j"] < 0.7 * r["module_energy_j"]  # the start-up is outside it
    per_window = sorted(w["j_per_step"] for w in r["trajectory"] if w.get("j_per_step"))
    mid = per_window[len(per_window) // 2]
    jitter = max(abs(j / mid - 1.0) for j in per_window)  # 0 on an idle machine, up to ~0.5 loaded
    tol = 0.03 + jitter
    assert abs(r["saving_vs_start_pct"]) < 100 * tol, (r["saving_vs_start_pct"], jitter)
    assert r["energy_at_start_clock_j"] == pytest.approx(r["module_energy_j"], rel=tol)
    naive = 100 * (1 - r["module_energy_j"] / (r["search"]["start_estimate_j_per_step"] * r["steps"]))
    assert naive < -40  # the old, unlike comparison

"""``pydvfs exporter`` scraped by a real Prometheus server (Debian's package) every second.

One rig for the module (~60 s): three exporters and one Prometheus.
- "wave": an AGX Orin whose four rails carry known waveforms (device/animate.py), read by the
  exporter's own C sampler: rate() of the module energy counter against the waveforms' energy,
  a pin seen in the clock metrics within two scrapes, the pinner seen as the GPU's holder;
- "daemon": the same board's rails through `govcore serve` (root runs the daemon here, the
  exporter talks to its socket): the daemon restarted mid-run leaves every counter monotonic,
  the time it was away a gap (never counted twice);
- "gov": an AGX Orin animated by the simulated fine-tuning, governed by `pydvfs run --policy
  online` publishing its status file: every query of the Grafana dashboard answers.
Plus `promtool check metrics` on each exporter's page, and the metric table against the page.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pydvfs.device.promserver import (
    INSTALL_HINT,
    Exporter,
    PromServer,
    governed_board,
    prometheus_binary,
    promtool_binary,
    scalar,
)

pytest.importorskip("prometheus_client", reason="the metrics extra: pip install 'pydvfs[metrics]'")
pytestmark = pytest.mark.skipif(prometheus_binary() is None or promtool_binary() is None, reason=INSTALL_HINT)

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "grafana" / "pydvfs-dashboard.json"
EXPORTER_RATE_HZ = "250"
SCRAPE_S = 1.0
# dashboard targets that answer only where the run gives them: J/token (a workload with tokens)
# and the MAXN line (a governor at the board's own clock)
OPTIONAL_TARGETS = ("joules_per_token", "governor_at_maxn")


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}
class Daemon:
    def __init__(self, govcore: str, root: Path, work: Path, env: dict):
        self.env = env
        self.args = [govcore, "--sysfs-root", str(root), "--state-dir", str(work / "state"), "serve",
                     "--socket", str(work / "govcore.sock"), "--group", "root",
                     "--policy-dir", str(work / "policies")]
        (work / "state").mkdir(mode=0o700, exist_ok=True)
        self.socket, self.work, self.proc = work / "govcore.sock", work, None
        self.start()

    def start(self) -> None:
        log = self.work / "daemon.log"
        log.write_text("")
        self.proc = subprocess.Popen(self.args, stderr=open(log, "ab"), env=self.env)
        deadline = time.monotonic() + 30
        while "serving " not in log.read_text():
            assert self.proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "govcore serve did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    from pydvfs.device.animate import Waveform, animate

    tmp = tmp_path_factory.mktemp("exporter")
    locks = tmp / "locks"  # one lock folder for the rig's processes and the tests' pins
    locks.mkdir(mode=0o700)
    env = _env(PYDVFS_LOCK_DIR=str(locks))
    wave = governed_board(tmp / "wave", "jp5")
    wave.set_update_interval(4)  # the daemon samples at the sensor's rate: 250 Hz
    gov = governed_board(tmp / "gov", "jp6")
    waves = {name: Waveform(voltage_mv=5000.0, base_ma=300.0 + 150.0 * i, sine_ma=100.0, sine_hz=3.0 + i,
                            step_ma=200.0, step_period_s=0.25 + 0.1 * i)
             for i, name in enumerate(sorted(wave.rails))}
    anim = animate(wave, waves, rate_hz=1000.0, duration_s=120.0)
    started = []
    r = {"tmp": tmp, "wave": wave, "gov": gov, "anim": anim, "waves": waves, "rig_locks": str(locks)}
    try:
        r["x_wave"] = Exporter("wave", wave.root, tmp / "x_wave.log", "--rate", EXPORTER_RATE_HZ, env=env,
                               wait=False)
        started.append(r["x_wave"])
        if os.geteuid() == 0:
            subprocess.run(["make", "-s", "-C", str(REPO / "govcore"), "govcore"], check=True, capture_output=True)
            (tmp / "d").mkdir()
            r["daemon"] = Daemon(str(REPO / "govcore" / "govcore"), wave.root, tmp / "d", env)
            r["x_daemon"] = Exporter("daemon", wave.root, tmp / "x_daemon.log", "--socket", str(r["daemon"].socket),
                                   env=env, wait=False)
            started.append(r["x_daemon"])
        # the governed board: the simulated fine-tuning under `pydvfs run --policy online`
        status = tmp / "governor.json"
        progress = tmp / "steps"
        train = [sys.executable, "-m", "pydvfs.sim.train_process", "--sysfs-root", str(gov.root), "--model",
                 "bert-base", "--task", "SST-2", "--steps", "10000000", "--time-scale", "400", "--tick-ms", "2",
                 "--progress-file", str(progress), "--seed", "0"]
        r["run"] = subprocess.Popen(
            [sys.executable, "-m", "pydvfs", "run", "--sysfs-root", str(gov.root), "--start", "1224", "--search",
             "hill", "--progress-file", str(progress), "--window", "0.4", "--min-steps", "50", "--settle", "0.05",
             "--rate", "500", "--json", "--", *train],
            env={**env, "PYDVFS_GOVERNOR_STATUS": str(status)}, stdout=subprocess.PIPE, stderr=open(tmp / "run.log", "wb"))
        r["x_gov"] = Exporter("gov", gov.root, tmp / "x_gov.log", "--rate", EXPORTER_RATE_HZ,
                              "--governor-status", str(status), env=env, wait=False)
        started.append(r["x_gov"])
        for x in started:  # started together, waited for together
            x.wait_ready()
        r["prom"] = PromServer(tmp / "prom", [x.addr for x in started], scrape_s=SCRAPE_S)
        r["prom"].wait_for("up", pred=lambda res: len(res) == len(started) and
                           all(float(x["value"][1]) == 1 for x in res))
        r["t0"] = time.time()
        yield r
    finally:
        if "prom" in r:
            r["prom"].stop()
        if "run" in r and r["run"].poll() is None:
            r["run"].send_signal(signal.SIGTERM)
            r["run"].wait(timeout=60)
        for x in started:
            x.stop()
        if "daemon" in r:
            r["daemon"].stop()
        if anim._t_ns is None:
            anim.stop()


def _wait_data(rig, seconds: float) -> None:
    left = rig["t0"] + seconds - time.time()
    if left > 0:
        time.sleep(left)


def test_every_page_passes_promtool_and_matches_the_metric_table(rig):
    from pydvfs.integrations.prometheus import METRICS, metric_name

    time.sleep(2 * SCRAPE_S)
    names = set()
    for key in ("x_wave", "x_daemon", "x_gov"):
        if key not in rig:
            continue
        page = rig[key].page()
        out = subprocess.run([promtool_binary(), "check", "metrics"], input=page, capture_output=True, text=True)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), (key, out.stdout, out.stderr)
        names |= set(re.findall(r"^(pydvfs_[a-z_]+)", page, re.M))
    # every family on the pages is in the table (and so in docs/metrics.md), and every metric of
    # the table but the governor's optional ones shows up
    table = {metric_name(k) for k in METRICS}
    assert names <= table, names - table
    optional = {metric_name("governor_joules_per_token")}
    assert table - optional <= names, (table - optional) - names
    docs = (REPO / "docs" / "metrics.md").read_text()
    for name in table:
        assert f"`{name}`" in docs, name


def test_a_pin_shows_in_the_clock_metrics_within_two_scrapes(rig, monkeypatch):
    from pydvfs.device import open_device

    monkeypatch.setenv("PYDVFS_LOCK_DIR", rig["rig_locks"])  # the lock folder the exporters read
    prom, board = rig["prom"], 'board="wave"'
    assert scalar(prom.query(f'pydvfs_clock_pinned{{{board},domain="gpu"}}')) == 0
    dev = open_device(rig["wave"].root)
    t_pin = time.time()
    dev.pin(714)
    try:
        time.sleep(2 * SCRAPE_S + 1.0)  # two scrapes, and the last one's ingestion
        series = prom.query(f'pydvfs_clock_hertz{{{board},domain="gpu"}}[10s]')
        samples = [(float(t), float(v)) for t, v in series[0]["values"] if float(t) > t_pin]
        assert len(samples) >= 2, samples
        # the first scrape after the pin may have begun before it; the second must show it
        assert samples[1][1] == 714e6 and samples[-1][1] == 714e6, samples
        assert scalar(prom.query(f'pydvfs_clock_max_hertz{{{board},domain="gpu"}}')) == 714e6
        assert scalar(prom.query(f'pydvfs_clock_pinned{{{board},domain="gpu"}}')) == 1
        # the pinner holds the GPU's lock: its pid and uid
        assert scalar(prom.query(f"pydvfs_gpu_holder_pid{{{board}}}")) == os.getpid()
        assert scalar(prom.query(f"pydvfs_gpu_holder_uid{{{board}}}")) == os.getuid()
    finally:
        dev.restore()
    prom.wait_for(f'pydvfs_clock_pinned{{{board},domain="gpu"}} == 0', timeout_s=4 * SCRAPE_S)
    assert scalar(prom.query(f"pydvfs_gpu_holder_pid{{{board}}}")) == 0


def _energy_check(rig, board: str, span_s: float) -> tuple[float, float, int]:
    """(counter increase, the waveforms' energy, samples) over the last span_s of scrapes."""
    series = rig["prom"].query(f'pydvfs_energy_joules_total{{board="{board}",role="module"}}[{int(span_s)}s]')
    vals = [(float(t), float(v)) for t, v in series[0]["values"]]
    (t_a, e_a), (t_b, e_b) = vals[0], vals[-1]
    assert all(b >= a for (_, a), (_, b) in zip(vals, vals[1:])), "the counter went backwards"
    offset_ns = time.time_ns() - time.monotonic_ns()  # Prometheus stamps wall time; the writer monotonic
    anim = rig["anim"]
    ref = sum(anim.energy_j(r, int(t_a * 1e9) - offset_ns, int(t_b * 1e9) - offset_ns) for r in rig["waves"])
    return e_b - e_a, ref, len(vals)


def test_a_daemon_restart_leaves_the_counters_monotonic(rig):
    if "daemon" not in rig:
        pytest.skip("needs root to run govcore serve")
    prom, board = rig["prom"], 'board="daemon"'
    _wait_data(rig, 8)
    t_down = time.time()
    rig["daemon"].stop()
    time.sleep(3 * SCRAPE_S)
    rig["daemon"].start()
    t_up = time.time()
    prom.wait_for(f"pydvfs_sampler_restarts_total{{{board}}} >= 1", timeout_s=10)
    time.sleep(4 * SCRAPE_S)
    span = time.time() - rig["t0"] - 1
    for expr in (f"resets(pydvfs_energy_joules_total{{{board}}}[{span:.0f}s])",
                 f"resets(pydvfs_rail_energy_joules_total{{{board}}}[{span:.0f}s])",
                 f"resets(pydvfs_sampler_samples_total{{{board}}}[{span:.0f}s])"):
        res = prom.query(expr)
        assert res and all(float(x["value"][1]) == 0 for x in res), (expr, res)
    # a gap, never a double count: over the whole span the counter holds the rails' energy less
    # (at most) what was drawn while the daemon was away
    got, ref, _ = _energy_check(rig, "daemon", span)
    away = sum(rig["anim"].energy_j(r, int((t_down - 1) * 1e9) - (time.time_ns() - time.monotonic_ns()),
                                    int((t_up + 1) * 1e9) - (time.time_ns() - time.monotonic_ns()))
               for r in rig["waves"])
    print(f"\ndaemon-backed: counter {got:.3f} J, waveforms {ref:.3f} J, away {away:.3f} J")
    assert ref - away - 0.01 * ref <= got <= ref * 1.01
    assert scalar(prom.query(f"pydvfs_sampler_up{{{board}}}")) == 1


def _dashboard_targets():
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return dash, out


def test_every_dashboard_query_answers_for_a_governed_board(rig):
    dash, targets = _dashboard_targets()
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "board"]
    assert any(p.get("repeat") == "board" for p in dash["panels"])  # one row per board
    prom = rig["prom"]
    # the governor has published a finished window (J/step, the saving's estimate)
    prom.wait_for('pydvfs_governor_joules_per_step{board="gov"}', timeout_s=40)
    prom.wait_for('pydvfs_governor_saved_estimate_joules{board="gov"}', timeout_s=40)
    boards = {x["metric"]["board"] for x in prom.query(
        dash["templating"]["list"][1]["query"]["query"].replace("label_values(", "").split(",")[0])}
    assert {"wave", "gov"} <= boards
    empty = []
    for title, expr in targets:
        if any(o in expr for o in OPTIONAL_TARGETS):
            continue
        if not prom.query(expr.replace("$board", "gov")):
            empty.append((title, expr))
    assert not empty, empty
    # the governor's own numbers: the run's pid holds the GPU, the chosen clock is a level
    info = prom.query('pydvfs_governor_info{board="gov"}')[0]["metric"]
    assert info["policy"] == "online" and info["phase"] in ("search", "hold")
    assert scalar(prom.query('pydvfs_gpu_holder_pid{board="gov"}')) == rig["run"].pid
    chosen = scalar(prom.query('pydvfs_governor_clock_hertz{board="gov",domain="gpu"}'))
    assert chosen in rig["gov"].levels_hz


# after the daemon's restart and the dashboard's queries (tests run in file order): the 28 s of
# scrapes this one needs build up while those run, instead of after
def test_module_energy_counter_matches_the_rails(rig):
    _wait_data(rig, 28)
    prom = rig["prom"]
    got, ref, n = _energy_check(rig, "wave", 25)
    assert n >= 15
    print(f"\nmodule energy over {n} scrapes: counter {got:.3f} J, waveforms {ref:.3f} J, "
          f"{100 * (got / ref - 1):+.3f} %")
    assert got == pytest.approx(ref, rel=0.01)
    # rate() against the mean power the waveforms give (a few per cent: rate() extrapolates)
    mean_w = sum(w.base_ma + w.step_ma / 2 for w in rig["waves"].values()) * 5000.0 / 1e6
    rate = scalar(prom.query('rate(pydvfs_energy_joules_total{board="wave",role="module"}[20s])'))
    assert rate == pytest.approx(mean_w, rel=0.03)
    power = scalar(prom.query('avg_over_time(pydvfs_power_watts{board="wave",role="module"}[20s])'))
    assert power == pytest.approx(mean_w, rel=0.03)
    # every rail's counter adds up to the module's (the AGX Orin's module is the sum of its rails)
    rails = sum(float(x["value"][1]) for x in prom.query('pydvfs_rail_energy_joules_total{board="wave"}'))
    module = scalar(prom.query('pydvfs_energy_joules_total{board="wave",role="module"}'))
    assert rails == pytest.approx(module, rel=1e-9)
    # the achieved rate: what was asked at most (a busy machine may take fewer samples)
    assert 0 < scalar(prom.query('pydvfs_sampler_rate_hertz{board="wave"}')) <= 1.05 * float(EXPORTER_RATE_HZ)


def test_the_service_unit_runs_unprivileged_and_read_only(tmp_path):
    import shutil

    unit = (REPO / "govcore" / "pydvfs-exporter.service").read_text()
    keys = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert keys["User"] == "pydvfs-exporter" and keys["NoNewPrivileges"] == "yes"
    assert keys["ProtectSystem"] == "strict" and "ReadWritePaths" not in keys and keys["CapabilityBoundingSet"] == ""
    assert keys["ExecStart"].split()[1] == "exporter"
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    copy = tmp_path / "pydvfs-exporter.service"
    copy.write_text(unit.replace("/usr/local/bin/pydvfs", sys.executable + " -m pydvfs"))
    out = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_status_file_round_trip_and_stale_records(tmp_path):
    from pydvfs.governor import status as gs

    path = tmp_path / "g.json"
    gs.write_status(path, {"policy": "online", "freq_mhz": 714.0, "j_per_step": float("nan")})
    rec = gs.read_status(path)
    assert rec["pid"] == os.getpid() and rec["freq_mhz"] == 714.0 and rec["j_per_step"] is None
    assert gs.read_folder(tmp_path) == ([rec], 0)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = json.loads(path.read_text()) | {"pid": int(dead.stdout)}
    (tmp_path / "old.json").write_text(json.dumps(stale))
    assert gs.read_folder(tmp_path) == ([rec], 0)  # a record whose process is gone is skipped
    (tmp_path / "bad.json").write_text("{not json")
    assert gs.read_folder(tmp_path) == ([rec], 1)  # a damaged one too, and counted
    gs.remove_status(path)
    assert not path.exists()


def test_bad_listen_address_is_one_line(cli):
    res = cli("exporter", "--listen", "127.0.0.1:99999")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "port" in res.stderr
    # --once listens nowhere: an address beside it is refused, not silently ignored
    res = cli("exporter", "--listen", "")  # empty: refused, not taken for the default
    assert res.returncode == 2 and "HOST:PORT" in res.stderr
    res = cli("exporter", "--once", "--listen", "203.0.113.1:9450")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--once" in res.stderr and not res.stdout


def _tree_digest(root: Path) -> dict:
    import hashlib

    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_once_as_an_unprivileged_user_reads_and_never_writes(test_tmp):
    """`pydvfs exporter --once` run as nobody (setpriv) on a board whose files it may read: the
    rails read directly, a page promtool accepts, and not one file of the board changed."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the exporter as nobody")
    folder = Path(tempfile.mkdtemp(dir=test_tmp, prefix="exporter-nobody-"))
    try:
        folder.chmod(0o755)
        fb = governed_board(folder / "board", "jp5")
        for name in fb.rails:
            fb.set_rail(name, 5000, 400)
        before = _tree_digest(fb.root)
        out = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                              "-m", "pydvfs", "exporter", "--once", "--sysfs-root", str(fb.root), "--board-name", "b"],
                             capture_output=True, text=True, cwd="/", timeout=120,
                             env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
        assert out.returncode == 0, out.stderr
        assert 'source="local"' in out.stdout
        module = re.search(r'^pydvfs_energy_joules_total\{board="b",role="module"\} (\S+)$', out.stdout, re.M)
        assert module and float(module.group(1)) > 0
        check = subprocess.run([promtool_binary(), "check", "metrics"], input=out.stdout, capture_output=True,
                               text=True)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr
        assert _tree_digest(fb.root) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_static_policy_publishes_its_pin_while_the_command_runs(cli, tmp_path):
    from pydvfs.device.fake import build_fake_board

    fb = build_fake_board(tmp_path / "b", "jp5", follow_clamp=True)
    status, seen = tmp_path / "g.json", tmp_path / "seen.json"
    res = cli("run", "--sysfs-root", str(fb.root), "--policy", "ffg", "--workload",
              "model=bert,layers=12,hidden=768,seq_len=64", "--", "sh", "-c",
              f'cp "$PYDVFS_GOVERNOR_STATUS" {seen}', env={"PYDVFS_GOVERNOR_STATUS": str(status)})
    assert res.returncode == 0, res.stderr
    rec = json.loads(seen.read_text())
    assert rec["policy"] == "ffg" and rec["phase"] == "static" and round(rec["freq_mhz"] * 1e6) in fb.levels_hz
    assert os.path.realpath(rec["sysfs_root"]) == os.path.realpath(fb.root) and rec["pid"] != os.getpid()


def _scrape_values(registry) -> dict:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "board")))] = s.value
    return out


def test_failed_rail_reads_are_counted_and_the_energy_never_goes_back(tmp_path):
    """A rail file that vanishes for a moment (a driver rebind): the sampler counts the failed
    reads, bridges the gap, and every counter only grows."""
    from prometheus_client import CollectorRegistry

    from pydvfs.device.fake import build_fake_board
    from pydvfs.integrations.prometheus import BoardCollector

    fb = build_fake_board(tmp_path / "b", "jp5")
    for name in fb.rails:
        fb.set_rail(name, 5000, 400)  # 2 W each
    col = BoardCollector(fb.root, 200.0, "b")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(col)
    try:
        first, t_first = _scrape_values(registry), time.monotonic()
        time.sleep(0.5)
        rail = sorted(fb.rails)[0]
        current = fb.rails[rail].current_path
        held = current.read_bytes()
        current.unlink()  # gone: the sampler sees it within 64 rounds and reads by path again
        time.sleep(0.8)
        middle = _scrape_values(registry)
        current.write_bytes(held)
        time.sleep(1.5)
        last, t_last = _scrape_values(registry), time.monotonic()
    finally:
        col.close()
    for key in first:
        if key[0].endswith("_total"):
            assert first[key] <= middle[key] <= last[key], key
    errors = ("pydvfs_sampler_read_errors_total", ())
    assert last[errors] > 0
    module = ("pydvfs_energy_joules_total", (("role", "module"),))
    # the gap bridged at the rail's power: the energy of the whole span, to the scrapes' times
    assert last[module] - first[module] == pytest.approx(2.0 * len(fb.rails) * (t_last - t_first), rel=0.03)

"""Every board of the table (pydvfs/data/boards.json), laid out by its fake board: both front ends
name it, pin and restore it, and measure the module's energy and the CPU+GPU energy by the rails
the table gives each role, none counted twice. And what discovery must not do: guess roles on a
board it does not know, drop a channel whose label repeats, or pass a label's control
characters to a terminal."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wrapped import report

from pydvfs.device import table as boards
from pydvfs.device.fake import build_fake_board

REPO = Path(__file__).resolve().parents[2]
BOARDS = list(boards.boards())


def rail_powers_w(fake) -> dict[str, float]:
    """Distinct constant powers: rail i draws (i + 1) W (5 V x (i + 1) x 200 mA)."""
    powers = {}
    for i, name in enumerate(fake.rails):
        fake.set_rail(name, 5000, 200 * (i + 1))
        powers[name] = float(i + 1)
    return powers


@pytest.fixture(params=BOARDS)
def powered(request, tmp_path):
    fake = build_fake_board(tmp_path / "board", board=request.param, follow_clamp=True)
    return fake, rail_powers_w(fake)


def pydvfs_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydvfs", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(params=["pydvfs", "govcore"])
def front(request, govcore_bin):
    """front(root, *argv) -> CompletedProcess, through either front end."""
    def run(root, *argv):
        if request.param == "pydvfs":
            verb, rest = argv[0], argv[1:]
            return pydvfs_cli(verb, "--sysfs-root", str(root), *rest)
        return subprocess.run([govcore_bin, "--sysfs-root", str(root), *argv], capture_output=True,
                              text=True, timeout=120)
    run.name = request.param
    return run


def expected_sum(b: boards.Board, role: str, powers: dict) -> float | None:
    rails = b.role_rails(role)
    return sum(powers[r] for r in dict.fromkeys(rails)) if rails else None


def test_status_names_the_board_and_each_role_s_rails(powered, front):
    fake, powers = powered
    b = boards.board(fake.board)
    r = front(fake.root, "--json", "status") if front.name == "govcore" else front(fake.root, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert "warning: unknown" not in r.stderr
    st = json.loads(r.stdout)
    assert st["board"] == fake.board and st["jetpack"] == fake.jetpack and st["jetpack"] in b.jetpack
    assert [x["name"] for x in st["rails"]] == list(b.rails)
    assert st["roles"] == {role: list(dict.fromkeys(b.role_rails(role))) for role in boards.ROLES}
    assert st["available_mhz"] == list(b.gpu_levels_mhz)
    live = st["live"]
    for role in boards.ROLES:
        want = expected_sum(b, role, powers)
        assert (live[f"{role}_power_w"] is None) if want is None else live[f"{role}_power_w"] == pytest.approx(want, rel=1e-3)
    if not b.gpu_has_load:  # Thor: no load file, and no made-up number
        assert st["gpu_load_pct"] is None and live["gpu_load_pct"] is None
    else:
        assert st["gpu_load_pct"] == 0.0
    # the text names the board, its JetPack and the rails of each role
    text = front(fake.root, "status")
    assert text.returncode == 0, text.stderr
    assert f"board     {fake.board}: {b.model_example} (JetPack {fake.jetpack}" in text.stdout
    assert f"cpu+gpu = {' + '.join(b.role_rails('cpu_gpu'))}" in text.stdout


def test_pin_and_restore(powered, front, tmp_path):
    fake, _ = powered
    levels = fake.levels_hz
    mid = levels[len(levels) // 2]
    state = tmp_path / "state"
    opts = ("--state-dir", str(state))
    if front.name == "govcore":
        r = front(fake.root, *opts, "pin", f"{mid / 1e6:g}")
    else:
        r = front(fake.root, "pin", f"{mid / 1e6:g}", *opts)
    assert r.returncode == 0, r.stderr
    assert fake.read_hz("min_freq") == fake.read_hz("max_freq") == mid
    assert fake.read_hz("cur_freq") == mid  # a static fake board shows the clamp, as a kernel would
    r = front(fake.root, *opts, "restore") if front.name == "govcore" else front(fake.root, "restore", *opts)
    assert r.returncode == 0, r.stderr
    assert (fake.read_hz("min_freq"), fake.read_hz("max_freq")) == (min(levels), max(levels))
    assert fake.read_hz("cur_freq") == max(levels)
    assert fake.governor() == "nvhost_podgov"


def test_measure_module_and_cpu_gpu_by_role(powered, front):
    fake, powers = powered
    b = boards.board(fake.board)
    argv = ("measure", "--json", "--", sys.executable, "-c", "import time; time.sleep(0.3)")
    r = front(fake.root, "--json", *argv[:1], *argv[2:]) if front.name == "govcore" else front(fake.root, *argv)
    assert r.returncode == 0, r.stderr
    d = report(r)
    dur = d["duration_s"]
    assert d["board"] == fake.board
    module = expected_sum(b, "module", powers) * dur
    assert d["module_energy_j"] == pytest.approx(module, rel=0.01)
    assert "total_energy_j" not in d  # no "total" beside the module: one name for one number
    assert d["cpu_gpu_energy_j"] == pytest.approx(expected_sum(b, "cpu_gpu", powers) * dur, rel=0.01)
    gpu = expected_sum(b, "gpu", powers)
    assert d["gpu_energy_j"] is None if gpu is None else d["gpu_energy_j"] == pytest.approx(gpu * dur, rel=0.01)
    # none counted twice: where the module has an input rail, its parts are not added to it
    if len(b.role_rails("module")) == 1:
        assert d["module_energy_j"] < 0.99 * sum(d["energy_j"].values())
    assert d["roles"]["module"] == list(b.role_rails("module"))
    text = front(fake.root, "measure", "--", "sleep", "0.2")
    assert text.returncode == 0, text.stderr
    assert f"({' + '.join(b.role_rails('module'))})" in text.stderr and text.stdout == ""  # stdout: CMD's
    assert "\ntotal" not in text.stderr and " total " not in text.stderr


def test_python_api_measurement(tmp_path):
    from pydvfs import Sampler

    fake = build_fake_board(tmp_path / "b", board="orin-nano-super")
    fake.set_rail("VDD_IN", 5000, 2000)          # 10 W: the module's input
    fake.set_rail("VDD_CPU_GPU_CV", 5000, 800)   # 4 W: part of VDD_IN
    fake.set_rail("VDD_SOC", 5000, 400)          # 2 W: part of VDD_IN
    with Sampler(sysfs_root=fake.root, rate_hz=500) as s:
        time.sleep(0.2)
    m = s.measurement
    assert s.board == "orin-nano-super" and m.board == "orin-nano-super" and s.warning is None
    assert m.module_energy_j == pytest.approx(10.0 * m.duration_s, rel=1e-6)
    assert m.module_energy_j < 0.7 * sum(m.energy_j.values())  # not 16 W: VDD_IN's parts are not added again
    assert m.cpu_gpu_energy_j == pytest.approx(4.0 * m.duration_s, rel=1e-6)
    assert m.gpu_energy_j is None and m.roles["gpu"] == []
    # a sampler of some rails only: a role whose rail was not sampled is not known, not smaller
    with Sampler(sysfs_root=fake.root, rails=["VDD_CPU_GPU_CV"]) as s2:
        time.sleep(0.05)
    assert s2.measurement.module_energy_j is None and s2.measurement.roles["module"] is None
    assert s2.measurement.cpu_gpu_energy_j is not None


def test_unknown_board_one_warning_no_guessed_roles(tmp_path, front):
    fake = build_fake_board(tmp_path / "b", board="orin-nano-super", model="Acme Carrier Board")
    rail_powers_w(fake)
    args = ("--json", "status") if front.name == "govcore" else ("status", "--json")
    r = front(fake.root, *args)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and 'unknown board (model "Acme Carrier Board")' in warnings[0], r.stderr
    st = json.loads(r.stdout)
    assert st["board"] is None and st["roles"] == {"module": None, "cpu_gpu": None, "gpu": None}
    assert st["live"]["module_power_w"] is None and st["live"]["cpu_gpu_power_w"] is None
    assert [x["name"] for x in st["rails"]] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]  # discovery works
    args = ("--json", "measure", "--", "sleep", "0.2") if front.name == "govcore" else ("measure", "--json", "--", "sleep", "0.2")
    r = front(fake.root, *args)
    assert r.returncode == 0, r.stderr
    assert sum("warning" in line for line in r.stderr.splitlines()) == 1
    d = report(r)
    assert d["module_energy_j"] is None and d["cpu_gpu_energy_j"] is None and d["board"] is None


def _label_file(fake, rail: str) -> Path:
    r = fake.rails[rail]
    return r.voltage_path.with_name(r.voltage_path.name.replace("_input", "_label"))


def test_repeated_label_keeps_both_channels_and_refuses_the_role(tmp_path, front):
    fake = build_fake_board(tmp_path / "b", board="orin-nano-super")
    rail_powers_w(fake)
    _label_file(fake, "VDD_SOC").write_text("VDD_IN\n")  # two channels labelled VDD_IN
    args = ("--json", "measure", "--", "sleep", "0.2") if front.name == "govcore" else ("measure", "--json", "--", "sleep", "0.2")
    r = front(fake.root, *args)
    assert r.returncode == 0, r.stderr
    assert "two power channels are labelled VDD_IN: the second is read as VDD_IN#2" in r.stderr
    d = report(r)
    assert list(d["energy_j"]) == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_IN#2"]  # none dropped
    assert d["module_energy_j"] is None and d["roles"]["module"] is None  # which VDD_IN? not known
    assert d["cpu_gpu_energy_j"] == pytest.approx(2.0 * d["duration_s"], rel=0.01)


@pytest.mark.parametrize("label", [b"VIN\x1b[2J\x1b[31mX\x07", b"VIN_\xff\xfe"], ids=["ansi", "not-utf8"])
def test_unprintable_labels_are_escaped(tmp_path, front, label):
    fake = build_fake_board(tmp_path / "b", board="agx-orin")
    rail_powers_w(fake)
    _label_file(fake, "VIN_SYS_5V0").write_bytes(label + b"\n")
    for argv in (("status",), ("measure", "--", "sleep", "0.2")):
        r = front(fake.root, *argv)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr
        shown = r.stdout if argv[0] == "status" else r.stderr  # measure: the report is on stderr
        assert ("VIN\\x1b[2J" if b"\x1b" in label else "VIN_\\xff\\xfe") in shown
    # the table's VIN_SYS_5V0 is gone under that label: the module sum says so instead of guessing
    assert "rail VIN_SYS_5V0 was not found" in r.stderr


def _status_json(front, root) -> tuple[dict, str]:
    r = front(root, "--json", "status") if front.name == "govcore" else front(root, "status", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_disabled_channel_is_no_rail_and_the_module_is_partial(tmp_path, front):
    """Issue 52: an INA3221 channel with inN_enable 0 is no rail; on the AGX Orin, whose
    VDDQ_VDD2_1V8AO the table marks optional, the module is summed over the three rails present
    and flagged (module_partial, a notice naming the rail) in status and measure."""
    fake = build_fake_board(tmp_path / "b", board="agx-orin")
    powers = rail_powers_w(fake)
    fake.disable_rail("VDDQ_VDD2_1V8AO")
    present = ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    st, err = _status_json(front, fake.root)
    assert [x["name"] for x in st["rails"]] == present
    [skipped] = st["skipped_rails"]
    assert skipped["name"] == "VDDQ_VDD2_1V8AO" and skipped["why"].startswith("disabled: ")
    assert skipped["why"].endswith("in2_enable is 0")
    assert st["roles"]["module"] == present and st["module_partial"] is True
    assert st["live"]["module_power_w"] == pytest.approx(sum(powers[r] for r in present), rel=1e-3)
    assert "module energy is partial (module_partial)" in st["warning"] and "VDDQ_VDD2_1V8AO" in st["warning"]
    assert "VDDQ_VDD2_1V8AO" in err  # the notice, on stderr too
    text = front(fake.root, "status")
    assert f"skipped   VDDQ_VDD2_1V8AO: {skipped['why']}" in text.stdout
    assert "module = VDD_GPU_SOC + VDD_CPU_CV + VIN_SYS_5V0 (partial" in text.stdout
    args = ("--json", "measure", "--", "sleep", "0.2") if front.name == "govcore" else ("measure", "--json", "--", "sleep", "0.2")
    r = front(fake.root, *args)
    assert r.returncode == 0, r.stderr
    d = report(r)
    assert d["module_partial"] is True and d["roles"]["module"] == present
    assert d["module_energy_j"] == pytest.approx(sum(powers[r] for r in present) * d["duration_s"], rel=0.01)
    assert "VDDQ_VDD2_1V8AO" not in d["energy_j"]


def test_unreadable_channel_is_no_rail(tmp_path, front):
    """A channel whose input read fails at discovery (a folder in its place reads EISDIR, as a
    disabled channel's reads EIO on a JetPack 6 AGX Orin: alumet issue 212) is skipped with the
    reason; the whole board's module is flagged partial, never a silent null or a wrong sum."""
    fake = build_fake_board(tmp_path / "b", board="agx-orin")
    rail_powers_w(fake)
    inp = fake.rails["VDDQ_VDD2_1V8AO"].voltage_path
    inp.unlink()
    inp.mkdir()
    st, _ = _status_json(front, fake.root)
    assert "VDDQ_VDD2_1V8AO" not in [x["name"] for x in st["rails"]]
    [skipped] = st["skipped_rails"]
    assert skipped["name"] == "VDDQ_VDD2_1V8AO" and "in2_input cannot be read: " in skipped["why"]
    assert st["module_partial"] is True and len(st["roles"]["module"]) == 3


def test_whole_board_is_not_partial(tmp_path):
    """The flag is off where every rail is there, and the role sums in Python agree with
    govcore's: an optional rail missing gives the sum over the rest, any other rail missing None."""
    b = boards.board("agx-orin")
    full = {r: 1.0 for r in b.rails}
    assert boards.missing_optional(full, b, "module") == () and boards.energies(full, b)["module"] == 4.0
    less = {r: 1.0 for r in b.rails if r != "VDDQ_VDD2_1V8AO"}
    assert boards.missing_optional(less, b, "module") == ("VDDQ_VDD2_1V8AO",)
    assert boards.energies(less, b)["module"] == 3.0
    no_vin = {r: 1.0 for r in b.rails if r != "VIN_SYS_5V0"}
    assert boards.energies(no_vin, b)["module"] is None and boards.missing_optional(no_vin, b, "module") == ()
    nano = boards.board("orin-nano-super")
    assert nano.optional_rails == {} and boards.energies({"VDD_SOC": 1.0}, nano)["module"] is None


def test_daemon_replies_carry_the_board_and_roles(tmp_path, govcore_bin):
    fake = build_fake_board(tmp_path / "b", board="thor")
    powers = rail_powers_w(fake)
    sock = tmp_path / "run" / "govcore.sock"
    sock.parent.mkdir(mode=0o755)
    (tmp_path / "state").mkdir(mode=0o700)
    log = tmp_path / "daemon.log"
    proc = subprocess.Popen([govcore_bin, "--sysfs-root", str(fake.root), "--state-dir", str(tmp_path / "state"),
                             "serve", "--socket", str(sock), "--group", "root",
                             "--policy-dir", str(tmp_path / "policies")], stderr=open(log, "wb"))
    try:
        deadline = time.monotonic() + 30
        while "serving " not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.02)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(sock))
            f = s.makefile("rw")

            def ask(line):
                f.write(line + "\n")
                f.flush()
                return json.loads(f.readline())
            st = ask("status")
            assert st["board"] == "thor" and st["jetpack"] == 7 and st["gpu_load_pct"] is None
            assert st["roles"] == {"module": ["ina238"], "cpu_gpu": ["VDD_GPU", "VDD_CPU_SOC_MSS"], "gpu": ["VDD_GPU"]}
            ask("begin w")
            time.sleep(0.3)
            w = ask("end w")
        assert w["board"] == "thor"
        assert w["module_energy_j"] == pytest.approx(powers["ina238"] * w["duration_s"], rel=0.01)
        assert w["cpu_gpu_energy_j"] == pytest.approx((powers["VDD_GPU"] + powers["VDD_CPU_SOC_MSS"]) * w["duration_s"], rel=0.01)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_fake_board_cli_lays_out_every_board(tmp_path):
    for board_id in BOARDS:
        r = pydvfs_cli("fake-board", str(tmp_path / board_id), "--board", board_id, "--json")
        assert r.returncode == 0, r.stderr
        made = json.loads(r.stdout)
        b = boards.board(board_id)
        assert made["board"] == board_id and made["levels_mhz"] == list(b.gpu_levels_mhz)
        assert sorted(made["rails"]) == sorted(b.rails)
    # every board animates now (issue 26 item 6; test_fake_board_cli.py runs each)
    r = pydvfs_cli("fake-board", str(tmp_path / "y"), "--board", "nope")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_boards_header_is_generated_from_the_table():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "gen_boards.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

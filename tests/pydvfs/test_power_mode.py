"""The power mode is the user's ceiling (issue 21 item 4; govcore/powermode.h).

A pin (``pin``, ``apply``, ``run``'s policies, the online searches' tables) stays at or under
the GPU cap in force: the highest level at or under the devfreq max_freq found before the first
pin and /sys/kernel/nvpmodel_clk_cap/gpu. A request above it is clamped with a one-line notice,
``--above-power-mode`` lifts it, restore returns the cap, and ``status`` names the mode from
nvpmodel's status and conf - or says it is unknown, never with a traceback.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

import pydvfs
from pydvfs import _core
from pydvfs.device import open_device
from pydvfs.device.fake import build_fake_board, rewrite_int

CONF = """# nvpmodel.conf of a fake AGX Orin
< PARAM TYPE=FILE NAME=CPU_ONLINE >
CORE_0 /sys/devices/system/cpu/cpu0/online

< PARAM TYPE=CLOCK NAME=GPU >
MAX_FREQ /sys/devices/17000000.ga10b/devfreq/17000000.ga10b/max_freq

< POWER_MODEL ID=0 NAME=MAXN >
CPU_ONLINE CORE_0 1
GPU MIN_FREQ 0
GPU MAX_FREQ -1

< POWER_MODEL ID=1 NAME=15W >
GPU MIN_FREQ 0
GPU MAX_FREQ 408000000

< POWER_MODEL ID=2 NAME=30W >
CPU_ONLINE CORE_0 1
GPU MIN_FREQ 0
GPU MAX_FREQ 612000000
EMC MAX_FREQ 0

< PM_CONFIG DEFAULT=2 >
"""
WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=64"


def set_mode(board, mode_id: int | None = 2, cap_hz: int | None = 612000000, conf: str = CONF) -> None:
    """What nvpmodel leaves on a board: the mode in force, its table and the GPU's max_freq."""
    if mode_id is not None:
        (board.root / "var/lib/nvpmodel").mkdir(parents=True, exist_ok=True)
        (board.root / "var/lib/nvpmodel/status").write_text(f"pmode:{mode_id:04d} fmode:quiet\n")
        (board.root / "etc").mkdir(exist_ok=True)
        (board.root / "etc/nvpmodel.conf").write_text(conf)
    if cap_hz is not None:
        rewrite_int(board.devfreq_dir / "max_freq", cap_hz)


def limits(board) -> tuple[int, int]:
    return board.read_hz("min_freq"), board.read_hz("max_freq")


@pytest.fixture
def orin30(tmp_path):
    b = build_fake_board(tmp_path / "board", "jp5")
    set_mode(b)
    return b


def gc(govcore_bin, board, *args):
    return subprocess.run([govcore_bin, "--sysfs-root", str(board.root), *args], capture_output=True,
                          text=True, timeout=120)


# -- clamp, notice, lift, restore -------------------------------------------------------------

def test_pin_above_the_cap_is_clamped_with_a_notice_in_both_front_ends(orin30, cli, govcore_bin):
    res = cli("pin", "918", "--sysfs-root", str(orin30.root), "--json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (612.0, 612.0, 918.0)
    notes = [line for line in res.stderr.splitlines() if "power mode" in line]
    assert notes == ["pydvfs pin: note: 918 MHz is above the power mode's GPU cap: pinned 612 MHz "
                     "(--above-power-mode lifts the cap)"]
    assert limits(orin30) == (612000000, 612000000)
    # govcore: the same record and the same notice; the cap is the saved original's max now
    g = gc(govcore_bin, orin30, "--json", "pin", "1020")
    assert g.returncode == 0, g.stderr
    gr = json.loads(g.stdout)
    assert {k: gr[k] for k in ("freq_mhz", "power_cap_mhz", "clamped_from_mhz")} == \
        {"freq_mhz": 612, "power_cap_mhz": 612, "clamped_from_mhz": 1020}
    assert "govcore pin: note: 1020 MHz is above the power mode's GPU cap: pinned 612 MHz" in g.stderr
    assert set(r) == set(gr)  # one record, two front ends
    # restore returns the cap: the original max_freq, not the table's top
    res = cli("restore", "--sysfs-root", str(orin30.root), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["max_mhz"] == 612.0
    assert limits(orin30) == (306000000, 612000000)


def test_a_pin_at_or_under_the_cap_says_nothing(orin30, cli):
    res = cli("pin", "510", "--sysfs-root", str(orin30.root), "--json")
    r = json.loads(res.stdout)
    assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (510.0, 612.0, None)
    assert "power mode" not in res.stderr


def test_above_power_mode_lifts_the_cap_in_both_front_ends(orin30, cli, govcore_bin):
    res = cli("pin", "1020", "--above-power-mode", "--sysfs-root", str(orin30.root), "--json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert (r["freq_mhz"], r["power_cap_mhz"], r["clamped_from_mhz"]) == (1020.0, None, None)
    assert "power mode" not in res.stderr
    assert cli("restore", "--sysfs-root", str(orin30.root)).returncode == 0
    g = gc(govcore_bin, orin30, "pin", "1122", "--above-power-mode")
    assert g.returncode == 0 and g.stdout.strip() == "pinned the GPU clock to 1122 MHz", g.stderr
    assert limits(orin30) == (1122000000, 1122000000)
    assert gc(govcore_bin, orin30, "restore").returncode == 0
    assert limits(orin30) == (306000000, 612000000)  # the cap is back


def test_the_python_api_clamps_by_default_and_takes_the_keyword(orin30):
    r = pydvfs.pin(1224, sysfs_root=orin30.root)
    assert (r.freq_mhz, r.power_cap_mhz, r.clamped_from_mhz) == (612.0, 612.0, 1224.0)
    assert "power mode's GPU cap" in r.notice()
    # the cap is the original max_freq (saved), not the pinned one: a second pin still gets 612
    r = pydvfs.pin(714, sysfs_root=orin30.root)
    assert (r.freq_mhz, r.clamped_from_mhz) == (612.0, 714.0)
    r = pydvfs.pin(1224, sysfs_root=orin30.root, above_power_mode=True)
    assert (r.freq_mhz, r.clamped_from_mhz, r.notice()) == (1224.0, None, None)
    assert pydvfs.restore(sysfs_root=orin30.root)
    assert limits(orin30) == (306000000, 612000000)


def test_apply_clamps_the_policy_choice_and_says_so(orin30, cli, govcore_bin):
    # ffg: the built-in tree's best fixed clock is above 612 MHz
    ffg = _core.Tree(None).ffg_mhz
    assert ffg > 612
    d = pydvfs.apply({"model": "bert", "layers": 12, "hidden": 768, "seq_len": 64}, policy="ffg",
                     sysfs_root=orin30.root)
    assert (d.freq_mhz, d.power_cap_mhz) == (612.0, 612.0) and d.clamped_from_mhz == pytest.approx(ffg, abs=1)
    assert d.to_dict()["clamped_from_mhz"] == d.clamped_from_mhz
    pydvfs.restore(sysfs_root=orin30.root)
    g = gc(govcore_bin, orin30, "--json", "apply", "--workload", WORKLOAD, "--policy", "ffg")
    assert g.returncode == 0, g.stderr
    gr = json.loads(g.stdout)
    assert gr["freq_mhz"] == 612 and gr["power_cap_mhz"] == 612 and gr["clamped_from_mhz"] > 612
    assert "govcore apply: note:" in g.stderr
    assert gc(govcore_bin, orin30, "restore").returncode == 0
    res = cli("apply", "--workload", WORKLOAD, "--policy", "ffg", "--above-power-mode",
              "--sysfs-root", str(orin30.root), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["freq_mhz"] == pytest.approx(ffg, abs=1) and "note:" not in res.stderr
    assert cli("restore", "--sysfs-root", str(orin30.root)).returncode == 0


def test_nvpmodel_clk_cap_lowers_the_cap_below_max_freq(orin30):
    cap_dir = orin30.root / "sys/kernel/nvpmodel_clk_cap"
    cap_dir.mkdir(parents=True)
    (cap_dir / "gpu").write_text("510000000\n")
    dev = open_device(orin30.root)
    assert dev.gpu_cap() == {"cap_mhz": 510.0, "devfreq_max_mhz": 612.0, "from_saved": False,
                             "nvpmodel_clk_cap_mhz": 510.0}
    assert dev.allowed_frequencies_mhz() == (306.0, 408.0, 510.0)
    assert dev.pin(612).freq_mhz == 510.0
    assert dev.restore()


def test_the_online_search_gets_the_capped_table(orin30):
    from pydvfs.governor.loop import plan_online

    plan = plan_online(open_device(orin30.root), None, start_mhz=918)
    assert plan["search_levels_mhz"] == [306.0, 408.0, 510.0, 612.0] and plan["centre_mhz"] == 612.0
    lifted = plan_online(open_device(orin30.root, above_power_mode=True), None, start_mhz=918)
    assert lifted["search_levels_mhz"][-1] == 1300.5 and lifted["centre_mhz"] == 918.0


def test_the_in_process_governor_takes_energy_and_above_power_mode_together(orin30):
    """OnlineGovernor(energy=..., above_power_mode=...): the merged keywords of both branches."""
    with pydvfs.OnlineGovernor(sysfs_root=orin30.root, start_mhz=918, energy="cpu-gpu", log=None) as gov:
        assert gov.objective.energy == "cpu-gpu" and limits(orin30)[1] == 612000000  # capped
    with pydvfs.OnlineGovernor(sysfs_root=orin30.root, start_mhz=918, energy="module", log=None,
                               above_power_mode=True) as gov:
        assert gov.objective.energy == "module" and limits(orin30)[1] == 918000000  # lifted
    assert limits(orin30)[1] == 612000000  # restored: the mode's own max_freq


# -- status: the mode's name and caps, or unknown ---------------------------------------------

def test_status_names_the_mode_and_cap_in_both_front_ends(orin30, cli, govcore_bin):
    res = cli("status", "--sysfs-root", str(orin30.root), "--json")
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["power_mode"] == {"id": 2, "name": "30W", "gpu_max_mhz": 612.0, "unknown": None}
    assert st["gpu_cap"] == {"cap_mhz": 612.0, "devfreq_max_mhz": 612.0, "from_saved": False,
                             "nvpmodel_clk_cap_mhz": None}
    g = json.loads(gc(govcore_bin, orin30, "--json", "status").stdout)
    assert g["power_mode"] == st["power_mode"] and g["gpu_cap"] == st["gpu_cap"]
    text = cli("status", "--sysfs-root", str(orin30.root)).stdout
    line = "mode      30W (nvpmodel 2); GPU cap 612 MHz (max_freq now 612 MHz)"
    assert line in text.splitlines()
    assert line in gc(govcore_bin, orin30, "status").stdout.splitlines()


GARBLED = {
    "no nvpmodel": (None, None, "/var/lib/nvpmodel/status: not found"),
    "status garbled": ("pmode:abc\n", CONF, "/var/lib/nvpmodel/status: garbled"),
    "status binary": (b"\x00\xff\x01pmode", CONF, "not a text file"),
    "mode not in conf": ("pmode:0007\n", CONF, "has no POWER_MODEL ID=7"),
    "conf garbled": ("pmode:0002\n", "< POWER_MODEL ID=2 NAME=30W\nGPU MAX_FREQ 612000000\n", "garbled"),
    "conf bad number": ("pmode:0002\n", CONF.replace("612000000", "6x2"), "garbled"),
    "conf huge": ("pmode:0002\n", "#" * (300 * 1024), "too large"),
    "conf missing": ("pmode:0002\n", None, "/etc/nvpmodel.conf: not found"),
    "status fifo": ("fifo", CONF, "not a text file"),
}


@pytest.mark.parametrize("case", list(GARBLED), ids=list(GARBLED))
def test_status_says_unknown_for_missing_or_garbled_nvpmodel_files(tmp_path, cli, govcore_bin, case):
    status, conf, why = GARBLED[case]
    b = build_fake_board(tmp_path / "board", "jp5")
    rewrite_int(b.devfreq_dir / "max_freq", 816000000)
    if status is not None:
        (b.root / "var/lib/nvpmodel").mkdir(parents=True)
        path = b.root / "var/lib/nvpmodel/status"
        if status == "fifo":
            os.mkfifo(path)  # must not hang a reader
        elif isinstance(status, bytes):
            path.write_bytes(status)
        else:
            path.write_text(status)
    if conf is not None:
        (b.root / "etc").mkdir(exist_ok=True)  # the fake board has /etc/nv_tegra_release
        (b.root / "etc/nvpmodel.conf").write_text(conf)
    for res in (cli("status", "--sysfs-root", str(b.root), "--json", timeout=60),
                gc(govcore_bin, b, "--json", "status")):
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        st = json.loads(res.stdout)
        # unknown means unknown: no id without its name (the exporter then exports no mode)
        assert st["power_mode"]["id"] is None and st["power_mode"]["name"] is None
        assert why in st["power_mode"]["unknown"]
        assert st["gpu_cap"]["cap_mhz"] == 816.0  # the cap in force does not need nvpmodel
    text = cli("status", "--sysfs-root", str(b.root), timeout=60).stdout
    assert any(line.startswith("mode      unknown (") for line in text.splitlines())


def test_govcore_parsers_directly():
    assert _core.parse_nvpmodel_status("pmode:0002 fmode:quiet\n") == 2
    assert _core.parse_nvpmodel_status("pmode:0000") == 0
    for bad in ("", "pmode:", "pmode:-1", "mode:0002", "pmode:00x2", "pmode:99999999"):
        assert _core.parse_nvpmodel_status(bad) is None, bad
    assert _core.parse_nvpmodel_conf(CONF, 2) == ("30W", 612000000)
    assert _core.parse_nvpmodel_conf(CONF, 1) == ("15W", 408000000)
    assert _core.parse_nvpmodel_conf(CONF, 0) == ("MAXN", 0)  # -1: no cap
    assert _core.parse_nvpmodel_conf(CONF, 5) is None
    assert _core.parse_nvpmodel_conf("< POWER_MODEL ID=x NAME=A >\n", 0) is None
    assert _core.parse_nvpmodel_conf("< POWER_MODEL ID=3 >\n", 3) is None  # no NAME

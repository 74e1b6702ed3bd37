"""The clocks beside the GPU's (EMC, each cpufreq policy) on fake boards: pin, status and restore
through the Python API and both front ends; an unavailable domain; a clock not in a table or
above the power mode's cap refused with nothing written; the board table's EMC rates where the
kernel lists none; a process SIGKILLed while it holds a joint pin, restored by the next restore."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.device.fake_domains import EMC_DIR, add_clock_domains, cpu_levels_khz
from pydvfs.device.table import board as board_row
from pydvfs.errors import InvalidValueError

NANO = board_row("orin-nano-super")
ORIN = board_row("agx-orin")


def _tree(root: Path) -> dict[str, str]:
    """Every file of the fake board's clocks beside the GPU's, and the GPU's devfreq files."""
    out = {}
    for sub in ("sys/kernel", "sys/devices/system/cpu", "sys/class/devfreq", "sys/devices/gpu.0",
                "sys/devices/platform"):
        base = root / sub
        if base.exists():
            for p in sorted(base.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    out[str(p.relative_to(root))] = p.read_text().strip()  # as sysfs shows it
    return out


def _cpu(root: Path, policy: int, name: str) -> str:
    return (root / "sys/devices/system/cpu/cpufreq" / f"policy{policy}" / name).read_text().strip()


def _emc(root: Path, name: str) -> str:
    return (root / EMC_DIR / name).read_text().strip()


@pytest.fixture
def nano(tmp_path):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    assert add_clock_domains(b.root, NANO) == ["emc", "cpu0", "cpu4"]
    return b


def test_build_fake_board_adds_the_domains_of_its_board(tmp_path):
    b = build_fake_board(tmp_path / "board", board="agx-orin", clock_domains=True)
    names = [d["name"] for d in pydvfs.open_device(b.root).domains()]
    assert names == ["emc", "cpu0", "cpu4", "cpu8"]
    assert build_fake_board(tmp_path / "plain", board="agx-orin").root.joinpath(EMC_DIR).exists() is False


def test_the_fake_follows_the_board_table(nano):
    assert _cpu(nano.root, 4, "related_cpus") == "4 5"
    levels = cpu_levels_khz(NANO)
    assert levels[0] == 115200 and levels[-1] == 1728000 and 1036800 in levels
    assert cpu_levels_khz(ORIN)[-1] == 2201600  # a top level between the 76.8 MHz steps is kept
    assert (nano.root / "sys/kernel/debug/emc/available_rates").read_text().split() == \
        [str(int(round(m * 1e6))) for m in NANO.emc_mhz]
    assert add_clock_domains(nano.root / "x", board_row("thor")) == []  # the table has none


def test_pin_status_restore_every_domain(nano):
    dev = pydvfs.open_device(nano.root)
    doms = {d["name"]: d for d in dev.status()["domains"]}
    assert set(doms) == {"emc", "cpu0", "cpu4"} and all(d["available"] for d in doms.values())
    assert doms["emc"]["levels_mhz"] == [204, 665.6, 2133, 3199] and doms["emc"]["pinned"] is False
    assert doms["cpu4"]["related_cpus"] == "4 5" and doms["cpu0"]["governor"] == "schedutil"
    before = _tree(nano.root)
    r = dev.pin(612, emc_mhz=2133, cpu_mhz=1036.8)
    assert r.freq_mhz == 612 and r.domains_mhz == {"emc": 2133, "cpu0": 1036.8, "cpu4": 1036.8}
    assert "the EMC to 2133 MHz" in r.describe() and "every CPU policy (cpu0, cpu4)" in r.describe()
    assert _emc(nano.root, "mrq_rate_locked") == "1" and _emc(nano.root, "rate") == "2133000000"
    for p in (0, 4):
        assert _cpu(nano.root, p, "scaling_min_freq") == _cpu(nano.root, p, "scaling_max_freq") == "1036800"
    doms = {d["name"]: d for d in dev.status()["domains"]}
    assert doms["emc"]["pinned"] and doms["cpu0"]["pinned"] and doms["cpu0"]["min_mhz"] == 1036.8
    # between levels: each policy gets its nearest, and says so
    r = dev.pin(612, cpu_mhz=1040)
    assert r.domains_mhz == {"cpu0": 1036.8, "cpu4": 1036.8} and "snapped to each policy" in r.describe()
    assert dev.restore() is True
    after = _tree(nano.root)
    # an EMC handed back to its own scaling keeps whatever rate it last had: not compared
    assert {k: v for k, v in after.items() if not k.endswith("emc/rate")} == \
        {k: v for k, v in before.items() if not k.endswith("emc/rate")}
    assert _emc(nano.root, "mrq_rate_locked") == "0"


@pytest.mark.parametrize("kw, message", [
    ({"emc_mhz": 1000}, "emc: 1000 MHz is not in its table (204 665.6 2133 3199 MHz)"),
    ({"cpu_mhz": 5000}, "cpu0: 5000 MHz is not in its table"),
    ({"emc_mhz": 3199, "cpu_mhz": 1036.8}, "emc: 3199 MHz is above the power mode's cap of 2133 MHz"),
    ({"emc_mhz": 2133, "cpu_mhz": 1728}, "cpu0: 1728 MHz is above the power mode's cap of 1190.4 MHz"),
])
def test_refused_before_anything_is_written(tmp_path, kw, message):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO, emc_cap_mhz=2133, cpu_cap_mhz=1190.4)
    before = _tree(b.root)
    dev = pydvfs.open_device(b.root)
    with pytest.raises(InvalidValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dev.pin(612, **kw)
    assert _tree(b.root) == before  # the GPU's files included
    assert dev.saved_state() is None


def test_an_unavailable_domain_is_shown_and_the_rest_governed(tmp_path, cli):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO)
    (b.root / EMC_DIR / "mrq_rate_locked").unlink()  # a layout we do not know
    dev = pydvfs.open_device(b.root)
    emc = dev.status()["domains"][0]
    assert emc["name"] == "emc" and not emc["available"] and "mrq_rate_locked" in emc["why"]
    before = _tree(b.root)
    with pytest.raises(InvalidValueError, match="emc is unavailable on this board"):
        dev.pin(612, emc_mhz=2133, cpu_mhz=1036.8)
    assert _tree(b.root) == before
    assert dev.pin(612, cpu_mhz=1036.8).domains_mhz == {"cpu0": 1036.8, "cpu4": 1036.8}
    assert dev.restore()
    p = cli("status", "--sysfs-root", str(b.root))
    assert p.returncode == 0 and "emc       unavailable: " in p.stdout, p.stderr
    p = cli("pin", "612", "--emc", "2133", "--sysfs-root", str(b.root))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "emc is unavailable" in p.stderr


def test_the_board_tables_emc_rates_where_the_kernel_lists_none(tmp_path, govcore_bin):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    add_clock_domains(b.root, NANO, emc_rates_file=False)
    dev = pydvfs.open_device(b.root)  # govcore/gen_boards.h, generated from the table
    assert dev.domains()[0]["available"] and dev.domains()[0]["levels_mhz"] == [204, 665.6, 2133, 3199]
    assert dev.pin(612, emc_mhz=665.6).domains_mhz == {"emc": 665.6}
    p = subprocess.run([govcore_bin, "--sysfs-root", str(b.root), "--json", "status"], capture_output=True,
                       text=True)
    emc = json.loads(p.stdout)["domains"][0]
    assert emc["available"] and emc["levels_mhz"] == [204, 665.6, 2133, 3199] and emc["pinned"] is True
    assert dev.restore()
    assert _emc(b.root, "mrq_rate_locked") == "0"
    # a board the table does not know, without available_rates: the EMC is shown, not pinned
    u = build_fake_board(tmp_path / "unknown", "jp6", model="Acme Carrier Board")
    add_clock_domains(u.root, NANO, emc_rates_file=False)
    emc = pydvfs.open_device(u.root).domains()[0]
    assert not emc["available"] and "no table of rates" in emc["why"]


def test_both_front_ends_pin_and_show_the_same(nano, cli, govcore_bin):
    root = str(nano.root)
    p = cli("pin", "612", "--emc", "2133", "--cpu", "1036.8", "--sysfs-root", root, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["domains"] == {"emc": 2133, "cpu0": 1036.8, "cpu4": 1036.8}
    g = subprocess.run([govcore_bin, "--sysfs-root", root, "--json", "status"], capture_output=True, text=True)
    q = cli("status", "--sysfs-root", root, "--json")
    assert json.loads(g.stdout)["domains"] == json.loads(q.stdout)["domains"]
    t = subprocess.run([govcore_bin, "--sysfs-root", root, "status"], capture_output=True, text=True).stdout
    u = cli("status", "--sysfs-root", root).stdout
    pick = lambda text: [ln for ln in text.splitlines() if ln.startswith(("emc ", "cpu"))]  # noqa: E731
    assert pick(t) == pick(u) and len(pick(t)) == 3 and "pinned (mrq_rate_locked 1)" in t
    r = subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "714", "--emc", "665.6", "--cpu", "1040"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "snapped to each policy's nearest level" in r.stdout, r.stderr
    r = subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "714", "--emc", "700"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "emc: 700 MHz is not in its table" in r.stderr
    assert cli("restore", "--sysfs-root", root).returncode == 0
    assert _emc(nano.root, "mrq_rate_locked") == "0" and _cpu(nano.root, 4, "scaling_min_freq") == "115200"


HOLD = """
import os, sys
import pydvfs
dev = pydvfs.open_device(sys.argv[1])
dev.pin(612, emc_mhz=665.6, cpu_mhz=729.6)
print("pinned", flush=True)
sys.stdin.read()  # held until killed
"""


@pytest.mark.parametrize("restorer", ["pydvfs", "govcore"])
def test_kill_9_during_a_joint_pin_then_restore_puts_every_domain_back(nano, cli, govcore_bin, restorer):
    before = _tree(nano.root)
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(nano.root)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert child.stdout.readline().strip() == "pinned"
    assert _emc(nano.root, "rate") == "665600000" and _cpu(nano.root, 0, "scaling_max_freq") == "729600"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    if restorer == "pydvfs":
        p = cli("restore", "--sysfs-root", str(nano.root))
    else:
        p = subprocess.run([govcore_bin, "--sysfs-root", str(nano.root), "restore"], capture_output=True,
                           text=True)
    assert p.returncode == 0 and "restored" in p.stdout, p.stderr
    after = _tree(nano.root)
    assert {k: v for k, v in after.items() if not k.endswith("emc/rate")} == \
        {k: v for k, v in before.items() if not k.endswith("emc/rate")}


def test_pin_with_a_command_holds_every_domain_for_its_life(nano, cli):
    root = nano.root
    check = (f"import pathlib, sys; r = pathlib.Path({str(root)!r}); "
             f"e = (r / {EMC_DIR!r} / 'rate').read_text().strip(); "
             "c = (r / 'sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq').read_text().strip(); "
             "sys.exit(0 if (e, c) == ('2133000000', '1036800') else 3)")
    p = cli("pin", "612", "--emc", "2133", "--cpu", "1036.8", "--sysfs-root", str(root), "--",
            sys.executable, "-c", check)
    assert p.returncode == 0, p.stderr
    assert _emc(root, "mrq_rate_locked") == "0" and _cpu(root, 4, "scaling_max_freq") == "1728000"

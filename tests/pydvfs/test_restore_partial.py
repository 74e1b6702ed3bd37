"""Issue 27, items 4 and 16: a joint pin whose record no longer matches the board in one domain
(a governor gone from a CPU policy's list, a cpufreq policy moved) is restored domain by domain:
every domain the board can take back is put back, the others stay in the saved state, named, for
a later restore (or `restore --force`); both front ends. And `restore` after a joint pin names
every domain it put back, not only the GPU."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pydvfs
from pydvfs.device.fake import build_fake_board
from pydvfs.device.fake_domains import EMC_DIR, add_clock_domains
from pydvfs.device.table import board as board_row
from pydvfs.errors import StateFileError

NANO = board_row("orin-nano-super")
CPUFREQ = "sys/devices/system/cpu/cpufreq"


@pytest.fixture
def nano(tmp_path):
    b = build_fake_board(tmp_path / "board", "jp6", model=NANO.model_example)
    assert add_clock_domains(b.root, NANO) == ["emc", "cpu0", "cpu4"]
    return b


def _cpu(root: Path, policy: int, name: str) -> str:
    return (root / CPUFREQ / f"policy{policy}" / name).read_text().strip()


def _gpu(b) -> tuple[str, str]:
    d = Path(b.devfreq_dir)
    return (d / "min_freq").read_text().strip(), (d / "max_freq").read_text().strip()


def _restore(front: str, root: Path, cli, govcore_bin, *extra: str) -> subprocess.CompletedProcess:
    if front == "pydvfs":
        return cli("restore", "--sysfs-root", str(root), *extra)
    return subprocess.run([govcore_bin, "--sysfs-root", str(root), "restore", *extra], capture_output=True,
                          text=True)


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_a_governor_gone_leaves_only_that_policy_and_keeps_it_saved(nano, cli, govcore_bin, front):
    root = nano.root
    gpu_before = _gpu(nano)
    p = subprocess.run([govcore_bin, "--sysfs-root", str(root), "pin", "612", "--emc", "665.6", "--cpu", "1036.8"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    govs = root / CPUFREQ / "policy0/scaling_available_governors"
    offered = govs.read_text()
    govs.write_text(offered.replace("schedutil", "").replace("  ", " "))
    p = _restore(front, root, cli, govcore_bin)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "restore partial" in p.stderr and "cpu0 (saved governor schedutil is not one it offers now)" in p.stderr
    assert "cpu4" not in p.stderr and "Traceback" not in p.stderr
    # every other domain is back; cpu0 is left as it is, not written
    assert _gpu(nano) == gpu_before
    assert (root / EMC_DIR / "mrq_rate_locked").read_text().strip() == "0"
    assert _cpu(root, 4, "scaling_min_freq") == "115200" and _cpu(root, 4, "scaling_max_freq") == "1728000"
    assert _cpu(root, 0, "scaling_min_freq") == _cpu(root, 0, "scaling_max_freq") == "1036800"
    # cpu0's original stays saved (before: the state was removed, cpu0 pinned for good)
    dev = pydvfs.open_device(root)
    assert dev.saved_state() is not None
    govs.write_text(offered)
    p = _restore(front, root, cli, govcore_bin)
    assert p.returncode == 0, p.stderr
    assert _cpu(root, 0, "scaling_min_freq") == "115200" and _cpu(root, 0, "scaling_governor") == "schedutil"
    assert dev.saved_state() is None


def test_a_moved_policy_is_named_and_force_drops_it(nano, cli, govcore_bin):
    root = nano.root
    dev = pydvfs.open_device(root)
    dev.pin(612, emc_mhz=665.6, cpu_mhz=1036.8)
    (root / CPUFREQ / "policy4").rename(root / CPUFREQ / "policy6")
    with pytest.raises(StateFileError, match=r"cpu4 \(the board has no such clock domain now\)") as e:
        dev.restore()
    assert "cpu0" not in str(e.value)
    assert _cpu(root, 0, "scaling_min_freq") == "115200" and _cpu(root, 0, "scaling_governor") == "schedutil"
    assert (root / EMC_DIR / "mrq_rate_locked").read_text().strip() == "0"
    assert dev.saved_state() is not None
    p = _restore("govcore", root, cli, govcore_bin, "--force")
    assert p.returncode == 0 and "dropped the saved state" in p.stderr, p.stderr
    assert dev.saved_state() is None


@pytest.mark.parametrize("json_out", [False, True])
@pytest.mark.parametrize("front", ["govcore", "pydvfs"])
def test_restore_names_every_domain_it_put_back(nano, govcore_bin, json_out, front):
    """After a joint pin, `restore` names every domain it put back, in both front ends (issue 27
    item 16: it named only the GPU)."""
    root = str(nano.root)
    def restore(*extra):  # govcore takes its options before the verb, pydvfs after it
        if front == "govcore":
            return [govcore_bin, "--sysfs-root", root, *extra, "restore"]
        return [sys.executable, "-m", "pydvfs", "restore", "--sysfs-root", root, *extra]

    p = subprocess.run([govcore_bin, "--sysfs-root", root, "pin", "612", "--emc", "665.6", "--cpu", "1036.8"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(restore(*(["--json"] if json_out else [])), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    if json_out:
        assert json.loads(p.stdout)["domains"] == ["emc", "cpu0", "cpu4"]
    else:
        assert "restored governor" in p.stdout and "and emc, cpu0, cpu4" in p.stdout
    # nothing saved: nothing named
    p = subprocess.run(restore(*(["--json"] if json_out else [])), capture_output=True, text=True)
    assert (json.loads(p.stdout)["domains"] == [] if json_out else "emc" not in p.stdout)

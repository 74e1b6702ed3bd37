"""govcore/govcore.service: installed by `make -C govcore install`, hardened, and valid for
systemd (systemd-analyze verify, where systemd is present)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

GOVCORE = Path(__file__).resolve().parents[2] / "govcore"


def _unit(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def test_install_puts_binary_and_unit_in_place(tmp_path):
    subprocess.run(["make", "-s", "-C", str(GOVCORE), "install", f"DESTDIR={tmp_path}", "PREFIX=/opt/pd"],
                   check=True, capture_output=True)
    assert (tmp_path / "opt/pd/bin/govcore").stat().st_mode & 0o111
    unit = _unit(tmp_path / "etc/systemd/system/govcore.service")
    assert unit["ExecStart"] == ["/opt/pd/bin/govcore serve --socket /run/pydvfs/govcore.sock --group pydvfs"]


def test_unit_is_hardened():
    unit = _unit(GOVCORE / "govcore.service")
    for key, value in (("ProtectSystem", "strict"), ("ProtectKernelTunables", "yes"), ("NoNewPrivileges", "yes"),
                       ("RuntimeDirectory", "pydvfs"), ("RestrictAddressFamilies", "AF_UNIX"),
                       ("PrivateNetwork", "yes"), ("ProtectHome", "yes")):
        assert unit[key] == [value], key
    # writable: only the GPU's devfreq folders, the EMC's clock and the cpufreq policies, each optional
    assert unit["ReadWritePaths"] and all(
        p.startswith("-/sys/") and ("devfreq" in p or p.endswith(("/clk/emc", "/cpu/cpufreq")))
        for p in unit["ReadWritePaths"])
    assert "/run/pydvfs/govcore.sock" in unit["ExecStart"][0]


def test_systemd_accepts_the_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    subprocess.run(["make", "-s", "-C", str(GOVCORE), "govcore"], check=True, capture_output=True)
    text = (GOVCORE / "govcore.service").read_text().replace("/usr/local/bin/govcore", str(GOVCORE / "govcore"))
    unit = tmp_path / "govcore.service"
    unit.write_text(text)
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


SANDBOX = r"""
set -e
root="$1"; shift
# ProtectSystem=strict (+ ProtectKernelTunables): the board read-only...
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root" "$root"
# ...but the unit's ReadWritePaths (a missing one skipped, as the leading '-' says)
for p in $RW; do
    if [ -e "$root$p" ]; then mount --bind "$root$p" "$root$p"; mount -o remount,bind,rw "$root$p"; fi
done
"$@"
"""


def _in_sandbox(root: Path, argv: list[str]) -> subprocess.CompletedProcess:
    rw = " ".join(p.lstrip("-") for p in _unit(GOVCORE / "govcore.service")["ReadWritePaths"])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", SANDBOX, "sh", str(root), *argv],
                          capture_output=True, text=True, env={**os.environ, "RW": rw, "PYDVFS_SOCKET": ""},
                          timeout=120)


def _can_unshare() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


FAKE_BOARDS = [("agx-orin", 5), ("agx-orin", 6), ("orin-nano-super", 6), ("thor", 7), ("agx-xavier", 4),
               ("nano", 4)]


@pytest.mark.skipif(not _can_unshare(), reason="needs root and unshare -m (a mount namespace)")
@pytest.mark.parametrize("board_id, jetpack", FAKE_BOARDS, ids=[f"{b}-jp{j}" for b, j in FAKE_BOARDS])
def test_the_unit_s_sandbox_lets_the_daemon_pin_every_domain(tmp_path, govcore_bin, board_id, jetpack):
    """Issue 27 item 6: the unit made only the GPU's devfreq folder writable, so the joint pin it
    exists to serve found the EMC "unavailable" and the CPU policies not writable. Emulated with a
    mount namespace: the fake board read-only, the unit's ReadWritePaths bound writable."""
    from pydvfs.device.fake import build_fake_board
    from pydvfs.device.fake_domains import add_clock_domains
    from pydvfs.device.table import board as row

    b = build_fake_board(tmp_path / "board", board=board_id, jetpack=jetpack)
    doms = add_clock_domains(b.root, row(board_id))
    args = ["pin", "612"] if board_id not in ("nano", "agx-xavier") else ["pin", "--nearest", "612"]
    if "emc" in doms:
        args += ["--emc", str(row(board_id).emc_mhz[1])]
    if any(d.startswith("cpu") for d in doms):
        args += ["--cpu", "1036.8"]
    base = [govcore_bin, "--sysfs-root", str(b.root), "--json"]
    # the sandbox is real: outside the ReadWritePaths the board cannot be written
    probe = _in_sandbox(b.root, ["sh", "-c", f"echo x > {b.root}/sys/probe"])
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr, probe.stderr
    p = _in_sandbox(b.root, [*base, *args])
    assert p.returncode == 0, p.stderr
    pinned = json.loads(p.stdout)
    assert set(pinned.get("domains", {})) == set(doms), (pinned, doms)
    p = _in_sandbox(b.root, [*base, "restore"])
    assert p.returncode == 0 and json.loads(p.stdout)["restored"] is True, p.stderr

"""govcore/govcore.service: installed by `make -C govcore install`, hardened, and valid for
systemd (systemd-analyze verify, where systemd is present)."""
from __future__ import annotations

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
    # writable: only the GPU's devfreq folders (JetPack 5 and 6), each optional
    assert unit["ReadWritePaths"] and all(p.startswith("-/sys/devices/") and "devfreq" in p
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

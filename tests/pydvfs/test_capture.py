"""``pydvfs capture-board OUT`` and ``pydvfs fake-board DIR --from OUT`` (issue 21 item 8;
pydvfs/device/capture.py): one file with what pydvfs reads, nothing personal, and the same
discovery on the rebuilt tree; every capture kept in the repo runs status, pin/restore and
measure."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wrapped import report

import pydvfs
from pydvfs.device import open_device
from pydvfs.device.capture import FORMAT, capture_board, read_capture, rebuild
from pydvfs.device.fake import ORIN_13_LEVELS_HZ, build_fake_board, rewrite_int
from pydvfs.errors import DeviceNotFoundError, InvalidValueError

CAPTURES = sorted((Path(__file__).resolve().parents[1] / "data" / "captures").glob("*.json"))
CONF = "< POWER_MODEL ID=0 NAME=MAXN >\nGPU MAX_FREQ -1\n< POWER_MODEL ID=2 NAME=30W >\nGPU MAX_FREQ 612000000\n"


def add_nvpmodel(fb, mode_id=2, cap_hz=612000000, conf=CONF):
    (fb.root / "var/lib/nvpmodel").mkdir(parents=True)
    (fb.root / "var/lib/nvpmodel/status").write_text(f"pmode:{mode_id:04d} fmode:quiet\n")
    (fb.root / "etc").mkdir(exist_ok=True)
    (fb.root / "etc/nvpmodel.conf").write_text(conf)
    (fb.root / "etc/nv_tegra_release").write_text(
        "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64, DATE: Fri Sep 13 04:36:44 UTC 2024\n"
        "# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n")
    rewrite_int(fb.devfreq_dir / "max_freq", cap_hz)


def discovery(root) -> dict:
    """What discovery sees, with the root taken out of the paths."""
    dev = open_device(root)
    st = dev.status()
    return {"model": dev.model, "gpu": dev.gpu_name, "devfreq_dir": os.path.relpath(dev.devfreq_dir, root),
            "levels": dev.available_frequencies_mhz, "rails": dev.rails, "clock": dev.state(),
            "load": dev.gpu_load_pct(), "power_mode": st["power_mode"], "gpu_cap": st["gpu_cap"],
            "sensor_interval_ms": dev.sensor_interval_ms}


@pytest.mark.parametrize("layout,levels", [("jp5", None), ("jp6", ORIN_13_LEVELS_HZ), ("jp4", None)],
                         ids=["jp5", "jp6-13", "jp4"])
def test_round_trip_discovery_sees_the_same_board(tmp_path, layout, levels):
    fb = build_fake_board(tmp_path / "board", layout, levels_hz=levels)
    add_nvpmodel(fb, cap_hz=max(fb.levels_hz) if layout == "jp4" else 612000000)
    for name in fb.rails:
        fb.set_rail(name, 5000, 700)
    fb.set_load(421)
    cap = capture_board(fb.root)
    assert cap["format"] == FORMAT and cap["skipped"] == []
    assert cap["meta"]["board"] == ("agx-xavier" if layout == "jp4" else "agx-orin")
    assert all(len(v) == 3 for v in cap["readings"].values()) and cap["readings"]
    out = tmp_path / "cap.json"
    out.write_text(json.dumps(cap))
    rebuilt = rebuild(read_capture(out), tmp_path / "rebuilt")
    assert discovery(rebuilt) == discovery(fb.root)
    assert (rebuilt / "etc/nv_tegra_release").read_text().startswith("# R36 (release)")
    assert "KERNEL_VARIANT" not in json.dumps(cap)  # the release line only


def test_fifos_and_personal_files_are_left_out_without_blocking(tmp_path):
    fb = build_fake_board(tmp_path / "board", "jp6")
    add_nvpmodel(fb, conf="# tuned by alice on alice-jetson\n" + CONF + "GPU MAX_FREQ alice@example.com\n")
    personal = {
        "etc/hostname": "alice-jetson\n",
        "proc/device-tree/serial-number": "1423821054321\x00",
        "sys/class/net/eth0/address": "48:b0:2d:aa:bb:cc\n",
        "home/alice/.bash_history": "sudo pydvfs pin 714\n",
        "sys/firmware/devicetree/base/serial-number": "1423821054321\x00",
    }
    for rel, text in personal.items():
        (fb.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (fb.root / rel).write_text(text)
    # values that are not what pydvfs reads, at paths it does read
    (fb.devfreq_dir / "governor").write_text("alice's governor; host alice-jetson\n")
    (fb.devfreq_dir / "polling_interval").write_text("48:b0:2d:aa:bb:cc\n")
    (fb.devfreq_dir / "available_governors").write_text("x" * 70000)
    os.unlink(fb.devfreq_dir / "target_freq")
    os.mkfifo(fb.devfreq_dir / "target_freq")   # a FIFO where a value should be: never waited on
    os.mkfifo(fb.root / "etc/nv_tegra_release.fifo")
    os.unlink(fb.root / "etc/nv_tegra_release")
    os.mkfifo(fb.root / "etc/nv_tegra_release")
    cap = capture_board(fb.root)
    text = json.dumps(cap)
    for word in ("alice", "1423821054321", "48:b0:2d", "bash_history", "hostname", "serial"):
        assert word not in text, word
    why = {s["path"].rsplit("/", 1)[-1]: s["why"] for s in cap["skipped"]}
    assert "FIFO" in why["target_freq"] and "FIFO" in why["nv_tegra_release"]
    assert "larger than" in why["available_governors"]
    assert "does not hold" in why["governor"] and "does not hold" in why["polling_interval"]
    conf = next(e["text"] for p, e in cap["entries"].items() if p.endswith("nvpmodel.conf"))
    assert conf.splitlines()[0] == "< POWER_MODEL ID=0 NAME=MAXN >" and "#" not in conf
    assert "max_freq" in " ".join(cap["entries"])  # the rest is there


def test_cli_round_trip_and_bad_input(tmp_path, cli):
    fb = build_fake_board(tmp_path / "board", "jp5")
    add_nvpmodel(fb)
    out = tmp_path / "my-board.json"
    res = cli("capture-board", str(out), "--sysfs-root", str(fb.root), "--json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["board"] == "agx-orin" and r["files"] > 30 and r["skipped"] == []
    assert str(tmp_path) not in out.read_text()  # the root's path (a user's home) is not recorded
    # an existing file is not replaced
    res = cli("capture-board", str(out), "--sysfs-root", str(fb.root))
    assert res.returncode == 2 and "exists" in res.stderr and "Traceback" not in res.stderr
    res = cli("fake-board", str(tmp_path / "rebuilt"), "--from", str(out), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    res = cli("status", "--sysfs-root", str(tmp_path / "rebuilt"), "--json")
    assert json.loads(res.stdout)["power_mode"]["name"] == "30W"
    # not a capture, a link out of the tree, a path with ..: one line, exit 2, nothing laid out
    bad = {"garbage": "not json {", "other": json.dumps({"format": "x"}),
           "escape": json.dumps({"format": FORMAT, "version": 1, "entries": {"sys/a": {"link": "../../etc"}}}),
           "dotdot": json.dumps({"format": FORMAT, "version": 1, "entries": {"sys/../../x": {"text": "1"}}})}
    for name, text in bad.items():
        f = tmp_path / f"{name}.json"
        f.write_text(text)
        res = cli("fake-board", str(tmp_path / f"out-{name}"), "--from", str(f))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (name, res.stderr)
        assert "Traceback" not in res.stderr
    with pytest.raises(InvalidValueError):
        read_capture(tmp_path / "escape.json")


def test_every_board_of_the_table_the_fake_layer_builds_has_a_capture(tmp_path):
    """One capture per board pydvfs.device.fake can lay out (tools/make_captures.py writes them)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import make_captures

    from pydvfs.device.table import boards

    built = [b.id for b in boards().values() if make_captures.fake_of(tmp_path / b.id, b) is not None]
    assert {"agx-orin", "agx-xavier"} <= set(built)
    missing = set(built) - {p.stem for p in CAPTURES}
    assert not missing, f"run python tools/make_captures.py: no capture of {sorted(missing)}"


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_status_pin_restore_and_measure_on_every_capture_kept(tmp_path, cli, govcore_bin, path):
    cap = read_capture(path)
    assert "not a real board" in cap["meta"]["source"] and cap["meta"]["board"] == path.stem
    root = rebuild(cap, tmp_path / "board")
    res = cli("status", "--sysfs-root", str(root), "--json")
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["model"] == cap["meta"]["model"] and st["available_mhz"]
    assert st["power_mode"]["name"] is not None and st["gpu_cap"]["cap_mhz"] is not None
    g = subprocess.run([govcore_bin, "--sysfs-root", str(root), "--json", "status"], capture_output=True, text=True)
    assert g.returncode == 0 and json.loads(g.stdout)["power_mode"] == st["power_mode"]
    dev = open_device(root)
    before = dev.state()
    top = dev.available_frequencies_mhz[-1]
    r = pydvfs.pin(top, sysfs_root=root)
    assert r.freq_mhz == st["gpu_cap"]["cap_mhz"] and dev.state().pinned
    assert pydvfs.restore(sysfs_root=root)
    after = dev.state()
    assert (after.min_mhz, after.max_mhz, after.governor) == (before.min_mhz, before.max_mhz, before.governor)
    res = cli("measure", "--sysfs-root", str(root), "--json", "--", sys.executable, "-c", "pass")
    assert res.returncode == 0, res.stderr
    m = report(res)
    assert set(m["energy_j"]) == {r.name for r in dev.rails}


def test_a_tree_with_no_jetson_is_refused_and_nothing_is_written(tmp_path, capsys):
    """Issue 37 item 17: an empty capture was written (exit 0) that fake-board --from built into
    a tree of no file, where status refuses."""
    from pydvfs.cli import main

    empty = tmp_path / "not-a-jetson"
    (empty / "sys/class/hwmon").mkdir(parents=True)
    with pytest.raises(DeviceNotFoundError, match="no devfreq device"):
        capture_board(empty)
    assert main(["capture-board", str(tmp_path / "cap.json"), "--sysfs-root", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Jetson GPU to capture" in err
    assert not (tmp_path / "cap.json").exists()

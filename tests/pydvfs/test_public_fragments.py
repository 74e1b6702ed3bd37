"""The board table against verbatim fragments of real Jetsons (tests/data/boards/public_fragments.json,
each with its source): the rails tegrastats names on each board are the table's, and the AGX
Orin's three (no VDDQ_VDD2_1V8AO on L4T R36) give a module energy flagged partial; the release and
model files of an R39 AGX Orin and an R38 Thor are identified as their boards and JetPack 7."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from wrapped import report

from pydvfs.device import open_device
from pydvfs.device import table as boards
from pydvfs.device.fake import build_fake_board

FRAGMENTS = json.loads((Path(__file__).resolve().parents[1] / "data" / "boards" / "public_fragments.json")
                       .read_text(encoding="utf-8"))
# a rail's reading in tegrastats: "NAME now/avg", in mW with or without the unit (JetPack 4: none)
RAIL = re.compile(r"(?<![\w@])([A-Z][A-Z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?![\w/])")


def tegrastats_rails(line: str) -> dict[str, float]:
    """{rail: instant power W} as tegrastats prints them."""
    return {name: int(now) / 1000.0 for name, now, _ in RAIL.findall(line)}


@pytest.mark.parametrize("frag", FRAGMENTS["tegrastats"], ids=lambda f: f"{f['board']}:{f['source'].split(', ')[-1]}")
def test_tegrastats_rails_are_the_table_s(frag):
    b = boards.board(frag["board"])
    power = tegrastats_rails(frag["line"])
    optional = set(b.optional_rails.get("module", ()))
    assert set(b.rails) - optional <= set(power) <= set(b.rails), (power, b.rails)
    by_role = boards.energies(power, b)
    assert by_role["cpu_gpu"] == pytest.approx(sum(power[r] for r in dict.fromkeys(b.role_rails("cpu_gpu"))))
    missing = boards.missing_optional(power, b, "module")
    # the module: whole where every rail is printed; the AGX Orin's without VDDQ_VDD2_1V8AO is the
    # sum of the three, flagged partial (never None, never silently whole)
    assert by_role["module"] == pytest.approx(sum(power[r] for r in b.role_rails("module") if r in power))
    assert set(missing) == set(b.rails) - set(power)


def test_the_r36_agx_orin_module_is_partial():
    r36 = next(f for f in FRAGMENTS["tegrastats"] if "r36Sample" in f["source"])
    power = tegrastats_rails(r36["line"])
    assert power == {"VDD_GPU_SOC": 3.205, "VDD_CPU_CV": 4.405, "VIN_SYS_5V0": 4.767}
    b = boards.board("agx-orin")
    assert boards.missing_optional(power, b, "module") == ("VDDQ_VDD2_1V8AO",)
    assert boards.energies(power, b)["module"] == pytest.approx(12.377)


@pytest.mark.parametrize("frag", FRAGMENTS["releases"], ids=lambda f: f"{f['board']}:{f['source'].split(' (')[0]}")
def test_release_and_model_files_identify_the_board(tmp_path, frag):
    fb = build_fake_board(tmp_path / "b", board=frag["board"])
    (fb.root / "proc/device-tree/model").unlink()
    model = fb.root / frag["model_path"].lstrip("/")
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(frag["model"].encode() + b"\0")  # device-tree strings end in NUL
    release = fb.root / "etc/nv_tegra_release"
    if frag["nv_tegra_release"] is None:
        release.unlink()
    else:
        release.write_text(frag["nv_tegra_release"] + "\n")
    dev = open_device(fb.root)
    assert dev.board_id == frag["board"] and dev.model == frag["model"]
    if frag["nv_tegra_release"] is not None:
        assert (dev.jetpack, dev.l4t) == (frag["jetpack"], frag["l4t"])
        assert dev.warning is None


@pytest.mark.parametrize("lay", FRAGMENTS["layouts"], ids=lambda f: f"{f['board']}:{f['source'].split(' (')[0]}")
def test_sensor_dump_layout_skips_the_failing_channel(tmp_path, lay, govcore_bin, capsys):
    """alumet issue 212's AGX Orin on JetPack 6: the 1-0041 INA3221's hwmon folder is there (its
    files as the dump shows them) and a disabled channel's input read fails (EIO there; here a
    folder in the file's place, which fails for root too: EISDIR). Every channel whose inN_enable
    is 0 fails so. Both front ends name the skipped channel in status, flag the module partial,
    and never count it: status's live module power and measure's module energy are the other
    three rails', the sampler never reads it (no read errors)."""
    from pydvfs.cli import main

    hwmon_no = int(lay["hwmon"].removeprefix("hwmon"))
    fb = build_fake_board(tmp_path / "b", board=lay["variant"], hwmon_start=hwmon_no - 2)  # a decoy, 1-0040
    assert (fb.board, fb.jetpack) == (lay["board"], lay["jetpack"])
    sensor = fb.root / lay["sensor"].lstrip("/")
    hwmon = sensor / "hwmon" / lay["hwmon"]
    assert (hwmon / "name").read_text().strip() == lay["files"]["name"]
    powers = {}
    for i, name in enumerate(fb.rails):  # rail i draws (i + 1) W
        fb.set_rail(name, 5000, 200 * (i + 1))
        powers[name] = float(i + 1)
    for rel, text in lay["files"].items():
        (sensor / rel).parent.mkdir(parents=True, exist_ok=True)
        (sensor / rel).write_text(text + "\n")
    failing = [sensor / rel for rel in lay["read_fails"]]
    off = [n for n in (1, 2, 3) if (hwmon / f"in{n}_enable").read_text().strip() == "0"]
    failing += [hwmon / f"{kind}{n}_input" for n in off for kind in ("in", "curr")]
    for path in dict.fromkeys(failing):
        path.unlink(missing_ok=True)
        path.mkdir()
    skipped = [label for label, rail in fb.rails.items() if rail.enable_path and rail.enable_path.parent == hwmon
               and rail.enable_path.read_text().strip() == "0"]
    assert skipped == list(boards.variants()[lay["variant"]].disabled_rails)
    present = [r for r in fb.rails if r not in skipped]
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    opts = ["--sysfs-root", str(fb.root), "--state-dir", str(state)]
    for front in ("pydvfs", "govcore"):
        def run(*argv, json_out=True):
            if front == "pydvfs":
                capsys.readouterr()
                verb, rest = argv[0], argv[1:]
                rc = main([verb, *opts, *(["--json"] if json_out else []), *rest])
                out, err = capsys.readouterr()
            else:
                r = subprocess.run([govcore_bin, *opts, *(["--json"] if json_out else []), *argv],
                                   capture_output=True, text=True, timeout=60)
                rc, out, err = r.returncode, r.stdout, r.stderr
            assert rc == 0 and "Traceback" not in err, (front, err)
            return out
        st = json.loads(run("status"))
        assert [x["name"] for x in st["rails"]] == present, front
        assert [x["name"] for x in st["skipped_rails"]] == skipped, front
        assert all(x["why"].startswith("disabled: ") for x in st["skipped_rails"]), st["skipped_rails"]
        assert st["module_partial"] is True and st["roles"]["module"] == present
        assert st["live"]["module_power_w"] == pytest.approx(sum(powers[r] for r in present), rel=1e-3), front
        text = run("status", json_out=False)
        assert all(f"skipped   {r}: disabled: " in text for r in skipped), text
        if front == "pydvfs":
            capsys.readouterr()
            assert main(["measure", "--sysfs-root", str(fb.root), "--json", "--", "sleep", "0.2"]) == 0
            d = report(capsys.readouterr())
        else:
            d = report(subprocess.run([govcore_bin, "--sysfs-root", str(fb.root), "--json", "measure", "--",
                                       "sleep", "0.2"], capture_output=True, text=True, timeout=60))
        assert d["module_partial"] is True and not set(skipped) & set(d["energy_j"]), front
        assert d["module_energy_j"] == pytest.approx(sum(powers[r] for r in present) * d["duration_s"], rel=0.02)
        assert d["read_errors"] == 0, front

"""The board table against verbatim fragments of real Jetsons (tests/data/boards/public_fragments.json,
each with its source): the rails tegrastats names on each board are the table's, and the AGX
Orin's three (no VDDQ_VDD2_1V8AO on L4T R36) give a module energy flagged partial; the release and
model files of an R39 AGX Orin and an R38 Thor are identified as their boards and JetPack 7."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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

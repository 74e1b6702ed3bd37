"""The board table's rows and variants (issue 52): each is laid out by `pydvfs fake-board --board`
or `--variant`, and both front ends name its board, JetPack and power mode (as nvpmodel prints
it), pin, restore, measure and apply on it without a traceback or a notice (its levels and modes
are the table's). The base rows' facts as the public record gives them. And the notices
discovery gives for what the table does not know: an L4T release, a GPU level, a mode id."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pydvfs.cli import main
from pydvfs.device import table as boards
from pydvfs.device.fake import build_fake_board, mode_in_force

WORKLOAD = "model=bert,layers=12,hidden=768,seq_len=13.3"


def _json(capsys, argv) -> dict:
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


# every board of the table and every variant of one: "every verb on every variant in CI" (issue 52)
EVERY_BOARD = [*boards.boards(), *boards.variants()]
# the shortest online runs the CLI allows: CMD ends before the first window (no probe)
ONLINE = ["run", "--policy", "online", "--window", "0.15", "--min-steps", "60", "--settle", "0.05"]


@pytest.mark.parametrize("bid", EVERY_BOARD)
def test_every_board_and_variant_runs_every_verb(tmp_path, govcore_bin, capsys, bid):
    """Each board and variant, laid out by `pydvfs fake-board` (with the clock domains the table
    gives it): status in both front ends names its board and JetPack; pin/restore (the GPU, and
    the EMC and CPU where it has them: Thor's bwmgr too), measure, apply and `run --policy online`
    (GPU-only, and the joint gpu,emc,cpu search where it shows a writable EMC and CPU) run with
    no traceback and leave the board as found. A board without a CPU domain in the table (Thor:
    the table lists no cpufreq policies) refuses the joint search in one line, exit 2."""
    v = boards.variants().get(bid)
    row = boards.board(v.board if v else bid)
    root, state = tmp_path / bid, tmp_path / "state"
    state.mkdir(mode=0o700)
    made = _json(capsys, ["fake-board", str(root), "--variant" if v else "--board", bid, "--json"])
    levels = list((v and v.gpu_levels_mhz) or row.gpu_levels_mhz)
    in_force = mode_in_force(replace(row, gpu_levels_mhz=tuple(levels),
                                     power_modes=(v and v.power_modes) or row.power_modes))
    assert made["board"] == row.id and made["variant"] == (bid if v else None) and made["levels_mhz"] == levels
    assert made["jetpack"] == (max(v.jetpack) if v else made["jetpack"]) and made["jetpack"] in row.jetpack
    opts = ["--sysfs-root", str(root), "--state-dir", str(state)]
    st = _json(capsys, ["status", *opts, "--json"])
    r = subprocess.run([govcore_bin, *opts, "--json", "status"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for got in (st, json.loads(r.stdout)):
        assert (got["board"], got["jetpack"], got["available_mhz"]) == (row.id, made["jetpack"], levels), bid
        if v and v.disabled_rails:  # a channel off: the module is flagged partial, naming the rail
            assert got["module_partial"] is True and [x["name"] for x in got["skipped_rails"]] == list(v.disabled_rails)
            assert all(r in got["warning"] for r in v.disabled_rails) and "level" not in got["warning"]
        else:
            assert got["warning"] is None, (bid, got["warning"])  # its levels are known: no notice
        # the name nvpmodel prints: the mode whose cap is the top level in force (MAXN, MAXN_SUPER)
        assert got["power_mode"]["name"] == in_force.name, bid
    mid = f"{levels[len(levels) // 2]:g}"
    dev = Path(st["devfreq_dir"])
    domains = {d["name"]: d for d in st["domains"] if d["available"]}
    cpus = [d for d in st["domains"] if d["kind"] == "cpu"]
    joint = "emc" in domains and cpus and all(d["available"] for d in cpus)
    if row.emc_devfreq_names:  # Thor's bwmgr is its EMC
        assert domains["emc"]["devfreq"] == row.emc_devfreq_names[0]
    pin_domains = []  # a middle rate / level of each domain it has
    if "emc" in domains:
        rates = domains["emc"]["levels_mhz"]
        pin_domains += ["--emc", f"{rates[len(rates) // 2]:g}"]
    if cpus and all(d["available"] for d in cpus):
        pin_domains += ["--cpu", f"{cpus[0]['levels_mhz'][len(cpus[0]['levels_mhz']) // 2]:g}"]

    def board_files():
        return {p: p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and not p.is_symlink() and "hwmon" not in p.parts and "iio:device0" not in p.parts}

    def limits():
        return int((dev / "min_freq").read_text()), int((dev / "max_freq").read_text())
    before = limits()
    assert main(["pin", mid, *pin_domains, *opts]) == 0, capsys.readouterr().err
    assert limits() == (round(float(mid) * 1e6),) * 2
    assert main(["restore", *opts]) == 0
    found = board_files()
    assert main(["measure", "--sysfs-root", str(root), "--json", "--", "true"]) == 0
    assert main(["apply", "--workload", WORKLOAD, *opts, "--", "true"]) == 0
    never = tmp_path / "never-written"
    assert main([*ONLINE, *opts, "--progress-file", str(never), "--", "true"]) == 0
    capsys.readouterr()
    rc = main([*ONLINE, "--knobs", "gpu,emc,cpu", *opts, "--progress-file", str(never), "--", "true"])
    err = capsys.readouterr().err
    if joint:
        assert rc == 0, (bid, err)
    else:
        assert rc == 2 and "search the GPU clock alone (--knobs gpu)" in err and len(err.strip().splitlines()) == 1, err
    assert limits() == before, bid
    assert {p: b for p, b in board_files().items() if p.name not in ("cur_freq", "target_freq", "rate")} == \
        {p: b for p, b in found.items() if p.name not in ("cur_freq", "target_freq", "rate")}, bid
    for argv in (["pin", mid, *pin_domains], ["restore"]):
        r = subprocess.run([govcore_bin, *opts, *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert limits() == before and not any(state.iterdir()), bid
    assert "Traceback" not in capsys.readouterr().err


def test_fake_board_variant_refusals(tmp_path, capsys):
    """--variant lays out the variant's own table unanimated, and alone."""
    for extra in (["--animate", "bert-base"], ["--levels", "13"], ["--board", "thor"]):
        assert main(["fake-board", str(tmp_path / "x"), "--variant", "agx-orin-jp5-13", *extra]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("--variant" in err or "one of --board" in err), err
    assert not (tmp_path / "x").exists()


def test_variant_facts():
    """The variants kept: each a real board that differs from its row in a public fragment (the
    JetPack 5 AGX Orin's 13 levels, the JetPack 5 Orin Nano, the JetPack 6 AGX Orin with a
    channel off); none only repeats its row."""
    v = boards.variants()
    assert set(v) == {"agx-orin-jp5-13", "agx-orin-jp6-3-rails", "orin-nano-jp5"}
    assert v["agx-orin-jp5-13"].gpu_levels_mhz[0] == 114.75 and len(v["agx-orin-jp5-13"].gpu_levels_mhz) == 13
    nano = v["orin-nano-jp5"]
    assert (nano.gpu_levels_mhz[0], nano.gpu_levels_mhz[-1], len(nano.gpu_levels_mhz)) == (306, 624.75, 5)
    assert nano.cpu_max_mhz == 1510.4 and nano.board == "orin-nano-super"
    for x in v.values():
        row = boards.board(x.board)  # each maps onto a row (its policy, profile, roles)
        differs = [f for f in ("gpu_levels_mhz", "power_modes", "cpu_max_mhz", "model_example", "disabled_rails")
                   if getattr(x, f) not in (None, ()) and getattr(x, f) != getattr(row, f, None)]
        assert x.source and differs, x.id


def test_base_rows_follow_the_public_record(tmp_path):
    """The rows' power modes as nvpmodel prints them and their JetPacks (the public record of
    docs/boards.md, issue 52 item 4): every fact of a row sourced, estimated or marked
    unconfirmed; a mode without a known GPU cap assumes none: the simulator does not model it,
    and a fake board's nvpmodel.conf gives it no GPU line. Thor's memory clock devfreq device
    (bwmgr) is no GPU to discovery."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from gen_boards import unsourced

    from pydvfs.sim.model import power_modes

    modes = {b: {(m.id, m.name): m.gpu_cap_mhz for m in boards.board(b).power_modes} for b in boards.boards()}
    assert modes["agx-orin"] == {(0, "MAXN"): 1300.5, (1, "MODE_15W"): 408, (2, "MODE_30W"): 612, (3, "MODE_50W"): 816}
    assert modes["orin-nano-super"] == {(0, "15W"): 612, (1, "25W"): 918, (2, "MAXN_SUPER"): 1020, (3, "7W"): 408}
    assert modes["orin-nx"] == {(0, "MAXN_SUPER"): 1173, (3, "25W"): 408}
    assert modes["thor"] == {(0, "MAXN"): 1575, (1, "120W"): 1386, (2, "90W"): None, (3, "70W"): None}
    assert modes["nano"] == {(0, "MAXN"): 921.6, (1, "5W"): 640}
    assert boards.board("agx-orin").jetpack == (5, 6, 7) and boards.board("agx-orin").l4t == {7: 39}
    assert boards.board("orin-nano-super").jetpack == (5, 6, 7) and boards.board("orin-nano-super").l4t == {7: 39}
    assert boards.board("thor").emc_devfreq_names == ("bwmgr",)
    table = json.loads(Path(boards.package_file("data", "boards.json")).read_text())
    assert all(not unsourced(row) for row in table["boards"])
    # the simulator's settings keep their names ("30w", "maxn-super") and model no uncapped mode
    assert list(power_modes("agx-orin")) == ["maxn", "15w", "30w", "50w"] and list(power_modes("thor")) == ["maxn"]
    fb = build_fake_board(tmp_path / "thor", board="thor")
    conf = (fb.root / "etc/nvpmodel.conf").read_text()
    assert "< POWER_MODEL ID=2 NAME=90W >\n< POWER_MODEL" in conf and "GPU MAX_FREQ 1386000000" in conf
    assert (fb.root / "sys/class/devfreq/bwmgr/available_frequencies").exists()
    from pydvfs.device import open_device

    assert open_device(fb.root).gpu_name == "gpu-gpc-0"


def test_r39_is_jetpack_7(tmp_path, govcore_bin):
    """L4T R39 is JetPack 7.2 (an AGX Orin: jetson_stats issue 864); the fake AGX Orin on JetPack
    7 shows R39, the fake Thor R38."""
    assert boards.l4t_jetpack()[39] == 7
    fb = build_fake_board(tmp_path / "orin", board="agx-orin", jetpack=7)
    assert "# R39 " in (fb.root / "etc/nv_tegra_release").read_text()
    assert "# R38 " in (build_fake_board(tmp_path / "thor", board="thor").root / "etc/nv_tegra_release").read_text()
    r = subprocess.run([govcore_bin, "--sysfs-root", str(fb.root), "--json", "status"], capture_output=True,
                       text=True, timeout=60)
    st = json.loads(r.stdout)
    assert st["jetpack"] == 7 and st["l4t"].startswith("R39") and st["warning"] is None


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_unknown_l4t_and_levels_give_one_notice_never_a_failure(tmp_path, govcore_bin, capsys, front):
    fb = build_fake_board(tmp_path / "b", board="orin-nano-super",
                          levels_hz=(306000000, 408000000, 500000000, 624750000, 700000000))
    (fb.root / "etc/nv_tegra_release").write_text("# R41 (release), REVISION: 1.0, GCID: 1, BOARD: generic\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    opts = ["--sysfs-root", str(fb.root), "--state-dir", str(state)]
    if front == "pydvfs":
        st = _json(capsys, ["status", *opts, "--json"])
        assert main(["pin", "500", *opts]) == 0 and main(["restore", *opts]) == 0
    else:
        r = subprocess.run([govcore_bin, *opts, "--json", "status"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        for argv in (["pin", "500"], ["restore"]):
            assert subprocess.run([govcore_bin, *opts, *argv], capture_output=True, timeout=60).returncode == 0
    assert st["board"] == "orin-nano-super" and st["jetpack"] is None and st["l4t"] == "R41.1.0"
    assert "L4T R41.1.0 is not in the board table (R32, R35, R36, R38, R39)" in st["warning"]
    assert ("2 GPU levels are not in the board table's orin-nano-super clock tables (500 700 MHz)"
            in st["warning"])
    assert st["warning"].count("L4T") == 1


@pytest.mark.parametrize("front", ["pydvfs", "govcore"])
def test_a_power_mode_outside_the_table_is_one_notice(tmp_path, govcore_bin, capsys, front):
    """A mode id the table knows for no release of the board: one notice, and the board works; a
    mode of the row (the Nano Super's 7W, id 3) is known and says nothing."""
    for vid, mode, name, noticed in (("orin-nano-super", 3, "7W", False), ("agx-orin", 7, "MODE_7W", True)):
        fb = build_fake_board(tmp_path / vid, board=vid)
        conf = fb.root / "etc/nvpmodel.conf"
        conf.write_text(conf.read_text() + f"< POWER_MODEL ID={mode} NAME={name} >\nGPU MAX_FREQ 408000000\n")
        (fb.root / "var/lib/nvpmodel/status").write_text(f"pmode:{mode:04d} fmode:quiet\n")
        state = tmp_path / f"{vid}-state"
        state.mkdir(mode=0o700)
        opts = ["--sysfs-root", str(fb.root), "--state-dir", str(state)]
        if front == "pydvfs":
            st = _json(capsys, ["status", *opts, "--json"])
            assert main(["pin", "408", *opts]) == 0 and main(["restore", *opts]) == 0
        else:
            r = subprocess.run([govcore_bin, *opts, "--json", "status"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            st = json.loads(r.stdout)
        assert st["power_mode"]["id"] == mode and st["power_mode"]["name"] == name
        note = (f"power mode {mode} ({name}) is not among the board table's modes of {vid}: "
                "its GPU cap is read from the board, as any mode's")
        assert (st["warning"] == note) if noticed else st["warning"] is None, st["warning"]


def test_thor_memory_clock_pins_with_emc_and_restores_byte_for_byte(tmp_path, govcore_bin, capsys):
    """Thor's memory clock is the devfreq device bwmgr (jtop memory.py): `pin --emc` drives it
    as the EMC in both front ends (min = max = the rate, its originals in the saved record as
    emc.governor/min_hz/max_hz), and restore puts its files and the GPU's back byte for byte.
    The public record gives only its top rate (4266 MHz): the lower two are this test's, so that
    a pin changes something."""
    fb = build_fake_board(tmp_path / "thor", board="thor")
    bwmgr = fb.root / "sys/devices/virtual/devfreq/bwmgr"
    (bwmgr / "available_frequencies").write_text("2133000000 3200000000 4266000000\n")
    (bwmgr / "min_freq").write_text("2133000000")
    for d in (bwmgr, fb.devfreq_dir):  # the numbers a pin writes, as govcore writes them: bytes compare
        for name in ("min_freq", "max_freq"):
            (d / name).write_text(str(int((d / name).read_text())))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    opts = ["--sysfs-root", str(fb.root), "--state-dir", str(state)]

    def files():
        return {p: p.read_bytes() for d in (bwmgr, fb.devfreq_dir) for p in sorted(d.iterdir()) if p.is_file()}

    before = files()
    for front in ("pydvfs", "govcore"):
        if front == "pydvfs":
            assert main(["pin", "630", "--emc", "3200", *opts]) == 0, capsys.readouterr().err
            st = _json(capsys, ["status", *opts, "--json"])
        else:
            r = subprocess.run([govcore_bin, *opts, "pin", "630", "--emc", "3200"], capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0 and "the EMC to 3200 MHz" in r.stdout, r.stderr
            st = json.loads(subprocess.run([govcore_bin, *opts, "--json", "status"], capture_output=True,
                                           text=True, timeout=60).stdout)
        [emc] = [d for d in st["domains"] if d["name"] == "emc"]
        assert (emc["kind"], emc["devfreq"], emc["min_mhz"], emc["max_mhz"], emc["pinned"]) == \
            ("emc", "bwmgr", 3200, 3200, True), front
        record = next(state.iterdir()).read_text()
        assert "emc.governor=nvhost_podgov\nemc.min_hz=2133000000\nemc.max_hz=4266000000\n" in record
        argv = ["restore", *opts]
        if front == "pydvfs":
            assert main(argv) == 0
        else:
            assert subprocess.run([govcore_bin, *argv], capture_output=True, timeout=60).returncode == 0
        assert files() == before, front
        assert not any(state.iterdir())

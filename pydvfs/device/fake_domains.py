"""The clocks beside the GPU's on a fake board: the EMC's BPMP debugfs folder and the cpufreq
policies, laid out from the board table (``pydvfs/data/boards.json``: ``emc_mhz``,
``cpu_policies``, ``cpu_max_mhz``) as JetPack 5/6 shows them on an Orin.

A static tree cannot round a written EMC rate up as BPMP does: govcore snaps the rate to the
table itself and reads it back, so the fake only has to hold what is written.

The fake's CPU table is made, not measured: the board table holds each board's top CPU clock,
and the Orin kernels' cpufreq tables step by 76.8 MHz from 115.2 MHz up to it (the top level is
kept where it falls between steps, as the AGX Orin's 2201.6 MHz does).
"""
from __future__ import annotations

from pathlib import Path

from .table import Board

EMC_DIR = "sys/kernel/debug/bpmp/debug/clk/emc"
EMC_RATES = "sys/kernel/debug/emc/available_rates"
CPUFREQ_DIR = "sys/devices/system/cpu/cpufreq"
NVPMODEL_CLK_CAP = "sys/kernel/nvpmodel_clk_cap"
CPU_STEP_KHZ = 76800
CPU_LOWEST_KHZ = 115200
CPU_GOVERNORS = ("schedutil", "performance", "powersave", "userspace")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def cpu_levels_khz(board: Board) -> list[int]:
    """The fake's cpufreq table for ``board`` (kHz, ascending); [] for a board without policies."""
    if not board.cpu_policies:
        return []
    top = int(round(board.cpu_max_mhz * 1000))
    levels = list(range(CPU_LOWEST_KHZ, top + 1, CPU_STEP_KHZ))
    if levels[-1] != top:
        levels.append(top)
    return levels


def add_clock_domains(root: str | Path, board: Board, *, emc_rates_file: bool = True,
                      emc_rate_mhz: float | None = None, emc_cap_mhz: float | None = None,
                      cpu_cap_mhz: float | None = None) -> list[str]:
    """Add the EMC and CPU domains of ``board`` to the fake tree at ``root``; the names of the
    domains added ("emc", "cpu0", "cpu4", ...).

    The EMC starts under the board's own memory scaling (``mrq_rate_locked`` 0) at
    ``emc_rate_mhz`` (default: the table's top rate); ``emc_rates_file`` False leaves out the
    kernel's ``available_rates`` (govcore then falls back to the board table). ``emc_cap_mhz``
    writes nvpmodel's ``nvpmodel_clk_cap/emc``; ``cpu_cap_mhz`` sets each policy's
    ``scaling_max_freq`` as a power mode does. Every CPU policy starts under schedutil over its
    whole table. A board without EMC rates or policies in the table gets none."""
    root = Path(root)
    added: list[str] = []
    if board.emc_mhz:
        rates_hz = [int(round(m * 1e6)) for m in board.emc_mhz]
        emc = root / EMC_DIR
        rate = int(round(emc_rate_mhz * 1e6)) if emc_rate_mhz else rates_hz[-1]
        _write(emc / "rate", f"{rate}\n")
        _write(emc / "min_rate", f"{rates_hz[0]}\n")
        _write(emc / "max_rate", f"{rates_hz[-1]}\n")
        _write(emc / "mrq_rate_locked", "0\n")
        if emc_rates_file:
            _write(root / EMC_RATES, " ".join(str(r) for r in rates_hz) + "\n")
        if emc_cap_mhz:
            _write(root / NVPMODEL_CLK_CAP / "emc", f"{int(round(emc_cap_mhz * 1e6))}\n")
        added.append("emc")
    levels = cpu_levels_khz(board)
    cap_khz = int(round(cpu_cap_mhz * 1000)) if cpu_cap_mhz else levels[-1] if levels else 0
    for pol in board.cpu_policies:
        d = root / CPUFREQ_DIR / f"policy{int(pol['policy'])}"
        first, _, last = str(pol["cpus"]).partition("-")
        cpus = range(int(first), int(last or first) + 1)
        _write(d / "related_cpus", " ".join(str(c) for c in cpus) + "\n")
        _write(d / "affected_cpus", " ".join(str(c) for c in cpus) + "\n")
        _write(d / "scaling_available_frequencies", " ".join(str(k) for k in levels) + " \n")
        _write(d / "scaling_available_governors", " ".join(CPU_GOVERNORS) + "\n")
        _write(d / "scaling_governor", "schedutil\n")
        _write(d / "scaling_min_freq", f"{levels[0]}\n")
        _write(d / "scaling_max_freq", f"{cap_khz}\n")
        _write(d / "scaling_cur_freq", f"{cap_khz}\n")
        _write(d / "cpuinfo_min_freq", f"{levels[0]}\n")
        _write(d / "cpuinfo_max_freq", f"{levels[-1]}\n")
        added.append(f"cpu{int(pol['policy'])}")
    return added

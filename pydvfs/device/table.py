"""The board table (``pydvfs/data/boards.json``): what pydvfs knows of each Jetson module.

One fact, one place: the GPU's devfreq names, its clock table, the power modes' GPU caps, the
power sensors and their rails, and the rails' **roles** (which rails make the module's energy,
which the CPU+GPU energy) live in that file only. govcore compiles a header generated from it
(``tools/gen_boards.py``); everything in Python reads it through this module.

Roles:
  ``module``   what the whole module draws: its input rail where it has one (VDD_IN, the INA238 on
               Thor, POM_5V_IN), else the sum of its rails, each once (AGX Orin, AGX Xavier);
  ``cpu_gpu``  the papers' measure: the rails that carry the CPU and the GPU (CV included where the
               board puts it on the same rail);
  ``gpu``      the GPU alone, where the board has a rail for it.
A rail's role is never guessed: on a board the table does not know, a role has no rails.

Rail names are the labels discovery reads (govcore/board.c): a label seen twice is kept, the
second read as ``LABEL#2``; a role naming such a label is then not known (None), as in govcore.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from ..package_data import package_file

ROLES = ("module", "cpu_gpu", "gpu")


@dataclass(frozen=True)
class PowerMode:
    id: int
    name: str
    gpu_cap_mhz: float | None  # None: the public record gives no cap. No cap is assumed: a pin obeys
    # the cap the board shows (devfreq max_freq, nvpmodel_clk_cap), the simulator does not model the
    # mode (pydvfs.sim.profiles), a fake board's nvpmodel.conf has no GPU line for it


@dataclass(frozen=True)
class Variant:
    """The same module as its board's row on other releases or SKUs: what differs (None: as the
    row), where it was read (``source``) and which facts are ``unconfirmed``. Everything else
    (rail roles, simulator profile, built-in policy) is the row's: a variant maps onto it."""

    id: str
    board: str                       # the row's id
    name: str
    jetpack: tuple[int, ...]
    model_example: str | None
    gpu_levels_mhz: tuple[float, ...] | None
    power_modes: tuple[PowerMode, ...] | None
    cpu_max_mhz: float | None
    emc_devfreq_names: tuple[str, ...]
    disabled_rails: tuple[str, ...]  # INA3221 channels this release leaves off (inN_enable 0)
    source: str
    unconfirmed: tuple[str, ...]


@dataclass(frozen=True)
class Board:
    """One row of the board table."""

    id: str
    name: str
    model_match: tuple[str, ...]
    model_example: str
    jetpack: tuple[int, ...]
    gpu_devfreq_names: tuple[str, ...]
    gpu_of_node_names: tuple[str, ...]
    gpu_has_load: bool
    gpu_levels_mhz: tuple[float, ...]
    power_modes: tuple[PowerMode, ...]
    sensors: tuple[dict, ...]
    roles: Mapping[str, tuple[str, ...]]
    optional_rails: Mapping[str, tuple[str, ...]]  # a role's rails the board may lack (partial)
    emc_mhz: tuple[float, ...]
    cpu_policies: tuple[dict, ...]
    cpu_max_mhz: float
    estimate: tuple[str, ...]
    l4t: Mapping[int, int] = None    # JetPack -> the L4T major this board runs there, where several map to it
    variants: tuple[Variant, ...] = ()
    emc_devfreq_names: tuple[str, ...] = ()  # the memory clock as a devfreq device (Thor's bwmgr)
    sources: Mapping[str, str] = None        # fact -> where it was read (docs/boards.md)
    unconfirmed: tuple[str, ...] = ()        # facts seen in one weak source only

    @property
    def rails(self) -> tuple[str, ...]:
        """Every rail the board's sensors carry, in the table's order (NC channels left out)."""
        out = []
        for s in self.sensors:
            for label in list(s.get("channels", {}).values()) + list(s.get("power_channels", {}).values()):
                if label != "NC":
                    out.append(label)
        return tuple(out)

    def role_rails(self, role: str) -> tuple[str, ...]:
        if role not in ROLES:
            raise ValueError(f"unknown rail role {role!r}; expected one of {', '.join(ROLES)}")
        return self.roles.get(role, ())


def _modes(rows) -> tuple[PowerMode, ...]:
    return tuple(PowerMode(int(m["id"]), m["name"], None if m["gpu_cap_mhz"] is None else float(m["gpu_cap_mhz"]))
                 for m in rows)


def _variant(board_id: str, v: dict) -> Variant:
    return Variant(
        id=v["id"], board=board_id, name=v["name"], jetpack=tuple(v["jetpack"]),
        model_example=v.get("model_example"),
        gpu_levels_mhz=tuple(float(f) for f in v["gpu_levels_mhz"]) if "gpu_levels_mhz" in v else None,
        power_modes=_modes(v["power_modes"]) if "power_modes" in v else None,
        cpu_max_mhz=float(v["cpu_max_mhz"]) if "cpu_max_mhz" in v else None,
        emc_devfreq_names=tuple(v.get("emc_devfreq_names", ())),
        disabled_rails=tuple(v.get("disabled_rails", ())), source=v["source"],
        unconfirmed=tuple(v["unconfirmed"]))


def _board(row: dict) -> Board:
    gpu = row["gpu"]
    return Board(
        id=row["id"], name=row["name"], model_match=tuple(row["model_match"]),
        model_example=row["model_example"], jetpack=tuple(row["jetpack"]),
        gpu_devfreq_names=tuple(gpu["devfreq_names"]), gpu_of_node_names=tuple(gpu["of_node_names"]),
        gpu_has_load=bool(gpu["load"]), gpu_levels_mhz=tuple(float(f) for f in row["gpu_levels_mhz"]),
        power_modes=_modes(row["power_modes"]),
        sensors=tuple(row["sensors"]),
        roles={role: tuple(rails) for role, rails in row["roles"].items()},
        optional_rails={role: tuple(rails) for role, rails in row.get("optional_rails", {}).items()},
        emc_mhz=tuple(float(f) for f in row["emc_mhz"]), cpu_policies=tuple(row["cpu_policies"]),
        cpu_max_mhz=float(row["cpu_max_mhz"]), estimate=tuple(row["estimate"]),
        l4t={int(j): int(r) for j, r in row.get("l4t", {}).items()},
        variants=tuple(_variant(row["id"], v) for v in row.get("variants", ())),
        emc_devfreq_names=tuple(row.get("emc_devfreq_names", ())),
        sources=dict(row.get("sources", {})), unconfirmed=tuple(row.get("unconfirmed", ())),
    )


@lru_cache(maxsize=1)
def _table() -> dict:
    with open(package_file("data", "boards.json"), encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=1)
def boards() -> dict[str, Board]:
    """The board table, by id, in the file's order."""
    return {row["id"]: _board(row) for row in _table()["boards"]}


def l4t_jetpack() -> dict[int, int]:
    """L4T major release (``/etc/nv_tegra_release``'s R36) -> JetPack major (6)."""
    return {int(r): int(j) for r, j in _table()["l4t_jetpack"].items()}


def variants() -> dict[str, Variant]:
    """Every board's variants, by id, in the file's order."""
    return {v.id: v for b in boards().values() for v in b.variants}


def mode_notice(board_id: str | None, mode: dict) -> str | None:
    """The notice where the power mode in force (``{"id", "name"}``) is not among the modes the
    table knows for the board (its row's and its variants'); None otherwise. Nothing fails: its
    GPU cap is read from the board as any mode's (the same words as govcore's report.c)."""
    b = boards().get(board_id) if board_id else None
    if b is None or mode.get("id") is None:
        return None
    known = {m.id for m in b.power_modes} | {m.id for v in b.variants for m in (v.power_modes or ())}
    if mode["id"] in known:
        return None
    return (f"power mode {mode['id']} ({mode['name']}) is not among the board table's modes of {b.id}: "
            "its GPU cap is read from the board, as any mode's")


def l4t_release(b: Board, jetpack: int) -> int:
    """The L4T major ``b`` runs on ``jetpack``: the row's ``l4t`` where it names one (the AGX
    Orin on JetPack 7: R39), else the lowest release of that JetPack."""
    if jetpack in (b.l4t or {}):
        return b.l4t[jetpack]
    return min(r for r, j in l4t_jetpack().items() if j == jetpack)


def board(board_id: str) -> Board:
    """A board by id; ValueError naming the known ids otherwise."""
    table = boards()
    if board_id not in table:
        raise ValueError(f"unknown board {board_id!r}; expected one of {', '.join(table)}")
    return table[board_id]


def identify(model: str) -> Board | None:
    """The board whose model strings match ``/proc/device-tree/model``; None if none does."""
    for b in boards().values():
        if any(m.lower() in model.lower() for m in b.model_match):
            return b
    return None


def by_rails(names) -> Board | None:
    """The first board of the table whose rails are all among ``names`` (a record that kept its
    rails but not its model: a dataset, a simulated board); None if none. Boards with the same
    rails (Orin Nano and NX) have the same roles, so the first is as good as the other."""
    have = set(names)
    for b in boards().values():
        if b.rails and set(b.rails) <= have:
            return b
    return None


def duplicate_name(label: str, copy: int = 2) -> str:
    """How discovery names the ``copy``-th channel with the same label (govcore/board.c)."""
    return f"{label}#{copy}"


def role_sum(per_rail: Mapping[str, float], rails: tuple[str, ...],
             optional: tuple[str, ...] = ()) -> float | None:
    """Sum of ``per_rail`` (energy J or power W) over ``rails``, each once; None where the board
    lacks any of them (a partial sum would be a wrong number, not a smaller one), or where one
    of them was labelled twice (which channel is the rail is then not known). The ``optional``
    rails (the table's ``optional_rails`` of the role) may be absent: the sum is then over the
    rails present, and :func:`partial` says so."""
    if not rails or any(duplicate_name(r) in per_rail for r in rails):
        return None
    present = [r for r in dict.fromkeys(rails) if r in per_rail]
    if not present or any(r not in per_rail and r not in optional for r in rails):
        return None
    return float(sum(per_rail[r] for r in present))


def missing_optional(per_rail: Mapping[str, float], board: Board | None, role: str) -> tuple[str, ...]:
    """The one definition of a partial role (``module_partial``; govcore's gc_board.role_partial):
    the optional rails of ``role`` absent from ``per_rail`` where the role is still summed over
    the rails present; () where the role is whole, or not known at all."""
    if board is None:
        return ()
    optional = board.optional_rails.get(role, ())
    if not optional or role_sum(per_rail, board.role_rails(role), optional) is None:
        return ()
    return tuple(r for r in optional if r not in per_rail)


def energies(per_rail: Mapping[str, float], board: Board | None) -> dict[str, float | None]:
    """Each role's sum of ``per_rail`` on ``board`` (None: an unknown board, whose roles are not
    guessed). Roles the board lacks, or whose rails were not read, are None; a role whose
    optional rails alone are missing is summed over the rails present (:func:`missing_optional`)."""
    return {role: (role_sum(per_rail, board.role_rails(role), board.optional_rails.get(role, ()))
                   if board else None) for role in ROLES}

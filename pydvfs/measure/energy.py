"""Which energy pydvfs minimises and reports: the module's, or CPU+GPU (the papers' measure).

``module``   what the whole Jetson module draws: its input rail where it has one (VDD_IN on an
             Orin Nano/NX, the INA238 on Thor, POM_5V_IN on a Nano), else the sum of its rails,
             each once (AGX Orin, AGX Xavier). What a user pays for: memory, SoC and the
             regulators' losses draw for as long as a step lasts. The default.
``cpu-gpu``  the rails that carry the CPU and the GPU (AGX Orin VDD_CPU_CV + VDD_GPU_SOC;
             Nano/NX VDD_CPU_GPU_CV), as paper A measured.

Which rails make each is the board table's (``pydvfs/data/boards.json``, :mod:`pydvfs.device.table`);
the sampler sums them by rail role into a Measurement's ``module_energy_j`` and
``cpu_gpu_energy_j`` (never over "all rails"), and :func:`of` picks the chosen one: nothing here
sums rails again. On a board the table does not know, both are None (unknown), never a made-up
total.

``MEASURES`` is the one list of names; the CLI's ``--energy`` (cli/common.py) and the
``energy=`` keyword of :class:`pydvfs.OnlineGovernor` and the callbacks take them.
"""
from __future__ import annotations

from .. import _core
from ..errors import InvalidValueError

MEASURES = ("module", "cpu-gpu")
DEFAULT_MEASURE = "module"
ROLE = {"module": "module", "cpu-gpu": "cpu_gpu"}  # measure -> the board table's rail role
LABEL = {m: _core.measure_label(m) for m in MEASURES}  # in text: govcore's (gc_measure_label)
COLUMN = {"module": "energy_module_j", "cpu-gpu": "energy_cpu_gpu_j"}  # the dataset's columns
FIELD = {"module": "module_energy_j", "cpu-gpu": "cpu_gpu_energy_j"}  # a Measurement's (and a report's) fields


def check_measure(measure) -> str:
    """``measure`` if it is one of MEASURES; InvalidValueError (one line) otherwise."""
    if measure not in MEASURES:
        raise InvalidValueError(f"unknown energy measure {measure!r}: expected {' or '.join(MEASURES)}")
    return measure


def of(m, measure: str) -> float | None:
    """The ``measure`` energy of a sampler window (a :class:`pydvfs.measure.sampler.Measurement`): its
    ``module_energy_j`` or ``cpu_gpu_energy_j``, which the sampler summed by the board's rail
    roles; None where it is unknown. Energies are read from the Measurement, never summed again."""
    return getattr(m, FIELD[check_measure(measure)])


def rails_of(board, measure: str) -> tuple[str, ...]:
    """The rails that make ``measure`` on ``board`` (empty: unknown)."""
    return board.role_rails(ROLE[check_measure(measure)]) if board is not None else ()


def unknown_reason(board, measure: str, model: str | None, rails=()) -> str | None:
    """Why ``measure`` cannot be had on this board (None: it can). ``rails``: the rails the
    sampler found, to name a rail of the role that is missing."""
    check_measure(measure)
    if board is None:
        return (f"{LABEL[measure]} energy is unknown on this board ({model or 'no model string'!r} is not "
                f"in pydvfs's board table, so which rails make it is not known; see docs/boards.md)")
    need = rails_of(board, measure)
    if not need:
        return f"the {board.name} has no rails for {LABEL[measure]} energy in the board table"
    # a rail the table marks optional for the role (the AGX Orin's VDDQ_VDD2_1V8AO) may be
    # missing: the energy is then over the rails present, flagged partial (boards.missing_optional)
    optional = board.optional_rails.get(ROLE[measure], ())
    missing = [r for r in need if rails and r not in rails and r not in optional]
    if missing:
        return (f"{LABEL[measure]} energy on the {board.name} needs rail(s) {', '.join(missing)}, which "
                f"the sampler did not find")
    return None


def require(board, measure: str, model: str | None, rails=()) -> None:
    """InvalidValueError (one line) where ``measure`` cannot be had on this board: a search
    cannot minimise an energy nobody can measure."""
    why = unknown_reason(board, measure, model, rails)
    if why is not None:
        other = [m for m in MEASURES if m != measure and unknown_reason(board, m, model, rails) is None]
        hint = f"; --energy {other[0]} can be measured here" if other else ""
        raise InvalidValueError(why + hint)


def report_fields(m, measure: str) -> dict:
    """The energy part of a run's report, from its Measurement ``m``: the measure minimised,
    both measures, the board."""
    return {"energy_measure": check_measure(measure), "board": m.board,
            **{FIELD[k]: of(m, k) for k in MEASURES}}


def column_label(column: str | None) -> str:
    """What a data column of energy is, named for a figure: "module (`energy_module_j`)",
    "CPU+GPU (`energy_cpu_gpu_j`)", another column by its name ("`energy_j`"), or "not recorded"
    (outputs from before pydvfs said which)."""
    if column is None:
        return "not recorded"
    names = {c: f"{LABEL[m]} (`{c}`)" for m, c in COLUMN.items()}
    return names.get(column, f"`{column}`")


def figure_label(column: str | None, what: str = "energy") -> str:
    """What a data column of energy is (or the power derived from it: ``what="power"``), for a
    figure's axis or title: "module energy", "CPU+GPU power", another column by its name
    ("energy (energy_j)")."""
    measure = {c: m for m, c in COLUMN.items()}.get(column)
    return f"{LABEL[measure]} {what}" if measure else f"{what} ({column or 'not recorded'})"


def describe(fields) -> str:
    """One line of a report's energies (``report_fields``), the minimised one first:
    "module 123.4 J (CPU+GPU 98.7 J)"; an unknown one says so."""
    measure = fields["energy_measure"]
    order = [measure] + [m for m in MEASURES if m != measure]

    def one(m):
        v = fields[FIELD[m]]
        return f"{LABEL[m]} {'unknown' if v is None else format(v, '.3f') + ' J'}"

    return f"{one(order[0])} ({', '.join(one(m) for m in order[1:])})"


__all__ = ["COLUMN", "DEFAULT_MEASURE", "FIELD", "LABEL", "MEASURES", "ROLE", "check_measure", "column_label",
           "describe", "of",
           "rails_of", "report_fields", "require", "unknown_reason"]

"""The board side of the search over whole power modes (GPU level x EMC rate x CPU clock): which
knobs (``--knobs``), the grid of modes a board or the simulator allows, the power mode's caps,
and the device that pins a mode. The search itself is :class:`~pydvfs.governor.mode_search.ModeSearch`
(:func:`JointSearch` builds it over modes with the joint model), docs/online.md.
"""
from __future__ import annotations

from ..errors import InvalidValueError
from ..policy.objective import Objective
from .mode_search import KNOBS, JointParams, JointSearch, Mode, SearchPrior, level_name, mode_name, within_caps


def parse_knobs(text: str) -> tuple:
    """``"gpu,emc,cpu"`` -> ("gpu", "emc", "cpu"); the GPU must be among them. Raises
    InvalidValueError (one line) on anything else."""
    items = [x.strip().lower() for x in str(text).split(",")]
    bad = [x for x in items if x not in KNOBS]
    if bad or not items:
        raise InvalidValueError(f"unknown knob {(bad or [text])[0]!r}: expected a comma list of {', '.join(KNOBS)}")
    if len(set(items)) != len(items):
        raise InvalidValueError(f"knob listed twice in {text!r}")
    if "gpu" not in items:
        raise InvalidValueError("the GPU clock must be among the knobs (gpu, or gpu,emc,cpu)")
    if len(items) == 2:  # the joint model needs every domain to vary
        raise InvalidValueError(f"knobs {text!r}: the joint search covers all three (gpu,emc,cpu), or give gpu alone")
    return tuple(k for k in KNOBS if k in items)


CPU_SHARES = (1 / 3, 1 / 2, 2 / 3, 1.0)  # the joint search's CPU clocks: these shares of the top clock


def mode_grid(gpu_levels_mhz, board, knobs=KNOBS, cpu_table_mhz=None) -> list:
    """The modes a joint search covers on ``board`` (a :class:`pydvfs.device.table.Board`): every GPU
    level x the table's EMC rates x four CPU clocks (a third, half, two thirds and all of the
    top clock, each snapped to ``cpu_table_mhz``, the board's cpufreq table where known). A
    domain not in ``knobs``, or without clocks in the table, stays at its top."""
    emcs = tuple(board.emc_mhz) if "emc" in knobs and board.emc_mhz else (max(board.emc_mhz or (0.0,)) or None,)
    top = board.cpu_max_mhz
    if "cpu" in knobs and top:
        table = sorted(float(x) for x in cpu_table_mhz) if cpu_table_mhz else None
        cpus = tuple(sorted({min(table, key=lambda f, x=x: abs(f - top * x)) if table else round(top * x, 1)
                             for x in CPU_SHARES}))
    else:
        cpus = (top or None,)
    if None in emcs or None in cpus:
        raise InvalidValueError(f"board {board.id} has no EMC rates or CPU clock in the board table: "
                                f"its modes cannot be searched")
    return [Mode((g, e, c)) for g in gpu_levels_mhz for e in emcs for c in cpus]


class ModeDevice:
    """The engine's device for a joint search: it pins a :class:`Mode` through one callable,
    ``pin_mode(gpu_mhz, emc_mhz, cpu_mhz)`` (the board's joint pin of every domain, or the
    simulator's), and restores through ``restore_mode()`` (default: the device's restore, which
    hands every domain it pinned back). Everything else is the device's."""

    def __init__(self, dev, pin_mode, restore_mode=None):
        if not callable(pin_mode):
            raise InvalidValueError("pin_mode must be a callable pin_mode(gpu_mhz, emc_mhz, cpu_mhz)")
        self.dev, self.pin_mode, self.restore_mode = dev, pin_mode, restore_mode

    def pin(self, mode) -> None:
        self.pin_mode(*Mode(mode))

    def restore(self):
        return self.restore_mode() if self.restore_mode is not None else self.dev.restore()

    def __getattr__(self, name):
        return getattr(self.dev, name)


def board_pin_mode(dev):
    """``pin_mode`` through the device's joint pin (govcore: one saved state, every domain put
    back by ``dev.restore()``)."""
    def pin_mode(gpu_mhz, emc_mhz, cpu_mhz):
        dev.pin(gpu_mhz, emc_mhz=emc_mhz, cpu_mhz=cpu_mhz)

    return pin_mode


def device_modes(dev, gpu_levels_mhz) -> tuple:
    """(modes, caps) of a device's clock domains (``dev.domains()``): every GPU level x its EMC
    rates x four CPU clocks of its cpufreq table (:data:`CPU_SHARES`); caps: the EMC's nvpmodel
    cap and the CPU policies' ``scaling_max_freq`` as found (a power mode's). A domain the board
    does not show, or shows as unavailable, raises InvalidValueError (nothing pinned)."""
    recs = dev.domains()
    emc = next((r for r in recs if r["kind"] == "emc"), None)
    cpus = [r for r in recs if r["kind"] != "emc"]
    need = [("emc", emc is not None and emc["available"] and emc["levels_mhz"]),
            ("cpu", bool(cpus) and all(r["available"] and r["levels_mhz"] for r in cpus))]
    for knob, ok in need:
        if not ok:
            raise InvalidValueError(f"this board shows no writable {knob.upper()} clock (pydvfs status): "
                                    f"search the GPU clock alone (--knobs gpu)")
    emc_cap = emc.get("cap_mhz") if emc else None
    cpu_cap = min((r["max_mhz"] for r in cpus if r.get("max_mhz")), default=None)
    emcs = [e for e in emc["levels_mhz"] if emc_cap is None or e <= emc_cap + 1e-6]
    table = sorted(set.intersection(*(set(r["levels_mhz"]) for r in cpus)))
    table = [c for c in table if cpu_cap is None or c <= cpu_cap + 1e-6] or table
    cpu = sorted({min(table, key=lambda f, x=x: abs(f - table[-1] * x)) for x in CPU_SHARES})
    return [Mode((g, e, c)) for g in gpu_levels_mhz for e in emcs for c in cpu], (None, emc_cap, cpu_cap)


def joint_setup(dev, gpu_levels_mhz, objective: Objective | None = None, pin_mode=None, restore_mode=None,
                modes=None, board=None, prior=None, start_gpu_mhz: float | None = None, start_source: str = "") -> tuple:
    """(search, the engine's device, plan fields) of a joint search on ``dev``, from the top mode
    within the caps: through the board's joint pin over its domains' tables (no ``pin_mode``),
    or through ``pin_mode`` over ``modes`` (default: :func:`mode_grid` of ``board``); ``prior``:
    what the board recorded before (:class:`~pydvfs.governor.mode_search.SearchPrior`);
    ``start_gpu_mhz``: the GPU clock the online plan starts from (the board's record, the
    built-in policy: :func:`pydvfs.governor.loop.choose_start`, said by ``start_source``),
    probed right after the top mode with the EMC and CPU at the top's (the prior's start, unless
    ``prior`` names one)."""
    caps = None
    if pin_mode is None:
        pin_mode = board_pin_mode(dev)
        if modes is None:
            modes, caps = device_modes(dev, gpu_levels_mhz)
    elif modes is None:
        modes = mode_grid(gpu_levels_mhz, board)
    top = max(Mode(m) for m in modes)
    prior = SearchPrior.of(prior)
    if start_gpu_mhz is not None and (prior is None or prior.start is None):
        prior = SearchPrior(prior.observations if prior else (), (float(start_gpu_mhz),) + tuple(top[1:]),
                            start_source or (prior.source if prior else ""))
    search = JointSearch(modes, top, objective=objective, caps=caps, prior=prior)
    source = "the top mode within the power mode's caps"
    if search.prior_start is not None:
        source += f", then {level_name(search.prior_start)} ({search.prior.source or 'the prior'})"
    plan = {"start_mhz": search.start_mode, "centre_mhz": search.start_mode, "maxn_anchor": False,
            "start_source": source, "knobs": list(KNOBS),
            "modes": len(search.modes), "caps_mhz": list(search.caps)}
    return search, ModeDevice(dev, pin_mode, restore_mode), plan


__all__ = ["CPU_SHARES", "joint_setup", "board_pin_mode", "device_modes", "KNOBS", "ModeDevice", "mode_grid",
           "JointParams", "JointSearch", "Mode", "mode_name", "parse_knobs", "within_caps"]

"""Energy per unit of work, and energy to completion.

:func:`per_work` is the one place a run's energy is divided by its work: J/step, J/token,
tokens/J and the average power, for the callbacks' logs, :class:`pydvfs.OnlineGovernor`'s
stats and the reports.

:func:`forecast` predicts the rest of a run once the online search has settled, from the
windows the search measured (as Carbontracker predicts a whole training run from its first
epoch): the steps left (the run's length less the steps done) at the settled clock's median
J/step and s/step, and what the whole run would have cost under MAXN, the board's own governor,
from its own windows where the search measured it, else from the top clock's (under a training
load the board's governor holds the top clock; the forecast says which it used). Nothing is
predicted for a run of unknown length.
"""
from __future__ import annotations

import math
from statistics import median


def per_work(energy_j: float | None, duration_s: float, steps: int, tokens: int | None) -> dict:
    """``power_w``, ``j_per_step``, ``j_per_token`` and ``tokens_per_j`` of ``energy_j`` over
    ``duration_s``, ``steps`` and ``tokens`` (each None where it cannot be told)."""
    known = energy_j is not None and math.isfinite(energy_j)
    return {"power_w": energy_j / duration_s if known and duration_s > 0 else None,
            "j_per_step": energy_j / steps if known and steps else None,
            "j_per_token": energy_j / tokens if known and tokens else None,
            "tokens_per_j": tokens / energy_j if known and tokens and energy_j > 0 else None}


def _at(trajectory: list[dict], mhz) -> tuple[float, float, int] | None:
    """Median J/step and s/step of the windows measured at ``mhz`` (None: MAXN), and how many."""
    ws = [w for w in trajectory if w["freq_mhz"] == mhz]
    if not ws:
        return None
    return median(w["j_per_step"] for w in ws), median(w["s_per_step"] for w in ws), len(ws)


def forecast(trajectory: list[dict], chosen, steps_done: int, total_steps: int | None,
             tokens_done: int | None = None, spent_j: float | None = None) -> dict | None:
    """The rest of the run at ``chosen`` (a clock in MHz, a mode, or None for MAXN) from the
    windows in ``trajectory`` (the engine's: ``freq_mhz``, ``j_per_step``, ``s_per_step``), and
    the whole run under MAXN; None when the length is unknown or ``chosen`` was never measured.

    Keys: ``steps_left``, ``time_left_s``, ``energy_left_j``, ``energy_total_j`` (``spent_j``,
    the energy measured so far, plus what is left; None without it), ``j_per_step``,
    ``s_per_step``, ``j_per_token`` (at the tokens per step seen so far), ``maxn_j_per_step``,
    ``maxn_source`` (``measured``, ``the top clock's windows`` or None), ``maxn_energy_total_j``
    (the whole run at MAXN, or None) and ``saving_vs_maxn_pct`` (the whole run's, predicted)."""
    if total_steps is None or steps_done > total_steps:
        return None
    here = _at(trajectory, chosen)
    if here is None:
        return None
    j_step, s_step, _ = here
    left = total_steps - steps_done
    out = {"chosen": chosen, "steps_left": left, "time_left_s": left * s_step, "energy_left_j": left * j_step,
           "j_per_step": j_step, "s_per_step": s_step,
           "j_per_token": j_step * steps_done / tokens_done if tokens_done and steps_done else None,
           "energy_total_j": spent_j + left * j_step if spent_j is not None and math.isfinite(spent_j) else None,
           "maxn_j_per_step": None, "maxn_source": None, "maxn_energy_total_j": None, "saving_vs_maxn_pct": None}
    maxn = _at(trajectory, None)
    source = "measured"
    if maxn is None:
        levels = [w["freq_mhz"] for w in trajectory if isinstance(w["freq_mhz"], (int, float))]
        maxn = _at(trajectory, max(levels)) if levels else None
        source = "the top clock's windows"
    if maxn is not None:
        out.update(maxn_j_per_step=maxn[0], maxn_source=source, maxn_energy_total_j=maxn[0] * total_steps)
        if out["energy_total_j"] is not None:
            out["saving_vs_maxn_pct"] = 100.0 * (1.0 - out["energy_total_j"] / out["maxn_energy_total_j"])
    return out


def describe(fc: dict, measure_label: str) -> str:
    """One line for logs and reports."""
    line = (f"forecast: {fc['steps_left']} steps left at {fc['j_per_step']:.5g} J/step ({measure_label}): "
            f"{fc['energy_left_j']:.4g} J in {fc['time_left_s']:.4g} s")
    if fc["maxn_energy_total_j"] is not None:
        how = "measured" if fc["maxn_source"] == "measured" else f"estimated from {fc['maxn_source']}"
        line += f"; the whole run under MAXN: {fc['maxn_energy_total_j']:.4g} J ({how})"
        if fc["saving_vs_maxn_pct"] is not None:
            line += f", this run {fc['energy_total_j']:.4g} J: {fc['saving_vs_maxn_pct']:+.1f} % saved"
    return line


__all__ = ["describe", "forecast", "per_work"]

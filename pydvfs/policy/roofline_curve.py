"""The frequency-aware roofline model: a whole U-curve, and so the energy-optimal clock, for a
workload never swept - from its architecture alone and a board's constants.

Paper B's proxies give a workload's compute and memory traffic per token (C_tok = 12 L d^2 +
3 L S d, M_tok = d L); the board's constants turn them into time and power at a GPU clock f
(GHz), per token::

    a(w)  = C_tok / K + q L / S                  Gcycles: the GEMMs at K proxy-FLOPs per cycle,
                                                 plus per-kernel fill/drain (q per layer and
                                                 sequence)
    b(w)  = m M_tok + (h0 + h1 L) / S            s: memory traffic (m = 1/BW) and host work
                                                 (h0 per sequence, h1 per layer and sequence)
    t(f)  = a / f + b
    P(f)  = P_idle + u(f) c f V(f)^2 + (1 - u(f)) c_idle f V(f)^2 + e_mem M_tok / t,
            u(f) = (a / f) / t  (the share of time the clock-scaled work runs)
    E(f)  = P t = P_idle a / f + (P_idle b + e_mem M_tok) + c a V^2 + c_idle b f V^2

which is exactly :mod:`pydvfs.model.curve`'s four-term energy basis, so a prediction is an
:class:`~pydvfs.model.curve.EnergyCurve` like any fitted curve (and the prior the online search
can start from). The board constants (q, m, h0, h1, P_idle, c, c_idle, e_mem) are fitted once per
board, from all workloads of its characterisation sweep jointly: time shapes and absolute power
(or, without run times, energy shapes). K is the gauge: a whole-run sweep does not know how many
tokens a run processed, so absolute time per token is not observable; K is fixed at 1000
proxy-FLOPs per cycle and the other time constants are relative to it (argmins do not depend on
it).

The constants are written to the model folder as ``roofline.txt`` (plain ``key=value`` lines,
parsed strictly by govcore's ``gc_roofline_load``; no code is loaded) and the ``roofline``
policy evaluates the same formula in C (``gc_propose_roofline``) over the board's levels.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InvalidValueError
from ..model.curve import DEFAULT_VF, EnergyCurve, VFCurve, energy_basis
from ..roofline.proxies import compute_per_token

K_GAUGE = 1.0e12  # proxy-FLOPs per Gcycle (1000 per cycle): fixes the time scale, see above
# The fitted constants, in file order. Units: q Gcycles per layer and sequence, m s per proxy
# byte, h0 s per sequence, h1 s per layer and sequence, powers W, e_mem J per proxy byte.
CONSTANTS = ("q_gcyc", "m_s", "h0_s", "h1_s", "p_idle_w", "c_w", "c_idle_w", "e_mem_j")
FORMAT_VERSION = 1
MAX_VF_POINTS = 32  # govcore's GC_ROOFLINE_MAX_VF


def traffic_per_token(layers: float, hidden: float) -> float:
    """Paper B's activation traffic per token: M ~ B S d L per step, so d L per token."""
    from ..roofline.proxies import memory_traffic
    return memory_traffic(1, 1, hidden, layers)


def work_terms(layers: float, hidden: float, seq_len: float, k: Sequence[float]) -> tuple[float, float, float]:
    """(a Gcycles, b s, M proxy bytes) per token of a workload under board constants ``k``."""
    q, m, h0, h1 = k[0], k[1], k[2], k[3]
    mt = traffic_per_token(layers, hidden)
    a = compute_per_token(layers, hidden, seq_len) / K_GAUGE + q * layers / seq_len
    b = m * mt + (h0 + h1 * layers) / seq_len
    return a, b, mt


def energy_coef(layers: float, hidden: float, seq_len: float, k: Sequence[float]) -> np.ndarray:
    """The workload's energy-basis coefficients (J per token) under board constants ``k``."""
    a, b, mt = work_terms(layers, hidden, seq_len, k)
    p_idle, c, c_idle, e_mem = k[4], k[5], k[6], k[7]
    return np.array([p_idle * a, p_idle * b + e_mem * mt, c * a, c_idle * b])


@dataclass(frozen=True)
class RooflineBoard:
    """A board's fitted roofline constants (``CONSTANTS`` order), their relative std, and V/f."""

    constants: tuple
    rel_std: tuple  # std of log(constant): the relative uncertainty (nan: not identified)
    vf: VFCurve = DEFAULT_VF
    n_workloads: int = 0
    rms_rel_error: float = float("nan")  # fit residual (log units ~ relative)
    mode: str = "time+power"  # or "energy" (no run times in the data: P_idle fixed at 1 W as gauge)
    cov_log: tuple = field(default=(), repr=False)  # covariance of log(constants)

    def coef(self, layers: float, hidden: float, seq_len: float) -> np.ndarray:
        return energy_coef(layers, hidden, seq_len, self.constants)

    def energy_curve(self, layers: float, hidden: float, seq_len: float, name: str = "") -> EnergyCurve:
        """The predicted U-curve (J per token), with the constants' uncertainty carried through."""
        coef = self.coef(layers, hidden, seq_len)
        cov = np.zeros((4, 4))
        if self.cov_log:
            C = np.asarray(self.cov_log, float)
            logk = np.log(np.asarray(self.constants, float))
            J = np.zeros((4, len(logk)))
            for i in range(len(logk)):
                step = np.zeros_like(logk)
                step[i] = 1e-6
                J[:, i] = (energy_coef(layers, hidden, seq_len, np.exp(logk + step)) - coef) / 1e-6
            cov = np.nan_to_num(J @ C @ J.T)
        return EnergyCurve(tuple(float(x) for x in coef), tuple(tuple(float(x) for x in r) for r in cov),
                           self.vf, 0, 0, f"roofline {name}".strip())

    def argmin_mhz(self, layers: float, hidden: float, seq_len: float, levels_mhz) -> float:
        """The level with the lowest predicted energy (the roofline policy's proposal)."""
        levels = sorted(float(x) for x in levels_mhz)
        e = energy_basis(levels, self.vf) @ self.coef(layers, hidden, seq_len)
        return levels[int(np.argmin(e))]

    def to_dict(self) -> dict:
        return {"constants": dict(zip(CONSTANTS, self.constants)), "vf_knee_mhz": base_knee_mhz(self.vf),
                "rel_std": {k: (None if math.isnan(v) else v) for k, v in zip(CONSTANTS, self.rel_std)},
                "k_gauge_per_gcycle": K_GAUGE, "vf": self.vf.to_dict(), "n_workloads": self.n_workloads,
                "rms_rel_error": None if math.isnan(self.rms_rel_error) else self.rms_rel_error,
                "mode": self.mode}

    def describe(self) -> str:
        return describe_dict(self.to_dict())


def describe_dict(d: dict) -> str:
    """The constants with their uncertainty, from :meth:`RooflineBoard.to_dict` output."""
    rms = d.get("rms_rel_error")
    lines = [(f"roofline board constants ({d['n_workloads']} workloads, fit {d['mode']}, rms error "
              f"{'?' if rms is None else f'{100 * rms:.1f} %'}; K = {d['k_gauge_per_gcycle']:g} "
              f"proxy-FLOPs/Gcycle, the gauge; V/f knee fitted at {d.get('vf_knee_mhz', 0):g} MHz):")]
    for name, v in d["constants"].items():
        s = d["rel_std"].get(name)
        unc = "not identified" if s is None else f"+/- {100 * s:.0f} %"
        lines.append(f"  {name:10s} {v:11.4g}  {unc}")
    return "\n".join(lines)


# ---- fitting ------------------------------------------------------------------------------------
def _initial(p_min: float, p_max: float, mode: str) -> np.ndarray:
    if mode == "energy":
        p_min, p_max = 1.0, 3.0
    c = max(p_max - p_min, 0.1 * p_max) / 1.1
    return np.array([1e-5, 5e-9, 4e-4, 1e-4, 0.8 * p_min, c, 0.1 * c, 1e-9])


KNEE_GRID = 10  # V/f knees tried per fit, from KNEE_RANGE[0] to KNEE_RANGE[1] of the top level
KNEE_RANGE = (0.3, 0.95)


def base_knee_mhz(vf: VFCurve) -> float:
    """Where a V/f shape leaves its voltage floor (the last clock at the lowest voltage)."""
    floor = vf.volts_v[0]
    return max(f for f, v in zip(vf.freqs_mhz, vf.volts_v) if v <= floor)


def stretched_vf(base: VFCurve, knee_mhz: float, top_mhz: float) -> VFCurve:
    """``base``'s shape moved so that its floor ends at ``knee_mhz`` and its top is at
    ``top_mhz`` (the floor part and the rise each scaled linearly in clock)."""
    bk, bt = base_knee_mhz(base), base.freqs_mhz[-1]
    if not 0 < knee_mhz < top_mhz or not 0 < bk < bt:
        raise InvalidValueError("a V/f knee must lie between 0 and the top clock")
    out = []
    for f in base.freqs_mhz:
        g = f * knee_mhz / bk if f <= bk else knee_mhz + (f - bk) * (top_mhz - knee_mhz) / (bt - bk)
        out.append(g)
    return VFCurve(tuple(out), base.volts_v)


def fit_board(curves, vf: VFCurve = DEFAULT_VF, start: RooflineBoard | None = None,
              fit_knee: bool = True) -> RooflineBoard:
    """Fit the board constants, and where the V/f shape leaves its floor (``fit_knee``: the
    knee with the lowest residual on a grid; ``vf`` then gives the shape, stretched to the
    board's top level), to every workload's measured curve at once."""
    curves = list(curves)
    if not fit_knee:
        return _fit_constants(curves, vf, start)
    top = max(max(c.freqs_mhz) for c in curves)
    grid = np.linspace(KNEE_RANGE[0], KNEE_RANGE[1], KNEE_GRID)
    if start is not None:  # cross-validation folds: the start's knee and its grid neighbours
        i = int(np.argmin(np.abs(grid - base_knee_mhz(start.vf) / top)))
        grid = grid[max(i - 1, 0):i + 2]
    best = None
    for frac in grid:
        b = _fit_constants(curves, stretched_vf(vf, frac * top, top), start or best)
        if best is None or b.rms_rel_error < best.rms_rel_error:
            best = b
    return best


def _fit_constants(curves, vf: VFCurve, start: RooflineBoard | None) -> RooflineBoard:
    """Fit the board constants to every workload's measured curve at once, for a given V/f.

    With run times: per workload, the time *shape* (its scale - tokens per run - profiled out)
    and the absolute power at every clock. Without: the energy shapes, with P_idle fixed at 1 W
    (energy shapes alone cannot tell power's scale). ``start``: constants to start from (a fit
    on similar data, e.g. all workloads when cross-validating: faster)."""
    from scipy.optimize import least_squares

    curves = list(curves)
    if len(curves) < 2:
        raise InvalidValueError("the roofline fit needs at least 2 workloads")
    mode = "time+power" if all(c.time_s is not None for c in curves) else "energy"
    # One row per (workload, clock), vectorised; g = the workload's index.
    g = np.concatenate([np.full(len(c.freqs_mhz), i) for i, c in enumerate(curves)])
    L = np.array([c.workload.layers for c in curves], float)[g]
    d = np.array([c.workload.hidden for c in curves], float)[g]
    S = np.array([c.workload.seq_len for c in curves], float)[g]
    f = np.concatenate([c.freqs_mhz for c in curves]).astype(float)
    e = np.concatenate([c.energy_j for c in curves]).astype(float)
    t = np.concatenate([c.time_s for c in curves]).astype(float) if mode == "time+power" else None
    X = energy_basis(f, vf)
    n_g = np.bincount(g).astype(float)
    ctok = compute_per_token(L, d, S) / K_GAUGE
    mt = traffic_per_token(L, d)
    f_ghz = f / 1000.0

    def centred(r):
        return r - (np.bincount(g, weights=r) / n_g)[g]

    fixed = {4: 0.0} if mode == "energy" else {}  # log P_idle = 0: 1 W
    free = [i for i in range(len(CONSTANTS)) if i not in fixed]
    p = e / t if t is not None else np.array([1.0])
    x0 = np.log(np.asarray(start.constants, float)) if start is not None and start.mode == mode \
        else np.log(_initial(float(p.min()), float(p.max()), mode))

    def full(x):
        logk = x0.copy()
        logk[free] = x
        for i, v in fixed.items():
            logk[i] = v
        return np.exp(logk)

    def resid(x):
        q, m, h0, h1, p_idle, c, c_idle, e_mem = full(x)
        a = ctok + q * L / S
        b = m * mt + (h0 + h1 * L) / S
        e_model = X[:, 0] * p_idle * a + X[:, 1] * (p_idle * b + e_mem * mt) + X[:, 2] * c * a + X[:, 3] * c_idle * b
        if t is None:
            return centred(np.log(e) - np.log(e_model))
        t_model = a / f_ghz + b
        return np.concatenate([centred(np.log(t) - np.log(t_model)), np.log(p) - np.log(e_model / t_model)])

    starts = [x0[free]] if start is not None else [x0[free] + np.where(np.arange(len(free)) < 4, sh, 0.0)
                                                   for sh in (0.0, 1.5, -1.5)]
    best = None
    for x_start in starts:  # the constants span many decades: a few starts without a warm one
        with np.errstate(all="ignore"):
            res = least_squares(resid, x_start, method="trf", max_nfev=300,
                                bounds=(x0[free] - 25.0, x0[free] + 25.0))
        if best is None or res.cost < best.cost:
            best = res
    k = full(best.x)
    r = best.fun
    dof = max(len(r) - len(free) - len(curves), 1)
    s2 = float(r @ r) / dof
    cov_free = s2 * np.linalg.pinv(best.jac.T @ best.jac)
    cov = np.zeros((len(CONSTANTS), len(CONSTANTS)))
    cov[np.ix_(free, free)] = cov_free
    rel = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    for i in fixed:
        rel[i] = float("nan")
    for i in free:  # a constant pushed to a vanishing value is not identified by this data
        if rel[i] > 10:
            rel[i] = float("nan")
    return RooflineBoard(tuple(float(v) for v in k), tuple(float(v) for v in rel), vf, len(curves),
                         math.sqrt(s2), mode, tuple(tuple(float(v) for v in row) for row in cov))


# ---- the model folder's file (govcore parses it) ------------------------------------------------
def write_roofline(board: RooflineBoard, path: str | Path, source: str = "") -> Path:
    """Write the constants as ``key=value`` lines: what ``gc_roofline_load`` reads."""
    vf = board.vf
    if len(vf.freqs_mhz) > MAX_VF_POINTS:
        raise InvalidValueError(f"a V/f table for govcore has at most {MAX_VF_POINTS} points")
    src = " ".join(str(source).split())  # one line
    lines = [f"# GENERATED by pydvfs train from {src}: the roofline policy's board constants.",
             "# Do not edit: retrain instead. Units and formula: pydvfs/policy/roofline_curve.py.",
             f"version={FORMAT_VERSION}", f"k_gauge={K_GAUGE!r}"]
    lines += [f"{name}={float(v)!r}" for name, v in zip(CONSTANTS, board.constants)]
    lines.append("vf_mhz=" + ",".join(repr(float(x)) for x in vf.freqs_mhz))
    lines.append("vf_v=" + ",".join(repr(float(x)) for x in vf.volts_v))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def read_roofline(path: str | Path) -> RooflineBoard:
    """Read a ``roofline.txt`` back (the Python twin of ``gc_roofline_load``, as strict), opened
    as govcore opens a model folder's files (``_core.read_model_file``: no link, no fifo; as
    root, no folder or file another user could write)."""
    from .. import _core

    path = Path(path)
    try:
        text = _core.read_model_file(str(path.parent), path.name).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidValueError(f"{path}: not UTF-8 text") from None
    seen: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key in seen:
            raise InvalidValueError(f"{path}:{n}: expected one key=value per key")
        seen[key] = value
    want = {"version", "k_gauge", "vf_mhz", "vf_v", *CONSTANTS}
    if set(seen) != want:
        raise InvalidValueError(f"{path}: keys differ from a roofline model's")
    if seen["version"] != str(FORMAT_VERSION) or float(seen["k_gauge"]) != K_GAUGE:
        raise InvalidValueError(f"{path}: another roofline format version")
    k = tuple(float(seen[c]) for c in CONSTANTS)
    vf = VFCurve(tuple(float(x) for x in seen["vf_mhz"].split(",")),
                 tuple(float(x) for x in seen["vf_v"].split(",")))
    return RooflineBoard(k, (float("nan"),) * len(k), vf)


# ---- as a candidate policy in training ----------------------------------------------------------
class RooflineChooser:
    """Fit the board constants on the training workloads; for a held-out workload, the argmin
    of its predicted curve over its levels. (A Chooser: see pydvfs.policy.train.)"""

    name = "roofline model"

    def __init__(self, vf: VFCurve = DEFAULT_VF, start: RooflineBoard | None = None):
        self.vf, self.start = vf, start  # vf: the base shape; each fit places its knee

    def fit(self, curves):
        self.board = fit_board(curves, self.vf, self.start)
        return self

    def choose(self, curve):
        w = curve.workload
        return self.board.argmin_mhz(w.layers, w.hidden, w.seq_len, curve.freqs_mhz)

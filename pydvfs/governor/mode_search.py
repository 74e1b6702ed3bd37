"""One online search over a space of modes: the GPU clock alone (a one-axis space) or whole power
modes (GPU level x EMC rate x CPU clock), in the ask/tell shape of Optuna and scikit-optimize.

The caller owns time, the board and the measurements: it pins :attr:`ModeSearch.target_mhz`,
measures a window there and tells the search with :meth:`ModeSearch.observe` (J/step and
s/step), which answers what to pin next. The search owns only what to try next and what it
believes. Passed in: the *space* (the modes), the *model* that predicts a mode's step time and
power from the windows measured (:class:`CurveModel`: t = a/f + b, P = p0 + c f V(f)^2 over GPU
levels; :class:`JointModel`: the joint model of :mod:`pydvfs.model.joint` over modes), and the
*prior* (:class:`SearchPrior`: what this board measured before, and a predicted start; data, not
a second code path).

One round (docs/online.md):

1. **Start** at the start mode (the stock mode, the model's clock, or MAXN with
   ``maxn_anchor``): it is what the guard protects.
2. **Design** along the GPU axis through the start (the other clocks at the start's): the start
   and two more levels (``jump_frac`` of the line at a time from its end, else ``bracket_frac``
   either side; the prior's predicted start, probed first after the start, bracketed where it
   beats the start); over whole modes, the line's best and its two neighbours (what the GPU-only
   search would choose). Then, in a run long enough (``scout_min_windows``), one step along
   each other axis from the line's best, down by at least ``scout_frac`` of the clock (one
   level's step is within the per-mode spread of a real board). Modes the prior already covers
   are not designed again.
3. **Fit** the model to every clean window (and the prior's observations, rescaled to this run
   where both measured a mode) and predict every mode's cost with a spread that holds on a board
   the model does not describe: the model's own uncertainty, plus what the fit leaves unexplained
   on the modes measured *beyond window noise* (at least ``misfit_floor_pct``). A misfit with a
   structure along one axis (the residuals' means at the axis's measured values differ beyond
   noise) stops extrapolation along it: modes beyond the measured range of that axis are not
   probed on the model's word (only step by step, as neighbours). Over whole modes the model's
   word reaches one measured span beyond the measured range of each axis (a trust region).
4. **Expected gain vs cost**: probe the mode whose expected improvement over the best measured
   (x the windows left in the run) most exceeds its cost (``samples`` windows at a worse mode);
   a measured mode is re-measured the same way, its spread its standard error. None: re-measure
   the best and the modes within noise of it to ``confirm_samples`` windows, probe the unmeasured
   neighbours of the best (one step along one axis) and of the best GPU-only mode, those that
   continue a measured descent first (the nearest mode measured the other way is worse), then
   resolve the guard. Exploration is budgeted against the run's length: with the windows left known
   (``remaining_windows``: ``--steps``, a trainer's ``max_steps``) no new mode is opened once a
   round has spent ``explore_share`` of the run on modes other than the best measured.
5. **Settle** on the measured mode of least cost; never on a mode measured worse than the best
   GPU-only mode measured (the EMC and CPU at the start's), never on one not measured, and away
   from the start only for a gain beyond ``z_guard`` standard errors. **Hold** it, its windows
   joining its estimate (a rival measured better, or the best GPU-only mode measured better than
   a held mode off the GPU line, resumes the search); a drift of its cost or
   ``reprobe_s`` starts a local round around it.

Windows noisier than ``noisy_pct`` (2 %; issue 39: 3-5 % windows in short runs) take these rules,
none of which acts on quieter windows: disagreeing windows are judged against the noise, a probe
clearly worse than the best ends early, the neighbours of a mode within noise but worse than the
best are checked only where they pay back over the horizon of checks (:meth:`ModeSearch._check_horizon`),
on one axis any neighbour (the best's too, once it has its windows) only where the fit's expected
gain there pays its windows, the close check confirms the best alone, the guard weighs an anchor
measured once with the fit's prediction and stops measuring a gain the horizon cannot prove, or one whose proof costs more
anchor windows than the chance that the anchor is better risks (:meth:`ModeSearch._tie`: the
better estimate is held), and the drift alarm needs a move beyond ``drift_z`` standard errors of
the held mode's median that lasts ``max_samples`` windows.

Objectives (:class:`~pydvfs.policy.objective.Objective`): the cost is J/step x (s/step)^k; a slowdown
bound removes the modes whose (measured, else predicted) step time exceeds the fastest measured
one's by more than the bound.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from ..device.levels import nearest_index
from ..errors import InvalidValueError
from ..policy.objective import Objective
from .search import Probe, SearchBase, latest_estimate

KNOBS = ("gpu", "emc", "cpu")
MAXN = None  # the target that leaves the clock to the board's own governor (not a mode)
DEFAULT_VF_SOURCE = "default Orin table"  # what state() says when no V/f curve is passed in


class Mode(tuple):
    """A mode (gpu_mhz, emc_mhz, cpu_mhz): a tuple that formats as "612/3199/1113.6", so that
    the engine's reports and status lines show it where they show a GPU clock (JSON: a list)."""

    def __new__(cls, clocks):
        return tuple.__new__(cls, (float(x) for x in clocks))

    def __format__(self, spec: str) -> str:
        return "/".join(format(x, spec or "g") for x in self)

    def __str__(self) -> str:
        return format(self, "g")


def level_name(mode) -> str:
    """A search target in words: "714 MHz", "612/3199/1113.6", or "MAXN" (the board's own governor)."""
    if mode is MAXN:
        return "MAXN"
    return f"{mode:g}" if isinstance(mode, tuple) else f"{mode:g} MHz"


def mode_name(mode) -> str:
    return "/".join(f"{x:g}" for x in mode)


def expected_improvement(best: float, mu: float, sigma: float) -> float:
    """E[max(0, best - X)] for X ~ N(mu, sigma)."""
    if sigma <= 0:
        return max(0.0, best - mu)
    z = (best - mu) / sigma
    phi = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return (best - mu) * cdf + sigma * phi


@dataclass(frozen=True)
class ModeParams:
    """Tunables of the search. Counts are windows unless named otherwise."""

    samples: int = 3  # windows per probe after the design
    max_samples: int = 5  # ... at most, when they disagree
    spread_pct: float = 2.5  # "disagree": (max - min) / median above this
    design_samples: int = 2  # windows per design (and neighbour) probe (the fit pools them; re-measuring adds)
    confirm_samples: int = 2  # windows the best and the modes within noise of it need before settling
    max_modes: int = 12  # distinct modes probed in a round, the design included
    max_windows: int = 12  # windows per mode at most in a round
    horizon_windows: int = 60  # windows a round's choice serves when the run's length is unknown
    explore_share: float = 0.3  # share of a run of known length a round may spend off the best mode
    scout_min_windows: int = 30  # a round of a run shorter than this (known length) stays on the GPU line
    long_run_windows: int = 180  # a run of known length this long (30 min of 10-s windows) designs with 2 windows
    scout_frac: float = 0.0  # the first step along the EMC and CPU axes: at least this share of the clock
    z_guard: float = 2.5  # leave the start only for a gain this many std errors sure
    margin_pct: float = 0.0  # ...and larger than this
    resolution_pct: float = 0.5  # gains smaller than this are not worth a probe
    noise_floor_pct: float = 0.3  # a window's relative noise is never taken below this
    noise_prior_pct: float = 1.5  # a window's relative noise before many are measured
    noise_prior_windows: int = 4  # ... and how many windows that prior is worth
    noisy_pct: float = 2.0  # windows noisier than this take the rules for noisy windows (issue 39)
    misfit_floor_pct: float = 1.5  # a mode's deviation from the model, at least
    spiky_misfit_pct: float = 4.0  # ... where the model keeps the workload at MAXN (spiky)
    misfit_corr_pct: float = 1.0  # one axis: levels closer than this (% of the clock) deviate alike
    jump_frac: float = 0.4  # one axis: design step from an end of the table, a share of its levels
    bracket_frac: float = 0.08  # one axis: design step around a start inside the table
    reprobe_s: float = 1800.0
    drift_pct: float = 5.0
    drift_z: float = 3.0  # ... and a move beyond this many standard errors of the window noise

    def __post_init__(self):
        checks = [
            (isinstance(self.samples, int) and self.samples >= 1, "samples must be an integer >= 1"),
            (isinstance(self.max_samples, int) and self.max_samples >= self.samples,
             "max_samples must be an integer >= samples"),
            (isinstance(self.design_samples, int) and 1 <= self.design_samples <= self.samples,
             "design_samples must be an integer within 1..samples"),
            (isinstance(self.confirm_samples, int) and 1 <= self.confirm_samples <= self.max_windows,
             "confirm_samples must be an integer within 1..max_windows"),
            (isinstance(self.max_modes, int) and self.max_modes >= 8, "max_modes must be an integer >= 8"),
            (isinstance(self.max_windows, int) and self.max_windows >= self.max_samples,
             "max_windows must be an integer >= max_samples"),
            (self.spread_pct > 0, "spread must be > 0 %"),
            (isinstance(self.long_run_windows, int) and self.long_run_windows >= 1,
             "long_run_windows must be an integer >= 1"),
            (isinstance(self.horizon_windows, int) and self.horizon_windows >= 1,
             "the horizon must be an integer >= 1 window"),
            (0 < self.explore_share <= 1, "explore_share must be within (0, 1]"),
            (isinstance(self.scout_min_windows, int) and self.scout_min_windows >= 0,
             "scout_min_windows must be an integer >= 0"),
            (self.z_guard >= 0 and math.isfinite(self.z_guard), "z_guard must be a finite number >= 0"),
            (self.margin_pct >= 0 and math.isfinite(self.margin_pct), "margin must be a finite % >= 0"),
            (0 <= self.resolution_pct < 100, "resolution must be within 0..100 %"),
            (self.noise_floor_pct > 0 and self.misfit_floor_pct >= 0 and self.spiky_misfit_pct >= 0,
             "noise floors must be > 0 %"),
            (0 < self.jump_frac <= 1 and 0 < self.bracket_frac <= 1, "jump_frac and bracket_frac must be within (0, 1]"),
            (self.reprobe_s > 0, "reprobe interval must be > 0 s"),
            (self.drift_pct > 0, "drift must be > 0 %"),
            (self.drift_z >= 0 and math.isfinite(self.drift_z), "drift_z must be a finite number >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidValueError(message)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CurveParams(ModeParams):
    """The defaults over the GPU's levels alone (a fine table: more windows per level)."""

    max_modes: int = 64
    max_windows: int = 20
    reprobe_s: float = 600.0


@dataclass(frozen=True)
class JointParams(ModeParams):
    """The defaults over whole modes: one window per design and neighbour probe (the joint fit
    pools them; a mode within noise of the best is re-measured anyway), and a first step along
    the EMC and CPU axes of about a third of the clock."""

    design_samples: int = 1
    scout_frac: float = 0.3


@dataclass(frozen=True)
class SearchPrior:
    """What the search knows before its first window: ``observations``, (mode, J/step, s/step)
    measured on this board before (its record of past runs), and ``start``, a predicted best mode
    (the built-in policy's, or the record's) probed right after the start. The observations join
    the fit (rescaled to this run where both measured a mode) and spare the design the modes they
    cover; they never count as measured for the guard: the search settles only on what it
    measured in this run."""

    observations: tuple = ()
    start: object = None
    source: str = ""
    # (lowest, highest) best GPU clock (MHz) across the board's uncertainty family where its
    # profile is an estimate (pydvfs.sim.uncertainty.optimum_spread): where the centre lies
    # outside it, the round-0 design probes its ends (docs/online.md, "The family's spread")
    spread: tuple | None = None

    def __post_init__(self):
        if self.spread is not None:
            try:
                lo, hi = (float(x) for x in self.spread)
            except (TypeError, ValueError):
                raise InvalidValueError(f"a prior's spread is (lowest, highest) MHz, got {self.spread!r}") from None
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise InvalidValueError(f"a prior's spread is (lowest, highest) MHz, got {self.spread!r}")
            object.__setattr__(self, "spread", (lo, hi))

    @classmethod
    def of(cls, prior) -> SearchPrior | None:
        """A prior from a SearchPrior, a dict (observations, start, source) or a list of
        (mode, J/step, s/step) / {"mode", "j_per_step", "s_per_step"} observations."""
        if prior is None or isinstance(prior, SearchPrior):
            return prior
        if isinstance(prior, dict):
            return cls(tuple(cls._obs(o) for o in prior.get("observations", ())), prior.get("start"),
                       str(prior.get("source", "")), prior.get("spread"))
        return cls(tuple(cls._obs(o) for o in prior))

    @staticmethod
    def _obs(o) -> tuple:
        if isinstance(o, dict):
            o = (o.get("mode", o.get("freq_mhz")), o.get("j_per_step"), o.get("s_per_step"))
        try:
            mode, j, s = o
            j, s = float(j), float(s)
        except (TypeError, ValueError):
            raise InvalidValueError(f"a prior observation is (mode, J/step, s/step), got {o!r}") from None
        if not (math.isfinite(j) and j > 0 and math.isfinite(s) and s > 0):
            raise InvalidValueError(f"a prior observation needs positive J/step and s/step, got {o!r}")
        return mode, j, s

    def to_dict(self) -> dict:
        out = {"observations": len(self.observations), "start": self.start, "source": self.source}
        if self.spread is not None:
            out["spread_mhz"] = list(self.spread)
        return out


# -- the models: what predicts a mode's step time and power from windows ------------------------
@dataclass
class Prediction:
    """A fitted model's prediction over the space: per mode (in the search's order) the step
    time (s), the power (W) and the model's own relative standard deviation of the energy and
    of the time (0 where the model gives none); ``summary``: the fit's coefficients for state()."""

    time_s: list
    power_w: list
    energy_rel_sd: list
    time_rel_sd: list
    summary: dict = field(default_factory=dict)


def vf_for_levels(levels_mhz):
    """The V/f curve to fit with: the curve model's default (an Orin's) when the table ends
    near its top clock; else that shape stretched to the table's top clock (a board whose V/f
    was not characterised: the voltage floor and the rise keep their share of the range)."""
    from ..model.curve import DEFAULT_VF, VFCurve

    top = max(levels_mhz)
    vf_top = max(DEFAULT_VF.freqs_mhz)
    if abs(top / vf_top - 1.0) <= 0.05:
        return DEFAULT_VF
    k = top / vf_top
    return VFCurve(tuple(f * k for f in DEFAULT_VF.freqs_mhz), DEFAULT_VF.volts_v)


class CurveModel:
    """The GPU clock's curve (:func:`pydvfs.model.curve.fit_time_power`): t = a/f + b,
    P = p0 + c f V(f)^2, over a one-axis space. ``vf``: the board's V/f (None: the default Orin
    table, stretched to the table's top clock)."""

    kind = "model"
    axes = 1

    def __init__(self, vf=None, vf_source: str | None = None):
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run (seconds)

        self.vf = vf
        self.vf_source = vf_source or ("given" if vf is not None else DEFAULT_VF_SOURCE)

    def fit(self, coords, time_s, power_w, space) -> Prediction | None:
        import numpy as np

        from ..model.curve import fit_time_power

        vf = self.vf or vf_for_levels([c[0] for c in space])
        try:
            fit = fit_time_power([c[0] for c in coords], time_s, power_w, vf)
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        lv = np.asarray([c[0] for c in space], float)
        t, p = fit.time_s(lv), fit.power_w(lv)
        e_sd = fit.curve.energy_std_j(lv)
        f_ghz = lv / 1000.0
        xt = np.column_stack([1.0 / f_ghz, np.ones_like(f_ghz)])
        t_sd = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", xt, np.asarray(fit.time_cov, float), xt), 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            return Prediction(list(t), list(p), list(e_sd / (p * t)), list(t_sd / t),
                              {"a": fit.a, "b": fit.b, "p0": fit.p0, "c": fit.c})


class JointModel:
    """The joint model of :mod:`pydvfs.model.joint` over (gpu, emc, cpu) modes."""

    kind = "joint"
    axes = 3

    def __init__(self, vf=None):
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run

        self.vf = vf
        self.vf_source = "given" if vf is not None else "the joint model's defaults"

    def fit(self, coords, time_s, power_w, space) -> Prediction | None:
        import numpy as np

        from ..model.joint import VFSet, fit_joint

        if len({c[1:] for c in coords}) == 1:
            return self._line_fit(coords, time_s, power_w, space)
        try:
            g, e, c = (list(x) for x in zip(*coords))
            fit = fit_joint(g, e, c, time_s, power_w, self.vf or VFSet())
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        arr = np.asarray(space, float)
        t = fit.time_s(arr[:, 0], arr[:, 1], arr[:, 2])
        p = fit.power_w(arr[:, 0], arr[:, 1], arr[:, 2])
        zero = [0.0] * len(space)
        return Prediction(list(t), list(p), zero, zero, {"fit": fit.to_dict()})

    def _line_fit(self, coords, time_s, power_w, space) -> Prediction | None:
        """Every window at one EMC rate and CPU clock: the GPU curve along that line (the joint
        model's other coefficients rest on nothing yet); the modes off the line are not placed."""
        rest = coords[0][1:]
        line = [c for c in space if c[1:] == rest]
        pred = CurveModel(self.vf.gpu if self.vf is not None else None).fit(coords, time_s, power_w, line)
        if pred is None:
            return None
        at = {c: i for i, c in enumerate(line)}
        nan = math.nan

        def col(xs):
            return [xs[at[c]] if c in at else nan for c in space]

        return Prediction(col(pred.time_s), col(pred.power_w), col(pred.energy_rel_sd), col(pred.time_rel_sd),
                          dict(pred.summary, line=list(rest)))


def _within(x: float, lo: float, hi: float) -> bool:
    return lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)


def _coords(m) -> tuple:
    return tuple(m) if isinstance(m, tuple) else (m,)


class ModeSearch(SearchBase):
    """See the module docstring. ``modes``: the space (GPU levels in MHz, or (gpu, emc, cpu)
    tuples); ``start``: snapped to it; ``model``: a :class:`CurveModel` or :class:`JointModel`
    (default: the one the space's axes call for); ``prior``: a :class:`SearchPrior` (or what
    :meth:`SearchPrior.of` takes); ``caps``: (gpu, emc, cpu) maxima of the power mode (None: no
    cap), modes above them are never proposed; ``maxn_anchor`` (one axis): the board's own
    governor is measured first and is what the guard protects."""

    fits_time = True  # the engine feeds J/step and s/step, not a combined cost

    def __init__(self, modes, start, model=None, params: ModeParams | None = None,
                 objective: Objective | None = None, prior=None, caps=None, maxn_anchor: bool = False,
                 now_s: float = 0.0):
        modes = list(modes)
        self.axes = 3 if modes and isinstance(modes[0], tuple) else 1
        if self.axes == 1:
            self.caps = None
            space = sorted({float(f) for f in modes})
            if not space:
                raise InvalidValueError("the clock table is empty")
        else:
            self.caps = tuple(caps) if caps is not None else (None, None, None)
            space = sorted({Mode(m) for m in within_caps(modes, self.caps)})
            if not space:
                raise InvalidValueError("no mode of the grid is within the power mode's caps")
        self.modes = tuple(space)
        self.model = model or (CurveModel() if self.axes == 1 else JointModel())
        if getattr(self.model, "axes", self.axes) != self.axes:
            raise InvalidValueError(f"the model covers {self.model.axes} axes, the modes {self.axes}")
        self.params = params or (CurveParams() if self.axes == 1 else JointParams())
        self.objective = objective or Objective()
        self.prior = SearchPrior.of(prior)
        self._prior_obs = [(self._snap(m), j, s) for m, j, s in (self.prior.observations if self.prior else ())]
        # windows left in the run, set by the caller before each window when the run's length is
        # known; None: unknown, the horizon is what is left of params.horizon_windows
        self.remaining_windows: int | None = None
        self.start_mode = self._snap(start)
        self.maxn_anchor = bool(maxn_anchor) and self.axes == 1
        first = MAXN if self.maxn_anchor else self.start_mode
        self._anchor = first  # what the guard protects (the start, then the held one; MAXN: None)
        self._center = self.start_mode  # the mode the design starts from
        self._cur = self._probing = first
        self._maxn_win: list = []  # this round's windows under MAXN
        self.maxn_probes: list[dict] = []
        self._round = 0
        self._win: dict = {}  # this round: mode -> [(J/step, s/step)]
        self._pending: list = []
        self._spent = 0  # windows this round has measured
        self._age = 0  # windows fed over the whole run (every round, held ones included)
        # what the last decision planned for (state()["horizon"]): the run's length told or not, the
        # windows a probe's gain was counted over, those a check was weighed over, the run's age
        self.planned: dict = {}
        self._hold_costs: list = []
        self._moved_for = 0  # windows in a row the held mode's cost has been off its estimate
        self._hold_ref = math.nan
        self._noise_n = 0  # the windows' deviations behind the last noise estimate
        self._next_reprobe_s = math.inf
        self.phase = self.SEARCH
        self.probes: list[Probe] = []
        self.moves: list = []
        self.reprobe_reasons: list = []
        self.dropped: list = []
        self.fit_summary: dict | None = None
        self._pred: dict | None = None  # the last decision's prediction (mode -> cost, its spread, s/step)
        self._at_fit: dict = {}  # ... at the measured modes: mode -> (cost, its spread with the misfit)
        self.decisions: list[dict] = []
        self._in_design = True
        self._scouting = False  # the probe in progress checks a neighbour (design_samples windows)

    # -- the two spaces' constructors ----------------------------------------------------------
    @classmethod
    def gpu(cls, levels_mhz, start_mhz, params: ModeParams | None = None, now_s: float = 0.0,
            objective: Objective | None = None, vf=None, vf_source: str | None = None,
            maxn_anchor: bool = False, prior=None):
        """The search over the GPU's levels alone, with the curve model."""
        return cls(levels_mhz, start_mhz, CurveModel(vf, vf_source), params or CurveParams(), objective, prior,
                   maxn_anchor=maxn_anchor, now_s=now_s)

    @classmethod
    def joint(cls, modes, start_mode, params: ModeParams | None = None, objective: Objective | None = None,
              caps=None, vf=None, now_s: float = 0.0, prior=None):
        """The search over (gpu, emc, cpu) modes, with the joint model."""
        return cls(modes, start_mode, JointModel(vf), params or JointParams(), objective, prior, caps, now_s=now_s)

    # -- what it proposes ------------------------------------------------------------------
    @property
    def target_mhz(self):
        """What to pin: a GPU level (MHz), a :class:`Mode`, or MAXN (None)."""
        return self._probing

    target_mode = target_mhz

    @property
    def start_mhz(self):
        return self.start_mode

    @property
    def levels_mhz(self) -> tuple:
        """The GPU levels of the space."""
        return self.modes if self.axes == 1 else tuple(sorted({m[0] for m in self.modes}))

    @property
    def dropped_mhz(self) -> list:
        return self.dropped

    @property
    def vf(self):
        return self.model.vf

    @property
    def vf_source(self) -> str:
        return self.model.vf_source

    @property
    def best_mhz(self):
        """The settled mode; while searching, the best measured so far this round."""
        if self.phase == self.HOLD or not self._win:
            return self._cur
        admissible = self._admissible({m: self._mode_time(m) for m in self._win})
        return self._best_measured(admissible) or min(self._win, key=self._mode_time)

    best_mode = best_mhz

    @property
    def prior_start(self):
        """The prior's predicted start, snapped to the space (probed right after the start), or None."""
        return self._snap(self.prior.start) if self.prior is not None and self.prior.start is not None else None

    @property
    def probed_modes(self) -> int:
        """Distinct modes probed over every round."""
        return len({p.freq_mhz for p in self.probes})

    def estimate(self, mode) -> float | None:
        """The latest J/step measured at the mode nearest ``mode`` (any round), or None."""
        if mode is MAXN:
            return self.maxn_probes[-1]["j_per_step"] if self.maxn_probes else None
        m = mode if mode in self.dropped else self._snap(mode)
        return latest_estimate(self.probes, m)

    # -- what it is told -------------------------------------------------------------------
    def observe(self, mode, j_per_step: float, now_s: float, s_per_step: float | None = None):
        for v, what in ((j_per_step, "J/step"), (s_per_step, "s/step")):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidValueError(f"{what} must be a positive number, got {v!r}")
        self._age += 1
        m = MAXN if mode is MAXN else self._snap(mode)
        if m != self._probing:
            return self.target_mhz
        w = (float(j_per_step), float(s_per_step))
        if self.phase == self.HOLD:
            self._hold(w, now_s)
            return self.target_mhz
        self._pending.append(w)
        if not self._probe_done(m):
            return self.target_mhz
        self._spent += len(self._pending)
        costs = [self._cost(*x) for x in self._pending]
        jps = [x[0] for x in self._pending]
        med_s = statistics.median(x[1] for x in self._pending)
        if m is MAXN:
            self._maxn_win.extend(self._pending)
            self.maxn_probes.append({"t_s": now_s, "j_per_step": statistics.median(jps), "windows": len(jps),
                                     "s_per_step": med_s})
        else:
            self._win.setdefault(m, []).extend(self._pending)
            self.probes.append(Probe(m, statistics.median(jps), len(self._pending), self._round, now_s,
                                     100.0 * (max(costs) - min(costs)) / statistics.median(costs), med_s))
        self._pending = []
        self._decide(now_s)
        return self.target_mhz

    def drop(self, mode, now_s: float):
        """The board refused a mode: remove it for good; returns what to run next."""
        m = self._snap(mode)
        if len(self.modes) == 1:
            raise InvalidValueError(f"{level_name(m)} is the only {'level' if self.axes == 1 else 'mode'} "
                                    f"left: cannot drop it")
        self.dropped.append(m)
        self.modes = tuple(x for x in self.modes if x != m)
        self._win.pop(m, None)
        if self._cur == m:
            self._cur = self._best_measured() or self._snap(m)
        if self._anchor == m:
            self._anchor = self._cur
        if self._center == m:
            self._center = self._snap(m)
        if self._probing != m:
            return self.target_mhz
        self._pending, self._hold_costs = [], []
        self.phase = self.SEARCH
        self._decide(now_s)
        return self.target_mhz

    # -- the space -------------------------------------------------------------------------
    def _snap(self, mode):
        if self.axes == 1:
            f = float(mode[0] if isinstance(mode, tuple) else mode)
            return min(self.modes, key=lambda x: (abs(x - f), x))
        g, e, c = (float(x) for x in mode)
        return min(self.modes, key=lambda m: (abs(m[0] - g) / max(g, 1.0) + abs(m[1] - e) / max(e, 1.0)
                                              + abs(m[2] - c) / max(c, 1.0), m))

    def _index(self, f) -> int:
        return self.modes.index(self._snap(f))

    def _axis(self, d: int) -> list:
        return sorted({_coords(m)[d] for m in self.modes})

    def _neighbours(self, m) -> list:
        """The modes one step away along one axis."""
        if self.axes == 1:
            i = self.modes.index(m)
            return [self.modes[k] for k in (i - 1, i + 1) if 0 <= k < len(self.modes)]
        out = []
        for d in range(3):
            axis = sorted({x[d] for x in self.modes if all(x[o] == m[o] for o in range(3) if o != d)})
            i = axis.index(m[d])
            out += [Mode(axis[k] if o == d else m[o] for o in range(3)) for k in (i - 1, i + 1) if 0 <= k < len(axis)]
        return out

    def _gpu_only(self, m) -> bool:
        """A mode the GPU-only search could choose: every other clock at the start's."""
        return m is MAXN or self.axes == 1 or tuple(m[1:]) == tuple(self.start_mode[1:])

    # -- what is measured ------------------------------------------------------------------
    def _cost(self, j: float, s: float) -> float:
        return self.objective.cost(j, s)

    def _windows(self, m) -> list:
        return self._maxn_win if m is MAXN else self._win[m]

    def _measured(self, m) -> bool:
        return bool(self._maxn_win) if m is MAXN else m in self._win

    def _kept(self, m) -> list:
        """The mode's window costs without its spikes (beyond 3 window-noise sigmas of its
        median: interference stretches a window, it never shortens one by as much)."""
        costs = [self._cost(*w) for w in self._windows(m)]
        if len(costs) < 3:
            return costs
        med = statistics.median(costs)
        band = 3 * self._window_noise() * med
        return [c for c in costs if abs(c - med) <= band] or costs

    def _mode_cost(self, m) -> float:
        """The mean of the mode's clean windows; of one or two, the least (a spike only adds)."""
        kept = self._kept(m)
        return statistics.fmean(kept) if len(self._windows(m)) >= 3 else min(kept)

    def _mode_time(self, m) -> float:
        return statistics.median(w[1] for w in self._windows(m))

    def _window_noise(self) -> float:
        """Relative std of one window's cost, pooled over the modes measured this round (1.48 x
        the median absolute deviation from each mode's median, robust to spikes), pooled with a
        prior (noise_prior_pct, worth noise_prior_windows windows), never below the floor."""
        devs = []
        for ws in list(self._win.values()) + [self._maxn_win]:
            if len(ws) < 2:
                continue
            cs = [self._cost(*w) for w in ws]
            med = statistics.median(cs)
            d = sorted(abs(c - med) / med for c in cs)
            devs += d[1:] if len(ws) % 2 else d  # an odd count's median deviates by 0 from itself
        rel = 1.4826 * statistics.median(devs) if devs else 0.0
        self._noise_n = len(devs)
        p = self.params
        k0, s0 = p.noise_prior_windows, p.noise_prior_pct / 100.0
        rel = math.sqrt((k0 * s0 * s0 + len(devs) * rel * rel) / (k0 + len(devs))) if k0 + len(devs) else rel
        return max(rel, p.noise_floor_pct / 100.0)

    def _noisy(self, noise: float) -> bool:
        """Are the windows noisier (``noisy_pct``) than those the search's rules were tuned for
        (the prior's 1.5 %; 1-2 % on a real board's 10-s windows)? Only then do the rules for
        noisy windows apply (disagreeing windows, a probe that is clearly worse, a neighbour check
        that must pay back in the horizon, a guard that cannot be resolved in it, the drift
        alarm's reference): with quiet windows the search is what it was."""
        # (on at least twice the prior's windows: a handful with one spike among them is no evidence)
        return noise > self.params.noisy_pct / 100.0 and self._noise_n >= 2 * self.params.noise_prior_windows

    def _stderr(self, m, noise: float) -> float:
        n = len(self._kept(m))
        # fewer than 3 windows (no spike test): ~1.25 x a mean's standard error
        return (1.25 if len(self._windows(m)) < 3 else 1.0) * noise * self._mode_cost(m) / math.sqrt(n)

    def _admissible(self, times: dict) -> list:
        """The modes within the slowdown bound of the fastest *measured* step time (a prediction
        never sets the bar; it only places the modes not measured yet)."""
        measured = [times[m] for m in self._win if m in times]
        if self._maxn_win:
            measured.append(self._mode_time(MAXN))
        known = [t for t in times.values() if t is not None]
        fastest = min(measured) if measured else min(known, default=math.inf)
        return [m for m in self.modes if m in times and (times[m] is None or self.objective.admissible(times[m], fastest))]

    def _best_measured(self, admissible=None):
        ms = [m for m in self._win if admissible is None or m in admissible]
        return min(ms, key=self._weighed_cost) if ms else None

    def _posterior(self, m) -> tuple:
        """(cost, standard error) of a measured mode as the decisions weigh it: its windows'
        (:meth:`_mode_cost`, :meth:`_stderr`). With noisy windows, those weighed with what the last
        fit over every measured mode puts there, by their spreads (the fit's: its own and its
        misfit): with 5-7 % windows, a level of 9 windows read 4 % low and one of 10 read 3 % high
        (2.5 standard errors apart), and the search held the worse one, where the fit over all 53
        windows ordered them right (816 MHz lowest, 714 MHz 0.2 % above it, 1020 MHz 6.7 %; truly
        0.3 and 4.6 %). With quiet windows a mode is what its windows say."""
        noise = self._window_noise()
        c, se = self._mode_cost(m), self._stderr(m, noise)
        fit = self._at_fit.get(m)
        if fit is None or not self._noisy(noise):
            return c, se
        wm, wf = se ** -2, fit[1] ** -2
        return (c * wm + fit[0] * wf) / (wm + wf), (wm + wf) ** -0.5

    def _weighed_cost(self, m) -> float:
        return self._posterior(m)[0]

    # -- the design --------------------------------------------------------------------------
    def _line(self) -> list:
        """The modes along the GPU axis through the design's centre (one axis: the table)."""
        if self.axes == 1:
            return list(self.modes)
        rest = tuple(self._center[1:])
        return [m for m in self.modes if tuple(m[1:]) == rest]

    def _design_next(self):
        """The next mode of the design, or None once it is measured: along the GPU axis
        through the centre (the start, or the held mode in a re-search), the centre and two more
        (``jump_frac`` of the line at a time from its end, else ``bracket_frac`` either side);
        first, right after the centre, the prior's start. The other axes are then walked a step
        at a time from the best (the neighbour check) and by the model where it interpolates."""
        line = self._line()
        measured = sorted(m for m in self._win if m in line)
        n = len(line)
        ps = self.prior_start
        if ps is not None and self._round == 0 and ps not in self._win and self._center in self._win:
            return ps
        covered = len(set(measured) | {m for m, _, _ in self._prior_obs if m in line}) if self._round == 0 \
            else len(measured)
        if covered >= min(3, n) and self._center in self._win:
            if self.axes > 1 and measured and len(self._win) < self.params.max_modes:
                # the GPU-only search's choice: the line's best and its neighbours
                j = line.index(min(measured, key=self._mode_cost))
                known = set(self._win) | ({m for m, _, _ in self._prior_obs} if self._round == 0 else set())
                for k in (j - 1, j + 1):
                    if 0 <= k < n and line[k] not in known:
                        return line[k]
            return self._axis_scout()
        if self._center not in self._win:  # (after MAXN) the centre first
            return self._center
        i = line.index(self._center)
        at_end = self._round == 0 and i in (0, n - 1) and n > 3
        step = max(1, round((n - 1) * self.params.jump_frac)) if at_end else 1
        inward = 1 if i == 0 else -1
        if self._round == 0 and ps in line and ps in self._win and ps != self._center:
            # a predicted start measured: bracket it if it beats the centre, else between the two
            j, d = line.index(ps), max(1, round(n * self.params.bracket_frac))
            better = self._mode_cost(ps) < self._mode_cost(self._center)
            candidates = [j + inward * d, j - inward * d] if better else [(i + j) // 2]
        elif not at_end:  # bracket the start (about 10 % of the table either side on a fine one)
            d = max(1, round(n * self.params.bracket_frac))
            lo, hi = self._spread_ends(line, i - d, i + d)  # (the family's spread, where given)
            candidates = [lo, hi, i - 1, i + 1]
        elif len(measured) == 1:
            candidates = [i + inward * step]
        else:
            second = line.index(measured[0] if measured[0] != self._center else measured[-1])
            # (worse only beyond a window's noise: from an end of the table a U-shaped curve goes on
            # falling inward, and one noisy window each sent the joint search back up to the top)
            better = self._mode_cost(line[second]) < self._mode_cost(self._center) * (1 + self._window_noise())
            candidates = [second + inward * step] if better else [(i + second) // 2]
        candidates += list(range(n))  # any unmeasured mode of the line, as a last resort
        for k in candidates:
            if 0 <= k < n and line[k] not in self._win:
                return line[k]
        return None

    def _spread_ends(self, line: list, lo: int, hi: int) -> tuple:
        """The round-0 bracket (line indices ``lo``, ``hi``), moved onto the prior's spread where
        the centre lies outside it (the family places the optimum on one side: a bracket point
        on the other is spent for nothing): the spread's ends, snapped to the line's GPU clocks."""
        spread = self.prior.spread if self.prior is not None and self._round == 0 else None
        if spread is None:
            return lo, hi
        gpu = [m[0] if self.axes > 1 else m for m in line]
        c = gpu[line.index(self._center)]
        if spread[0] <= c <= spread[1]:
            return lo, hi
        return nearest_index(gpu, spread[0]), nearest_index(gpu, spread[1])

    def _axis_scout(self):
        """After the line: one step along each axis not varied yet (measured here or in the prior),
        from the best measured mode, so that the model rests on every axis; None when done."""
        left = self.remaining_windows
        if self.axes == 1 or (left is not None and self._spent + left < self.params.scout_min_windows):
            return None  # (a short run: a step off the line would not pay back its windows)
        seen = list(self._win) + [m for m, _, _ in self._prior_obs]
        line = self._line()  # from the line's best: each axis's step alone, not one on top of another
        best = min((m for m in self._win if m in line), key=self._mode_cost, default=None) or self._best_measured()
        for d in range(1, self.axes):
            if len({m[d] for m in seen}) > 1:
                continue
            axis = sorted({x[d] for x in self.modes if all(x[o] == best[o] for o in range(3) if o != d)})
            i = axis.index(best[d])
            # a step down first (the stock mode is at the top) of about scout_frac of the clock:
            # a neighbour one small step away differs by less than the per-mode spread
            down = [k for k in range(i) if axis[k] <= axis[i] * (1 - self.params.scout_frac)]
            for k in (down[-1] if down else i - 1, i + 1):
                if 0 <= k < len(axis):
                    return Mode(axis[k] if o == d else best[o] for o in range(3))
        return None

    def _required(self, m) -> int:
        """Windows the probe in progress takes at least: ``design_samples`` in the design (one
        for a one-axis start at an end of the table: a scout; ``samples`` for a start inside it,
        which the guard protects); else up to ``samples`` in all, or ``samples`` more."""
        have = len(self._windows(m)) if self._measured(m) else 0
        if (self._in_design or self._scouting) and not have:
            if self._round == 0 and not self._win and (m == self._center or m is MAXN):
                line = self._line()
                n = len(line)
                return 1 if n > 3 and line.index(self._center) in (0, n - 1) else self.params.samples
            return self._design_windows()
        return self.params.samples - have if have < self.params.samples else self.params.samples

    def _design_windows(self) -> int:
        """``design_samples``; at least two in a run known to be long (``long_run_windows`` or more
        in all): there the second window costs little of the run and a sharper design pays."""
        left, p = self.remaining_windows, self.params
        if left is not None and self._spent + left >= p.long_run_windows:
            return max(p.design_samples, min(2, p.samples))
        return p.design_samples

    def _probe_done(self, m) -> bool:
        n = len(self._pending)
        if n < self._required(m):
            return False
        if n >= self.params.max_samples:
            return True
        costs = [self._cost(*w) for w in self._pending]
        noise = self._window_noise()
        if self._noisy(noise) and self._win and min(costs) > min(self._mode_cost(b) for b in self._win) * (1 + 2 * noise):
            return True  # noisy windows disagree, but even the cleanest is clearly worse than the best: more cannot make it the best
        # "disagree": beyond spread_pct, tuned for windows as noisy as the prior; windows measured
        # noisy disagree by as much more by chance alone (a spike still stands out). On the noise
        # alone, not _noisy's 8 windows: they come after the design, whose probes would each run
        # to max_samples
        noisy = noise > self.params.noisy_pct / 100.0
        spread = self.params.spread_pct * (noise / (self.params.noise_prior_pct / 100.0) if noisy else 1.0)
        return 100.0 * (max(costs) - min(costs)) / statistics.median(costs) <= spread

    # -- the budget ----------------------------------------------------------------------------
    def _explored(self) -> int:
        """Windows this round spent on modes other than the best measured."""
        best = self._best_measured()
        return self._spent - (len(self._win[best]) if best is not None else 0)

    def _budget_left(self) -> bool:
        """May the round open a new mode? With the run's length known: while it has spent less
        than ``explore_share`` of the run (this round's windows and those left) off the best."""
        left = self.remaining_windows
        if left is None:
            return True
        return self._explored() < self.params.explore_share * (self._spent + left)

    # -- the model's prediction -------------------------------------------------------------
    def _prior_rows(self) -> list:
        """The prior's observations, rescaled to this run: time and power each by the median
        ratio of this round's to the prior's over the modes both measured (1 where none)."""
        if not self._prior_obs:
            return []
        rt, rp = [], []
        for m, j, s in self._prior_obs:
            if m in self._win:
                t = self._mode_time(m)
                pw = statistics.median(jj / ss for jj, ss in self._win[m])
                rt.append(t / s)
                rp.append(pw / (j / s))
        kt = statistics.median(rt) if rt else 1.0
        kp = statistics.median(rp) if rp else 1.0
        return [(m, s * kt, j / s * kp) for m, j, s in self._prior_obs]

    def _predict(self) -> dict | None:
        """mode -> (predicted cost, its spread, predicted s/step); None when it cannot be fitted.
        Modes beyond the measured range of an axis whose misfit has a structure are left out."""
        noise = self._window_noise()
        coords, ts, ps = [], [], []
        for m, ws in self._win.items():
            med = statistics.median(self._cost(*w) for w in ws)
            for j, s in ws:  # spikes (beyond 3 sigma above the mode's median) stay out of the fit
                if self._cost(j, s) <= med * (1 + 3 * noise):
                    coords.append(_coords(m))
                    ts.append(s)
                    ps.append(j / s)
        for m, s, pw in self._prior_rows():
            coords.append(_coords(m))
            ts.append(s)
            ps.append(pw)
        pred = self.model.fit(coords, ts, ps, [_coords(m) for m in self.modes])
        if pred is None:
            return None
        k = {"energy": 0, "edp": 1, "ed2p": 2}[self.objective.kind]
        t, pw = pred.time_s, pred.power_w
        placed = [math.isfinite(t[i]) and t[i] > 0 and math.isfinite(pw[i]) and pw[i] > 0 for i in range(len(t))]
        index = {m: i for i, m in enumerate(self.modes) if placed[i]}  # the modes the model places
        if any(m not in index for m in self._win):
            return None
        cost = [float(pw[i] * t[i] * t[i] ** k) if placed[i] else math.nan for i in range(len(self.modes))]
        measured = list(self._win)
        # what the model leaves unexplained on the measured modes, beyond their window noise
        resid = {m: self._mode_cost(m) / cost[index[m]] - 1.0 for m in measured}
        se = {m: self._stderr(m, noise) / self._mode_cost(m) for m in measured}
        excess = statistics.fmean(resid[m] ** 2 - se[m] ** 2 for m in measured) if measured else 0.0
        p = self.params
        floor = (p.spiky_misfit_pct if self.maxn_anchor else p.misfit_floor_pct) / 100.0
        misfit = max(floor, math.sqrt(max(0.0, excess)))
        structured = self._structured_axes(resid, se, floor)
        seen = measured + [m for m, _, _ in self._prior_obs]
        ranges = [(min(_coords(m)[d] for m in seen), max(_coords(m)[d] for m in seen)) for d in range(self.axes)]
        # no extrapolation along an axis the model misfits with a structure, nor along one not
        # varied yet (its coefficients rest on nothing measured): those modes are reached by steps
        fenced = [d for d in range(self.axes) if d in structured or ranges[d][0] == ranges[d][1]]
        # over whole modes the fit has no spread of its own and 13 coefficients on 7-10 modes: it
        # interpolates them, and its misfit reads as the floor however far it extrapolates (it
        # sent short runs to the corner of the grid, EMC 204-665 MHz, on the word of a fit
        # measured down to 2133). It is trusted one measured span beyond what was measured
        # along each axis (a ratio of clocks): the search reaches further a step at a time
        reach = [(lo, hi) if d in fenced else (lo * lo / hi, hi * hi / lo) if self.axes > 1 else (0.0, math.inf)
                 for d, (lo, hi) in enumerate(ranges)]
        out, at_fit = {}, {}
        for m, i in index.items():
            c = _coords(m)
            if m not in self._win and not all(_within(c[d], *reach[d]) for d in range(self.axes)):
                continue
            corr = 1.0
            if self.axes == 1 and measured:  # a level next to a measured one deviates alike
                near = min(abs(m - x) for x in measured)
                corr = min(1.0, near / (p.misfit_corr_pct / 100.0 * m))
            bias = max((abs(self._axis_residual(resid, d, c[d])) for d in structured), default=0.0)
            own = pred.energy_rel_sd[i] ** 2 + (k * pred.time_rel_sd[i]) ** 2 + bias ** 2
            rel = math.sqrt(own + (misfit * corr) ** 2)
            out[m] = (cost[i], cost[i] * rel if math.isfinite(rel) else math.inf, float(t[i]))
            # a measured mode's windows are weighed with the fit's word there and its whole misfit
            whole = math.sqrt(own + misfit ** 2)
            if m in self._win and math.isfinite(whole) and whole > 0:
                at_fit[m] = (cost[i], cost[i] * whole)
        self._at_fit = at_fit
        best = min(out, key=lambda m: out[m][0]) if out else None
        self.fit_summary = dict(pred.summary, misfit_pct=100 * misfit, window_noise_pct=100 * noise,
                                structured_axes=[KNOBS[d] for d in structured],
                                fenced_axes=[KNOBS[d] for d in fenced],
                                predicted_best=best if best is None or self.axes == 1 else list(best),
                                prior_observations=len(self._prior_obs))
        if self.axes == 1:
            self.fit_summary["predicted"] = {f"{m:g}": cost[i] for m, i in index.items()}
        return out

    def _structured_axes(self, resid: dict, se: dict, floor: float) -> list:
        """The axes along which the residuals have a structure: their means at two of the
        axis's measured values differ by more than ``z_guard`` times what the window noise and
        the misfit floor allow."""
        out = []
        for d in range(self.axes):
            groups: dict = {}
            for m in resid:
                groups.setdefault(_coords(m)[d], []).append(m)
            if len(groups) < 2:
                continue
            stats = [(statistics.fmean(resid[m] for m in ms),
                      math.sqrt(statistics.fmean(se[m] ** 2 + floor ** 2 for m in ms) / len(ms)))
                     for ms in groups.values()]
            hi = max(stats, key=lambda x: x[0])
            lo = min(stats, key=lambda x: x[0])
            if hi[0] - lo[0] > self.params.z_guard * math.hypot(hi[1], lo[1]):
                out.append(d)
        return out

    def _axis_residual(self, resid: dict, d: int, x: float) -> float:
        """The mean residual along axis ``d`` at ``x``, interpolated between its measured values."""
        groups: dict = {}
        for m, r in resid.items():
            groups.setdefault(_coords(m)[d], []).append(r)
        xs = sorted(groups)
        ys = [statistics.fmean(groups[v]) for v in xs]
        if x <= xs[0]:
            return ys[0]
        for a, b, ya, yb in zip(xs, xs[1:], ys, ys[1:]):
            if x <= b:
                return ya + (yb - ya) * (x - a) / (b - a)
        return ys[-1]

    # -- one step: expected gain / guard / settle ---------------------------------------------
    def _decide(self, now_s: float) -> None:
        p = self.params
        budget = self._budget_left()
        nxt = self._design_next() if budget or not self._win else None
        self._in_design = nxt is not None
        if nxt is not None:
            self._probe(nxt, now_s, "design")
            return
        pred = self._pred = self._predict()
        noise = self._window_noise()
        # (a mode the model does not place has no time yet: it is not ruled out by the bound)
        times = {m: self._mode_time(m) if m in self._win else (pred[m][2] if pred and m in pred else None)
                 for m in self.modes}
        if pred is None:  # cannot fit: only measured modes are placed
            times = {m: self._mode_time(m) if m in self._win else None for m in self.modes}
        admissible = self._admissible(times) if times else list(self._win)
        best_m = self._best_measured(admissible) or min(self._win, key=self._mode_time)
        best = self._weighed_cost(best_m)
        if self._maxn_win:  # a mode must beat MAXN too to be worth a probe
            best = min(best, self._weighed_cost(MAXN))
        new_ok = budget and len(self._win) < p.max_modes
        left = self.remaining_windows
        horizon = max(1, left if left is not None else p.horizon_windows - self._spent)
        self.planned = {"length": "unknown" if left is None else "told", "windows": horizon,
                        "check_windows": self._check_horizon(), "run_windows": self._age,
                        "noisy": self._noisy(noise)}
        choice, net, why = None, 0.0, ""
        for m in admissible:  # a mode where a probe is expected to gain more than its windows cost
            if m in self._win:  # re-measure a measured rival (within noise of the best)
                if m == best_m or len(self._win[m]) + p.samples > p.max_windows:
                    continue
                mu, sigma = self._posterior(m)
                label = "re-measure"
            elif pred is not None and new_ok and m in pred:  # a new mode, placed by the model
                mu, sigma, _ = pred[m]
                label = "model"
                wall = self._wall(m, best_m)
                if wall is not None:
                    w = self._posterior(wall)
                    if expected_improvement(best, mu, sigma) > expected_improvement(best, *w):
                        (mu, sigma), label = w, f"model (no better than {level_name(wall)})"
            else:
                continue
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sigma) * horizon
            cost = p.samples * max(0.0, mu - best)
            if gain - cost > net:
                choice, net = m, gain - cost
                why = f"{label}: {mu:.5g} +- {sigma:.2g} vs best {best:.5g}; gain {gain:.3g} > cost {cost:.3g}"
        # the checks beyond the expected gain are tuned for the default horizon: with fewer than a
        # sixth of it (10 windows) left in a run of known length they cannot pay back (settle)
        checks = left is None or left >= p.horizon_windows / 6
        if not why and checks:
            choice, why = self._close_check(best_m, noise, admissible)
        if not why and checks and new_ok:
            choice, why = self._neighbour_check(best_m, noise, admissible, pred, self._check_horizon())
        if not why and checks:
            choice, why = self._resolve_guard(self._settle_choice(best_m, admissible), noise)
        if why:
            self._probe(choice, now_s, why)
            return
        self._settle(best_m, noise, now_s, admissible)

    def _wall(self, m, best_m):
        """One axis: the measured level between ``m`` and the best, where ``m`` lies between two
        measured levels and the best beyond them (None otherwise, or while the best has fewer
        than ``samples`` windows: their least may be a few % low by chance). On a U-shaped curve
        ``m`` is then no better than that wall, whatever the fit's spread there: a probe of ``m``
        can gain no more than a re-measure of the wall would. On a flat-bottomed curve from the
        top, the fit's misfit made a level between the design's first point and the top look
        worth a probe, 50-90 % worse than the best."""
        if self.axes > 1 or len(self._kept(best_m)) < self.params.samples:
            return None
        below = [x for x in self._win if x < m]
        above = [x for x in self._win if x > m]
        if not below or not above:
            return None
        return max(below) if best_m < m else min(above)

    def _check_horizon(self) -> int:
        """Windows a check beyond the expected gain (a neighbour) is weighed over: those left in a
        run of known length; else what is left of ``horizon_windows`` or, once the run is older
        than that, as many windows again as it has run (a run that has gone on this long is as
        likely to go on as long again): a long run checks as it always did."""
        left = self.remaining_windows
        if left is not None:
            return max(1, left)
        return max(1, self.params.horizon_windows, self._age)

    def _probe(self, m, now_s: float, why: str) -> None:
        self._probing = m
        self._scouting = why.startswith("neighbour")
        self.decisions.append({"t_s": now_s, "probe": m if m is MAXN or self.axes == 1 else list(m),
                               "probe_mhz": m if self.axes == 1 else list(m), "why": why})

    def _close_check(self, best_m, noise: float, admissible) -> tuple:
        """Re-measure the best and the modes within noise of it to ``confirm_samples`` windows each;
        with noisy windows, the best alone: "within noise" then reaches modes several % worse, and
        a second window of each cannot tell them apart (the expected gain still re-measures a rival
        worth it). On the family's joint grid at 5 %, the rivals' windows were a fifth of what the
        search spent in a 60-window run."""
        best = self._weighed_cost(best_m)
        rivals = not self._noisy(noise)
        for m in sorted(self._win, key=self._weighed_cost):
            close = m == best_m or rivals and self._weighed_cost(m) - best <= self.params.z_guard * math.hypot(
                self._posterior(m)[1], self._posterior(best_m)[1])
            if m in admissible and close and len(self._win[m]) < self.params.confirm_samples:
                return m, f"re-measure {level_name(m)}: within noise of the best"
        return None, ""

    def _neighbour_check(self, best_m, noise: float, admissible, pred, horizon: int) -> tuple:
        """The unmeasured neighbours of the best, of the modes within noise of it and of the
        best GPU-only mode, that the model does not place clearly worse (a smooth model is only
        roughly right: one step along an axis is checked, not predicted). With noisy windows, once
        the best has ``samples`` windows, a mode within noise but measured worse than it has its
        neighbours checked only where one as good as it, give or take the model's misfit, could
        pay back their windows in the ``horizon``: "within noise" then reaches modes several %
        worse, whose neighbours cost more than the rest of the run can win back. On one axis a
        level is then checked only where the model's expected gain there pays its windows, the
        best's neighbours too (before the best has its windows, only a level beyond such a mode,
        away from the best): 60-window runs at 5 % checked the table's ends, 15-30 % above the
        best, next to levels measured a few % low by chance; and from the best, 612 MHz, pythia-70m
        checked 510 MHz, read it low, went on to 408 MHz and settled on 510, 2.4 % above the best."""
        best = self._weighed_cost(best_m)
        p = self.params
        misfit = max(p.misfit_floor_pct, (self.fit_summary or {}).get("misfit_pct", 0.0)) / 100.0

        # (until the best has its ``samples`` windows, its estimate may be a few % low by chance:
        # every mode within noise of it is checked as before)
        unsure = len(self._kept(best_m)) < p.samples
        noisy = self._noisy(noise)

        def worth(mu: float, sd: float) -> bool:  # a check of a mode ~ N(mu, sd) pays its windows
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sd) * horizon
            return gain > self._design_windows() * max(0.0, mu - best)

        def pays(m) -> bool:
            c = self._weighed_cost(m)
            return worth(c, misfit * c)

        def fit_pays(nb) -> bool:
            # one axis: a level next to a measured one is weighed as a model probe is, on the
            # fit's word there (its slope), not on the measured one's
            return pred is not None and nb in pred and worth(*pred[nb][:2])

        close = sorted((m for m in self._win if m in admissible and (
            m == best_m or (self._weighed_cost(m) - best <= self.params.z_guard * math.hypot(
                self._posterior(m)[1], self._posterior(best_m)[1]) and (not noisy or unsure or pays(m))))),
            key=self._weighed_cost)
        gpu_best = min((m for m in self._win if self._gpu_only(m) and m in admissible), key=self._weighed_cost,
                       default=None)
        if gpu_best is not None and gpu_best not in close:
            close.append(gpu_best)
        for m in close:
            for nb in self._by_trend(m, pred):
                if nb in self._win or nb not in admissible:
                    continue
                if self.axes == 1 and abs(nb - m) < self.params.misfit_corr_pct / 100.0 * m:
                    continue  # closer than the misfit's correlation: the model predicts it well
                if self.axes == 1 and noisy and (not unsure or (nb - m) * (m - best_m) > 0) and not fit_pays(nb):
                    continue
                if self.axes > 1 and pred is not None and nb in pred and \
                        pred[nb][0] - best > self.params.z_guard * pred[nb][1]:
                    continue  # the model places it clearly worse
                what = "the best measured" if m == best_m else \
                    "the best GPU-only mode" if m == gpu_best and m not in close[:-1] else "a mode within noise of the best"
                return nb, f"neighbour of {what}, {level_name(m)}"
        return None, ""

    def _by_trend(self, m, pred) -> list:
        """The neighbours of ``m``, those that continue a measured descent first (the nearest
        mode measured the other way along the same axis is worse than ``m``: go on that way),
        then by the model's prediction (unplaced ones after the placed)."""
        here = _coords(m)

        def key(nb):
            c = _coords(nb)
            d = next(i for i in range(len(c)) if c[i] != here[i])
            side = 1 if c[d] > here[d] else -1
            if self.axes == 1:  # a fine table: the level one step the other way
                back = [x for x in self._neighbours(m) if x != nb and x in self._win]
            else:  # a coarse axis the scout may have stepped over: the nearest measured the other way
                back = [x for x in self._win if all(_coords(x)[o] == here[o] for o in range(len(c)) if o != d)
                        and (here[d] - _coords(x)[d]) * side > 0]
            near = min(back, key=lambda x: abs(_coords(x)[d] - here[d]), default=None)
            trend = near is not None and self._weighed_cost(near) > self._weighed_cost(m)
            placed = pred is not None and nb in pred
            return (not trend, not placed, pred[nb][0] if placed else 0.0)

        return sorted(self._neighbours(m), key=key)

    def _proven(self, best_m, noise: float) -> tuple:
        """Is ``best_m`` measured better than the anchor beyond the guard? (proven, gain, sd)"""
        a = self._anchor
        ca, sa = self._posterior(a)  # (with noisy windows, weighed with the fit: the anchor is
        # often the stock mode or the top clock, measured once at the start, where proving a
        # 10-20 % gain over one noisy window took about four more windows, the costliest)
        gain = ca - self._weighed_cost(best_m)
        sd = math.hypot(sa, self._posterior(best_m)[1])
        # (a gain below the resolution is not worth leaving for)
        z = self._guard_z()
        floor = max(self.params.margin_pct, self.params.resolution_pct) / 100
        return gain > z * sd and gain > self._weighed_cost(a) * floor, gain, sd

    def _guard_z(self) -> float:
        """The guard's bar in standard errors: ``z_guard``, raised by 0.5 ln k for the k modes
        measured (the best of k is measured low by chance more often than one mode)."""
        return self.params.z_guard + 0.5 * math.log(max(1, len(self._win) + bool(self._maxn_win)))

    def _settle_choice(self, best_m, admissible):
        """The best measured mode, unless it is measured worse than the best GPU-only mode
        measured (then that one): the search never ends worse than a GPU-only search would."""
        gpu = [m for m in self._win if self._gpu_only(m) and m in admissible]
        if self._maxn_win:
            gpu.append(MAXN)
        gpu_best = min(gpu, key=self._weighed_cost, default=None)
        if gpu_best is not None and self._weighed_cost(gpu_best) < self._weighed_cost(best_m):
            return gpu_best
        return best_m

    def _resolve_guard(self, best_m, noise: float) -> tuple:
        """The best beats the anchor, but not yet beyond the guard: measure both more (the best
        first: it costs nothing over settling there) while windows are left."""
        a = self._anchor
        if best_m == a or not self._measured(a):
            return None, ""
        ok, gain, sd = self._proven(best_m, noise)
        p = self.params
        if ok or gain <= self._mode_cost(a) * max(p.margin_pct, p.resolution_pct) / 100:
            return None, ""
        noisy = self._noisy(noise)
        if noisy and self._unresolvable(best_m, a, gain, noise):
            return None, ""
        # (the best's windows cost nothing over holding it; the anchor's must pay)
        skip_anchor = noisy and not self._anchor_pays(best_m, gain, sd)
        for m in sorted((best_m, a), key=lambda x: len(self._windows(x))):
            if m == a and skip_anchor:
                continue
            if len(self._windows(m)) + p.samples <= p.max_windows:
                return m, f"guard: {level_name(best_m)} beats {level_name(a)} by {gain:.3g} +- {sd:.2g}: measure more"
        return None, ""

    def _unresolvable(self, best_m, a, gain: float, noise: float) -> bool:
        """Can the rest of the run not tell ``best_m`` from the anchor ``a`` at the guard's bar?
        Proving ``gain`` takes about 2 (z noise cost / gain)^2 windows at each; so when the windows
        still missing (at both) exceed the horizon (:meth:`_check_horizon`): measuring them would
        take the rest of the run, and the gain could not be collected in it."""
        z = self._guard_z()
        need = 2.0 * (z * noise * self._mode_cost(a) / max(gain, 1e-12)) ** 2
        missing = sum(max(0.0, need - len(self._kept(m))) for m in (best_m, a))
        return missing > self._check_horizon()

    def _anchor_pays(self, best_m, gain: float, sd: float) -> bool:
        """Is the anchor, ``gain`` +- ``sd`` worse than ``best_m``, worth ``samples`` more windows?
        Only while what holding ``best_m`` risks over the horizon (the chance that the anchor is
        the better, times by how much: its expected improvement) exceeds what they cost. The
        guard's bar grows with the modes measured: with 5-7 % windows a level measured 13 % below
        the top clock, 2.2 standard errors, sent 7 windows of a 45-window run back to the top
        clock and its neighbour, 17 % above the best (16 points of the oracle's saving)."""
        cb = self._weighed_cost(best_m)
        return expected_improvement(cb, cb + gain, sd) * self._check_horizon() > self.params.samples * gain

    def _tie(self, best_m, a, gain: float, sd: float, noise: float) -> bool:
        """Is telling ``best_m`` from the anchor ``a`` not worth the run's windows: the run cannot
        resolve it, or the anchor's windows would not pay?"""
        return self._unresolvable(best_m, a, gain, noise) or not self._anchor_pays(best_m, gain, sd)

    def _settle(self, best_m, noise: float, now_s: float, admissible) -> None:
        chosen = self._settle_choice(best_m, admissible)
        if chosen != best_m:
            self.decisions.append({"t_s": now_s, "settle": level_name(chosen),
                                   "why": f"{level_name(best_m)} is measured worse than the GPU-only {level_name(chosen)}"})
        a = self._anchor
        if chosen != a and self._measured(a):
            proven, gain, sd = self._proven(chosen, noise)
            if not proven and gain > 0 and self._noisy(noise) and self._tie(chosen, a, gain, sd, noise):
                self.decisions.append({"t_s": now_s, "settle": level_name(chosen),
                                       "why": f"tie: telling {level_name(chosen)} from {level_name(a)} would not pay "
                                              f"in the run ({gain:.3g} +- {sd:.2g}): the better estimate is held"})
            elif not proven:
                self.decisions.append({"t_s": now_s, "settle": level_name(a),
                                       "why": f"guard: {level_name(chosen)} not proven better than {level_name(a)} "
                                              f"({gain:.3g} < {self.params.z_guard:g} x {sd:.2g})"})
                chosen = a
        if chosen != self._cur:
            self.moves.append((now_s, self._cur, chosen))
        self._cur = self._probing = chosen
        self.phase = self.HOLD
        self._hold_ref = self._mode_cost(chosen)
        self._hold_costs = []
        self._next_reprobe_s = now_s + self.params.reprobe_s

    def _hold(self, w: tuple, now_s: float) -> None:
        cur = self._cur
        p = self.params
        self._hold_costs = (self._hold_costs + [self._cost(*w)])[-p.max_samples:]
        # a new phase moves the held mode's cost either way (longer sequences, shorter ones): the
        # median of the last max_samples windows by drift_pct from its cost at settling; with noisy
        # windows also beyond ``drift_z`` standard errors of what the noise alone moves it (~1.25 x
        # a mean's), against the held mode's median, for max_samples windows in a row. With quiet
        # windows (1-2 %) the check is as it was; with 3-5 % windows a 5 % move is noise, and a
        # false alarm threw the round's windows away and searched again
        noise = self._window_noise()
        ref, band, n_ref = self._hold_ref, p.drift_pct / 100.0, 1
        cs = [self._cost(*x) for x in self._windows(cur)] if self._measured(cur) else []
        med = statistics.median(cs) if cs else math.nan
        if len(cs) >= 2 * p.noise_prior_windows:
            # the held mode's own spread, once it has the windows: the pooled estimate rests on
            # modes of two or three windows, whose deviations from their median read 3 % as 2 %
            noise = max(noise, 1.4826 * statistics.median(abs(c / med - 1.0) for c in cs))
        noisy = self._noisy(noise)
        if noisy:
            # noisy windows: against the median of the held mode's windows, its held ones included
            # (a level settled on a few windows measured low is corrected by verifying, not searched
            # again). A median against a median: interference stretches some windows of both
            # alike, where against the mean of the clean windows it read as a move up
            if cs:
                ref, n_ref = med, len(cs)
            band = max(band, p.drift_z * noise * 1.25 * math.hypot(1.0 / math.sqrt(p.max_samples), 1.0 / math.sqrt(max(1, n_ref))))
        moved = len(self._hold_costs) >= p.max_samples and \
            abs(statistics.median(self._hold_costs) / ref - 1.0) > band
        # noisy windows: the move must hold for max_samples windows in a row (a new phase stays;
        # a cluster of interference passes). Checked after every window of a long hold, a single
        # median of five crossed the band 192 times in 288 120-window runs at 5 % that never moved
        self._moved_for = self._moved_for + 1 if moved else 0
        drifted = self._moved_for >= (p.max_samples if noisy else 1)
        if drifted or now_s >= self._next_reprobe_s:
            self.reprobe_reasons.append((now_s, "drift" if drifted else "timer"))
            # what the ending round measured joins the next round's fit as observations, rescaled
            # to it as a prior's are: the re-search measures only around the held mode, and a fit
            # over those few modes alone may extrapolate to a mode this run measured far worse
            carried = {m: (statistics.median(j for j, _ in ws), statistics.median(s for _, s in ws))
                       for m, ws in self._win.items()}
            self._prior_obs = [o for o in self._prior_obs if o[0] not in carried] + \
                [(m, j, s) for m, (j, s) in carried.items()]
            self._round += 1
            self.phase = self.SEARCH
            self._win, self._maxn_win, self._pending, self._hold_costs = {}, [], [], []
            self._at_fit = {}
            self._spent = 0
            self._anchor = cur  # a local re-search around the held mode
            self._center = self.start_mode if cur is MAXN else cur
            self._in_design = True
            self._probing = cur
            return
        # verify for free: the held mode's windows join its estimate (the winner of a few noisy
        # probes tends to have been measured low); a rival measured better resumes the search
        if self._measured(cur) and len(self._windows(cur)) < p.max_windows:
            self._windows(cur).append(w)
            self._spent += 1
            admissible = self._admissible({m: self._mode_time(m) for m in self._win})
            rival = self._best_measured(admissible)
            why = None
            if rival is not None and rival != cur and \
                    self._weighed_cost(rival) < self._weighed_cost(cur) * (1 - p.resolution_pct / 100):
                why = f"verify: {level_name(rival)} measured better"
            elif not self._gpu_only(cur) and cur in admissible and \
                    (gpu_rival := self._settle_choice(cur, admissible)) != cur:  # never held worse than it
                why = f"verify: the GPU-only {level_name(gpu_rival)} measured better"
            if why:
                self.reprobe_reasons.append((now_s, why))
                self.phase = self.SEARCH
                self._hold_costs = []
                self._decide(now_s)

    def state(self) -> dict:
        one = self.axes == 1

        def js(m):  # (a Mode stays a Mode: hashable here, a list in JSON)
            return m

        out = {"kind": self.model.kind, "axes": self.axes, "phase": self.phase, "round": self._round,
               "start_mhz": js(self.start_mode), "best_mhz": js(self.best_mhz), "target_mhz": js(self.target_mhz),
               "estimates": [{"freq_mhz": js(m), "j_per_step": j} for m, j in self.estimates().items()],
               "probed_modes": self.probed_modes, "probes": [p.to_dict() for p in self.probes],
               "moves": [{"t_s": t, "from_mhz": js(a), "to_mhz": js(b)} for t, a, b in self.moves],
               "reprobes": [{"t_s": t, "reason": r} for t, r in self.reprobe_reasons],
               "decisions": self.decisions, "fit": self.fit_summary, "vf_source": self.vf_source,
               "remaining_windows": self.remaining_windows, "horizon": dict(self.planned) or None,
               "maxn_anchor": self.maxn_anchor,
               "maxn_probes": self.maxn_probes, "prior": self.prior.to_dict() if self.prior else None,
               "objective": self.objective.to_dict(), "params": self.params.to_dict()}
        if one:
            out.update(levels_mhz=list(self.modes), dropped_mhz=list(self.dropped))
        else:
            out.update(caps=list(self.caps), modes=len(self.modes), dropped=[list(m) for m in self.dropped])
        return out


def within_caps(modes, caps) -> list:
    """The modes at or below every cap of ``caps`` = (gpu, emc, cpu) maxima (None: no cap)."""
    caps = tuple(caps or (None, None, None))
    if len(caps) != 3:
        raise InvalidValueError("caps are (gpu, emc, cpu) maxima")
    return [m for m in modes if all(cap is None or x <= cap + 1e-6 for x, cap in zip(m, caps))]


def CurveSearch(levels_mhz, start_mhz, params: ModeParams | None = None, now_s: float = 0.0,
                objective: Objective | None = None, vf=None, vf_source: str | None = None,
                maxn_anchor: bool = False, prior=None) -> ModeSearch:
    """The search over the GPU's levels alone (:meth:`ModeSearch.gpu`)."""
    return ModeSearch.gpu(levels_mhz, start_mhz, params, now_s, objective, vf, vf_source, maxn_anchor, prior)


def JointSearch(modes, start_mode, params: ModeParams | None = None, objective: Objective | None = None,
                caps=None, vf=None, now_s: float = 0.0, prior=None) -> ModeSearch:
    """The search over (gpu, emc, cpu) modes (:meth:`ModeSearch.joint`)."""
    return ModeSearch.joint(modes, start_mode, params, objective, caps, vf, now_s, prior)


__all__ = ["CurveModel", "CurveParams", "CurveSearch", "DEFAULT_VF_SOURCE", "JointModel", "JointParams",
           "JointSearch", "KNOBS", "MAXN", "Mode", "ModeParams", "ModeSearch", "Prediction", "SearchPrior",
           "expected_improvement", "level_name", "mode_name", "vf_for_levels", "within_caps"]

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
best are checked only where they pay back over the horizon of checks (:meth:`Design.check_horizon`),
on one axis any neighbour (the best's too, once it has its windows) only where the fit's expected
gain there pays its windows, the close check confirms the best alone, the guard weighs an anchor
measured once with the fit's prediction and stops measuring a gain the horizon cannot prove, or one whose proof costs more
anchor windows than the chance that the anchor is better risks (:meth:`Guard.tie`: the
better estimate is held), and the drift alarm needs a move beyond ``drift_z`` standard errors of
the held mode's median that lasts ``max_samples`` windows.

Objectives (:class:`~pydvfs.policy.objective.Objective`): the cost is J/step x (s/step)^k; a slowdown
bound removes the modes whose (measured, else predicted) step time exceeds the fastest measured
one's by more than the bound.

The search is split by role: :mod:`.modes` (the space), :mod:`.mode_params` (the tunables and
the prior), :mod:`.probes` (the design and the budget), :mod:`.windows` (what the round
measured, and the rules for noisy windows), :mod:`.fit` (the models and the prediction),
:mod:`.checks` (the expected gain and the checks beyond it), :mod:`.guard` (the guard, settling,
the drift alarm); :class:`ModeSearch` holds the run's state and coordinates them.
"""
from __future__ import annotations

import math
import statistics

from ..errors import InvalidValueError
from ..policy.objective import Objective
from .checks import Checks
from .fit import DEFAULT_VF_SOURCE, CurveModel, JointModel, ModeFit, Prediction, expected_improvement, vf_for_levels
from .guard import Drift, Guard
from .mode_params import CurveParams, JointParams, ModeParams, SearchPrior
from .modes import KNOBS, MAXN, Mode, ModeSpace, level_name, mode_name, within_caps
from .probes import Design
from .search import Probe, SearchBase, latest_estimate, probe_done, spread_pct
from .windows import RoundWindows


class ModeSearch(SearchBase):
    """See the module docstring. ``modes``: the space (GPU levels in MHz, or (gpu, emc, cpu)
    tuples); ``start``: snapped to it; ``model``: a :class:`CurveModel` or :class:`JointModel`
    (default: the one the space's axes call for); ``prior``: a :class:`SearchPrior` (or what
    :meth:`SearchPrior.of` takes); ``caps``: (gpu, emc, cpu) maxima of the power mode (None: no
    cap), modes above them are never proposed; ``maxn_anchor`` (one axis): the board's own
    governor is measured first and is what the guard protects.

    Its collaborators, each given the search: ``space`` (:class:`ModeSpace`), ``windows``
    (:class:`RoundWindows`: this round's), ``design`` (:class:`Design`), ``fit``
    (:class:`ModeFit`), ``checks`` (:class:`Checks`), ``guard`` (:class:`Guard`) and ``drift``
    (:class:`Drift`)."""

    fits_time = True  # the engine feeds J/step and s/step, not a combined cost

    def __init__(self, modes, start, model=None, params: ModeParams | None = None,
                 objective: Objective | None = None, prior=None, caps=None, maxn_anchor: bool = False,
                 now_s: float = 0.0):
        self.space = ModeSpace(modes, caps)
        self.model = model or (CurveModel() if self.axes == 1 else JointModel())
        if getattr(self.model, "axes", self.axes) != self.axes:
            raise InvalidValueError(f"the model covers {self.model.axes} axes, the modes {self.axes}")
        self.params = params or (CurveParams() if self.axes == 1 else JointParams())
        self.objective = objective or Objective()
        self.windows = RoundWindows(self.params, self.objective)
        self.design, self.fit, self.checks = Design(self), ModeFit(self), Checks(self)
        self.guard, self.drift = Guard(self), Drift(self)
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
        self.maxn_probes: list[dict] = []
        self._round = 0
        self._pending: list = []
        self._spent = 0  # windows this round has measured
        self._age = 0  # windows fed over the whole run (every round, held ones included)
        # what the last decision planned for (state()["horizon"]): the run's length told or not, the
        # windows a probe's gain was counted over, those a check was weighed over, the run's age
        self.planned: dict = {}
        self._next_reprobe_s = math.inf
        self.phase = self.SEARCH
        self.probes: list[Probe] = []
        self.moves: list = []
        self.reprobe_reasons: list = []
        self.dropped: list = []
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

    # -- the space -------------------------------------------------------------------------
    @property
    def modes(self) -> tuple:
        """The modes it may propose (those the board refused dropped)."""
        return self.space.modes

    @property
    def axes(self) -> int:
        return self.space.axes

    @property
    def caps(self):
        return self.space.caps

    def _snap(self, mode):
        return self.space.snap(mode)

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
    def fit_summary(self) -> dict | None:
        """The last fit's coefficients and misfit (None before the first fit)."""
        return self.fit.summary

    @property
    def best_mhz(self):
        """The settled mode; while searching, the best measured so far this round."""
        w = self.windows
        if self.phase == self.HOLD or not w.win:
            return self._cur
        admissible = w.admissible({m: w.mode_time(m) for m in w.win}, self.modes)
        return w.best_measured(admissible) or min(w.win, key=w.mode_time)

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

    # -- what the round measured (its windows; the tests read them here) -------------------
    @property
    def _win(self) -> dict:
        return self.windows.win

    def _mode_cost(self, m) -> float:
        return self.windows.mode_cost(m)

    def _window_noise(self) -> float:
        return self.windows.noise()

    def _noisy(self, noise: float) -> bool:
        return self.windows.noisy(noise)

    def _predict(self) -> dict | None:
        return self.fit.predict()

    def _structured_axes(self, resid: dict, se: dict, floor: float) -> list:
        return self.fit.structured_axes(resid, se, floor)

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
        costs = [self.windows.cost(*x) for x in self._pending]
        jps = [x[0] for x in self._pending]
        med_s = statistics.median(x[1] for x in self._pending)
        if m is MAXN:
            self.windows.maxn.extend(self._pending)
            self.maxn_probes.append({"t_s": now_s, "j_per_step": statistics.median(jps), "windows": len(jps),
                                     "s_per_step": med_s})
        else:
            self.windows.win.setdefault(m, []).extend(self._pending)
            self.probes.append(Probe(m, statistics.median(jps), len(self._pending), self._round, now_s,
                                     spread_pct(costs), med_s))
        self._pending = []
        self._decide(now_s)
        return self.target_mhz

    def _probe_done(self, m) -> bool:
        """The probe in progress at ``m`` (its windows pending) is done (:func:`probe_done`)."""
        w = self.windows
        costs = [w.cost(*x) for x in self._pending]
        noise = w.noise()
        return probe_done(costs, self.design.required(m), self.params.max_samples, w.spread_limit_pct(noise),
                          lambda: w.clearly_worse(costs, noise))

    def drop(self, mode, now_s: float):
        """The board refused a mode: remove it for good; returns what to run next."""
        m = self._snap(mode)
        if len(self.modes) == 1:
            raise InvalidValueError(f"{level_name(m)} is the only {'level' if self.axes == 1 else 'mode'} "
                                    f"left: cannot drop it")
        self.dropped.append(m)
        self.space.drop(m)
        self.windows.win.pop(m, None)
        if self._cur == m:
            self._cur = self.windows.best_measured() or self._snap(m)
        if self._anchor == m:
            self._anchor = self._cur
        if self._center == m:
            self._center = self._snap(m)
        if self._probing != m:
            return self.target_mhz
        self._pending, self.drift.costs = [], []
        self.phase = self.SEARCH
        self._decide(now_s)
        return self.target_mhz

    # -- one step: design / expected gain and checks / guard and settle ------------------------
    def _decide(self, now_s: float) -> None:
        w = self.windows
        p = self.params
        budget = self.design.budget_left()
        nxt = self.design.next() if budget or not w.win else None
        self._in_design = nxt is not None
        if nxt is not None:
            self._probe(nxt, now_s, "design")
            return
        pred = self.fit.predict()
        noise = w.noise()
        # (a mode the model does not place has no time yet: it is not ruled out by the bound)
        times = {m: w.mode_time(m) if m in w.win else (pred[m][2] if pred and m in pred else None)
                 for m in self.modes}
        if pred is None:  # cannot fit: only measured modes are placed
            times = {m: w.mode_time(m) if m in w.win else None for m in self.modes}
        admissible = w.admissible(times, self.modes) if times else list(w.win)
        best_m = w.best_measured(admissible) or min(w.win, key=w.mode_time)
        best = w.weighed_cost(best_m)
        if w.maxn:  # a mode must beat MAXN too to be worth a probe
            best = min(best, w.weighed_cost(MAXN))
        new_ok = budget and len(w.win) < p.max_modes
        left = self.remaining_windows
        horizon = max(1, left if left is not None else p.horizon_windows - self._spent)
        self.planned = {"length": "unknown" if left is None else "told", "windows": horizon,
                        "check_windows": self.design.check_horizon(), "run_windows": self._age,
                        "noisy": w.noisy(noise)}
        choice, why = self.checks.gain(admissible, best_m, best, pred, new_ok, horizon)
        # the checks beyond the expected gain are tuned for the default horizon: with fewer than a
        # sixth of it (10 windows) left in a run of known length they cannot pay back (settle)
        checks = left is None or left >= p.horizon_windows / 6
        if not why and checks:
            choice, why = self.checks.close(best_m, noise, admissible)
        if not why and checks and new_ok:
            choice, why = self.checks.neighbour(best_m, noise, admissible, pred, self.design.check_horizon())
        if not why and checks:
            choice, why = self.guard.resolve(self.guard.settle_choice(best_m, admissible), noise)
        if why:
            self._probe(choice, now_s, why)
            return
        self._settle(best_m, noise, now_s, admissible)

    def _probe(self, m, now_s: float, why: str) -> None:
        self._probing = m
        self._scouting = why.startswith("neighbour")
        self.decisions.append({"t_s": now_s, "probe": m if m is MAXN or self.axes == 1 else list(m),
                               "probe_mhz": m if self.axes == 1 else list(m), "why": why})

    def _settle(self, best_m, noise: float, now_s: float, admissible) -> None:
        chosen = self.guard.settle_on(best_m, noise, now_s, admissible)
        if chosen != self._cur:
            self.moves.append((now_s, self._cur, chosen))
        self._cur = self._probing = chosen
        self.phase = self.HOLD
        self.drift.ref = self.windows.mode_cost(chosen)
        self.drift.costs = []
        self._next_reprobe_s = now_s + self.params.reprobe_s

    # -- holding -------------------------------------------------------------------------------
    def _hold(self, w: tuple, now_s: float) -> None:
        drifted = self.drift.drifted(w)
        if drifted or now_s >= self._next_reprobe_s:
            self.reprobe_reasons.append((now_s, "drift" if drifted else "timer"))
            self._research()
            return
        self._verify(w, now_s)

    def _research(self) -> None:
        """A local round around the held mode. What the ending round measured joins the next
        round's fit as observations, rescaled to it as a prior's are: the re-search measures
        only around the held mode, and a fit over those few modes alone may extrapolate to a mode
        this run measured far worse."""
        cur = self._cur
        carried = {m: (statistics.median(j for j, _ in ws), statistics.median(s for _, s in ws))
                   for m, ws in self.windows.win.items()}
        self._prior_obs = [o for o in self._prior_obs if o[0] not in carried] + \
            [(m, j, s) for m, (j, s) in carried.items()]
        self._round += 1
        self.phase = self.SEARCH
        self.windows.clear()
        self._pending, self.drift.costs = [], []
        self._spent = 0
        self._anchor = cur  # a local re-search around the held mode
        self._center = self.start_mode if cur is MAXN else cur
        self._in_design = True
        self._probing = cur

    def _verify(self, w: tuple, now_s: float) -> None:
        """Verify for free: the held mode's windows join its estimate (the winner of a few noisy
        probes tends to have been measured low); a rival measured better resumes the search."""
        cur, win, p = self._cur, self.windows, self.params
        if not (win.measured(cur) and len(win.windows(cur)) < p.max_windows):
            return
        win.windows(cur).append(w)
        self._spent += 1
        admissible = win.admissible({m: win.mode_time(m) for m in win.win}, self.modes)
        rival = win.best_measured(admissible)
        why = None
        if rival is not None and rival != cur and \
                win.weighed_cost(rival) < win.weighed_cost(cur) * (1 - p.resolution_pct / 100):
            why = f"verify: {level_name(rival)} measured better"
        elif not self.space.gpu_only(cur, self.start_mode) and cur in admissible and \
                (gpu_rival := self.guard.settle_choice(cur, admissible)) != cur:  # never held worse than it
            why = f"verify: the GPU-only {level_name(gpu_rival)} measured better"
        if why:
            self.reprobe_reasons.append((now_s, why))
            self.phase = self.SEARCH
            self.drift.costs = []
            self._decide(now_s)

    def state(self) -> dict:
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
        if self.axes == 1:
            out.update(levels_mhz=list(self.modes), dropped_mhz=list(self.dropped))
        else:
            out.update(caps=list(self.caps), modes=len(self.modes), dropped=[list(m) for m in self.dropped])
        return out


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

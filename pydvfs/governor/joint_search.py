"""The joint online search: GPU level x EMC rate x CPU clock, chosen while the job trains.

Pure logic like :class:`~pydvfs.governor.model_search.CurveSearch` (fed windows of J/step and
s/step, proposing what to pin; it never writes anything), over *modes* ``(gpu_mhz, emc_mhz,
cpu_mhz)`` instead of GPU levels, with the joint model of :mod:`pydvfs.joint_model`
(time = smax(a/g + m/e + k, l/c) + s/c, power per domain on its V/f) in place of the GPU curve.

One round (docs/online.md, "The joint search"):

1. **Start** at the stock mode (the power mode's own clocks, or a prior's mode): it is what the
   guard protects.
2. **Design**: a 3-level orthogonal array (L9) over the three domains, one window each, placed
   where optima are found, not at the table's corners: the GPU at ``gpu_high``, ``gpu_mid``
   and ``gpu_low`` of its top clock (the start measures the top); the EMC at its top and the rate below (a rate of a few hundred MHz costs
   several times the energy per step: a probe there is never worth its windows); the CPU at its
   top, middle and lowest clock. With the start that is 10 modes, all within the caps.
3. **Fit** the joint model to every clean window (spikes beyond 3 window-noise sigmas of their
   mode's median stay out; the fit's soft-L1 loss tolerates what one window cannot tell) and
   predict every mode's cost, with a spread: the measured modes' RMS deviation from the model
   (at least ``misfit_floor_pct``).
4. **Move and verify**: probe the mode of largest expected gain over its cost (expected
   improvement over the best measured mode x the windows left, against ``samples`` windows at
   a worse mode); none: re-measure the best measured mode and the modes within noise of it to
   ``samples`` windows, and probe the unmeasured neighbours (one step in one domain) of the
   best that the model places within ``z_guard`` spreads of it — at most ``max_modes``
   distinct modes in a round (the design included).
5. **Settle** on the measured mode of least cost (the mean of its windows, spikes left out),
   leaving the start only for a gain beyond ``z_guard`` standard errors; **hold** it, its
   windows joining its estimate (a rival measured better resumes the search).

Caps: ``caps`` = (gpu, emc, cpu) maxima of the power mode (None: no cap): a mode above them
is removed from the grid before anything is proposed, so it is never probed. A mode the board
refuses is dropped with :meth:`JointSearch.drop`.

Objectives as the GPU-only searches (:class:`~pydvfs.objective.Objective`): J/step x
(s/step)^k, with an optional slowdown bound against the fastest measured mode.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from ..errors import InvalidValueError
from ..objective import Objective
from .model_search import expected_improvement
from .search import Probe

KNOBS = ("gpu", "emc", "cpu")


class Mode(tuple):
    """A mode (gpu_mhz, emc_mhz, cpu_mhz): a tuple that formats as "612/3199/1113.6", so that
    the engine's reports and status lines show it where they show a GPU clock (JSON: a list)."""

    def __new__(cls, clocks):
        return tuple.__new__(cls, (float(x) for x in clocks))

    def __format__(self, spec: str) -> str:
        return "/".join(format(x, spec or "g") for x in self)

    def __str__(self) -> str:
        return format(self, "g")


def parse_knobs(text: str) -> tuple:
    """``"gpu,emc,cpu"`` -> ("gpu", "emc", "cpu"); the GPU must be among them. Raises
    InvalidValueError (one line) on anything else."""
    items = [x.strip().lower() for x in str(text).split(",") if x.strip()]
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


@dataclass(frozen=True)
class JointParams:
    """Tunables of the joint search. Counts are windows unless named otherwise."""

    samples: int = 3  # windows per probe after the design
    max_samples: int = 5  # ... at most, when they disagree
    spread_pct: float = 2.5
    design_samples: int = 1  # windows per design probe (the fit pools them)
    max_modes: int = 12  # distinct modes probed in a round, the design included
    max_windows: int = 12  # windows per mode at most in a round
    horizon_windows: int = 60  # windows a choice serves when the run's length is unknown
    gpu_high: float = 0.70  # design GPU levels as shares of the top clock (the start measures the top)
    gpu_mid: float = 0.55
    gpu_low: float = 0.40
    z_guard: float = 2.5
    resolution_pct: float = 0.5
    noise_floor_pct: float = 0.3
    noise_prior_pct: float = 1.5
    noise_prior_windows: int = 4
    misfit_floor_pct: float = 1.5
    reprobe_s: float = 1800.0
    drift_pct: float = 5.0

    def __post_init__(self):
        checks = [
            (isinstance(self.samples, int) and self.samples >= 1, "samples must be an integer >= 1"),
            (isinstance(self.max_samples, int) and self.max_samples >= self.samples,
             "max_samples must be an integer >= samples"),
            (isinstance(self.design_samples, int) and 1 <= self.design_samples <= self.samples,
             "design_samples must be an integer within 1..samples"),
            (isinstance(self.max_modes, int) and self.max_modes >= 8, "max_modes must be an integer >= 8"),
            (isinstance(self.max_windows, int) and self.max_windows >= self.max_samples,
             "max_windows must be an integer >= max_samples"),
            (isinstance(self.horizon_windows, int) and self.horizon_windows >= 1, "horizon must be >= 1 window"),
            (0 < self.gpu_low < self.gpu_mid < self.gpu_high <= 1,
             "design shares must satisfy 0 < gpu_low < gpu_mid < gpu_high <= 1"),
            (self.z_guard >= 0 and math.isfinite(self.z_guard), "z_guard must be a finite number >= 0"),
            (0 <= self.resolution_pct < 100, "resolution must be within 0..100 %"),
            (self.noise_floor_pct > 0 and self.misfit_floor_pct >= 0, "noise floors must be > 0 %"),
            (self.spread_pct > 0 and self.reprobe_s > 0 and self.drift_pct > 0,
             "spread, reprobe interval and drift must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidValueError(message)

    def to_dict(self) -> dict:
        return asdict(self)


def mode_name(mode) -> str:
    g, e, c = mode
    return f"{g:g}/{e:g}/{c:g}"


def within_caps(modes, caps) -> list:
    """The modes at or below every cap of ``caps`` = (gpu, emc, cpu) maxima (None: no cap)."""
    caps = tuple(caps or (None, None, None))
    if len(caps) != 3:
        raise InvalidValueError("caps are (gpu, emc, cpu) maxima")
    return [m for m in modes if all(cap is None or x <= cap + 1e-6 for x, cap in zip(m, caps))]


class JointSearch:
    """See the module docstring. ``modes``: the (gpu, emc, cpu) MHz grid the board allows (a
    designed set of CPU clocks, not every cpufreq step); ``start_mode``: snapped to it."""

    SEARCH = "search"
    HOLD = "hold"
    fits_time = True

    def __init__(self, modes, start_mode, params: JointParams | None = None, objective: Objective | None = None,
                 caps=None, vf=None, now_s: float = 0.0):
        import scipy.optimize  # noqa: F401 - the fit's solver: imported now, not mid-run

        self.params = params or JointParams()
        self.objective = objective or Objective()
        self.caps = tuple(caps) if caps is not None else (None, None, None)
        allowed = sorted({Mode(m) for m in within_caps(modes, self.caps)})
        if not allowed:
            raise InvalidValueError("no mode of the grid is within the power mode's caps")
        self.modes = tuple(allowed)
        self.vf = vf
        self.remaining_windows: int | None = None
        self.start_mode = self._snap(start_mode)
        self._anchor = self._cur = self._probing = self.start_mode
        self._round = 0
        self._win: dict = {}  # mode -> [(J/step, s/step)] this round
        self._pending: list = []
        self._design = self._design_modes()
        self._hold_costs: list = []
        self._hold_ref = math.nan
        self._next_reprobe_s = math.inf
        self.phase = self.SEARCH
        self.probes: list = []  # finished probes (Probe, its freq_mhz a Mode)
        self.reprobe_reasons: list = []  # (t_s, why) of each new round
        self.moves: list = []
        self.decisions: list = []
        self.dropped: list = []
        self.fit_summary: dict | None = None
        self._now0 = now_s

    # -- what it proposes ------------------------------------------------------------------
    @property
    def target_mode(self) -> tuple:
        return self._probing

    @property
    def target_mhz(self) -> Mode:
        """The target mode: what the engine pins (through a mode device, :class:`ModeDevice`)."""
        return self._probing

    @property
    def start_mhz(self) -> Mode:
        return self.start_mode

    @property
    def round(self) -> int:
        return self._round

    def estimate(self, mode) -> float | None:
        """The latest J/step measured at ``mode`` (snapped to the grid), or None."""
        m = self._snap(mode)
        for p in reversed(self.probes):
            if p.freq_mhz == m:
                return p.j_per_step
        return None

    @property
    def best_mode(self) -> tuple:
        if self.phase == self.HOLD or not self._win:
            return self._cur
        return self._best_measured() or self._cur

    @property
    def best_mhz(self) -> Mode:
        return self.best_mode

    @property
    def converged(self) -> bool:
        return self.phase == self.HOLD

    @property
    def probed_modes(self) -> int:
        """Distinct modes probed over every round."""
        return len({p.freq_mhz for p in self.probes})

    # -- what it is fed --------------------------------------------------------------------
    def observe(self, mode, j_per_step: float, now_s: float, s_per_step: float | None = None) -> tuple:
        for v, what in ((j_per_step, "J/step"), (s_per_step, "s/step")):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidValueError(f"{what} must be a positive number, got {v!r}")
        m = self._snap(mode)
        if m != self._probing:
            return self.target_mode
        w = (float(j_per_step), float(s_per_step))
        if self.phase == self.HOLD:
            self._hold(w, now_s)
            return self.target_mode
        self._pending.append(w)
        if not self._probe_done(m):
            return self.target_mode
        self._win.setdefault(m, []).extend(self._pending)
        costs = [self._cost(*x) for x in self._pending]
        self.probes.append(Probe(m, statistics.median(x[0] for x in self._pending), len(self._pending), self._round,
                                 now_s, 100.0 * (max(costs) - min(costs)) / statistics.median(costs),
                                 statistics.median(x[1] for x in self._pending)))
        self._pending = []
        self._decide(now_s)
        return self.target_mode

    def drop(self, mode, now_s: float) -> tuple:
        """The board refused a mode: remove it for good; returns the mode to run next."""
        m = self._snap(mode)
        if len(self.modes) == 1:
            raise InvalidValueError(f"{mode_name(m)} is the only mode left: cannot drop it")
        self.dropped.append(m)
        self.modes = tuple(x for x in self.modes if x != m)
        self._win.pop(m, None)
        self._design = [x for x in self._design if x != m]
        if self._cur == m:
            self._cur = self._best_measured() or self._snap(m)
        if self._anchor == m:
            self._anchor = self._cur
        if self._probing != m:
            return self.target_mode
        self._pending, self._hold_costs = [], []
        self.phase = self.SEARCH
        self._decide(now_s)
        return self.target_mode

    # -- internals -------------------------------------------------------------------------
    def _snap(self, mode) -> Mode:
        g, e, c = (float(x) for x in mode)
        return min(self.modes, key=lambda m: (abs(m[0] - g) / max(g, 1.0) + abs(m[1] - e) / max(e, 1.0)
                                              + abs(m[2] - c) / max(c, 1.0), m))

    def _axis(self, i: int) -> list:
        return sorted({m[i] for m in self.modes})

    def _design_modes(self) -> list:
        """The L9 design (see the module docstring), snapped to the grid, the start first."""
        p = self.params
        G, E, C = self._axis(0), self._axis(1), self._axis(2)

        def near(xs, x):
            return min(xs, key=lambda v: (abs(v - x), v))

        top = G[-1]
        g3 = [near(G, top * p.gpu_low), near(G, top * p.gpu_mid), near(G, top * p.gpu_high)]
        e3 = [E[-2] if len(E) > 1 else E[-1], E[-1], E[-1]]
        c3 = [C[0], C[len(C) // 2], C[-1]]
        l9 = ((0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 1), (1, 1, 2), (1, 2, 0), (2, 0, 2), (2, 1, 0), (2, 2, 1))
        out = [self.start_mode]
        for i, j, k in l9:
            m = self._snap((g3[i], e3[j], c3[k]))
            if m not in out:
                out.append(m)
        return out

    def _cost(self, j: float, s: float) -> float:
        return self.objective.cost(j, s)

    def _required(self, m) -> int:
        """Windows the probe in progress takes at least: ``design_samples`` for a design mode's
        first probe; else up to ``samples`` in all, or ``samples`` more for a mode that has them."""
        have = len(self._win.get(m, ()))
        if m in self._design and not have:
            return self.params.design_samples
        return self.params.samples - have if have < self.params.samples else self.params.samples

    def _probe_done(self, m) -> bool:
        """The probe has its windows, more while they disagree, up to ``max_samples``."""
        n = len(self._pending)
        if n < self._required(m):
            return False
        if n >= self.params.max_samples or n == 1:
            return True
        costs = [self._cost(*w) for w in self._pending]
        return 100.0 * (max(costs) - min(costs)) / statistics.median(costs) <= self.params.spread_pct

    def _window_noise(self) -> float:
        devs = []
        for ws in self._win.values():
            if len(ws) < 2:
                continue
            cs = [self._cost(*w) for w in ws]
            med = statistics.median(cs)
            d = sorted(abs(c - med) / med for c in cs)
            devs += d[1:] if len(ws) % 2 else d
        rel = 1.4826 * statistics.median(devs) if devs else 0.0
        p = self.params
        k0, s0 = p.noise_prior_windows, p.noise_prior_pct / 100.0
        rel = math.sqrt((k0 * s0 * s0 + len(devs) * rel * rel) / (k0 + len(devs)))
        return max(rel, p.noise_floor_pct / 100.0)

    def _kept(self, m) -> list:
        costs = [self._cost(*w) for w in self._win[m]]
        if len(costs) < 3:
            return costs
        med = statistics.median(costs)
        band = 3 * self._window_noise() * med
        return [c for c in costs if abs(c - med) <= band] or costs

    def _mode_cost(self, m) -> float:
        kept = self._kept(m)
        return statistics.fmean(kept) if len(self._win[m]) >= 3 else min(kept)  # 1-2 windows: spikes only add

    def _mode_time(self, m) -> float:
        return statistics.median(w[1] for w in self._win[m])

    def _stderr(self, m, noise: float) -> float:
        return noise * self._mode_cost(m) / math.sqrt(len(self._kept(m)))

    def _admissible(self, times: dict) -> list:
        measured = [self._mode_time(m) for m in self._win]
        fastest = min(measured) if measured else min(times.values())
        return [m for m in self.modes if m in times and self.objective.admissible(times[m], fastest)]

    def _best_measured(self, admissible=None) -> tuple | None:
        ms = [m for m in self._win if admissible is None or m in admissible]
        return min(ms, key=self._mode_cost) if ms else None

    def _predict(self) -> dict | None:
        """mode -> (predicted cost, its spread, predicted s/step); None when it cannot be fitted."""
        import numpy as np

        from ..joint_model import VFSet, fit_joint

        noise = self._window_noise()
        rows = []
        for m, ws in self._win.items():
            med = statistics.median(self._cost(*w) for w in ws)
            rows += [(m[0], m[1], m[2], s, j / s) for j, s in ws if self._cost(j, s) <= med * (1 + 3 * noise)]
        try:
            g, e, c, t, pw = (list(x) for x in zip(*rows))
            fit = fit_joint(g, e, c, t, pw, self.vf or VFSet())
        except (InvalidValueError, ValueError, np.linalg.LinAlgError):
            return None
        arr = np.asarray(self.modes, float)
        t = fit.time_s(arr[:, 0], arr[:, 1], arr[:, 2])
        pw = fit.power_w(arr[:, 0], arr[:, 1], arr[:, 2])
        if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(np.isfinite(pw)) and np.all(pw > 0)):
            return None
        k = {"energy": 0, "edp": 1, "ed2p": 2}[self.objective.kind]
        cost = pw * t * t ** k
        index = {m: i for i, m in enumerate(self.modes)}
        resid = [self._mode_cost(m) / cost[index[m]] - 1.0 for m in self._win]
        misfit = max(self.params.misfit_floor_pct / 100.0, math.sqrt(sum(r * r for r in resid) / len(resid)))
        best = int(np.argmin(cost))
        self.fit_summary = {"fit": fit.to_dict(), "misfit_pct": 100 * misfit, "window_noise_pct": 100 * noise,
                            "predicted_best": list(self.modes[best]), "predicted_best_cost": float(cost[best])}
        return {m: (float(cost[i]), float(cost[i] * misfit), float(t[i])) for m, i in index.items()}

    def _neighbours(self, m) -> list:
        out = []
        for d in range(3):
            axis = sorted({x[d] for x in self.modes if all(x[o] == m[o] for o in range(3) if o != d)})
            i = axis.index(m[d])
            for k in (i - 1, i + 1):
                if 0 <= k < len(axis):
                    out.append(Mode(axis[k] if o == d else m[o] for o in range(3)))
        return out

    def _decide(self, now_s: float) -> None:
        p = self.params
        nxt = next((m for m in self._design if m not in self._win), None)
        if nxt is not None:
            self._probing = nxt
            self.decisions.append({"t_s": now_s, "probe": list(nxt), "why": "design"})
            return
        pred = self._predict()
        noise = self._window_noise()
        times = {m: self._mode_time(m) if m in self._win else (pred[m][2] if pred else math.inf) for m in self.modes}
        if pred is None:
            times = {m: self._mode_time(m) for m in self._win}
        admissible = self._admissible(times)
        best_m = self._best_measured(admissible) or min(self._win, key=self._mode_time)
        best = self._mode_cost(best_m)
        budget = len(self._win) < p.max_modes
        left = self.remaining_windows
        horizon = max(1, left if left is not None else p.horizon_windows - sum(len(w) for w in self._win.values()))
        choice, net, why = None, 0.0, ""
        for m in admissible:  # a mode where a probe is expected to gain more than its windows cost
            if m in self._win:  # re-measure a measured rival (within noise of the best)
                if m == best_m or len(self._win[m]) + p.samples > p.max_windows:
                    continue
                mu, sigma = self._mode_cost(m), self._stderr(m, noise)
                label = "re-measure"
            elif pred is not None and budget:  # a new mode, placed by the model
                mu, sigma, _ = pred[m]
                label = "model"
            else:
                continue
            gain = expected_improvement(best * (1 - p.resolution_pct / 100), mu, sigma) * horizon
            cost = p.samples * max(0.0, mu - best)
            if gain - cost > net:
                choice, net = m, gain - cost
                why = f"{label}: {mu:.5g} +- {sigma:.2g} vs best {best:.5g}; gain {gain:.3g} > cost {cost:.3g}"
        checks = left is None or left >= p.horizon_windows / 6
        if not why and checks:  # the best and the modes within noise of it, to samples windows each
            for m in sorted(self._win, key=self._mode_cost):
                close = m == best_m or self._mode_cost(m) - best <= p.z_guard * math.hypot(
                    self._stderr(m, noise), self._stderr(best_m, noise))
                if m in admissible and close and len(self._win[m]) < p.samples:
                    choice, why = m, f"re-measure {mode_name(m)}: within noise of the best"
                    break
        if not why and checks and budget and pred is not None:  # the best's neighbours the model places close
            sd = pred[best_m][1]
            for m in sorted(self._neighbours(best_m), key=lambda x: pred[x][0]):
                if m not in self._win and m in admissible and pred[m][0] - best <= p.z_guard * sd:
                    choice, why = m, f"neighbour of the best, {mode_name(best_m)}"
                    break
        if not why and checks and self._anchor in self._win and best_m != self._anchor:
            ok, gain, sd = self._proven(best_m, noise)
            if not ok and gain > self._mode_cost(self._anchor) * p.resolution_pct / 100:
                for m in sorted((best_m, self._anchor), key=lambda x: len(self._win[x])):
                    if len(self._win[m]) + p.samples <= p.max_windows:
                        choice, why = m, f"guard: {mode_name(best_m)} beats the start by {gain:.3g} +- {sd:.2g}"
                        break
        if why:
            self._probing = choice
            self.decisions.append({"t_s": now_s, "probe": list(choice), "why": why})
            return
        self._settle(best_m, noise, now_s)

    def _proven(self, best_m, noise: float) -> tuple:
        a = self._anchor
        gain = self._mode_cost(a) - self._mode_cost(best_m)
        sd = math.hypot(self._stderr(a, noise), self._stderr(best_m, noise))
        z = self.params.z_guard + 0.5 * math.log(max(1, len(self._win)))
        return gain > z * sd and gain > self._mode_cost(a) * self.params.resolution_pct / 100, gain, sd

    def _settle(self, best_m, noise: float, now_s: float) -> None:
        chosen = best_m
        if best_m != self._anchor and self._anchor in self._win and not self._proven(best_m, noise)[0]:
            chosen = self._anchor
            self.decisions.append({"t_s": now_s, "settle": list(chosen), "why": "guard: the best not proven better"})
        if chosen != self._cur:
            self.moves.append((now_s, self._cur, chosen))
        self._cur = self._probing = chosen
        self.phase = self.HOLD
        self._hold_ref = self._mode_cost(chosen)
        self._hold_costs = []
        self._next_reprobe_s = now_s + self.params.reprobe_s

    def _hold(self, w, now_s: float) -> None:
        cur = self._cur
        p = self.params
        self._hold_costs = (self._hold_costs + [self._cost(*w)])[-p.max_samples:]
        drifted = len(self._hold_costs) >= p.max_samples and \
            abs(statistics.median(self._hold_costs) / self._hold_ref - 1.0) > p.drift_pct / 100.0
        if drifted or now_s >= self._next_reprobe_s:
            self.reprobe_reasons.append((now_s, "drift" if drifted else "timer"))
            # a local re-search: the held mode is the new start (the design keeps its shape)
            self._round += 1
            self.phase = self.SEARCH
            self._win, self._pending, self._hold_costs = {}, [], []
            self._anchor = self.start_mode = cur
            self._design = self._design_modes()[:1] + self._neighbours(cur)
            self._probing = cur
            return
        if cur in self._win and len(self._win[cur]) < p.max_windows:  # verify for free
            self._win[cur].append(w)
            rival = self._best_measured()
            if rival is not None and rival != cur and \
                    self._mode_cost(rival) < self._mode_cost(cur) * (1 - p.resolution_pct / 100):
                self.phase = self.SEARCH
                self._hold_costs = []
                self._decide(now_s)

    def state(self) -> dict:
        return {"kind": "joint", "phase": self.phase, "round": self._round, "start_mhz": self.start_mode,
                "best_mhz": self.best_mode, "target_mhz": self.target_mode,
                "probed_modes": self.probed_modes, "probes": [p.to_dict() for p in self.probes],
                "reprobes": [{"t_s": t, "reason": r} for t, r in self.reprobe_reasons],
                "moves": [{"t_s": t, "from": list(a), "to": list(b)} for t, a, b in self.moves],
                "decisions": self.decisions, "fit": self.fit_summary, "caps": list(self.caps),
                "modes": len(self.modes), "dropped": [list(m) for m in self.dropped],
                "remaining_windows": self.remaining_windows,
                "objective": self.objective.to_dict(), "params": self.params.to_dict()}


CPU_SHARES = (1 / 3, 1 / 2, 2 / 3, 1.0)  # the joint search's CPU clocks: these shares of the top clock


def mode_grid(gpu_levels_mhz, board, knobs=KNOBS, cpu_table_mhz=None) -> list:
    """The modes a joint search covers on ``board`` (a :class:`pydvfs.boards.Board`): every GPU
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
                modes=None, board=None) -> tuple:
    """(search, the engine's device, plan fields) of a joint search on ``dev``, from the top mode
    within the caps: through the board's joint pin over its domains' tables (no ``pin_mode``),
    or through ``pin_mode`` over ``modes`` (default: :func:`mode_grid` of ``board``)."""
    caps = None
    if pin_mode is None:
        pin_mode = board_pin_mode(dev)
        if modes is None:
            modes, caps = device_modes(dev, gpu_levels_mhz)
    elif modes is None:
        modes = mode_grid(gpu_levels_mhz, board)
    search = JointSearch(modes, max(Mode(m) for m in modes), objective=objective, caps=caps)
    plan = {"start_mhz": search.start_mode, "centre_mhz": search.start_mode, "maxn_anchor": False,
            "start_source": "the top mode within the power mode's caps", "knobs": list(KNOBS),
            "modes": len(search.modes), "caps_mhz": list(search.caps)}
    return search, ModeDevice(dev, pin_mode, restore_mode), plan


__all__ = ["CPU_SHARES", "joint_setup", "board_pin_mode", "device_modes", "KNOBS", "ModeDevice", "mode_grid", "JointParams", "JointSearch", "Mode", "mode_name", "parse_knobs", "within_caps"]

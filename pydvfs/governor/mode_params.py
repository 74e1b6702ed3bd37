"""What an online search over modes (:mod:`pydvfs.governor.mode_search`) is given besides the
space: its tunables (:class:`ModeParams`, with the defaults over the GPU's levels alone and over
whole modes) and its prior (:class:`SearchPrior`: what the board measured before, and a
predicted start)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import InvalidValueError


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


__all__ = ["CurveParams", "JointParams", "ModeParams", "SearchPrior"]

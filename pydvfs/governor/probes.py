"""The design of an online search over modes (:mod:`pydvfs.governor.mode_search`): which modes
a round measures before the model has its say, how many windows a probe takes, and what the
run's length allows the round to explore.

Along the GPU axis through the centre (the start, or the held mode in a re-search): the centre
and two more levels (``jump_frac`` of the line at a time from its end, else ``bracket_frac``
either side, moved onto the prior's spread where the centre lies outside it); right after the
centre, the prior's predicted start. Over whole modes, the line's best and its two neighbours,
then one step along each other axis from the line's best (:meth:`Design.axis_scout`)."""
from __future__ import annotations

from ..device.levels import nearest_index
from .modes import MAXN, Mode


class Design:
    """The design and the budget of a :class:`ModeSearch`'s round (``search``: its state)."""

    def __init__(self, search):
        self.s = search

    def next(self):
        """The next mode of the design, or None once it is measured: along the GPU axis
        through the centre (the start, or the held mode in a re-search), the centre and two more
        (``jump_frac`` of the line at a time from its end, else ``bracket_frac`` either side);
        first, right after the centre, the prior's start. The other axes are then walked a step
        at a time from the best (the neighbour check) and by the model where it interpolates."""
        s, w = self.s, self.s.windows
        line = s.space.line(s._center)
        measured = sorted(m for m in w.win if m in line)
        n = len(line)
        ps = s.prior_start
        if ps is not None and s._round == 0 and ps not in w.win and s._center in w.win:
            return ps
        covered = len(set(measured) | {m for m, _, _ in s._prior_obs if m in line}) if s._round == 0 \
            else len(measured)
        if covered >= min(3, n) and s._center in w.win:
            if s.axes > 1 and measured and len(w.win) < s.params.max_modes:
                # the GPU-only search's choice: the line's best and its neighbours
                j = line.index(min(measured, key=w.mode_cost))
                known = set(w.win) | ({m for m, _, _ in s._prior_obs} if s._round == 0 else set())
                for k in (j - 1, j + 1):
                    if 0 <= k < n and line[k] not in known:
                        return line[k]
            return self.axis_scout()
        if s._center not in w.win:  # (after MAXN) the centre first
            return s._center
        candidates = self._line_candidates(line, measured)
        candidates += list(range(n))  # any unmeasured mode of the line, as a last resort
        for k in candidates:
            if 0 <= k < n and line[k] not in w.win:
                return line[k]
        return None

    def _line_candidates(self, line: list, measured: list) -> list:
        """The line's indices the design would measure next, best first (some may be measured)."""
        s, w = self.s, self.s.windows
        n = len(line)
        ps = s.prior_start
        i = line.index(s._center)
        at_end = s._round == 0 and i in (0, n - 1) and n > 3
        step = max(1, round((n - 1) * s.params.jump_frac)) if at_end else 1
        inward = 1 if i == 0 else -1
        if s._round == 0 and ps in line and ps in w.win and ps != s._center:
            # a predicted start measured: bracket it if it beats the centre, else between the two
            j, d = line.index(ps), max(1, round(n * s.params.bracket_frac))
            better = w.mode_cost(ps) < w.mode_cost(s._center)
            return [j + inward * d, j - inward * d] if better else [(i + j) // 2]
        if not at_end:  # bracket the start (about 10 % of the table either side on a fine one)
            d = max(1, round(n * s.params.bracket_frac))
            lo, hi = self.spread_ends(line, i - d, i + d)  # (the family's spread, where given)
            if 0 <= hi < n and self._beats_centre(line[hi]):
                # one curve, one least: a level above the centre beat it, so none below it can
                # (issue 51: on a board whose least is its top, each lower probe cost its windows)
                return [hi, hi + 1, i + 1, lo, i - 1]
            if self._beats_centre(MAXN, beyond_noise=False):
                # MAXN, the board's governor near the top under training's load, measured cheaper
                # than the start at all: the least lies above the start more often than below, and
                # there a level below costs the most (issue 51: on a held-out AGX Xavier whose
                # least is its top, 905 MHz took 5 windows at +14 %, the first run +1.85 % over MAXN)
                return [hi, lo, i - 1, i + 1]
            return [lo, hi, i - 1, i + 1]
        if len(measured) == 1:
            return [i + inward * step]
        second = line.index(measured[0] if measured[0] != s._center else measured[-1])
        # (worse only beyond a window's noise: from an end of the table a U-shaped curve goes on
        # falling inward, and one noisy window each sent the joint search back up to the top)
        better = w.mode_cost(line[second]) < w.mode_cost(s._center) * (1 + w.noise())
        return [second + inward * step] if better else [(i + second) // 2]

    def _beats_centre(self, m, beyond_noise: bool = True) -> bool:
        """``m`` (a mode, or MAXN) measured this round below the centre's cost (beyond a window's noise)."""
        w, c = self.s.windows, self.s._center
        k = 1 + w.noise() if beyond_noise else 1.0
        return m != c and w.measured(m) and w.measured(c) and w.mode_cost(m) * k < w.mode_cost(c)

    def spread_ends(self, line: list, lo: int, hi: int) -> tuple:
        """The round-0 bracket (line indices ``lo``, ``hi``), moved onto the prior's spread where
        the centre lies outside it (the family places the optimum on one side: a bracket point
        on the other is spent for nothing): the spread's ends, snapped to the line's GPU clocks."""
        s = self.s
        spread = s.prior.spread if s.prior is not None and s._round == 0 else None
        if spread is None:
            return lo, hi
        gpu = [m[0] if s.axes > 1 else m for m in line]
        c = gpu[line.index(s._center)]
        if spread[0] <= c <= spread[1]:
            return lo, hi
        return nearest_index(gpu, spread[0]), nearest_index(gpu, spread[1])

    def axis_scout(self):
        """After the line: one step along each axis not varied yet (measured here or in the prior),
        from the best measured mode, so that the model rests on every axis; None when done."""
        s, w = self.s, self.s.windows
        left = s.remaining_windows
        if s.axes == 1 or (left is not None and s._spent + left < s.params.scout_min_windows):
            return None  # (a short run: a step off the line would not pay back its windows)
        seen = list(w.win) + [m for m, _, _ in s._prior_obs]
        line = s.space.line(s._center)  # from the line's best: each axis's step alone, not one on top of another
        best = min((m for m in w.win if m in line), key=w.mode_cost, default=None) or w.best_measured()
        for d in range(1, s.axes):
            if len({m[d] for m in seen}) > 1:
                continue
            axis = sorted({x[d] for x in s.modes if all(x[o] == best[o] for o in range(3) if o != d)})
            i = axis.index(best[d])
            # a step down first (the stock mode is at the top) of about scout_frac of the clock:
            # a neighbour one small step away differs by less than the per-mode spread
            down = [k for k in range(i) if axis[k] <= axis[i] * (1 - s.params.scout_frac)]
            for k in (down[-1] if down else i - 1, i + 1):
                if 0 <= k < len(axis):
                    return Mode(axis[k] if o == d else best[o] for o in range(3))
        return None

    def required(self, m) -> int:
        """Windows the probe in progress takes at least: ``design_samples`` in the design (one
        for a one-axis start at an end of the table: a scout; ``samples`` for a start inside it,
        which the guard protects); else up to ``samples`` in all, or ``samples`` more."""
        s, w = self.s, self.s.windows
        have = len(w.windows(m)) if w.measured(m) else 0
        if (s._in_design or s._scouting) and not have:
            if s._round == 0 and not w.win and (m == s._center or m is MAXN):
                line = s.space.line(s._center)
                n = len(line)
                return 1 if n > 3 and line.index(s._center) in (0, n - 1) else s.params.samples
            return self.windows()
        return s.params.samples - have if have < s.params.samples else s.params.samples

    def windows(self) -> int:
        """``design_samples``; at least two in a run known to be long (``long_run_windows`` or more
        in all): there the second window costs little of the run and a sharper design pays."""
        left, p = self.s.remaining_windows, self.s.params
        if left is not None and self.s._spent + left >= p.long_run_windows:
            return max(p.design_samples, min(2, p.samples))
        return p.design_samples

    # -- the budget ----------------------------------------------------------------------------
    def explored(self) -> int:
        """Windows this round spent on modes other than the best measured."""
        w = self.s.windows
        best = w.best_measured()
        return self.s._spent - (len(w.win[best]) if best is not None else 0)

    def budget_left(self) -> bool:
        """May the round open a new mode? With the run's length known: while it has spent less
        than ``explore_share`` of the run (this round's windows and those left) off the best."""
        left = self.s.remaining_windows
        if left is None:
            return True
        return self.explored() < self.s.params.explore_share * (self.s._spent + left)

    def check_horizon(self) -> int:
        """Windows a check beyond the expected gain (a neighbour) is weighed over: those left in a
        run of known length; else what is left of ``horizon_windows`` or, once the run is older
        than that, as many windows again as it has run (a run that has gone on this long is as
        likely to go on as long again): a long run checks as it always did."""
        left = self.s.remaining_windows
        if left is not None:
            return max(1, left)
        return max(1, self.s.params.horizon_windows, self.s._age)


__all__ = ["Design"]

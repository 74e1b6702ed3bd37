/* decision_text.c - a decision in words, as both front ends print it (`govcore apply`'s text and
 * pydvfs's Decision.describe): the clock line, the goal, the bound's move and the predicted trade.
 * What only pydvfs knows of a decision (a learned or calibrated board's origin, the expected
 * saving's line) it adds around these. */
#include "policy.h"

#include <stdio.h>
#include <string.h>

/* A measure's name in text (pydvfs.measure.energy.LABEL reads it here). */
const char *gc_measure_label(const char *measure)
{
    return measure && strcmp(measure, "cpu-gpu") == 0 ? "CPU+GPU" : "module";
}

void gc_goal_text(char *out, size_t len, const gc_goal *g, const char *measure)
{
    static const char *const kinds[GC_OBJECTIVE_COUNT] = {
        "energy per step", "energy x time per step (EDP)", "energy x time^2 per step (ED2P)"};
    int n = snprintf(out, len, "%s %s", gc_measure_label(measure),
                     g->objective >= 0 && g->objective < GC_OBJECTIVE_COUNT ? kinds[g->objective] : "?");

    if (g->max_slowdown_pct >= 0 && n >= 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, ", step time within %g %% of the fastest clock's",
                 g->max_slowdown_pct);
}

void gc_decision_head(char *out, size_t len, const gc_decision *d)
{
    if (d->level_hz == 0)
        snprintf(out, len, "policy %s: MAXN (the board's own governor)", gc_policy_name(d->policy));
    else
        snprintf(out, len, "policy %s: GPU clock %g MHz", gc_policy_name(d->policy), gc_hz_to_mhz(d->level_hz));
}

/* Append one line (with its '\n') to out, which holds n bytes; the new length. */
static size_t add_line(char *out, size_t len, size_t n, const char *line)
{
    int r = n < len ? snprintf(out + n, len - n, "%s\n", line) : -1;

    return r < 0 || n + (size_t)r >= len ? n : n + (size_t)r;
}

void gc_decision_goal_lines(char *out, size_t len, const gc_decision *d, const char *measure)
{
    char line[512], goal[256];
    size_t n = 0;

    if (len)
        out[0] = '\0';
    if (d->level_hz == 0)
        return;
    if (d->goal.objective != GC_OBJECTIVE_ENERGY || d->goal.max_slowdown_pct >= 0 ||
        (measure && strcmp(measure, gc_energy_measures[0]) != 0)) {
        gc_goal_text(goal, sizeof goal, &d->goal, measure);
        snprintf(line, sizeof line, "objective %s", goal);
        n = add_line(out, len, n, line);
    }
    if (d->goal.max_slowdown_pct >= 0 && d->policy_level_hz && d->policy_level_hz != d->level_hz) {
        snprintf(line, sizeof line, "bound     %s chose %g MHz; %g MHz meets the %g %% slowdown bound",
                 gc_policy_name(d->policy), gc_hz_to_mhz(d->policy_level_hz), gc_hz_to_mhz(d->level_hz),
                 d->goal.max_slowdown_pct);
        n = add_line(out, len, n, line);
    }
    if (d->trade_vs_hz && d->trade_vs_hz != d->level_hz) {
        snprintf(line, sizeof line, "trade     %g MHz against %g MHz (the top level), predicted by the roofline "
                 "model: J/step %+.1f %%, s/step %+.1f %%", gc_hz_to_mhz(d->level_hz),
                 gc_hz_to_mhz(d->trade_vs_hz), d->trade_j_pct, d->trade_s_pct);
        add_line(out, len, n, line);
    }
}

/* decide.c - the decision: a policy's proposal mapped onto this board's table, checked, snapped
 * to a level, gated by what the tree knows of its saving, raised by a slowdown bound, and its
 * predicted trade; the lines that say why a board was left to its own governor; and the
 * decision acted on (gc_apply_goal: pin, or restore). */
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The level the slowdown bound leaves of the policy's: a policy that takes an objective
 * proposes again under the bound (the roofline policy: its objective's argmin over the levels
 * within it); any other policy's level raised to the lowest level at or above it within the
 * bound (the top level always is). */
static int bounded_level(gc_board *b, const gc_policy_entry *e, const gc_tree_model *m, const gc_roofline *rl,
                         const gc_workload *w, const gc_goal *g, uint64_t *level_hz)
{
    double mhz;
    int i = 0, rc;

    if (e->flags & GC_POLICY_TAKES_OBJECTIVE) {
        if ((rc = e->propose(b, m, rl, w, g, &mhz)) < 0)
            return rc;
        return gc_snap_hz(b, gc_mhz_to_hz(mhz), level_hz);
    }
    while (i < b->n_freqs - 1 && b->freqs_hz[i] < *level_hz)
        i++;
    while (!gc_roofline_within_bound(rl, w, g->max_slowdown_pct, b->freqs_hz, b->n_freqs, i))
        i++;
    *level_hz = b->freqs_hz[i];
    return 0;
}

/* The predicted trade of the level against the top level, where the curve is known. */
static void predict_trade(const gc_board *b, const gc_roofline *rl, const gc_workload *w, gc_decision *d)
{
    uint64_t top = b->freqs_hz[b->n_freqs - 1];
    double t_top = gc_roofline_time_s(rl, w, gc_hz_to_mhz(top));
    double e_top = gc_roofline_energy_j(rl, w, gc_hz_to_mhz(top));

    if (!(t_top > 0.0) || !(e_top > 0.0) || !isfinite(t_top) || !isfinite(e_top))
        return; /* a degenerate model: no ratio to give */
    d->trade_vs_hz = top;
    d->trade_s_pct = 100.0 * (gc_roofline_time_s(rl, w, gc_hz_to_mhz(d->level_hz)) / t_top - 1.0);
    d->trade_j_pct = 100.0 * (gc_roofline_energy_j(rl, w, gc_hz_to_mhz(d->level_hz)) / e_top - 1.0);
}

/* What the tree's training data says of the proposal of mlg (its class's saving) and ffg (the
 * FFG clock's), where the tree carries it. */
static void expectation(const gc_tree_model *m, int policy, gc_decision *d)
{
    int i;

    if (!m || !m->has_savings)
        return;
    if (policy == GC_POLICY_FFG) {
        d->has_expectation = 1;
        d->expected_saving_pct = m->ffg_saving_pct;
        d->saving_spread_pct = m->ffg_spread_pct;
        return;
    }
    if (policy != GC_POLICY_MLG)
        return;
    for (i = 0; i < m->n_classes && i < GC_MAX_CLASSES; i++)
        if (m->classes_mhz[i] == d->proposed_mhz) {
            d->has_expectation = 1;
            d->expected_saving_pct = m->class_saving_pct[i];
            d->saving_spread_pct = m->class_spread_pct[i];
            return;
        }
}

const char *gc_tree_origin_kind(const gc_tree_model *m)
{
    if (strcmp(m->origin, GC_ORIGIN_BUILTIN) == 0 && m->calibrated >= 0)
        return m->calibrated ? "calibrated" : "estimate";
    return m->origin;
}

/* What the family said of m's classes (gc_builtin_saving_ranges) where m is a built-in and the
 * policy mlg; NULL otherwise. */
static const gc_builtin_ranges *builtin_ranges(const gc_tree_model *m, int policy)
{
    int i;

    if (!m || policy != GC_POLICY_MLG || strcmp(m->origin, GC_ORIGIN_BUILTIN) != 0)
        return NULL;
    for (i = 0; i < gc_n_builtin_saving_ranges; i++)
        if (strcmp(gc_builtin_saving_ranges[i].board_id, m->board_id) == 0 &&
            strcmp(gc_builtin_saving_ranges[i].measure, m->measure) == 0)
            return &gc_builtin_saving_ranges[i];
    return NULL;
}

int gc_saving_range(const gc_tree_model *m, const gc_decision *d, double out[2])
{
    const gc_builtin_ranges *r = d ? builtin_ranges(m, d->policy) : NULL;
    int i, hits = 0;

    if (!r)
        return 0;
    if (d->level_hz == 0) { /* the tree's MAXN class, or kept at MAXN: nothing pinned, nothing saved */
        out[0] = out[1] = 0.0;
        return 1;
    }
    for (i = 0; i < r->n; i++)
        if (fabs(r->classes[i].mhz - d->proposed_mhz) < 0.5) {
            if (!hits || r->classes[i].range_pct[0] < out[0])
                out[0] = r->classes[i].range_pct[0];
            if (!hits || r->classes[i].range_pct[1] > out[1])
                out[1] = r->classes[i].range_pct[1];
            hits++;
        }
    return hits > 0;
}

/* The way to the saving a kept decision leaves on the table: every kept reason ends with it. */
#define GC_KEPT_WAY "; to get the saving, one governed run (`pydvfs run --policy online -- CMD`, the default) " \
    "or `pydvfs calibrate` (about a minute) calibrates this board for every workload"

void gc_kept_reason(const gc_decision *d, char *out, size_t len)
{
    if (!len)
        return;
    out[0] = '\0';
    if (d->kept_maxn == GC_KEPT_BELOW_TRAINED_LOAD) {
        snprintf(out, len, "left the board to its own governor: the workload's GPU load at MAXN, %g %%, is "
                 "below every workload the built-in %s policy was trained on (%g %% and up): the board's own "
                 "governor already runs the GPU low there, and the tree's %g MHz would be an extrapolation "
                 "that can cost more than MAXN" GC_KEPT_WAY, d->util_pct, gc_policy_name(d->policy),
                 d->trained_util_min_pct, gc_hz_to_mhz(d->kept_from_hz));
        return;
    }
    if (d->kept_maxn == GC_KEPT_NO_SAFE_CLOCK) {
        snprintf(out, len, "kept MAXN for lack of knowledge: no clock of the built-in %s policy saves energy "
                 "for workloads like this on every board this one may be (its simulator is an estimate: "
                 "the uncertainty family), and the board's own governor never costs more" GC_KEPT_WAY,
                 gc_policy_name(d->policy));
        return;
    }
    if (!d->kept_maxn)
        return;
    snprintf(out, len, "left the board to its own governor: the %s policy's %g MHz is expected to save "
             "%.1f %% against MAXN, spread %.1f %% in its training data, which is not clearly positive "
             "(expected minus %g spread <= 0)" GC_KEPT_WAY, gc_policy_name(d->policy),
             gc_hz_to_mhz(d->kept_from_hz), d->expected_saving_pct, d->saving_spread_pct, GC_SAVING_MARGIN_SD);
}

void gc_outside_reason(const gc_tree_model *m, int policy, const gc_workload *w, char *out, size_t len)
{
    const double v[3] = {w ? w->layers : 0, w ? w->hidden : 0, w ? w->seq_len : 0};
    const double lo[3] = {GC_TRAINED_LAYERS_MIN, GC_TRAINED_HIDDEN_MIN, GC_TRAINED_SEQ_LEN_MIN};
    const double hi[3] = {GC_TRAINED_LAYERS_MAX, GC_TRAINED_HIDDEN_MAX, GC_TRAINED_SEQ_LEN_MAX};
    size_t n = 0;
    int i, outside = 0;

    if (!len)
        return;
    out[0] = '\0';
    if (!w || !m || policy != GC_POLICY_MLG || strcmp(m->origin, GC_ORIGIN_BUILTIN) != 0)
        return;
    for (i = 0; i < 3; i++) /* a value typed rounded (SST-2's 13.32 as 13.3) is not outside */
        if (v[i] < lo[i] * (1 - GC_TRAINED_ROUNDING) || v[i] > hi[i] * (1 + GC_TRAINED_ROUNDING)) {
            int r = snprintf(out + n, len - n, "%s%s %g", outside ? ", " : "the workload's ",
                             gc_workload_fields[GC_WF_LAYERS + i].key, v[i]);

            if (r < 0 || (size_t)r >= len - n)
                return;
            n += (size_t)r;
            outside++;
        }
    if (outside)
        snprintf(out + n, len - n, " %s outside the built-in policy's training workloads (layers %g..%g, "
                 "hidden %g..%g, seq_len %g..%g): its clock is extrapolated; `pydvfs run --policy "
                 "online` measures this workload's own best clock", outside > 1 ? "are" : "is",
                 lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]);
}

/* What gc_decide_goal refuses before it asks the policy: a goal it cannot have, a workload it
 * lacks or that fails its checks, an objective or bound without the curve it needs. 0, or
 * -EINVAL with b->err. */
static int refuse_goal(gc_board *b, const gc_policy_entry *e, const gc_roofline *rl, const gc_workload *w,
                       const gc_goal *g)
{
    int bound;

    if (g->objective < 0 || g->objective >= GC_OBJECTIVE_COUNT || !isfinite(g->max_slowdown_pct)) {
        snprintf(b->err, sizeof b->err, "unknown objective %d or a slowdown bound that is not a "
                 "finite %% (got %g)", g->objective, g->max_slowdown_pct);
        return -EINVAL;
    }
    bound = g->max_slowdown_pct >= 0.0;
    if (!w && (!(e->flags & GC_POLICY_NO_WORKLOAD) || bound)) {
        snprintf(b->err, sizeof b->err, "the %s policy needs a workload", e->name);
        return -EINVAL;
    }
    if (w && gc_workload_check(w, b->err, sizeof b->err) < 0)
        return -EINVAL;
    if (g->objective != GC_OBJECTIVE_ENERGY && !(e->flags & (GC_POLICY_TAKES_OBJECTIVE | GC_POLICY_PINS_NOTHING))) {
        snprintf(b->err, sizeof b->err,
                 "the %s objective needs the workload's whole time and energy curve, and the %s "
                 "policy gives one clock: use --policy roofline (the curve predicted from a model "
                 "folder) or `pydvfs run --policy online` (the curve measured)",
                 gc_objective_name(g->objective), e->name);
        return -EINVAL;
    }
    if (bound && !rl && !(e->flags & (GC_POLICY_PINS_NOTHING | GC_POLICY_NEEDS_MODEL_DIR))) {
        snprintf(b->err, sizeof b->err,
                 "a slowdown bound needs the board's time curve: a model folder from `pydvfs "
                 "train` that holds roofline.txt (--model-dir)");
        return -EINVAL;
    }
    if ((e->flags & GC_POLICY_NEEDS_MODEL_DIR) && !rl) {
        snprintf(b->err, sizeof b->err,
                 "the %s policy needs a model folder with roofline.txt (from `pydvfs train`)", e->name);
        return -EINVAL;
    }
    return 0;
}

int gc_decide_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                   const gc_workload *w, const gc_goal *goal, gc_decision *d)
{
    static const gc_goal no_goal = {GC_OBJECTIVE_ENERGY, -1.0};
    const gc_policy_entry *e = gc_policy_of(policy);
    gc_goal unbounded;
    uint64_t want_hz;
    const gc_builtin_ranges *r;
    int rc, bound;

    memset(d, 0, sizeof *d);
    d->policy = policy;
    d->goal = goal ? *goal : no_goal;
    if (!e) {
        snprintf(b->err, sizeof b->err, "unknown policy %d", policy);
        return -EINVAL;
    }
    if ((rc = refuse_goal(b, e, rl, w, &d->goal)) < 0)
        return rc;
    bound = d->goal.max_slowdown_pct >= 0.0;
    /* the policy's own level first (the bound, if any, after) */
    unbounded = d->goal;
    unbounded.max_slowdown_pct = -1.0;
    if ((rc = e->propose(b, m, rl, w, &unbounded, &d->proposed_mhz)) < 0)
        return rc;
    expectation(m, policy, d);
    if (d->proposed_mhz == 0.0) { /* the tree's MAXN class: the board's own governor, as fast as the board */
        if (builtin_ranges(m, policy))
            d->kept_maxn = GC_KEPT_NO_SAFE_CLOCK; /* a built-in: no clock saves across its family */
        return 0;
    }
    if (policy != GC_POLICY_ROOFLINE) { /* the roofline policy chose from this board's table */
        double mhz = d->proposed_mhz;
        int mapped = 0;

        if ((rc = gc_map_to_board(m, b, &mhz, &mapped, b->err, sizeof b->err)) < 0)
            return rc;
        if (mapped) {
            d->mapped_from_mhz = d->proposed_mhz;
            d->proposed_mhz = mhz;
        }
    }
    /* A proposal that is not a clock, or far outside the table (a tree made for another board
     * whose table was not known to map it, a damaged model), is refused as `pin` refuses one:
     * never a silent guess at a clock. */
    if ((want_hz = gc_mhz_to_hz(d->proposed_mhz)) == 0) {
        snprintf(b->err, sizeof b->err, "the %s policy proposed %g MHz, which is not a clock; "
                 "the board was not changed", gc_policy_name(policy), d->proposed_mhz);
        return -EINVAL;
    }
    if (gc_check_near_table(b, want_hz) < 0) {
        char why[GC_ERR_MAX];

        memcpy(why, b->err, sizeof why);
        snprintf(b->err, sizeof b->err, "the %s policy proposed a clock this board does not "
                 "have: %s; the board was not changed (a model made for another board?)",
                 gc_policy_name(policy), why);
        return -EINVAL;
    }
    if (gc_snap_hz(b, want_hz, &d->level_hz) < 0) {
        snprintf(b->err, sizeof b->err, "the board lists no GPU clock levels");
        return -ENODEV;
    }
    d->policy_level_hz = d->level_hz;
    if ((r = builtin_ranges(m, policy)) && w && w->gpu_util_pct >= 0.0 && w->gpu_util_pct < r->util_min_pct) {
        /* more host-bound than anything the tree was trained on (enum gc_kept): leave it */
        d->kept_maxn = GC_KEPT_BELOW_TRAINED_LOAD;
        d->util_pct = w->gpu_util_pct;
        d->trained_util_min_pct = r->util_min_pct;
        d->kept_from_hz = d->level_hz;
        d->level_hz = 0;
        d->policy_level_hz = 0;
        return 0;
    }
    if (d->has_expectation && !(d->expected_saving_pct - GC_SAVING_MARGIN_SD * d->saving_spread_pct > 0.0)) {
        /* not clearly better than the board's own governor by what the tree knows: leave it */
        d->kept_maxn = GC_KEPT_NOT_CLEAR;
        d->kept_from_hz = d->level_hz;
        d->level_hz = 0;
        d->policy_level_hz = 0;
        return 0;
    }
    if (bound && (rc = bounded_level(b, e, m, rl, w, &d->goal, &d->level_hz)) < 0)
        return rc;
    if (rl && w)
        predict_trade(b, rl, w, d);
    return 0;
}

int gc_map_to_board(const gc_tree_model *m, const gc_board *b, double *mhz, int *mapped, char *err,
                    size_t err_len)
{
    double top_tree, top_board, ratio;

    *mapped = 0;
    if (!m || m->n_levels < 1 || b->n_freqs < 1)
        return 0;
    top_tree = m->levels_mhz[m->n_levels - 1];
    top_board = gc_hz_to_mhz(b->freqs_hz[b->n_freqs - 1]);
    if (!(top_tree > 0.0) || fabs(top_board - top_tree) <= 0.5)
        return 0;
    ratio = top_board / top_tree;
    if (ratio > GC_TREE_MAP_MAX_RATIO || ratio < 1.0 / GC_TREE_MAP_MAX_RATIO) {
        snprintf(err, err_len,
                 "the policy was trained on %s's clock table (%g..%g MHz) and this board's "
                 "(%g..%g MHz) is too different to map its choice onto (top levels %.2fx apart): "
                 "measure this board's own clock with `pydvfs run --policy online`, or train a "
                 "model on this board (`pydvfs sweep`, `pydvfs train --board`)",
                 m->board_id[0] ? m->board_id : "another board", m->levels_mhz[0], top_tree,
                 gc_hz_to_mhz(b->freqs_hz[0]), top_board, ratio);
        return -EINVAL;
    }
    *mhz = *mhz * ratio;
    *mapped = 1;
    return 0;
}

int gc_decide(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
              const gc_workload *w, gc_decision *d)
{
    return gc_decide_goal(b, m, rl, policy, w, NULL, d);
}

int gc_apply_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                  const gc_workload *w, const gc_goal *goal, const char *state_dir, gc_decision *d)
{
    uint64_t level;
    int rc, restored;

    if ((rc = gc_decide_goal(b, m, rl, policy, w, goal, d)) < 0)
        return rc;
    if (d->level_hz == 0)
        return gc_restore(b, state_dir, &restored);
    if ((rc = gc_pin_hz(b, d->level_hz, state_dir, &level)) < 0)
        return rc;
    d->clamped_from_hz = b->clamped_from_hz; /* the power mode's cap (powermode.h) */
    d->cap_hz = b->cap_hz;
    d->level_hz = level;
    return 0;
}

int gc_apply(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
             const gc_workload *w, const char *state_dir, gc_decision *d)
{
    return gc_apply_goal(b, m, rl, policy, w, NULL, state_dir, d);
}

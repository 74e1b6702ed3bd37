/* roofline.c - the frequency-aware roofline model (pydvfs/policy/roofline.py has the derivation):
 * a workload's predicted time and energy per token at a clock, the objectives it minimises, and
 * its argmin over a board's levels under a slowdown bound. roofline.txt is read by
 * policy_load.c. */
#include "policy.h"

#include <errno.h>
#include <string.h>

static const char *const objective_names[GC_OBJECTIVE_COUNT] = {"energy", "edp", "ed2p"};

int gc_objective_parse(const char *name, int *objective)
{
    int i;

    for (i = 0; i < GC_OBJECTIVE_COUNT; i++)
        if (strcmp(name, objective_names[i]) == 0) {
            *objective = i;
            return 0;
        }
    return -EINVAL;
}

const char *gc_objective_name(int objective)
{
    return (objective >= 0 && objective < GC_OBJECTIVE_COUNT) ? objective_names[objective] : "?";
}

static double vf_volts(const gc_roofline *r, double mhz)
{
    int i;

    if (mhz <= r->vf_mhz[0])
        return r->vf_v[0];
    for (i = 1; i < r->n_vf; i++)
        if (mhz <= r->vf_mhz[i]) {
            double t = (mhz - r->vf_mhz[i - 1]) / (r->vf_mhz[i] - r->vf_mhz[i - 1]);
            return r->vf_v[i - 1] + t * (r->vf_v[i] - r->vf_v[i - 1]);
        }
    return r->vf_v[r->n_vf - 1];
}

/* Per token: a (Gcycles, clock-scaled work) and b (s, clock-independent time). */
static void work_terms(const gc_roofline *r, const gc_workload *w, double *a, double *b)
{
    double L = w->layers, S = w->seq_len;

    *a = gc_c_tok(w) / r->k_gauge + r->q_gcyc * L / S;
    *b = r->m_s * (w->hidden * L) + (r->h0_s + r->h1_s * L) / S;
}

double gc_roofline_time_s(const gc_roofline *r, const gc_workload *w, double mhz)
{
    double a, b;

    work_terms(r, w, &a, &b);
    return a / (mhz / 1000.0) + b;
}

double gc_roofline_energy_j(const gc_roofline *r, const gc_workload *w, double mhz)
{
    double mt = w->hidden * w->layers, a, b;
    double f = mhz / 1000.0, v = vf_volts(r, mhz), v2 = v * v;

    work_terms(r, w, &a, &b);
    /* the energy basis [1/f, 1, V^2, f V^2] of pydvfs.curve_model, in the same order */
    return (1.0 / f) * (r->p_idle_w * a) + 1.0 * (r->p_idle_w * b + r->e_mem_j * mt) +
           v2 * (r->c_w * a) + (f * v2) * (r->c_idle_w * b);
}

/* Within the slowdown bound of the top level's predicted step time (always without a bound). */
int gc_roofline_within_bound(const gc_roofline *r, const gc_workload *w, double max_slowdown_pct,
                             const uint64_t *levels_hz, int n, int i)
{
    double top_s;

    if (max_slowdown_pct < 0.0 || i == n - 1)
        return 1;
    top_s = gc_roofline_time_s(r, w, gc_hz_to_mhz(levels_hz[n - 1]));
    return gc_roofline_time_s(r, w, gc_hz_to_mhz(levels_hz[i])) <= top_s * (1.0 + max_slowdown_pct / 100.0);
}

/* The index of the level within the bound with the lowest predicted E t^objective; ties: the
 * lower. The top level is always within the bound, so there is one. */
int gc_roofline_argmin(const gc_roofline *r, const gc_workload *w, int objective, double max_slowdown_pct,
                       const uint64_t *levels_hz, int n)
{
    double best_cost = 0.0, cost, t, mhz;
    int i, k, best = -1;

    for (i = 0; i < n; i++) {
        if (!gc_roofline_within_bound(r, w, max_slowdown_pct, levels_hz, n, i))
            continue;
        mhz = gc_hz_to_mhz(levels_hz[i]);
        cost = gc_roofline_energy_j(r, w, mhz);
        t = gc_roofline_time_s(r, w, mhz);
        for (k = 0; k < objective; k++)
            cost *= t;
        if (best < 0 || cost < best_cost) {
            best_cost = cost;
            best = i;
        }
    }
    return best;
}

int gc_propose_roofline(const gc_roofline *r, const gc_workload *w, const uint64_t *levels_hz, int n,
                        double *mhz)
{
    if (n < 1)
        return -EINVAL;
    *mhz = gc_hz_to_mhz(levels_hz[gc_roofline_argmin(r, w, GC_OBJECTIVE_ENERGY, -1.0, levels_hz, n)]);
    return 0;
}


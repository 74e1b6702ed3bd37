/* policy_table.c - the policies, registered as devfreq's governors are: one entry each in
 * gc_policies (name, help, flags, proposal), and which built-in tree a board and measure get. A
 * policy only proposes a clock; decide.c has the last word. */
#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The policies' proposals (below), and their table: one entry per policy, in enum gc_policy's
 * order for the policies it names. */
static int propose_mlg(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                       const gc_goal *g, double *mhz);
static int propose_ffg(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                       const gc_goal *g, double *mhz);
static int propose_rules(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                         const gc_goal *g, double *mhz);
static int propose_maxn(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                        const gc_goal *g, double *mhz);
static int propose_roofline(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                            const gc_goal *g, double *mhz);

const gc_policy_entry gc_policies[] = {
    {"mlg", "the learned decision tree's clock for the workload (default)", 0, propose_mlg},
    {"ffg", "the best fixed clock of the tree's training data", GC_POLICY_NO_WORKLOAD, propose_ffg},
    {"rules", "paper A's published rules", 0, propose_rules},
    {"maxn", "the board's own governor: restore, pin nothing", GC_POLICY_PINS_NOTHING | GC_POLICY_NO_WORKLOAD,
     propose_maxn},
    {"roofline", "the frequency-aware roofline model's optimum (needs a model folder's roofline.txt)",
     GC_POLICY_NEEDS_MODEL_DIR | GC_POLICY_TAKES_OBJECTIVE, propose_roofline},
};
const int gc_n_policies = (int)(sizeof gc_policies / sizeof gc_policies[0]);

const gc_policy_entry *gc_policy_of(int policy)
{
    return (policy >= 0 && policy < gc_n_policies) ? &gc_policies[policy] : NULL;
}

int gc_policy_parse(const char *name, int *policy)
{
    int i;

    for (i = 0; i < gc_n_policies; i++)
        if (strcmp(name, gc_policies[i].name) == 0) {
            *policy = i;
            return 0;
        }
    return -EINVAL;
}

const char *gc_policy_name(int policy)
{
    const gc_policy_entry *e = gc_policy_of(policy);

    return e ? e->name : "?";
}

void gc_policy_list(char *out, size_t len)
{
    size_t n = 0;
    int i, k;

    if (len)
        out[0] = '\0';
    for (i = 0; i < gc_n_policies && n < len; i++) {
        k = snprintf(out + n, len - n, "%s%s", i == 0 ? "" : i == gc_n_policies - 1 ? " or " : ", ",
                     gc_policies[i].name);
        if (k < 0)
            break;
        n += (size_t)k;
    }
}

int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t len)
{
    double x[GC_MAX_FEATURES], p[GC_MAX_CLASSES];
    int i, best = 0, rc;

    if (m->n_features > GC_MAX_FEATURES || m->n_classes > GC_MAX_CLASSES || m->n_classes < 1) {
        snprintf(err, len, "the model has too many features or classes for this build");
        return -EINVAL;
    }
    if ((rc = gc_features(m, w, x, err, len)) < 0)
        return rc;
    m->score(x, p);
    /* argmax, first maximum wins: as numpy.argmax in DecisionTreeClassifier.predict */
    for (i = 1; i < m->n_classes; i++)
        if (p[i] > p[best])
            best = i;
    *mhz = m->classes_mhz[best];
    return 0;
}

double gc_propose_rules(const gc_workload *w)
{
    /* Paper A's published tree (SPEC section 2). The GPU-utilisation split is read as applying
     * first: a GPU this idle is waiting on something else, and a high clock costs little. */
    if (w->gpu_util_pct >= 0.0 && w->gpu_util_pct <= 22.0)
        return 1020.0;
    if (w->layers <= 7.0)
        return w->seq_len <= 32.5 ? 510.0 : 612.0;
    return w->seq_len <= 53.0 ? 714.0 : 816.0;
}

static int propose_mlg(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                       const gc_goal *g, double *mhz)
{
    (void)rl;
    (void)g;
    return gc_propose_tree(m, w, mhz, b->err, sizeof b->err);
}

static int propose_ffg(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                       const gc_goal *g, double *mhz)
{
    (void)b;
    (void)rl;
    (void)w;
    (void)g;
    *mhz = m->ffg_mhz;
    return 0;
}

static int propose_rules(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                         const gc_goal *g, double *mhz)
{
    (void)b;
    (void)m;
    (void)rl;
    (void)g;
    *mhz = gc_propose_rules(w);
    return 0;
}

static int propose_maxn(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                        const gc_goal *g, double *mhz)
{
    (void)b;
    (void)m;
    (void)rl;
    (void)w;
    (void)g;
    *mhz = 0.0;
    return 0;
}

static int propose_roofline(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                            const gc_goal *g, double *mhz)
{
    (void)m;
    if (b->n_freqs < 1) {
        snprintf(b->err, sizeof b->err, "the board lists no GPU clock levels");
        return -ENODEV;
    }
    *mhz = gc_hz_to_mhz(b->freqs_hz[gc_roofline_argmin(rl, w, g->objective, g->max_slowdown_pct, b->freqs_hz,
                                                       b->n_freqs)]);
    return 0;
}

int gc_measure_parse(const char *name, const char **measure)
{
    int i;

    for (i = 0; gc_energy_measures[i]; i++)
        if (strcmp(name, gc_energy_measures[i]) == 0) {
            *measure = gc_energy_measures[i];
            return 0;
        }
    return -EINVAL;
}

const gc_tree_model *gc_builtin_for(const char *board_id, const char *measure)
{
    const char *mm;
    int i, pass;

    if (!measure)
        measure = gc_energy_measures[0];
    if (gc_measure_parse(measure, &mm) < 0)
        return NULL;
#ifdef GC_BUILTIN_TREE_ONLY /* a release built with its own POLICY: that tree, on every board */
    (void)pass;
    (void)i;
    (void)board_id;
#else
    for (pass = 0; pass < 2; pass++) {
        const char *want = pass == 0 ? (board_id ? board_id : "") : gc_builtin_fallback_board;

        for (i = 0; i < gc_n_builtin_policies; i++)
            if (strcmp(gc_builtin_policies[i].board_id, want) == 0 &&
                strcmp(gc_builtin_policies[i].measure, mm) == 0)
                return gc_builtin_policies[i].tree;
    }
#endif
    return &gc_builtin_tree;
}

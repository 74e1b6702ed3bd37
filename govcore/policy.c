/* policy.c - feature vectors, the policies' proposals, and the clamp to the board's table. */
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const encoders[] = {"bert", "encoder", "roberta", "deberta", "deberta-v2",
                                       "distilbert", "electra", "albert", "minilm", "xlm-roberta",
                                       NULL};
static const char *const decoders[] = {"pythia", "gpt", "decoder", "gpt_neox", "gpt2", "gptj",
                                       "llama", "gemma", "gemma2", "opt", "mistral", "qwen2",
                                       "phi", "phi3", "falcon", "bloom", NULL};

static int in_list(const char *const *list, const char *name)
{
    for (; *list; list++)
        if (strcasecmp(*list, name) == 0)
            return 1;
    return 0;
}

int gc_model_family(const char *model, int *is_decoder)
{
    if (in_list(encoders, model))
        *is_decoder = 0;
    else if (in_list(decoders, model))
        *is_decoder = 1;
    else
        return -EINVAL;
    return 0;
}

static const char *const policy_names[GC_POLICY_COUNT] = {"mlg", "ffg", "rules", "maxn"};

int gc_policy_parse(const char *name, int *policy)
{
    int i;

    for (i = 0; i < GC_POLICY_COUNT; i++)
        if (strcmp(name, policy_names[i]) == 0) {
            *policy = i;
            return 0;
        }
    return -EINVAL;
}

const char *gc_policy_name(int policy)
{
    return (policy >= 0 && policy < GC_POLICY_COUNT) ? policy_names[policy] : "?";
}

/* Compute per token of a transformer layer stack (paper B's proxy): 12 L d^2 + 3 L S d. */
static double c_tok(const gc_workload *w)
{
    return 12.0 * w->layers * w->hidden * w->hidden + 3.0 * w->layers * w->seq_len * w->hidden;
}

int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t len)
{
    int i;
    double util = w->gpu_util_pct;

    if (!(util >= 0.0))
        util = m->default_util_pct[w->is_decoder ? 1 : 0];
    for (i = 0; i < m->n_features && i < GC_MAX_FEATURES; i++) {
        const char *f = m->feature_names[i];
        double v;

        if (strcmp(f, "is_decoder") == 0)
            v = w->is_decoder ? 1.0 : 0.0;
        else if (strcmp(f, "gpu_util_pct") == 0)
            v = util;
        else if (strcmp(f, "layers") == 0)
            v = w->layers;
        else if (strcmp(f, "hidden") == 0)
            v = w->hidden;
        else if (strcmp(f, "seq_len") == 0)
            v = w->seq_len;
        else if (strcmp(f, "log10_c_tok") == 0)
            v = log10(c_tok(w));
        else if (strcmp(f, "intensity") == 0) /* c_tok per byte-proxy of traffic (d L) */
            v = c_tok(w) / (w->hidden * w->layers);
        else {
            snprintf(err, len, "the model uses a feature this build does not know: %s", f);
            return -EINVAL;
        }
        /* scikit-learn compares float32 features with its thresholds: do the same. */
        out[i] = (double)(float)v;
    }
    return 0;
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

int gc_decide(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w, gc_decision *d)
{
    int rc;

    memset(d, 0, sizeof *d);
    d->policy = policy;
    /* layers and hidden are whole numbers; util is a percentage, or negative for "unknown" */
    if (!(w->layers > 0.0) || !(w->hidden > 0.0) || !(w->seq_len > 0.0) || !isfinite(w->layers) ||
        !isfinite(w->hidden) || !isfinite(w->seq_len) || w->layers != floor(w->layers) ||
        w->hidden != floor(w->hidden) || isnan(w->gpu_util_pct) || w->gpu_util_pct > 100.0) {
        snprintf(b->err, sizeof b->err,
                 "workload needs whole layers and hidden > 0, seq-len > 0 and util within 0..100 "
                 "(got %g, %g, %g, %g)", w->layers, w->hidden, w->seq_len, w->gpu_util_pct);
        return -EINVAL;
    }
    switch (policy) {
    case GC_POLICY_MAXN:
        return 0;
    case GC_POLICY_FFG:
        d->proposed_mhz = m->ffg_mhz;
        break;
    case GC_POLICY_RULES:
        d->proposed_mhz = gc_propose_rules(w);
        break;
    case GC_POLICY_MLG:
        if ((rc = gc_propose_tree(m, w, &d->proposed_mhz, b->err, sizeof b->err)) < 0)
            return rc;
        break;
    default:
        snprintf(b->err, sizeof b->err, "unknown policy %d", policy);
        return -EINVAL;
    }
    if (d->proposed_mhz == 0.0)
        return 0; /* the tree's MAXN class */
    /* A proposal that is not a clock fails safe toward the top level. */
    if (gc_snap_hz(b, gc_mhz_to_hz(d->proposed_mhz), &d->level_hz) < 0)
        d->level_hz = b->freqs_hz[b->n_freqs - 1];
    return 0;
}

int gc_apply(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w,
             const char *state_dir, gc_decision *d)
{
    uint64_t level;
    int rc, restored;

    if ((rc = gc_decide(b, m, policy, w, d)) < 0)
        return rc;
    if (d->level_hz == 0)
        return gc_restore(b, state_dir, &restored);
    return gc_pin_hz(b, d->level_hz, state_dir, &level);
}

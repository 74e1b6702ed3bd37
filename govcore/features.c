/* features.c - what the policies read of a workload: the feature vector a tree names, and the
 * quantities it is made of (the Python twin is pydvfs's model features; the golden test holds
 * the two equal). */
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

double gc_weight_bits(const gc_workload *w)
{
    if (w->weight_bits > 0.0)
        return w->weight_bits;
    if (w->peft == GC_PEFT_QLORA)
        return 4.0;
    if (w->peft == GC_PEFT_LORA && w->precision != GC_PRECISION_FP32)
        return 16.0;
    return 32.0;
}

double gc_trainable_share(const gc_workload *w)
{
    double stack = 12.0 * w->layers * w->hidden * w->hidden, t;

    if (w->trainable_params > 0.0)
        t = w->trainable_params / stack;
    else if (w->peft == GC_PEFT_NONE)
        return 1.0;
    else
        t = 4.0 * (w->rank > 0.0 ? w->rank : GC_DEFAULT_LORA_RANK) * w->hidden * w->layers / stack;
    return t < 1.0 ? t : 1.0;
}

/* Compute per token of a transformer layer stack (paper B's proxy): 12 L d^2 + 3 L S d. */
double gc_c_tok(const gc_workload *w)
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
            v = log10(gc_c_tok(w));
        else if (strcmp(f, "intensity") == 0) /* c_tok per byte-proxy of traffic (d L) */
            v = gc_c_tok(w) / (w->hidden * w->layers);
        else if (strcmp(f, "trainable_share") == 0)
            v = gc_trainable_share(w);
        else if (strcmp(f, "weight_bits") == 0)
            v = gc_weight_bits(w);
        else if (strcmp(f, "compute_bits") == 0)
            v = w->precision == GC_PRECISION_FP32 ? 32.0 : 16.0;
        else {
            snprintf(err, len, "the model uses a feature this build does not know: %s", f);
            return -EINVAL;
        }
        /* scikit-learn compares float32 features with its thresholds: do the same. */
        out[i] = (double)(float)v;
    }
    return 0;
}

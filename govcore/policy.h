/* policy.h - where a GPU clock is chosen. Policies only *propose* a clock in MHz; gc_decide
 * clamps the proposal to the board's table (the core, not the policy, has the last word), and
 * gc_apply sets it through clock.c.
 *
 * Features are named; a trained tree lists the names it was trained on (in order) and
 * gc_features() computes each from a workload, so Python and C cannot disagree on the order.
 */
#ifndef GOVCORE_POLICY_H
#define GOVCORE_POLICY_H

#include "govcore.h"

#define GC_MAX_FEATURES 16
#define GC_MAX_CLASSES 32

enum gc_policy {
    GC_POLICY_MLG = 0,   /* the learned decision tree */
    GC_POLICY_FFG = 1,   /* the best fixed clock of the training data */
    GC_POLICY_RULES = 2, /* the paper's published rules */
    GC_POLICY_MAXN = 3,  /* the board's default governor state: restore, pin nothing */
    GC_POLICY_COUNT = 4  /* how many there are (gc_policy_name of 0 .. GC_POLICY_COUNT-1) */
};

/* What the policies know of a workload. */
typedef struct gc_workload {
    int is_decoder;      /* 0: encoder (BERT family), 1: decoder (Pythia / GPT family) */
    double gpu_util_pct; /* measured GPU utilisation, 0..100; negative if unknown */
    double layers;       /* transformer layers */
    double hidden;       /* hidden size */
    double seq_len;      /* average tokens per training sample */
} gc_workload;

/* A decision tree exported by tools/export_policy.py (m2cgen) or by `pydvfs train`. */
typedef struct gc_tree_model {
    const char *name;                     /* where it came from, e.g. "builtin: sim sweep" */
    void (*score)(double *input, double *output); /* m2cgen: class probabilities */
    int n_features;
    const char *const *feature_names;     /* in the order score() expects them */
    int n_classes;
    const double *classes_mhz;            /* class i means classes_mhz[i]; 0 means MAXN */
    double default_util_pct[2];           /* used when util is unknown: encoder, decoder */
    double ffg_mhz;                       /* the best fixed clock of the same training data */
} gc_tree_model;

/* The tree compiled into this build (govcore/policy_tree.c, generated). */
extern const gc_tree_model gc_builtin_tree;

/* The family of a model type name (case-insensitive): *is_decoder = 0 for encoders (bert,
 * roberta, deberta, ...), 1 for decoders (pythia, gpt, llama, ...). -EINVAL if unknown. */
int gc_model_family(const char *model, int *is_decoder);

/* Parse "mlg" / "ffg" / "rules" / "maxn". -EINVAL otherwise. */
int gc_policy_parse(const char *name, int *policy);
const char *gc_policy_name(int policy);

/* Feature vector for the tree's feature names. -EINVAL (with err) for an unknown name. */
int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t err_len);

/* Proposals, in MHz. */
int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t len);
double gc_propose_rules(const gc_workload *w);

/* The decision: what the policy proposes, and the board level it becomes. level_hz 0 means
 * MAXN: the maxn policy, or a tree that judged this workload too spiky to pin. */
typedef struct gc_decision {
    int policy;
    double proposed_mhz; /* 0 for MAXN */
    uint64_t level_hz;   /* 0 for MAXN */
} gc_decision;

int gc_decide(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w,
              gc_decision *d);

/* Decide and act: pin the level (or, for MAXN, restore the board's own state). */
int gc_apply(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w,
             const char *state_dir, gc_decision *d);

/* Load a tree compiled by `pydvfs train` (model_dir/policy.so, symbol gc_tree). The handle
 * must stay open while the model is used; close it with gc_tree_close. */
int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t len);
void gc_tree_close(void *handle);

#endif

/* policy.c - feature vectors, the policies' proposals, and the clamp to the board's table. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const encoders[] = {"bert", "encoder", "roberta", "deberta", "deberta-v2",
                                       "distilbert", "electra", "albert", "minilm", "xlm-roberta",
                                       NULL};
static const char *const decoders[] = {"pythia", "gpt", "decoder", "gpt_neox", "gpt2", "gptj",
                                       "llama", "gemma", "gemma2", "opt", "mistral", "qwen2",
                                       "phi", "phi3", "falcon", "bloom", "qwen", "qwen3",
                                       "smollm", "gemma3", "gemma3_text", NULL};

static int in_list(const char *const *list, const char *name)
{
    for (; *list; list++)
        if (strcasecmp(*list, name) == 0)
            return 1;
    return 0;
}

int gc_model_family(const char *model, int *is_decoder)
{
    char lead[24];
    size_t n = 0;

    if (in_list(encoders, model))
        *is_decoder = 0;
    else if (in_list(decoders, model))
        *is_decoder = 1;
    else {
        /* a model's own name (qwen2.5-0.5b, llama-3.2-1b, smollm2-135m, bert-base): the family
         * of its leading letters */
        while (n + 1 < sizeof lead && isalpha((unsigned char)model[n])) {
            lead[n] = model[n];
            n++;
        }
        lead[n] = '\0';
        if (n == 0 || model[n] == '\0' || isalpha((unsigned char)model[n]))
            return -EINVAL;
        if (in_list(encoders, lead))
            *is_decoder = 0;
        else if (in_list(decoders, lead))
            *is_decoder = 1;
        else
            return -EINVAL;
    }
    return 0;
}

const char *const gc_peft_names[GC_PEFT_COUNT] = {"none", "lora", "qlora"};
const char *const gc_precision_names[GC_PRECISION_COUNT] = {"fp32", "fp16", "bf16"};
const char *const gc_method_keys[GC_N_METHOD_KEYS] = {"peft", "rank", "trainable_params",
                                                      "weight_bits", "precision", "batch_size",
                                                      "tokens_per_step"};

const gc_workload_field gc_workload_fields[GC_N_WORKLOAD_FIELDS] = {
    {"model", GC_WK_NAME, 0, 0},
    {"layers", GC_WK_WHOLE, 1, 1024},
    {"hidden", GC_WK_WHOLE, 1, 65536},
    {"seq_len", GC_WK_DECIMAL, 1, 1048576},     /* average tokens per sample: at least one */
    {"util_pct", GC_WK_DECIMAL, 0, 100},
    {"peft", GC_WK_NAME, 0, 0},
    {"rank", GC_WK_WHOLE, 1, 65536},
    {"trainable_params", GC_WK_WHOLE, 1, 1e12},
    {"weight_bits", GC_WK_WHOLE, 4, 32},        /* and one of 32, 16, 8, 4 */
    {"precision", GC_WK_NAME, 0, 0},
    {"batch_size", GC_WK_WHOLE, 1, 65536},
    {"tokens_per_step", GC_WK_DECIMAL, 1, 1073741824},
    {"name", GC_WK_LABEL, 0, 0},
    {"task", GC_WK_LABEL, 0, 0},
    {"heads", GC_WK_WHOLE, 1, 1024},
    {"params", GC_WK_WHOLE, 1, 1e12},
    {"model_size", GC_WK_LABEL, 0, 0},
};

int gc_workload_field_of(const char *s, size_t n)
{
    int f;

    for (f = 0; f < GC_N_WORKLOAD_FIELDS; f++)
        if (strlen(gc_workload_fields[f].key) == n && memcmp(gc_workload_fields[f].key, s, n) == 0)
            return f;
    return -1;
}

int gc_parse_decimal(const char *s, size_t n, double *out)
{
    char buf[GC_NUMBER_DIGITS + 2];
    size_t i, digits = 0, points = 0;

    if (n == 0 || n >= sizeof buf || s[0] == '.' || s[n - 1] == '.')
        return -EINVAL;
    for (i = 0; i < n; i++) {
        if (s[i] == '.')
            points++;
        else if (s[i] >= '0' && s[i] <= '9')
            digits++;
        else
            return -EINVAL;
    }
    if (points > 1 || digits > GC_NUMBER_DIGITS)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL); /* the grammar above is a subset of what strtod reads exactly */
    return 0;
}

static int name_index(const char *const *names, int n, const char *value)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcasecmp(names[i], value) == 0)
            return i;
    return -1;
}

/* The bounds of a number field, as every refusal of it words them. */
static void bounds_text(int f, char *out, size_t len)
{
    const gc_workload_field *k = &gc_workload_fields[f];

    if (f == GC_WF_WEIGHT_BITS)
        snprintf(out, len, "workload weight_bits must be 32, 16, 8 or 4");
    else
        snprintf(out, len, "workload %s must be a %snumber from %.15g to %.15g", k->key,
                 k->kind == GC_WK_WHOLE ? "whole " : "", k->min, k->max);
}

/* A number of field f within its bounds. */
static int number_ok(int f, double v)
{
    const gc_workload_field *k = &gc_workload_fields[f];

    if (!(v >= k->min && v <= k->max) || (k->kind == GC_WK_WHOLE && v != floor(v)))
        return 0;
    return f != GC_WF_WEIGHT_BITS || v == 32.0 || v == 16.0 || v == 8.0 || v == 4.0;
}

/* The field's slot in w (NULL for a label or a name). */
static double *number_of(gc_workload *w, int f)
{
    switch (f) {
    case GC_WF_LAYERS: return &w->layers;
    case GC_WF_HIDDEN: return &w->hidden;
    case GC_WF_SEQ_LEN: return &w->seq_len;
    case GC_WF_UTIL_PCT: return &w->gpu_util_pct;
    case GC_WF_RANK: return &w->rank;
    case GC_WF_TRAINABLE_PARAMS: return &w->trainable_params;
    case GC_WF_WEIGHT_BITS: return &w->weight_bits;
    case GC_WF_BATCH_SIZE: return &w->batch_size;
    case GC_WF_TOKENS_PER_STEP: return &w->tokens_per_step;
    default: return NULL;
    }
}

static int printable_word(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

int gc_workload_set(gc_workload *w, int f, const char *value, size_t n, char *model, size_t model_len,
                    char *err, size_t len)
{
    const gc_workload_field *k;
    char text[GC_NUMBER_DIGITS + 2], bounds[160];
    double v, scratch;
    int i;

    if (f < 0 || f >= GC_N_WORKLOAD_FIELDS) {
        snprintf(err, len, "workload: unknown key %d", f);
        return -EINVAL;
    }
    k = &gc_workload_fields[f];
    if (n == 0 || !printable_word(value, n)) {
        snprintf(err, len, "workload %s: empty, or not printable ASCII without blanks", k->key);
        return -EINVAL;
    }
    if (k->kind == GC_WK_LABEL)
        return 0; /* a sweep's label: the policies do not read it */
    if (k->kind == GC_WK_NAME) {
        char name[GC_MODEL_NAME_MAX];

        if (n >= sizeof name || (f == GC_WF_MODEL && n >= model_len)) {
            snprintf(err, len, "workload %s: at most %zu characters", k->key,
                     (f == GC_WF_MODEL && model_len < sizeof name ? model_len : sizeof name) - 1);
            return -EINVAL;
        }
        memcpy(name, value, n);
        name[n] = '\0';
        if (f == GC_WF_MODEL) {
            if (gc_model_family(name, &w->is_decoder) < 0) {
                snprintf(err, len, "workload model: unknown model type: expected an encoder (bert, "
                         "roberta, deberta, ...) or a decoder (pythia, gpt, llama, qwen2, ...) (got '%s')",
                         name);
                return -EINVAL;
            }
            memcpy(model, name, n + 1);
            return 0;
        }
        {
            const char *const *names = f == GC_WF_PEFT ? gc_peft_names : gc_precision_names;

            if ((i = name_index(names, 3, name)) < 0) {
                snprintf(err, len, "workload %s: expected %s, %s or %s (got '%s')", k->key, names[0],
                         names[1], names[2], name);
                return -EINVAL;
            }
            *(f == GC_WF_PEFT ? &w->peft : &w->precision) = i;
            return 0;
        }
    }
    if (gc_parse_decimal(value, n, &v) < 0) {
        snprintf(err, len, "workload %s: not a plain decimal number (ASCII digits and at most one "
                 "'.': no sign, exponent, hex, '_' or blank; at most %d digits) (got '%.*s')", k->key,
                 GC_NUMBER_DIGITS, (int)(n < 40 ? n : 40), value);
        return -EINVAL;
    }
    if (!number_ok(f, v)) {
        memcpy(text, value, n); /* n fits: gc_parse_decimal took it */
        text[n] = '\0';
        bounds_text(f, bounds, sizeof bounds);
        snprintf(err, len, "%s (got '%s')", bounds, text);
        return -EINVAL;
    }
    *(number_of(w, f) ? number_of(w, f) : &scratch) = v;
    return 0;
}

int gc_workload_parse(const char *spec, gc_workload *w, char *model, size_t model_len, unsigned *have,
                      char *err, size_t len)
{
    size_t n = strlen(spec), i, start = 0;

    if (n == 0 || n > GC_WORKLOAD_SPEC_MAX) {
        snprintf(err, len, "workload: %s (a spec is 1 to %d bytes)", n ? "too long" : "empty",
                 GC_WORKLOAD_SPEC_MAX);
        return -EINVAL;
    }
    for (i = 0; i < n; i++)
        if (!printable_word(spec + i, 1)) {
            snprintf(err, len, "workload: a blank or a byte that is not printable ASCII at offset %zu "
                     "(keys and values are ASCII, without blanks)", i);
            return -EINVAL;
        }
    for (i = 0; i <= n; i++) {
        const char *item = spec + start, *eq;
        size_t m = i - start;
        int f, rc;

        if (i < n && spec[i] != ',')
            continue;
        start = i + 1;
        eq = memchr(item, '=', m);
        if (!eq || eq == item) { /* an empty value: gc_workload_set says so, as for the daemon */
            snprintf(err, len, "workload: expected key=value, got '%.*s'", (int)(m < 40 ? m : 40), item);
            return -EINVAL;
        }
        if ((f = gc_workload_field_of(item, (size_t)(eq - item))) < 0) {
            char known[320];
            size_t used = 0;
            int k;

            for (k = 0; k < GC_N_WORKLOAD_FIELDS && used < sizeof known; k++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", k ? ", " : "",
                                         gc_workload_fields[k].key);
            snprintf(err, len, "workload: unknown key '%.*s' (known: %s)",
                     (int)((size_t)(eq - item) < 40 ? (size_t)(eq - item) : 40), item, known);
            return -EINVAL;
        }
        if (*have & (1u << f)) {
            snprintf(err, len, "workload: %s given twice", gc_workload_fields[f].key);
            return -EINVAL;
        }
        *have |= 1u << f;
        if ((rc = gc_workload_set(w, f, eq + 1, (size_t)(item + m - eq - 1), model, model_len, err, len)) < 0)
            return rc;
    }
    return 0;
}

int gc_workload_check(const gc_workload *w, char *err, size_t len)
{
    double stack, most;
    int f;

    if (w->peft < 0 || w->peft >= GC_PEFT_COUNT || w->precision < 0 || w->precision >= GC_PRECISION_COUNT) {
        snprintf(err, len, "workload: unknown peft %d or precision %d", w->peft, w->precision);
        return -EINVAL;
    }
    for (f = 0; f < GC_N_WORKLOAD_FIELDS; f++) {
        double *v = number_of((gc_workload *)w, f);

        /* util_pct < 0 and the method counts 0 mean "not given" */
        if (!v || (f == GC_WF_UTIL_PCT && *v < 0.0) || (f >= GC_WF_PEFT && *v == 0.0))
            continue;
        if (!number_ok(f, *v)) {
            bounds_text(f, err, len);
            return -EINVAL;
        }
    }
    if (w->rank > 0.0 && w->peft == GC_PEFT_NONE) {
        snprintf(err, len, "workload rank is a LoRA rank: give peft=lora or peft=qlora with it");
        return -EINVAL;
    }
    if (w->rank > w->hidden) {
        snprintf(err, len, "workload rank %.15g is above hidden %.15g: a LoRA rank is at most the "
                 "size of the matrices it adapts", w->rank, w->hidden);
        return -EINVAL;
    }
    if ((w->weight_bits == 8.0 || w->weight_bits == 4.0) && w->peft != GC_PEFT_QLORA) {
        snprintf(err, len, "workload weight_bits=%g: quantised weights are frozen, give peft=qlora",
                 w->weight_bits);
        return -EINVAL;
    }
    if (w->peft == GC_PEFT_QLORA && (w->weight_bits == 32.0 || w->weight_bits == 16.0)) {
        snprintf(err, len, "workload peft=qlora quantises the weights to 4 or 8 bits, got "
                 "weight_bits=%g", w->weight_bits);
        return -EINVAL;
    }
    stack = 12.0 * w->layers * w->hidden * w->hidden;
    if (stack * GC_MIN_WEIGHT_BITS / 8.0 > GC_MAX_MEMORY_BYTES) {
        snprintf(err, len, "workload layers=%.15g, hidden=%.15g: the layers' weights alone (12 L d^2 = "
                 "%.3g parameters) need %.0f GB even at %d bits, more than the largest Jetson's %.0f GB",
                 w->layers, w->hidden, stack, stack * GC_MIN_WEIGHT_BITS / 8e9, GC_MIN_WEIGHT_BITS,
                 GC_MAX_MEMORY_BYTES / 1e9);
        return -EINVAL;
    }
    most = GC_MAX_STACK_FACTOR * stack + 2.0 * GC_MAX_VOCAB * w->hidden;
    if (w->trainable_params > most) {
        snprintf(err, len, "workload trainable_params=%.15g is more than a model of %.15g layers of "
                 "hidden %.15g can have (at most %.3g: %g x 12 L d^2 and two embeddings of %.0f tokens)",
                 w->trainable_params, w->layers, w->hidden, most, GC_MAX_STACK_FACTOR, GC_MAX_VOCAB);
        return -EINVAL;
    }
    if (w->rank > 0.0 && w->trainable_params > 0.0 && w->trainable_params < w->rank * w->hidden) {
        snprintf(err, len, "workload trainable_params=%.15g is fewer than one rank-%.15g adapter of "
                 "hidden %.15g holds (%.15g): give rank or trainable_params, not two that disagree",
                 w->trainable_params, w->rank, w->hidden, w->rank * w->hidden);
        return -EINVAL;
    }
    return 0;
}

void gc_method_format(const gc_workload *w, char *out, size_t len)
{
    const double nums[GC_N_METHOD_KEYS] = {0, w->rank, w->trainable_params, w->weight_bits, 0,
                                           w->batch_size, w->tokens_per_step};
    size_t n = 0;
    int k, r;

    if (len)
        out[0] = '\0';
    for (k = 0; k < GC_N_METHOD_KEYS && n < len; k++) {
        if (k == 0 || k == 4) {
            int i = k == 0 ? w->peft : w->precision;

            if (i <= 0 || i >= (k == 0 ? GC_PEFT_COUNT : GC_PRECISION_COUNT))
                continue;
            r = snprintf(out + n, len - n, " %s=%s", gc_method_keys[k],
                         k == 0 ? gc_peft_names[i] : gc_precision_names[i]);
        } else if (nums[k] > 0.0) {
            char num[48];
            size_t m;

            /* plain decimal, as the protocol reads numbers: 6 places, trailing zeros cut */
            snprintf(num, sizeof num, "%.6f", nums[k]);
            m = strlen(num);
            while (m > 1 && num[m - 1] == '0')
                num[--m] = '\0';
            if (m > 1 && num[m - 1] == '.')
                num[--m] = '\0';
            r = snprintf(out + n, len - n, " %s=%s", gc_method_keys[k], num);
        } else {
            continue;
        }
        if (r < 0)
            break;
        n += (size_t)r;
    }
    if (n >= len && len) /* cut: never half a key */
        out[0] = '\0';
}

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

static int roofline_argmin(const gc_roofline *r, const gc_workload *w, int objective,
                           double max_slowdown_pct, const uint64_t *levels_hz, int n);

static int propose_roofline(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                            const gc_goal *g, double *mhz)
{
    (void)m;
    if (b->n_freqs < 1) {
        snprintf(b->err, sizeof b->err, "the board lists no GPU clock levels");
        return -ENODEV;
    }
    *mhz = gc_hz_to_mhz(b->freqs_hz[roofline_argmin(rl, w, g->objective, g->max_slowdown_pct, b->freqs_hz,
                                                    b->n_freqs)]);
    return 0;
}

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

static int within_bound(const gc_roofline *r, const gc_workload *w, double max_slowdown_pct,
                        const uint64_t *levels_hz, int n, int i);

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
    while (!within_bound(rl, w, g->max_slowdown_pct, b->freqs_hz, b->n_freqs, i))
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
    if (d->goal.objective < 0 || d->goal.objective >= GC_OBJECTIVE_COUNT ||
        !isfinite(d->goal.max_slowdown_pct)) {
        snprintf(b->err, sizeof b->err, "unknown objective %d or a slowdown bound that is not a "
                 "finite %% (got %g)", d->goal.objective, d->goal.max_slowdown_pct);
        return -EINVAL;
    }
    bound = d->goal.max_slowdown_pct >= 0.0;
    if (!w && (!(e->flags & GC_POLICY_NO_WORKLOAD) || bound)) {
        snprintf(b->err, sizeof b->err, "the %s policy needs a workload", e->name);
        return -EINVAL;
    }
    if (w && gc_workload_check(w, b->err, sizeof b->err) < 0)
        return -EINVAL;
    if (d->goal.objective != GC_OBJECTIVE_ENERGY &&
        !(e->flags & (GC_POLICY_TAKES_OBJECTIVE | GC_POLICY_PINS_NOTHING))) {
        snprintf(b->err, sizeof b->err,
                 "the %s objective needs the workload's whole time and energy curve, and the %s "
                 "policy gives one clock: use --policy roofline (the curve predicted from a model "
                 "folder) or `pydvfs run --policy online` (the curve measured)",
                 gc_objective_name(d->goal.objective), e->name);
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

/* ---- the roofline model ---------------------------------------------------------------------- */
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

    *a = c_tok(w) / r->k_gauge + r->q_gcyc * L / S;
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
static int within_bound(const gc_roofline *r, const gc_workload *w, double max_slowdown_pct,
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
static int roofline_argmin(const gc_roofline *r, const gc_workload *w, int objective,
                           double max_slowdown_pct, const uint64_t *levels_hz, int n)
{
    double best_cost = 0.0, cost, t, mhz;
    int i, k, best = -1;

    for (i = 0; i < n; i++) {
        if (!within_bound(r, w, max_slowdown_pct, levels_hz, n, i))
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
    *mhz = gc_hz_to_mhz(levels_hz[roofline_argmin(r, w, GC_OBJECTIVE_ENERGY, -1.0, levels_hz, n)]);
    return 0;
}


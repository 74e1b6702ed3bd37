/* workload.c - the one grammar of a workload (docs/policy.md, "The workload grammar"): the model
 * families, the keys and the bounds of their numbers, the spec parser, the checks that the keys
 * agree, and the method keys as the protocol writes them. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

void gc_plain_decimal(char *out, size_t len, double v)
{
    char buf[GC_NUMBER_DIGITS + 64];
    int places, whole = 1;
    double t;

    for (t = v < 0 ? -v : v; t >= 10.0 && whole < GC_NUMBER_DIGITS; t /= 10.0)
        whole++;
    /* the fewest places that read back as v, within the grammar's digits (else the most) */
    for (places = 0; places < GC_NUMBER_DIGITS - whole; places++) {
        snprintf(buf, sizeof buf, "%.*f", places, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    snprintf(out, len, "%.*f", places, v);
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

            gc_plain_decimal(num, sizeof num, nums[k]);
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

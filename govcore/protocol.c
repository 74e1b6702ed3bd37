/* protocol.c - the strict parser of `govcore serve`'s requests (see protocol.h). */
#include "protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 20 /* apply: 5 workload keys, 7 of how it trains, policy, tree, dry_run, objective, bound */

static int refuse(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
}

int gc_protocol_name_ok(const char *s)
{
    size_t i;

    /* no leading '.': a tree name must never walk up ("..") or hide */
    if (!s[0] || s[0] == '.')
        return 0;
    for (i = 0; s[i]; i++)
        if (i >= GC_WINDOW_NAME_MAX - 1 || !name_char(s[i]))
            return 0;
    return 1;
}

/* A token of the request: start and length inside the line. */
typedef struct token {
    const char *s;
    size_t n;
} token;

static int tok_is(const token *t, const char *word)
{
    return strlen(word) == t->n && memcmp(t->s, word, t->n) == 0;
}

/* Copy a token into a NUL-terminated buffer; -EINVAL if it does not fit. */
static int tok_copy(const token *t, char *out, size_t len)
{
    if (t->n + 1 > len)
        return -EINVAL;
    memcpy(out, t->s, t->n);
    out[t->n] = '\0';
    return 0;
}

/* Plain decimal: digits, at most one '.', at least one digit before it, at most
 * GC_NUMBER_DIGITS digits in all. */
static int parse_decimal(const char *s, size_t n, double *out)
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

static int parse_apply(const token *tok, int n_tok, gc_request *req, char *err, size_t len)
{
    enum { K_MODEL = 1, K_LAYERS = 2, K_HIDDEN = 4, K_SEQ = 8, K_UTIL = 16, K_POLICY = 32,
           K_TREE = 64, K_DRY = 128, K_OBJECTIVE = 256, K_SLOWDOWN = 512, K_ENERGY = 1024,
           N_KEYS = 11 };
    static const char *const keys[N_KEYS] = {"model", "layers", "hidden", "seq_len", "util_pct",
                                             "policy", "tree", "dry_run", "objective",
                                             "max_slowdown_pct", "energy"};
    char value[GC_TREE_NAME_MAX], why[160];
    int have = 0, have_method = 0, i, k, m;
    double num;

    req->policy = GC_POLICY_MLG;
    req->workload.gpu_util_pct = -1.0;
    req->goal.objective = GC_OBJECTIVE_ENERGY;
    req->goal.max_slowdown_pct = -1.0;
    req->measure = gc_energy_measures[0];
    for (i = 1; i < n_tok; i++) {
        const char *eq = memchr(tok[i].s, '=', tok[i].n);
        token key, val;

        if (!eq)
            return refuse(err, len, "apply: expected KEY=VALUE (argument %d)", i);
        key.s = tok[i].s;
        key.n = (size_t)(eq - tok[i].s);
        val.s = eq + 1;
        val.n = tok[i].n - key.n - 1;
        for (k = 0; k < N_KEYS && !tok_is(&key, keys[k]); k++)
            ;
        if (k == N_KEYS && key.n < sizeof value && tok_copy(&key, value, sizeof value) == 0 &&
            (m = gc_method_key(value)) >= 0) { /* how it trains: peft, rank, precision, ... */
            if (have_method & (1 << m))
                return refuse(err, len, "apply: %s given twice", gc_method_keys[m]);
            have_method |= 1 << m;
            if (val.n == 0 || tok_copy(&val, value, sizeof value) < 0)
                return refuse(err, len, "apply: %s: empty or too long", gc_method_keys[m]);
            if (m != 0 && m != 4 && parse_decimal(val.s, val.n, &num) < 0)
                return refuse(err, len, "apply: %s: not a plain decimal number", gc_method_keys[m]);
            if (gc_method_set(&req->workload, m, value, why, sizeof why) < 0) {
                char *got = strstr(why, " (got '");

                if (got) /* the reason never echoes the input */
                    *got = '\0';
                return refuse(err, len, "apply: %s", why);
            }
            continue;
        }
        if (k == N_KEYS)
            return refuse(err, len, "apply: unknown key (argument %d); keys: model, layers, "
                                    "hidden, seq_len, util_pct, peft, rank, trainable_params, "
                                    "weight_bits, precision, batch_size, tokens_per_step, policy, "
                                    "tree, dry_run, objective, max_slowdown_pct, energy", i);
        if (have & (1 << k))
            return refuse(err, len, "apply: %s given twice", keys[k]);
        have |= 1 << k;
        if (val.n == 0 || tok_copy(&val, value, sizeof value) < 0)
            return refuse(err, len, "apply: %s: empty or too long", keys[k]);
        switch (1 << k) {
        case K_MODEL:
            if (val.n >= GC_MODEL_NAME_MAX || !gc_protocol_name_ok(value) ||
                gc_model_family(value, &req->workload.is_decoder) < 0)
                return refuse(err, len, "apply: unknown model type: expected an encoder (bert, "
                                        "roberta, ...) or a decoder (pythia, gpt, llama, ...)");
            memcpy(req->model, value, val.n + 1);
            break;
        case K_LAYERS:
        case K_HIDDEN:
        case K_SEQ:
        case K_UTIL: {
            double *dst = k == 1 ? &req->workload.layers : k == 2 ? &req->workload.hidden
                        : k == 3 ? &req->workload.seq_len : &req->workload.gpu_util_pct;
            if (parse_decimal(val.s, val.n, dst) < 0)
                return refuse(err, len, "apply: %s: not a plain decimal number", keys[k]);
            break;
        }
        case K_POLICY:
            if (gc_policy_parse(value, &req->policy) < 0) {
                char names[128];

                gc_policy_list(names, sizeof names);
                return refuse(err, len, "apply: unknown policy: expected %s", names);
            }
            break;
        case K_OBJECTIVE:
            if (gc_objective_parse(value, &req->goal.objective) < 0)
                return refuse(err, len, "apply: unknown objective: expected energy, edp or ed2p");
            break;
        case K_SLOWDOWN:
            if (parse_decimal(val.s, val.n, &req->goal.max_slowdown_pct) < 0 ||
                req->goal.max_slowdown_pct > GC_MAX_SLOWDOWN_PCT)
                return refuse(err, len, "apply: max_slowdown_pct: a plain decimal number of %% "
                                        "from 0 to %d", GC_MAX_SLOWDOWN_PCT);
            break;
        case K_ENERGY:
            if (gc_measure_parse(value, &req->measure) < 0)
                return refuse(err, len, "apply: unknown energy measure: expected %s or %s",
                              gc_energy_measures[0], gc_energy_measures[1]);
            break;
        case K_TREE:
            if (!gc_protocol_name_ok(value))
                return refuse(err, len, "apply: tree: a name of [A-Za-z0-9_.:-], not starting "
                                        "with '.', at most 63 characters");
            memcpy(req->tree, value, val.n + 1);
            break;
        case K_DRY:
            if (val.n != 1 || (value[0] != '0' && value[0] != '1'))
                return refuse(err, len, "apply: dry_run is 0 or 1");
            req->dry_run = value[0] == '1';
            break;
        }
    }
    if ((have & (K_MODEL | K_LAYERS | K_HIDDEN | K_SEQ)) != (K_MODEL | K_LAYERS | K_HIDDEN | K_SEQ))
        return refuse(err, len, "apply needs model=, layers=, hidden= and seq_len=");
    if (gc_method_check(&req->workload, why, sizeof why) < 0)
        return refuse(err, len, "apply: %s", why);
    return 0;
}

int gc_request_parse(const char *line, size_t len, gc_request *req, char *err, size_t err_len)
{
    token tok[MAX_TOKENS];
    int n_tok = 0;
    size_t i, start = 0;

    memset(req, 0, sizeof *req);
    if (len == 0)
        return refuse(err, err_len, "empty request");
    if (len > GC_REQ_MAX)
        return refuse(err, err_len, "request longer than %d bytes", GC_REQ_MAX);
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];

        if (c < 0x20 || c > 0x7e)
            return refuse(err, err_len, "request holds a byte that is not printable ASCII "
                                        "(offset %zu)", i);
    }
    /* split on single spaces; an empty token means a doubled, leading or trailing space */
    for (i = 0; i <= len; i++) {
        if (i < len && line[i] != ' ')
            continue;
        if (i == start)
            return refuse(err, err_len, "stray space at offset %zu", i);
        if (n_tok == MAX_TOKENS)
            return refuse(err, err_len, "too many arguments (at most %d)", MAX_TOKENS - 1);
        tok[n_tok].s = line + start;
        tok[n_tok].n = i - start;
        n_tok++;
        start = i + 1;
    }
    if (tok_is(&tok[0], "version") || tok_is(&tok[0], "status") || tok_is(&tok[0], "restore")) {
        if (n_tok != 1)
            return refuse(err, err_len, "%s takes no argument",
                          tok_is(&tok[0], "version") ? "version"
                          : tok_is(&tok[0], "status") ? "status" : "restore");
        req->kind = tok_is(&tok[0], "version") ? GC_REQ_VERSION
                    : tok_is(&tok[0], "status") ? GC_REQ_STATUS : GC_REQ_RESTORE;
        return 0;
    }
    if (tok_is(&tok[0], "pin")) {
        int i;

        if (n_tok < 2 || n_tok > 5 || gc_parse_mhz(tok[1].s, tok[1].n, &req->hz) < 0)
            return refuse(err, err_len, "usage: pin MHZ [nearest=1] [emc_mhz=MHZ] [cpu_mhz=MHZ] (MHZ: "
                          GC_MHZ_GRAMMAR ")");
        req->mhz = gc_hz_to_mhz(req->hz);
        /* the clocks beside the GPU's: each key at most once, checked against the board by the
         * daemon (domain.h) */
        for (i = 2; i < n_tok; i++) {
            const char *eq = memchr(tok[i].s, '=', tok[i].n);
            token key;
            uint64_t *slot;

            if (tok_is(&tok[i], "nearest=1")) {
                if (req->nearest)
                    return refuse(err, err_len, "pin: a key given twice");
                req->nearest = 1;
                continue;
            }
            if (!eq)
                return refuse(err, err_len, "pin: expected nearest=1, emc_mhz=MHZ or cpu_mhz=MHZ (argument %d)", i);
            key.s = tok[i].s;
            key.n = (size_t)(eq - tok[i].s);
            if (tok_is(&key, "emc_mhz"))
                slot = &req->emc_hz;
            else if (tok_is(&key, "cpu_mhz"))
                slot = &req->cpu_hz;
            else
                return refuse(err, err_len, "pin: unknown key (argument %d); keys: nearest=1, emc_mhz, cpu_mhz", i);
            if (*slot)
                return refuse(err, err_len, "pin: a key given twice");
            if (gc_parse_mhz(eq + 1, tok[i].n - key.n - 1, slot) < 0)
                return refuse(err, err_len, "pin: argument %d: not a clock (" GC_MHZ_GRAMMAR ")", i);
        }
        req->kind = GC_REQ_PIN;
        return 0;
    }
    if (tok_is(&tok[0], "begin") || tok_is(&tok[0], "end")) {
        if (n_tok != 2 || tok_copy(&tok[1], req->name, sizeof req->name) < 0 ||
            !gc_protocol_name_ok(req->name))
            return refuse(err, err_len, "usage: begin|end NAME (1..63 of [A-Za-z0-9_.:-], not "
                                        "starting with '.')");
        req->kind = tok_is(&tok[0], "begin") ? GC_REQ_BEGIN : GC_REQ_END;
        return 0;
    }
    if (tok_is(&tok[0], "apply")) {
        req->kind = GC_REQ_APPLY;
        return parse_apply(tok, n_tok, req, err, err_len);
    }
    return refuse(err, err_len, "unknown request (expected version, status, pin, restore, apply, "
                                "begin or end)");
}

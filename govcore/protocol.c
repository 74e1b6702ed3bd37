/* protocol.c - the strict parser of `govcore serve`'s requests (see protocol.h). */
#include "protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 24 /* apply: the workload's 17 keys (gc_workload_fields), policy, tree, dry_run, objective, bound, energy */

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

static int parse_apply(const token *tok, int n_tok, gc_request *req, char *err, size_t len)
{
    /* the request's own keys; the workload's are gc_workload_fields' (its one grammar) */
    enum { K_POLICY = 1, K_TREE = 2, K_DRY = 4, K_OBJECTIVE = 8, K_SLOWDOWN = 16, K_ENERGY = 32,
           N_KEYS = 6 };
    static const char *const keys[N_KEYS] = {"policy", "tree", "dry_run", "objective",
                                             "max_slowdown_pct", "energy"};
    char value[GC_TREE_NAME_MAX], why[GC_ERR_MAX];
    unsigned have_workload = 0;
    int have = 0, i, k, f;

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
        if ((f = gc_workload_field_of(key.s, key.n)) >= 0) {
            char *got;

            if (have_workload & (1u << f))
                return refuse(err, len, "apply: workload: %s given twice", gc_workload_fields[f].key);
            have_workload |= 1u << f;
            if (gc_workload_set(&req->workload, f, val.s, val.n, req->model, sizeof req->model, why,
                                sizeof why) < 0) {
                if ((got = strstr(why, " (got '"))) /* the reason never echoes the input */
                    *got = '\0';
                return refuse(err, len, "apply: %s", why);
            }
            continue;
        }
        for (k = 0; k < N_KEYS && !tok_is(&key, keys[k]); k++)
            ;
        if (k == N_KEYS)
            return refuse(err, len, "apply: unknown key (argument %d); keys: the workload's (model, "
                                    "layers, hidden, seq_len, util_pct, peft, rank, trainable_params, "
                                    "weight_bits, precision, batch_size, tokens_per_step, ...), policy, "
                                    "tree, dry_run, objective, max_slowdown_pct, energy", i);
        if (have & (1 << k))
            return refuse(err, len, "apply: %s given twice", keys[k]);
        have |= 1 << k;
        if (val.n == 0 || tok_copy(&val, value, sizeof value) < 0)
            return refuse(err, len, "apply: %s: empty or too long", keys[k]);
        switch (1 << k) {
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
            if (gc_parse_decimal(val.s, val.n, &req->goal.max_slowdown_pct) < 0 ||
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
    if ((have_workload & GC_WORKLOAD_REQUIRED) != GC_WORKLOAD_REQUIRED)
        return refuse(err, len, "apply needs model=, layers=, hidden= and seq_len=");
    if (gc_workload_check(&req->workload, why, sizeof why) < 0)
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

int gc_request_format_apply(const gc_request *req, char *out, size_t len, char *err, size_t err_len)
{
    const gc_workload *w = &req->workload;
    char layers[32], hidden[32], seq_len[32], util[48] = "", bound[64] = "", method[256];
    char energy[32] = "", tree[GC_TREE_NAME_MAX + 8] = "", objective[32] = "";
    gc_request check;
    int n;

    gc_plain_decimal(layers, sizeof layers, w->layers);
    gc_plain_decimal(hidden, sizeof hidden, w->hidden);
    gc_plain_decimal(seq_len, sizeof seq_len, w->seq_len);
    if (w->gpu_util_pct >= 0) {
        strcpy(util, " util_pct=");
        gc_plain_decimal(util + strlen(util), sizeof util - strlen(util), w->gpu_util_pct);
    }
    gc_method_format(w, method, sizeof method);
    if (req->goal.objective != GC_OBJECTIVE_ENERGY)
        snprintf(objective, sizeof objective, " objective=%s", gc_objective_name(req->goal.objective));
    if (req->goal.max_slowdown_pct >= 0) {
        strcpy(bound, " max_slowdown_pct=");
        gc_plain_decimal(bound + strlen(bound), sizeof bound - strlen(bound), req->goal.max_slowdown_pct);
    }
    if (req->measure)
        snprintf(energy, sizeof energy, " energy=%.20s", req->measure);
    if (req->tree[0])
        snprintf(tree, sizeof tree, " tree=%s", req->tree);
    n = snprintf(out, len, "apply model=%s layers=%s hidden=%s seq_len=%s%s%s policy=%s%s%s%s%s%s",
                 req->model, layers, hidden, seq_len, util, method, gc_policy_name(req->policy),
                 objective, bound, energy, tree, req->dry_run ? " dry_run=1" : "");
    if (n < 0 || (size_t)n >= len) {
        if (len)
            out[0] = '\0';
        return refuse(err, err_len, "apply request longer than its buffer");
    }
    return gc_request_parse(out, (size_t)n, &check, err, err_len);
}

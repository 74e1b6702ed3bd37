/* protocol.h - the requests of `govcore serve`: one line each, at most GC_REQ_MAX bytes,
 * parsed strictly (this file is pure: no I/O, no board; it is fuzzed on its own).
 *
 *   version
 *   status
 *   pin MHZ [nearest=1]          MHZ: a clock (gc_parse_mhz's grammar), snapped to the board's
 *                                table as a direct pin is (the one snap: clients send the clock
 *                                asked for); refused more than one level outside it unless
 *                                nearest=1. The reply's freq_hz is the level set, exact
 *       [emc_mhz=MHZ] [cpu_mhz=MHZ]
 *                                the memory clock (one of its rates) and every cpufreq policy
 *                                (each one's nearest level), pinned with the GPU as one
 *                                (domain.h)
 *   restore
 *   apply KEY=VALUE...           the workload's keys, values and bounds by its one grammar
 *                                (policy.h's gc_workload_fields: model, layers, hidden,
 *                                seq_len required; util_pct, how it trains, a sweep's labels),
 *                                policy (mlg|ffg|rules|maxn|roofline), tree (a policy installed
 *                                by root), dry_run (0|1), objective (energy|edp|ed2p),
 *                                max_slowdown_pct (plain decimal, at most 1000); each at most
 *                                once. The roofline policy and a slowdown bound use the
 *                                roofline.txt of tree's folder
 *   begin NAME / end NAME        a sampler window; NAME is 1..63 of [A-Za-z0-9_.:-]
 *
 * Grammar: printable ASCII only, tokens separated by exactly one space, no leading or trailing
 * space, lower-case verbs and keys, numbers in plain decimal (gc_parse_decimal: digits, at most
 * one '.', no sign, no exponent, no hex; a clock: gc_parse_mhz). The line's "\n" is not part
 * of the request.
 *
 * Every reply is one line of JSON: the record (the same keys as the verb's --json output), or
 * {"error": MESSAGE, "errno": N}.
 */
#ifndef GOVCORE_PROTOCOL_H
#define GOVCORE_PROTOCOL_H

#include "policy.h"

#include <stddef.h>

#define GC_PROTOCOL_VERSION 1
#define GC_REQ_MAX 512          /* bytes of one request, without its newline */
#define GC_WINDOW_NAME_MAX 64   /* a window name's buffer (63 characters) */
#define GC_TREE_NAME_MAX 64     /* an installed policy's name's buffer */
#define GC_MAX_SLOWDOWN_PCT 1000 /* the largest slowdown bound a request may give, % */

enum gc_req_kind {
    GC_REQ_VERSION = 1,
    GC_REQ_STATUS,
    GC_REQ_PIN,
    GC_REQ_RESTORE,
    GC_REQ_APPLY,
    GC_REQ_BEGIN,
    GC_REQ_END,
};

typedef struct gc_request {
    int kind;                         /* enum gc_req_kind */
    uint64_t hz;                      /* pin: the clock asked for, exactly as given */
    double mhz;                       /* pin: the same, MHz */
    uint64_t emc_hz, cpu_hz;          /* pin: the EMC / CPU clocks asked for; 0: not given */
    int nearest;                      /* pin: 1 = the nearest level even far outside the table */
    char name[GC_WINDOW_NAME_MAX];    /* begin/end: the window */
    /* apply */
    int policy;                       /* enum gc_policy */
    gc_workload workload;             /* gpu_util_pct < 0: not given */
    char model[GC_MODEL_NAME_MAX];    /* the model type, a known family */
    char tree[GC_TREE_NAME_MAX];      /* "" : the built-in tree */
    int dry_run;
    gc_goal goal;                     /* objective (default energy), max_slowdown_pct (< 0: none) */
    const char *measure;              /* energy=: the built-in policy's measure (gc_energy_measures) */
} gc_request;

/* Parse one request (len bytes, no newline; need not be NUL-terminated). 0, or -EINVAL with a
 * one-line reason in err (never echoing the input's bytes). */
int gc_request_parse(const char *line, size_t len, gc_request *req, char *err, size_t err_len);

/* The apply request line of req (req->kind is not read): the inverse of gc_request_parse, and
 * the one place a client spells it (`govcore apply` through the daemon, pydvfs's RemoteBoard).
 * The workload's keys in gc_workload_fields' order, a number as gc_plain_decimal writes it and
 * only where it is given (method keys: where not the default); then policy, objective (where not
 * energy), max_slowdown_pct (where >= 0), energy (where req->measure is set), tree (where not "")
 * and dry_run=1. The line is parsed back before it is returned: 0, or -EINVAL with the parser's
 * one-line reason in err (a request the daemon would refuse is never sent). */
int gc_request_format_apply(const gc_request *req, char *out, size_t len, char *err, size_t err_len);

/* 1 if s (NUL-terminated) is a valid window or tree name. */
int gc_protocol_name_ok(const char *s);

#endif

/* fuzz_protocol.c - libFuzzer harness for govcore serve's request parser (govcore/protocol.c).
 * Built with clang -fsanitize=fuzzer,address,undefined by `make -C govcore fuzz`. Besides the
 * sanitizers' checks, every input must give either a well-formed request or -EINVAL with a
 * printable, bounded reason that never echoes the input. */
#include "protocol.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void require(int cond)
{
    if (!cond)
        abort();
}

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

/* The formatter is the parser's inverse: an accepted apply request, formatted and parsed again,
 * is the same request (its labels aside, which the request does not keep), and fits where the
 * original left room for the keys it adds (policy=, energy=). */
static void round_trip(const gc_request *rq, size_t size)
{
    char line[GC_REQ_MAX + 1], err[GC_ERR_MAX];
    gc_request again;

    if (gc_request_format_apply(rq, line, sizeof line, err, sizeof err) < 0) {
        require(size > GC_REQ_MAX - 48);
        return;
    }
    require(gc_request_parse(line, strlen(line), &again, err, sizeof err) == 0);
    require(again.kind == GC_REQ_APPLY && again.policy == rq->policy && again.dry_run == rq->dry_run);
    require(memcmp(&again.workload, &rq->workload, sizeof again.workload) == 0);
    require(strcmp(again.model, rq->model) == 0 && strcmp(again.tree, rq->tree) == 0);
    require(again.goal.objective == rq->goal.objective &&
            again.goal.max_slowdown_pct == rq->goal.max_slowdown_pct && again.measure == rq->measure);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gc_request rq;
    char err[GC_ERR_MAX];
    size_t i;
    int rc;

    err[0] = '\0';
    rc = gc_request_parse((const char *)data, size, &rq, err, sizeof err);
    if (rc < 0) {
        require(rc == -EINVAL);
        require(err[0] != '\0' && strlen(err) < sizeof err && printable(err));
        return 0;
    }
    require(rc == 0 && size > 0 && size <= GC_REQ_MAX);
    for (i = 0; i < size; i++)
        require(data[i] >= 0x20 && data[i] <= 0x7e);
    switch (rq.kind) {
    case GC_REQ_VERSION:
    case GC_REQ_STATUS:
    case GC_REQ_RESTORE:
        break;
    case GC_REQ_PIN:
        require(isfinite(rq.mhz) && rq.mhz > 0 && gc_mhz_to_hz(rq.mhz) > 0);
        break;
    case GC_REQ_BEGIN:
    case GC_REQ_END:
        require(memchr(rq.name, '\0', sizeof rq.name) && gc_protocol_name_ok(rq.name));
        break;
    case GC_REQ_APPLY:
        require(rq.model[0] && memchr(rq.model, '\0', sizeof rq.model));
        require(!rq.tree[0] || gc_protocol_name_ok(rq.tree));
        require(isfinite(rq.workload.layers) && isfinite(rq.workload.hidden) &&
                isfinite(rq.workload.seq_len) && isfinite(rq.workload.gpu_util_pct));
        require(rq.policy >= 0 && rq.policy < gc_n_policies);
        require(rq.dry_run == 0 || rq.dry_run == 1);
        require(rq.goal.objective >= 0 && rq.goal.objective < GC_OBJECTIVE_COUNT);
        require(rq.goal.max_slowdown_pct < 0 || (isfinite(rq.goal.max_slowdown_pct) &&
                                                 rq.goal.max_slowdown_pct <= GC_MAX_SLOWDOWN_PCT));
        round_trip(&rq, size);
        break;
    default:
        abort();
    }
    return 0;
}

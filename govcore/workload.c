/* workload.c - the one reader of a workload's text, `model=..,layers=..,hidden=..,seq_len=..`:
 * `govcore apply --workload` and the Slurm plugin's `--dvfs-workload` (spank/spank_pydvfs.c). */
#include "policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gc_workload_item(char *item, gc_workload *w, const char **model_name, int *have, char *err,
                     size_t len)
{
    static const char *const ignored[] = {"name", "task", "heads", "params", "model_size"};
    char *eq = strchr(item, '='), *end;
    char why[GC_ERR_MAX];
    double *num = NULL;
    int bit = 0, m;
    size_t k;

    if (!eq || eq == item || !eq[1]) {
        snprintf(err, len, "--workload: expected key=value, got '%s'", item);
        return -EINVAL;
    }
    *eq = '\0';
    if ((m = gc_method_key(item)) >= 0) { /* how it trains: peft, rank, precision, ... */
        if (*have & (1024 << m)) {
            snprintf(err, len, "--workload: %s given twice", item);
            return -EINVAL;
        }
        *have |= 1024 << m;
        if (gc_method_set(w, m, eq + 1, why, sizeof why) < 0) {
            snprintf(err, len, "--workload: %s", why);
            return -EINVAL;
        }
        return 0;
    }
    if (strcmp(item, "model") == 0) {
        *model_name = eq + 1;
        bit = 1;
    } else if (strcmp(item, "layers") == 0) {
        num = &w->layers;
        bit = 2;
    } else if (strcmp(item, "hidden") == 0) {
        num = &w->hidden;
        bit = 4;
    } else if (strcmp(item, "seq_len") == 0) {
        num = &w->seq_len;
        bit = 8;
    } else if (strcmp(item, "util_pct") == 0) {
        num = &w->gpu_util_pct;
        bit = 16;
    } else {
        for (k = 0; k < sizeof ignored / sizeof ignored[0]; k++)
            if (strcmp(item, ignored[k]) == 0) {
                if (*have & (32 << k)) {
                    snprintf(err, len, "--workload: %s given twice", item);
                    return -EINVAL;
                }
                *have |= 32 << k;
                return 0;
            }
        snprintf(err, len, "--workload: unknown key '%s' (known: model, layers, hidden, seq_len, "
                 "util_pct, peft, rank, trainable_params, weight_bits, precision, batch_size, "
                 "tokens_per_step)", item);
        return -EINVAL;
    }
    if (*have & bit) { /* as the daemon and pydvfs: each key at most once */
        snprintf(err, len, "--workload: %s given twice", item);
        return -EINVAL;
    }
    if (num) {
        errno = 0;
        *num = strtod(eq + 1, &end);
        if (errno != 0 || end == eq + 1 || *end != '\0' || !isfinite(*num)) {
            snprintf(err, len, "%s: not a number: '%s'", item, eq + 1);
            return -EINVAL;
        }
    }
    *have |= bit;
    return 0;
}

/* propose_loop.c - the cost of one gc_propose_tree call (features + tree + argmax), timed over
 * N calls in a C loop. Built and run by bench/bench_policy.py; kept out of the extension, which
 * holds only what production code calls.
 *
 *   propose_loop MODEL_DIR IS_DECODER UTIL_PCT LAYERS HIDDEN SEQ_LEN N   -> mean ns per call
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    gc_tree_model m;
    gc_workload w;
    void *handle = NULL;
    char err[GC_ERR_MAX] = "";
    struct timespec t0, t1;
    double mhz = 0, sink = 0;
    long i, n;

    if (argc != 8) {
        fprintf(stderr, "usage: propose_loop MODEL_DIR IS_DECODER UTIL_PCT LAYERS HIDDEN SEQ_LEN N\n");
        return 2;
    }
    if (gc_tree_load(argv[1], &m, &handle, err, sizeof err) < 0) {
        fprintf(stderr, "propose_loop: %s\n", err);
        return 2;
    }
    w.is_decoder = atoi(argv[2]);
    w.gpu_util_pct = atof(argv[3]);
    w.layers = atof(argv[4]);
    w.hidden = atof(argv[5]);
    w.seq_len = atof(argv[6]);
    n = atol(argv[7]);
    if (n < 1) {
        gc_tree_close(handle);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; i++) {
        gc_propose_tree(&m, &w, &mhz, err, sizeof err);
        sink += mhz;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    gc_tree_close(handle);
    printf("%.3f %g\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n, sink / n);
    return 0;
}

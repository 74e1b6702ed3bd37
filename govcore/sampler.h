/* sampler.h - the high-rate INA3221 sampler: a pthread that reads the rail files, integrates
 * energy and keeps a ring buffer of raw samples.
 *
 * Plain C99 + POSIX threads, no Python. Every function returns 0 or -errno.
 *
 * Threading. The caller never reads a board file: gc_sampler_start launches one thread that
 * owns every file descriptor; the caller only takes snapshots of the shared counters, under a
 * mutex held for a few hundred nanoseconds. Snapshots can be taken from any thread.
 *
 * Units (one conversion point each, in sampler.c):
 *   power   - uW as integers: hwmon mV x mA is exactly uW; ina3221x mW x 1000; hwmon power
 *             channels (powerN_input) are uW as read.
 *   energy  - the trapezoid integral is kept exactly, in integers: twice the energy, as whole
 *             nJ plus a fJ remainder (0..999999), so no rounding ever accumulates; windows
 *             report int64 nJ (exact to 1 nJ) and double J.
 *   time    - CLOCK_MONOTONIC ns (the same clock as Python's time.monotonic on Linux).
 *   load    - GPU load in permille (0..1000, the devfreq `load` file), integrated over time.
 *
 * Windows. A window is the difference of two snapshots (gc_sampler_snapshot, gc_window_diff),
 * so any number of windows may overlap and none costs the thread anything. A snapshot taken
 * between two samples extends each rail's integral to the snapshot time holding the rail's
 * last reading (zero-order hold), so a window's duration is exact and its energy error at each
 * edge is at most |dP| x (one sample interval) / 2.
 */
#ifndef GOVCORE_SAMPLER_H
#define GOVCORE_SAMPLER_H

#include "govcore.h"

#include <stddef.h>
#include <stdint.h>

#define GC_SAMPLER_FALLBACK_RATE_HZ 150.0   /* sensor rate when update_interval is unknown */
#define GC_SAMPLER_MAX_RATE_HZ 100000.0     /* above this, ask for flat out (rate < 0) */
#define GC_SAMPLER_MIN_RATE_HZ 0.01         /* one sample per 100 s; slower integrates nothing */
#define GC_SAMPLER_RING_DEFAULT 65536       /* samples kept for traces */
#define GC_SAMPLER_RING_MAX (1 << 24)
#define GC_SAMPLER_START_WAIT_MS 2000       /* start waits this long for the first sample */
#define GC_SAMPLER_STOP_WAIT_MS 1000        /* stop waits this long past one period */
#define GC_SAMPLE_MISSING INT32_MIN         /* a ring entry whose reading failed */
#define GC_SAMPLER_MAX_INTERPOLATED_PCT 5.0 /* more of a window bridged over failed reads (or
                                               a negative reading): the front ends warn, and
                                               `measure --strict` fails */

typedef struct gc_sampler gc_sampler;

typedef struct gc_sampler_config {
    double rate_hz;          /* samples per second; 0: follow the sensor's update_interval
                                (GC_SAMPLER_FALLBACK_RATE_HZ if unknown); < 0: flat out */
    uint32_t rail_mask;      /* bit i samples b->rails[i]; 0: every rail */
    uint32_t ring_capacity;  /* samples kept for traces; 0: GC_SAMPLER_RING_DEFAULT */
} gc_sampler_config;

/* The cumulative counters at one instant. Opaque in meaning; subtract two with
 * gc_window_diff. */
typedef struct gc_snapshot {
    int64_t t_ns;                    /* CLOCK_MONOTONIC time of the snapshot */
    int n_rails;
    int64_t e2_nj[GC_MAX_RAILS];     /* twice the energy integral: whole nJ ... */
    int64_t e2_fj[GC_MAX_RAILS];     /* ... plus a remainder in fJ, 0..999999 */
    int64_t load2_pm_ns;             /* twice the integral of GPU load, permille x ns */
    int64_t load_ns;                 /* time covered by the load integral, ns */
    uint64_t samples;                /* sample rounds completed */
    uint64_t read_errors;            /* failed file reads (all files) */
    /* Reading quality per rail. A round whose reading of a rail fails leaves a gap that the
     * trapezoid bridges from the last good reading to the next (interpolated), or that a
     * snapshot holds the last reading across (held). gap_ns is the time covered that way. */
    uint64_t failed_reads[GC_MAX_RAILS];     /* rounds whose reading of the rail failed */
    int64_t gap_ns[GC_MAX_RAILS];            /* time interpolated or held over failed reads */
    uint64_t negative_readings[GC_MAX_RAILS];/* readings with negative power: integrated as 0 */
} gc_snapshot;

/* What happened between two snapshots. */
typedef struct gc_window {
    int64_t duration_ns;
    int n_rails;                     /* same order as gc_sampler_rail_name */
    int64_t energy_nj[GC_MAX_RAILS]; /* trapezoid energy per rail, nJ */
    double energy_j[GC_MAX_RAILS];   /* the same in J */
    double avg_power_w[GC_MAX_RAILS];/* energy_j / duration */
    double gpu_util_pct;             /* time-weighted mean GPU load, %; -1 if no load file */
    uint64_t samples;
    uint64_t read_errors;
    double rate_hz;                  /* samples / duration */
    uint64_t failed_reads[GC_MAX_RAILS];     /* per rail, see gc_snapshot */
    uint64_t negative_readings[GC_MAX_RAILS];
    double interpolated_pct[GC_MAX_RAILS];   /* gap time / duration, 0..100 */
    int readings_ok;                 /* 1: no rail above GC_SAMPLER_MAX_INTERPOLATED_PCT and no
                                        negative reading */
} gc_window;

typedef struct gc_sampler_stats {
    int running;                     /* 1 between start and stop */
    double rate_hz;                  /* the configured rate; 0 means flat out */
    int64_t period_ns;               /* pacing period; 0 = flat out */
    uint64_t samples;
    uint64_t read_errors;
    uint64_t overruns;               /* deadlines missed because a round took too long */
    uint64_t reopens;                /* rail files reopened after they vanished */
    int64_t first_t_ns;              /* first and last sample times (0 if none) */
    int64_t last_t_ns;
    int64_t thread_cpu_ns;           /* CPU time of the sampler thread (refreshed every 64
                                        rounds and at exit) */
    uint32_t ring_count;             /* samples now in the ring (<= capacity) */
    uint32_t ring_capacity;
    int abandoned;                   /* 1 if stop gave up waiting on a blocked read */
} gc_sampler_stats;

/* Open the rail (and GPU load) files of a discovered board. -ENODEV (with b->err) if the board
 * has no INA3221 rail or none is selected; -EINVAL for a bad config; -errno (with b->err) if a
 * rail file cannot be opened. Nothing is read yet. */
int gc_sampler_create(gc_sampler **out, gc_board *b, const gc_sampler_config *cfg);

/* Start the thread and wait (at most GC_SAMPLER_START_WAIT_MS) for its first sample.
 * Calling it again while running does nothing. A sampler runs once: -EINVAL after stop. */
int gc_sampler_start(gc_sampler *s);

/* Ask the thread to stop and wait for it at most one period + GC_SAMPLER_STOP_WAIT_MS. If it
 * is stuck in a read that does not return, it is detached (stats.abandoned = 1) and frees its
 * own resources when the read returns; counters stay frozen at the last complete sample.
 * Safe from any thread, any number of times, and before start. */
int gc_sampler_stop(gc_sampler *s);

/* Stop if needed and release the caller's reference. */
void gc_sampler_free(gc_sampler *s);

int gc_sampler_n_rails(const gc_sampler *s);
const char *gc_sampler_rail_name(const gc_sampler *s, int i);   /* NULL if out of range */
int gc_sampler_has_load(const gc_sampler *s);
/* The board table's id of the sampled board ("" if unknown). */
const char *gc_sampler_board_id(const gc_sampler *s);
/* A rail role's rails (GC_ROLE_MODULE, _CPU_GPU, _GPU), as indices of the sampled rails in
 * *rails: the count, 0 if the board has no such role, -1 if it is not known (a board outside
 * the table, a rail missing, repeated or not sampled). */
int gc_sampler_role(const gc_sampler *s, int role, const int **rails);
/* 1 if a known role is summed over the rails present, an optional rail of it missing or not
 * sampled (gc_board.role_partial: the AGX Orin's module without VDDQ_VDD2_1V8AO). */
int gc_sampler_role_partial(const gc_sampler *s, int role);
/* A window's energy over a role's rails, each once (J); 0 with *known = 0 where not known. */
double gc_window_role_j(const gc_sampler *s, const gc_window *w, int role, int *known);

/* The counters now (between two samples: extended to now, holding the last reading). */
int gc_sampler_snapshot(gc_sampler *s, gc_snapshot *snap);

/* b - a. -EINVAL if the snapshots are of different samplers' shapes or b is before a. */
int gc_window_diff(const gc_snapshot *a, const gc_snapshot *b, gc_window *w);

int gc_sampler_get_stats(gc_sampler *s, gc_sampler_stats *st);

/* Copy the newest min(ring_count, max_samples) samples, oldest first. t_ns[max_samples];
 * power_uw[max_samples * n_rails] row-major (GC_SAMPLE_MISSING where a read failed);
 * load_pm[max_samples] (-1 where missing or no load file). Any output may be NULL. */
int gc_sampler_trace(gc_sampler *s, int64_t *t_ns, int32_t *power_uw, int16_t *load_pm,
                     size_t max_samples, size_t *n_out);

/* --- the arithmetic, exposed for unit tests --- */

/* A trapezoid accumulator: twice the integral, whole nJ plus a fJ remainder. */
typedef struct gc_energy_acc {
    int64_t e2_nj;
    int64_t e2_fj;  /* 0..999999 */
} gc_energy_acc;

/* Add the trapezoid of a segment: sum_uw = P(start) + P(end) in uW, dt_ns >= 0. */
void gc_energy_add(gc_energy_acc *acc, int64_t sum_uw, int64_t dt_ns);

/* Parse a sysfs integer ("  1234\n", "-5"). -EINVAL for empty or garbage text. */
int gc_parse_int(const char *text, size_t len, int64_t *out);

#endif

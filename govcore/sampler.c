/* sampler.c - the INA3221 sampler thread: pread, integrate, ring buffer. See sampler.h.
 *
 * Design notes (docs/sampler.md has the long version):
 * - One thread owns every descriptor. Files stay open; each sample is one pread(fd, .., 0) per
 *   file, as sysfs attributes are regenerated on every read at offset 0.
 * - Pacing: absolute deadlines on CLOCK_MONOTONIC (clock_nanosleep TIMER_ABSTIME), so
 *   latency never accumulates. A round that overruns its deadline skips the missed slots
 *   (counted in overruns) instead of bursting to catch up.
 * - The reads happen without the lock; the lock is taken once per round to fold the round
 *   into the integrals and the ring, and by callers to copy counters.
 * - A file that fails (EIO, empty, garbage) counts one read error and the rail's reading is
 *   skipped: the next good reading is joined to the last good one by the trapezoid. A file
 *   that vanished (read error ENODEV/ENOENT, or st_nlink == 0 on a periodic fstat) is closed
 *   and reopened by path every RECHECK_ROUNDS rounds until it reappears.
 * - Blocking reads: an INA3221 read may block until the next conversion. Only the thread
 *   blocks. stop() sets a flag, then waits on a condition variable with a deadline; if the
 *   thread is stuck in the kernel past it, stop() detaches it. The object is reference
 *   counted (caller + thread): whoever lets go last frees it.
 */
#include "sampler.h"
#include "err.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL
#define FJ_PER_NJ 1000000LL
#define NS_PER_MS 1000000LL
#define RECHECK_ROUNDS 64            /* fstat/reopen and thread-CPU refresh cadence */
#define SLEEP_CHUNK_NS (20 * NS_PER_MS) /* longest sleep before re-checking the stop flag */
#define MAX_ABS_UW 10000000000LL     /* 10 kW: anything larger is garbage, not a reading */
#define MAX_DT_NS (1000 * NS_PER_S)  /* longest segment integrated (keeps int64 safe) */
#define READ_BUF 32

/* One file the thread reads. */
struct chan {
    const char *root;                /* the sysfs root the path must stay beneath */
    char path[GC_PATH_MAX];
    int fd;                          /* -1 while closed (vanished) */
};

struct rail_state {
    char name[GC_NAME_MAX];
    int kind;                        /* enum gc_rail_kind */
    struct chan v, i, p;             /* hwmon: v (mV), i (mA); ina3221x: p (mW); power: p (uW) */
    /* integration state, under mu */
    int have_last;
    int64_t last_t_ns;
    int64_t last_uw;
    gc_energy_acc acc;
    /* reading quality, under mu: failures since the last good reading open a gap */
    int pending_fail;                /* failed rounds since the last good reading */
    int64_t gap_start_ns;            /* where the open gap began */
    int64_t gap_ns;                  /* closed gaps, cumulative */
    uint64_t failed_reads;
    uint64_t negative_readings;
};

enum run_state { ST_IDLE = 0, ST_RUNNING, ST_STOPPED };

struct gc_sampler {
    /* fixed after create */
    char root[GC_PATH_MAX];          /* the board's sysfs root: every file opens beneath it */
    int n_rails;
    struct rail_state rails[GC_MAX_RAILS];
    struct chan load;                /* path "" if the board has no load file */
    char board_id[GC_NAME_MAX];      /* the board table's id, "" if unknown */
    int role_n[GC_N_ROLES];          /* as gc_board's, by index into rails[] here; -1 unknown */
    int role_rail[GC_N_ROLES][GC_MAX_RAILS];
    int role_partial[GC_N_ROLES];    /* as gc_board's: summed without an optional rail */
    int has_load;
    int64_t period_ns;               /* 0: flat out */
    double rate_hz;
    uint32_t cap;                    /* ring capacity */

    pthread_mutex_t ctl;             /* serialises start/stop/free */
    pthread_mutex_t mu;              /* guards everything below */
    pthread_cond_t cv;               /* first sample, thread done */
    pthread_t thread;
    enum run_state state;
    int stop_requested;
    int thread_done;
    int abandoned;
    int refs;                        /* caller + running thread */

    /* GPU load integration */
    int load_have_last;
    int64_t load_last_t_ns;
    int64_t load_last_pm;
    int64_t load2_pm_ns;
    int64_t load_ns;

    uint64_t samples, read_errors, overruns, reopens;
    int64_t first_t_ns, last_t_ns, thread_cpu_ns;

    /* ring: head = next slot to write; count <= cap */
    uint32_t head, count;
    int64_t *ring_t;
    int32_t *ring_p;                 /* cap x n_rails */
    int16_t *ring_load;
};

/* ---------------------------------------------------------------- arithmetic --- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

void gc_energy_add(gc_energy_acc *acc, int64_t sum_uw, int64_t dt_ns)
{
    int64_t carry;

    if (dt_ns <= 0)
        return;
    if (dt_ns > MAX_DT_NS)
        dt_ns = MAX_DT_NS;
    /* uW x ms = nJ and uW x ns = fJ: split dt so neither product can overflow. */
    acc->e2_nj += sum_uw * (dt_ns / NS_PER_MS);
    acc->e2_fj += sum_uw * (dt_ns % NS_PER_MS);
    carry = floor_div(acc->e2_fj, FJ_PER_NJ);
    acc->e2_nj += carry;
    acc->e2_fj -= carry * FJ_PER_NJ;
}

int gc_parse_int(const char *text, size_t len, int64_t *out)
{
    size_t k = 0;
    int neg = 0, digits = 0;
    int64_t v = 0;

    while (k < len && (text[k] == ' ' || text[k] == '\t'))
        k++;
    if (k < len && (text[k] == '-' || text[k] == '+'))
        neg = text[k++] == '-';
    for (; k < len && text[k] >= '0' && text[k] <= '9'; k++) {
        if (v > (INT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (text[k] - '0');
        digits++;
    }
    if (!digits)
        return -EINVAL;
    while (k < len && (text[k] == '\n' || text[k] == ' ' || text[k] == '\t' || text[k] == '\r' ||
                       text[k] == '\0'))
        k++;
    if (k != len)
        return -EINVAL;
    *out = neg ? -v : v;
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec to_ts(int64_t ns)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(ns / NS_PER_S);
    ts.tv_nsec = (long)(ns % NS_PER_S);
    return ts;
}

/* ---------------------------------------------------------------- file access --- */

static int chan_open(struct chan *c)
{
    int fd = gc_sysfs_open(c->root, c->path, O_RDONLY);

    c->fd = fd < 0 ? -1 : fd;
    return fd < 0 ? fd : 0;
}

static void chan_close(struct chan *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int chan_init(struct chan *c, const char *root, const char *path)
{
    c->root = root;
    snprintf(c->path, sizeof c->path, "%s", path);
    c->fd = -1;
    return chan_open(c);
}

/* One reading. 0 on success; -errno otherwise (the caller counts it). */
static int chan_read(struct chan *c, int64_t *value)
{
    char buf[READ_BUF];
    ssize_t n;

    if (c->fd < 0)
        return -ENOENT;
    do {
        n = pread(c->fd, buf, sizeof buf, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        int err = errno;
        /* the device went away: reopen by path later */
        if (err == ENODEV || err == ENOENT || err == ESTALE || err == EBADF || err == ENXIO)
            chan_close(c);
        return -err;
    }
    if (n == 0)
        return -ENODATA;
    if ((size_t)n == sizeof buf)
        return -EINVAL; /* longer than any number a sensor writes */
    return gc_parse_int(buf, (size_t)n, value);
}

/* Periodic housekeeping: close files that were unlinked, reopen closed ones. Returns the
 * number of files reopened. */
static int chan_recheck(struct chan *c)
{
    struct stat st;

    if (!c->path[0])
        return 0;
    if (c->fd >= 0) {
        if (fstat(c->fd, &st) == 0 && st.st_nlink > 0)
            return 0;
        chan_close(c);
    }
    return chan_open(c) == 0;
}

/* Power of one rail in uW, or -errno. *errors += failed reads. */
static int read_rail_uw(struct rail_state *r, int64_t *uw, uint64_t *errors)
{
    int64_t mv, ma, mw;
    int rc;

    if (r->kind == GC_RAIL_INA3221X || r->kind == GC_RAIL_POWER) {
        rc = chan_read(&r->p, &mw);
        if (rc < 0) {
            (*errors)++;
            return rc;
        }
        if (r->kind == GC_RAIL_POWER) { /* hwmon powerN_input is uW already */
            if (mw > MAX_ABS_UW || mw < -MAX_ABS_UW) {
                (*errors)++;
                return -ERANGE;
            }
            *uw = mw;
        } else {
            if (mw > MAX_ABS_UW / 1000 || mw < -MAX_ABS_UW / 1000) {
                (*errors)++;
                return -ERANGE;
            }
            *uw = mw * 1000; /* the mW -> uW conversion */
        }
    } else {
        int rv = chan_read(&r->v, &mv), ri = chan_read(&r->i, &ma);

        *errors += (rv < 0) + (ri < 0);
        if (rv < 0 || ri < 0)
            return rv < 0 ? rv : ri;
        if (mv > 1000000 || mv < -1000000 || ma > 1000000 || ma < -1000000) {
            (*errors)++;
            return -ERANGE;
        }
        *uw = mv * ma; /* mV x mA is exactly uW: the one power conversion */
    }
    if (*uw > MAX_ABS_UW || *uw < -MAX_ABS_UW) {
        (*errors)++;
        return -ERANGE;
    }
    return 0;
}

/* ---------------------------------------------------------------- the thread --- */

struct round {
    int64_t t_ns;
    int ok[GC_MAX_RAILS];
    int negative[GC_MAX_RAILS];      /* the reading was below zero (clamped to 0) */
    int64_t uw[GC_MAX_RAILS];
    int load_ok;
    int64_t load_pm;
    uint64_t errors;
};

static void read_round(gc_sampler *s, struct round *rd)
{
    int64_t t0, t1;
    int k;

    rd->errors = 0;
    t0 = now_ns();
    for (k = 0; k < s->n_rails; k++) {
        rd->ok[k] = read_rail_uw(&s->rails[k], &rd->uw[k], &rd->errors) == 0;
        /* a negative current is no energy drawn: never integrate it as negative energy */
        rd->negative[k] = rd->ok[k] && rd->uw[k] < 0;
        if (rd->negative[k])
            rd->uw[k] = 0;
    }
    rd->load_ok = 0;
    if (s->has_load) {
        if (chan_read(&s->load, &rd->load_pm) == 0 && rd->load_pm >= 0 && rd->load_pm <= 1000)
            rd->load_ok = 1;
        else
            rd->errors++;
    }
    t1 = now_ns();
    /* the round's time is the middle of its reads */
    rd->t_ns = t0 + (t1 - t0) / 2;
}

/* Fold one round into the integrals and the ring. Called with mu held. */
static void fold_round(gc_sampler *s, const struct round *rd)
{
    uint32_t slot = s->head;
    int k;

    for (k = 0; k < s->n_rails; k++) {
        struct rail_state *r = &s->rails[k];

        s->ring_p[(size_t)slot * (size_t)s->n_rails + (size_t)k] =
            rd->ok[k] ? (int32_t)(rd->uw[k] > INT32_MAX ? INT32_MAX
                                  : rd->uw[k] <= INT32_MIN ? INT32_MIN + 1 : rd->uw[k])
                      : GC_SAMPLE_MISSING;
        r->negative_readings += (uint64_t)rd->negative[k];
        if (!rd->ok[k]) {
            if (r->pending_fail++ == 0)
                r->gap_start_ns = r->have_last ? r->last_t_ns : rd->t_ns;
            r->failed_reads++;
            continue;
        }
        if (r->pending_fail) { /* the gap closes: the trapezoid below bridges it */
            r->gap_ns += rd->t_ns - r->gap_start_ns;
            r->pending_fail = 0;
        }
        if (r->have_last)
            gc_energy_add(&r->acc, r->last_uw + rd->uw[k], rd->t_ns - r->last_t_ns);
        r->have_last = 1;
        r->last_t_ns = rd->t_ns;
        r->last_uw = rd->uw[k];
    }
    if (rd->load_ok) {
        if (s->load_have_last) {
            int64_t dt = rd->t_ns - s->load_last_t_ns;
            s->load2_pm_ns += (s->load_last_pm + rd->load_pm) * dt;
            s->load_ns += dt;
        }
        s->load_have_last = 1;
        s->load_last_t_ns = rd->t_ns;
        s->load_last_pm = rd->load_pm;
    }
    s->ring_t[slot] = rd->t_ns;
    s->ring_load[slot] = rd->load_ok ? (int16_t)rd->load_pm : -1;
    s->head = (slot + 1) % s->cap;
    if (s->count < s->cap)
        s->count++;
    if (s->samples == 0)
        s->first_t_ns = rd->t_ns;
    s->last_t_ns = rd->t_ns;
    s->samples++;
    s->read_errors += rd->errors;
}

static int64_t thread_cpu_now(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void destroy(gc_sampler *s);

static int stop_requested(gc_sampler *s)
{
    int stop;

    pthread_mutex_lock(&s->mu);
    stop = s->stop_requested;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* Sleep until deadline_ns (absolute, CLOCK_MONOTONIC) in chunks, so a stop request is seen
 * within SLEEP_CHUNK_NS even at low rates. Returns 1 if a stop was requested. */
static int sleep_until(gc_sampler *s, int64_t deadline_ns)
{
    for (;;) {
        int64_t now = now_ns(), wake = deadline_ns;
        struct timespec ts;

        if (now >= deadline_ns)
            return 0;
        if (wake - now > SLEEP_CHUNK_NS)
            wake = now + SLEEP_CHUNK_NS;
        ts = to_ts(wake);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        if (wake != deadline_ns && stop_requested(s))
            return 1;
    }
}

static void *sampler_main(void *arg)
{
    gc_sampler *s = arg;
    struct round rd;
    int64_t deadline = now_ns();
    uint64_t rounds = 0;
    int k, last_ref;

    /* Linux delays a normal thread's timer by up to 50 us of "slack" to batch wake-ups; a
     * sampler wants its deadline. Per thread, harmless where unsupported. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    for (;;) {
        uint64_t reopened = 0;

        read_round(s, &rd);
        rounds++;
        if (rounds % RECHECK_ROUNDS == 0) {
            for (k = 0; k < s->n_rails; k++) {
                reopened += (uint64_t)chan_recheck(&s->rails[k].v);
                reopened += (uint64_t)chan_recheck(&s->rails[k].i);
                reopened += (uint64_t)chan_recheck(&s->rails[k].p);
            }
            reopened += (uint64_t)chan_recheck(&s->load);
        }
        pthread_mutex_lock(&s->mu);
        fold_round(s, &rd);
        s->reopens += reopened;
        if (rounds % RECHECK_ROUNDS == 0)
            s->thread_cpu_ns = thread_cpu_now();
        if (rounds == 1)
            pthread_cond_broadcast(&s->cv); /* start() waits for the first sample */
        if (s->stop_requested) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        pthread_mutex_unlock(&s->mu);

        if (s->period_ns == 0)
            continue;
        deadline += s->period_ns;
        {
            int64_t now = now_ns();
            if (deadline <= now) {
                /* overran: skip the slots already missed, keep the grid */
                int64_t missed = (now - deadline) / s->period_ns + 1;
                deadline += missed * s->period_ns;
                pthread_mutex_lock(&s->mu);
                s->overruns += (uint64_t)missed;
                pthread_mutex_unlock(&s->mu);
            }
        }
        if (sleep_until(s, deadline))
            break;
    }

    for (k = 0; k < s->n_rails; k++) {
        chan_close(&s->rails[k].v);
        chan_close(&s->rails[k].i);
        chan_close(&s->rails[k].p);
    }
    chan_close(&s->load);
    pthread_mutex_lock(&s->mu);
    s->thread_cpu_ns = thread_cpu_now();
    s->thread_done = 1;
    last_ref = --s->refs == 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (last_ref)
        destroy(s); /* the caller already let go: we were detached */
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle --- */

static void destroy(gc_sampler *s)
{
    int k;

    for (k = 0; k < s->n_rails; k++) {
        chan_close(&s->rails[k].v);
        chan_close(&s->rails[k].i);
        chan_close(&s->rails[k].p);
    }
    chan_close(&s->load);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->ctl);
    free(s->ring_t);
    free(s->ring_p);
    free(s->ring_load);
    free(s);
}

/* The board's rail roles, by index into the sampled rails: a role with a rail left out of the
 * mask is not known, unless the rail is optional for the role (board.c: resolve_roles), which
 * leaves the role partial, as a board without that rail. */
static void copy_roles(gc_sampler *s, const gc_board *b, uint32_t mask)
{
    int role, j, k, n, at[GC_MAX_RAILS];

    for (k = 0, j = 0; k < b->n_rails; k++)
        at[k] = (!mask || (mask & (1u << k))) ? j++ : -1;
    for (role = 0; role < GC_N_ROLES; role++) {
        s->role_n[role] = b->role_n[role];
        s->role_partial[role] = b->role_partial[role];
        for (j = 0, n = 0; j < b->role_n[role]; j++) {
            int idx = at[b->role_rail[role][j]];

            if (idx < 0 && (b->role_optional[role] & (1u << b->role_rail[role][j]))) {
                s->role_partial[role] = 1;
                continue;
            }
            if (idx < 0) {
                s->role_n[role] = -1;
                break;
            }
            s->role_rail[role][n++] = idx;
        }
        if (s->role_n[role] > 0)
            s->role_n[role] = n > 0 ? n : -1;
        if (s->role_n[role] < 0)
            s->role_partial[role] = 0;
    }
}

int gc_sampler_create(gc_sampler **out, gc_board *b, const gc_sampler_config *cfg)
{
    gc_sampler_config def = {0};
    pthread_condattr_t ca;
    gc_sampler *s;
    int k, rc;

    *out = NULL;
    if (!cfg)
        cfg = &def;
    if (b->n_rails == 0) {
        set_err(b, "no power rail under %s (looked for hwmon devices named ina3221, hwmon power "
                     "channels and the ina3221x driver): energy cannot be measured on this board",
                  b->sysfs_root);
        return -ENODEV;
    }
    if (isnan(cfg->rate_hz) || cfg->rate_hz > GC_SAMPLER_MAX_RATE_HZ ||
        (cfg->rate_hz > 0 && cfg->rate_hz < GC_SAMPLER_MIN_RATE_HZ)) {
        set_err(b, "sampling rate must be within %g..%.0f Hz", GC_SAMPLER_MIN_RATE_HZ,
                  GC_SAMPLER_MAX_RATE_HZ);
        return -EINVAL;
    }
    if (cfg->ring_capacity > GC_SAMPLER_RING_MAX) {
        set_err(b, "ring capacity must be at most %d samples", GC_SAMPLER_RING_MAX);
        return -EINVAL;
    }
    if (b->n_rails < 32 && (cfg->rail_mask >> b->n_rails)) {
        set_err(b, "rail mask selects rails the board does not have");
        return -EINVAL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    for (k = 0; k < GC_MAX_RAILS; k++)
        s->rails[k].v.fd = s->rails[k].i.fd = s->rails[k].p.fd = -1;
    s->load.fd = -1;
    snprintf(s->root, sizeof s->root, "%s", b->sysfs_root);

    if (cfg->rate_hz < 0) {
        s->period_ns = 0;
        s->rate_hz = 0;
    } else {
        double hz = cfg->rate_hz;
        if (hz == 0)
            hz = b->sensor_interval_ms > 0 ? 1000.0 / b->sensor_interval_ms
                                           : GC_SAMPLER_FALLBACK_RATE_HZ;
        s->period_ns = (int64_t)llround(1e9 / hz);
        if (s->period_ns < 1)
            s->period_ns = 1;
        s->rate_hz = 1e9 / (double)s->period_ns;
    }
    s->cap = cfg->ring_capacity ? cfg->ring_capacity : GC_SAMPLER_RING_DEFAULT;

    for (k = 0; k < b->n_rails; k++) {
        const gc_rail *src = &b->rails[k];
        struct rail_state *r;

        if (cfg->rail_mask && !(cfg->rail_mask & (1u << k)))
            continue;
        r = &s->rails[s->n_rails++];
        snprintf(r->name, sizeof r->name, "%s", src->name);
        r->kind = src->kind;
        if (src->kind == GC_RAIL_INA3221X || src->kind == GC_RAIL_POWER)
            rc = chan_init(&r->p, s->root, src->power_path);
        else if ((rc = chan_init(&r->v, s->root, src->voltage_path)) == 0)
            rc = chan_init(&r->i, s->root, src->current_path);
        if (rc < 0) {
            set_err(b, "cannot open the %s sensor files (%s): %s", src->name,
                      src->kind != GC_RAIL_HWMON ? src->power_path : src->voltage_path,
                      strerror(-rc));
            goto fail_files;
        }
    }
    snprintf(s->board_id, sizeof s->board_id, "%s", b->board_id);
    copy_roles(s, b, cfg->rail_mask);
    if (b->load_path[0]) {
        /* the load file is optional: a board without one measures energy all the same */
        s->has_load = chan_init(&s->load, s->root, b->load_path) == 0;
        if (!s->has_load)
            s->load.path[0] = '\0';
    }

    s->ring_t = malloc(sizeof *s->ring_t * s->cap);
    s->ring_p = malloc(sizeof *s->ring_p * s->cap * (size_t)s->n_rails);
    s->ring_load = malloc(sizeof *s->ring_load * s->cap);
    if (!s->ring_t || !s->ring_p || !s->ring_load) {
        rc = -ENOMEM;
        goto fail_files;
    }
    if ((rc = -pthread_mutex_init(&s->ctl, NULL)) < 0)
        goto fail_files;
    if ((rc = -pthread_mutex_init(&s->mu, NULL)) < 0)
        goto fail_ctl;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = -pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc < 0)
        goto fail_mu;
    s->refs = 1;
    *out = s;
    return 0;

fail_mu:
    pthread_mutex_destroy(&s->mu);
fail_ctl:
    pthread_mutex_destroy(&s->ctl);
fail_files:
    for (k = 0; k < GC_MAX_RAILS; k++) {
        chan_close(&s->rails[k].v);
        chan_close(&s->rails[k].i);
        chan_close(&s->rails[k].p);
    }
    chan_close(&s->load);
    free(s->ring_t);
    free(s->ring_p);
    free(s->ring_load);
    free(s);
    return rc;
}

int gc_sampler_start(gc_sampler *s)
{
    struct timespec ts;
    int rc = 0;

    pthread_mutex_lock(&s->ctl);
    if (s->state != ST_IDLE) {
        rc = s->state == ST_RUNNING ? 0 : -EINVAL;
        goto unlock_ctl;
    }
    pthread_mutex_lock(&s->mu);
    s->refs++; /* the thread's reference */
    pthread_mutex_unlock(&s->mu);
    rc = -pthread_create(&s->thread, NULL, sampler_main, s);
    if (rc < 0) {
        pthread_mutex_lock(&s->mu);
        s->refs--;
        pthread_mutex_unlock(&s->mu);
        goto unlock_ctl;
    }
    pthread_mutex_lock(&s->mu);
    s->state = ST_RUNNING;
    /* Wait for the first sample so that a window begun now has a reading to start from.
     * A condition wait, not a read: a sensor that blocks longer only delays this bound. */
    ts = to_ts(now_ns() + GC_SAMPLER_START_WAIT_MS * NS_PER_MS);
    while (s->samples == 0 && !s->thread_done)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->mu);
unlock_ctl:
    pthread_mutex_unlock(&s->ctl);
    return rc;
}

int gc_sampler_stop(gc_sampler *s)
{
    struct timespec ts;
    int done = 0;

    pthread_mutex_lock(&s->ctl);
    if (s->state != ST_RUNNING) {
        pthread_mutex_lock(&s->mu);
        s->state = ST_STOPPED; /* stop before start: the sampler is spent */
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&s->ctl);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    s->stop_requested = 1;
    ts = to_ts(now_ns() + s->period_ns + GC_SAMPLER_STOP_WAIT_MS * NS_PER_MS);
    while (!s->thread_done)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
            break;
    done = s->thread_done;
    if (!done)
        s->abandoned = 1;
    s->state = ST_STOPPED;
    pthread_mutex_unlock(&s->mu);
    if (done)
        pthread_join(s->thread, NULL);
    else
        pthread_detach(s->thread); /* it frees itself if it outlives the caller */
    pthread_mutex_unlock(&s->ctl);
    return 0;
}

void gc_sampler_free(gc_sampler *s)
{
    int last;

    if (!s)
        return;
    gc_sampler_stop(s);
    pthread_mutex_lock(&s->mu);
    last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last)
        destroy(s);
}

/* ---------------------------------------------------------------- reading out --- */

int gc_sampler_n_rails(const gc_sampler *s)
{
    return s->n_rails;
}

const char *gc_sampler_rail_name(const gc_sampler *s, int i)
{
    return (i >= 0 && i < s->n_rails) ? s->rails[i].name : NULL;
}

const char *gc_sampler_board_id(const gc_sampler *s)
{
    return s->board_id;
}

int gc_sampler_role(const gc_sampler *s, int role, const int **rails)
{
    if (role < 0 || role >= GC_N_ROLES)
        return -1;
    if (rails)
        *rails = s->role_rail[role];
    return s->role_n[role];
}

int gc_sampler_role_partial(const gc_sampler *s, int role)
{
    return role >= 0 && role < GC_N_ROLES && s->role_n[role] > 0 && s->role_partial[role];
}

double gc_window_role_j(const gc_sampler *s, const gc_window *w, int role, int *known)
{
    const int *rails;
    int n = gc_sampler_role(s, role, &rails), k;
    double sum = 0;

    *known = n > 0 && w->n_rails == s->n_rails;
    for (k = 0; *known && k < n; k++)
        sum += w->energy_j[rails[k]];
    return *known ? sum : 0;
}

int gc_sampler_has_load(const gc_sampler *s)
{
    return s->has_load;
}

int gc_sampler_snapshot(gc_sampler *s, gc_snapshot *snap)
{
    int64_t t;
    int k;

    memset(snap, 0, sizeof *snap);
    pthread_mutex_lock(&s->mu);
    /* After stop, time stands still at the last sample: the thread no longer observes. */
    t = s->state == ST_STOPPED && s->last_t_ns ? s->last_t_ns : now_ns();
    snap->t_ns = t;
    snap->n_rails = s->n_rails;
    for (k = 0; k < s->n_rails; k++) {
        const struct rail_state *r = &s->rails[k];
        gc_energy_acc acc = r->acc;

        if (r->have_last && t > r->last_t_ns)
            gc_energy_add(&acc, 2 * r->last_uw, t - r->last_t_ns); /* hold the last reading */
        snap->e2_nj[k] = acc.e2_nj;
        snap->e2_fj[k] = acc.e2_fj;
        snap->failed_reads[k] = r->failed_reads;
        snap->negative_readings[k] = r->negative_readings;
        snap->gap_ns[k] = r->gap_ns + (r->pending_fail && t > r->gap_start_ns
                                           ? t - r->gap_start_ns : 0);
    }
    snap->load2_pm_ns = s->load2_pm_ns;
    snap->load_ns = s->load_ns;
    if (s->load_have_last && t > s->load_last_t_ns) {
        snap->load2_pm_ns += 2 * s->load_last_pm * (t - s->load_last_t_ns);
        snap->load_ns += t - s->load_last_t_ns;
    }
    snap->samples = s->samples;
    snap->read_errors = s->read_errors;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int gc_window_diff(const gc_snapshot *a, const gc_snapshot *b, gc_window *w)
{
    double dur_s;
    int k;

    memset(w, 0, sizeof *w);
    if (a->n_rails != b->n_rails || b->t_ns < a->t_ns)
        return -EINVAL;
    w->duration_ns = b->t_ns - a->t_ns;
    dur_s = (double)w->duration_ns / 1e9;
    w->n_rails = a->n_rails;
    for (k = 0; k < a->n_rails; k++) {
        /* twice-energy difference in nJ (whole) and fJ (remainder), then halve */
        int64_t d_nj = b->e2_nj[k] - a->e2_nj[k];
        int64_t d_fj = b->e2_fj[k] - a->e2_fj[k];
        int64_t two_nj = d_nj + floor_div(d_fj + FJ_PER_NJ / 2, FJ_PER_NJ); /* round */

        w->energy_nj[k] = floor_div(two_nj + 1, 2);
        w->energy_j[k] = ((double)d_nj + (double)d_fj / 1e6) / 2.0 / 1e9;
        w->avg_power_w[k] = dur_s > 0 ? w->energy_j[k] / dur_s : 0.0;
        {
            int64_t gap = b->gap_ns[k] - a->gap_ns[k];

            if (gap < 0)
                gap = 0;
            if (gap > w->duration_ns)
                gap = w->duration_ns;
            w->interpolated_pct[k] = w->duration_ns > 0 ? 100.0 * (double)gap /
                                                              (double)w->duration_ns : 0.0;
        }
        w->failed_reads[k] = b->failed_reads[k] - a->failed_reads[k];
        w->negative_readings[k] = b->negative_readings[k] - a->negative_readings[k];
    }
    w->readings_ok = 1;
    for (k = 0; k < a->n_rails; k++)
        if (w->interpolated_pct[k] > GC_SAMPLER_MAX_INTERPOLATED_PCT || w->negative_readings[k])
            w->readings_ok = 0;
    w->gpu_util_pct = b->load_ns > a->load_ns
                          ? (double)(b->load2_pm_ns - a->load2_pm_ns) / 2.0 /
                                (double)(b->load_ns - a->load_ns) / 10.0
                          : -1.0;
    w->samples = b->samples - a->samples;
    w->read_errors = b->read_errors - a->read_errors;
    w->rate_hz = dur_s > 0 ? (double)w->samples / dur_s : 0.0;
    return 0;
}

int gc_sampler_get_stats(gc_sampler *s, gc_sampler_stats *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    st->running = s->state == ST_RUNNING;
    st->rate_hz = s->rate_hz;
    st->period_ns = s->period_ns;
    st->samples = s->samples;
    st->read_errors = s->read_errors;
    st->overruns = s->overruns;
    st->reopens = s->reopens;
    st->first_t_ns = s->first_t_ns;
    st->last_t_ns = s->last_t_ns;
    st->thread_cpu_ns = s->thread_cpu_ns;
    st->ring_count = s->count;
    st->ring_capacity = s->cap;
    st->abandoned = s->abandoned;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int gc_sampler_trace(gc_sampler *s, int64_t *t_ns, int32_t *power_uw, int16_t *load_pm,
                     size_t max_samples, size_t *n_out)
{
    size_t n, j, first;

    pthread_mutex_lock(&s->mu);
    n = s->count < max_samples ? s->count : max_samples;
    first = ((size_t)s->head + s->cap - n) % s->cap; /* oldest of the newest n */
    for (j = 0; j < n; j++) {
        size_t slot = (first + j) % s->cap;

        if (t_ns)
            t_ns[j] = s->ring_t[slot];
        if (power_uw)
            memcpy(power_uw + j * (size_t)s->n_rails, s->ring_p + slot * (size_t)s->n_rails,
                   sizeof *power_uw * (size_t)s->n_rails);
        if (load_pm)
            load_pm[j] = s->ring_load[slot];
    }
    pthread_mutex_unlock(&s->mu);
    *n_out = n;
    return 0;
}

/* domain.c - the EMC and CPU clock domains: discovery, check, pin, restore, and their part of
 * the saved-state record (domain.h). */
#include "domain.h"
#include "err.h"
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KHZ 1000ULL
#define SLACK_HZ 500000ULL /* the user's MHz rounding: 1036.8 for 1036800 kHz, 665.6 for 665600000 */

/* keys of a record, as bits of gc_domain_state.keys */
#define K_RATE 1u
#define K_LOCKED 2u
#define K_GOVERNOR 4u
#define K_MIN 8u
#define K_MAX 16u

/* root + a path on the board ("/" as root: the path itself). */
static void board_path(const gc_domains *ds, const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s%s", strcmp(ds->sysfs_root, "/") ? ds->sysfs_root : "", path);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int dom_read_u64(gc_domains *ds, const gc_domain *d, const char *name, uint64_t *out)
{
    char path[GC_PATH_MAX];
    int rc;

    gc_domain_file(d, name, path, sizeof path);
    rc = gc_sysfs_read_u64(ds->sysfs_root, path, out);
    if (rc < 0)
        set_err(ds, "%s: cannot read %s: %s", d->name, path,
                rc == -GC_EBOARD ? "not a regular file" : gc_sysfs_strerror(rc));
    return rc;
}

static int dom_write_u64(gc_domains *ds, const gc_domain *d, const char *name, uint64_t v)
{
    char path[GC_PATH_MAX];
    int rc;

    gc_domain_file(d, name, path, sizeof path);
    rc = gc_sysfs_write_u64(ds->sysfs_root, path, v);
    if (rc < 0)
        set_err(ds, "%s: cannot write %llu to %s: %s%s", d->name, (unsigned long long)v, path,
                rc == -GC_EBOARD ? "not a regular file" : gc_sysfs_strerror(rc),
                (rc == -EACCES || rc == -EPERM) ? " (run as root, or through govcore serve)" : "");
    return rc;
}

/* CPU files hold kHz: the one conversion each way. */
static int cpu_read_hz(gc_domains *ds, const gc_domain *d, const char *name, uint64_t *hz)
{
    uint64_t khz;
    int rc = dom_read_u64(ds, d, name, &khz);

    if (rc == 0)
        *hz = khz * KHZ;
    return rc;
}

static int cpu_write_hz(gc_domains *ds, const gc_domain *d, const char *name, uint64_t hz)
{
    return dom_write_u64(ds, d, name, hz / KHZ);
}

static void open_emc(gc_domains *ds, gc_domain *d, const uint64_t *table_hz, int n_table)
{
    static const char *const files[] = {"rate", "mrq_rate_locked"};
    char path[GC_PATH_MAX], text[4096];
    uint64_t max_hz = 0, cap_hz = 0;
    int rc, i;

    d->kind = GC_DOMAIN_EMC;
    d->policy = -1;
    snprintf(d->name, sizeof d->name, "emc");
    board_path(ds, GC_EMC_DIR, d->dir, sizeof d->dir);
    if (!gc_sysfs_exists(ds->sysfs_root, d->dir)) {
        if (gc_devfreq_emc_open(ds, d)) /* Thor's memory clock: a devfreq device */
            return;
        gc_domain_unavailable(d, "no BPMP debugfs clock %s (debugfs not mounted, not readable without root, or "
                       "not an Orin)", d->dir);
        return;
    }
    if ((rc = gc_domain_check_files(ds->sysfs_root, d, files, sizeof files / sizeof *files,
                          "debugfs needs root: use govcore serve")) < 0)
        return;
    d->readable = 1;
    d->writable = rc;
    board_path(ds, GC_EMC_RATES, path, sizeof path);
    rc = gc_sysfs_read(ds->sysfs_root, path, text, sizeof text);
    if (rc == 0) {
        if (gc_domain_parse_levels(text, 1, d->levels_hz, &d->n_levels) < 0) {
            gc_domain_unavailable(d, "%s holds no list of rates in Hz", path);
            return;
        }
    } else if (table_hz && n_table > 0) {
        for (i = 0; i < n_table && i < GC_MAX_FREQS; i++)
            d->levels_hz[i] = table_hz[i];
        d->n_levels = i;
        qsort(d->levels_hz, (size_t)d->n_levels, sizeof *d->levels_hz, cmp_u64);
    } else {
        gc_domain_unavailable(d, "no table of rates: %s is absent and the board table lists none for this "
                       "board", GC_EMC_RATES);
        return;
    }
    gc_domain_file(d, "max_rate", path, sizeof path);
    if (gc_sysfs_read_u64(ds->sysfs_root, path, &max_hz) == 0 && max_hz)
        cap_hz = max_hz;
    board_path(ds, GC_EMC_CAP, path, sizeof path);
    if (gc_sysfs_read_u64(ds->sysfs_root, path, &max_hz) == 0 && max_hz && (!cap_hz || max_hz < cap_hz))
        cap_hz = max_hz;
    d->cap_hz = cap_hz;
    d->available = d->writable;
}

static void open_cpu(gc_domains *ds, gc_domain *d, int policy)
{
    static const char *const files[] = {"scaling_min_freq", "scaling_max_freq", "scaling_governor"};
    char path[GC_PATH_MAX], text[4096];
    int rc;

    d->kind = GC_DOMAIN_CPU;
    d->policy = policy;
    snprintf(d->name, sizeof d->name, "cpu%d", policy);
    board_path(ds, GC_CPUFREQ_DIR, path, sizeof path);
    snprintf(d->dir, sizeof d->dir, "%s/policy%d", path, policy);
    gc_domain_file(d, "related_cpus", path, sizeof path);
    if (gc_sysfs_read(ds->sysfs_root, path, text, sizeof text) == 0)
        gc_printable(text, d->related_cpus, sizeof d->related_cpus);
    if ((rc = gc_domain_check_files(ds->sysfs_root, d, files, sizeof files / sizeof *files,
                          "run as root, or through govcore serve")) < 0)
        return;
    d->readable = 1;
    d->writable = rc;
    gc_domain_file(d, "scaling_available_frequencies", path, sizeof path);
    if (gc_sysfs_read(ds->sysfs_root, path, text, sizeof text) < 0 ||
        gc_domain_parse_levels(text, KHZ, d->levels_hz, &d->n_levels) < 0) {
        gc_domain_unavailable(d, "%s is missing or holds no list of kHz", path);
        return;
    }
    d->available = d->writable;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return x < y ? -1 : x > y;
}

int gc_domains_open(gc_domains *ds, const char *sysfs_root, const uint64_t *emc_table_hz,
                    int n_emc_table)
{
    char dir[GC_PATH_MAX];
    int policies[GC_MAX_CPU_POLICIES], n_pol = 0, fd, i;
    DIR *dh;
    struct dirent *e;

    if (!ds || !sysfs_root || n_emc_table < 0 || (n_emc_table && !emc_table_hz))
        return -EINVAL;
    memset(ds, 0, sizeof *ds);
    if (!*sysfs_root)
        sysfs_root = "/";
    if (snprintf(ds->sysfs_root, sizeof ds->sysfs_root, "%s", sysfs_root) >= (int)sizeof ds->sysfs_root)
        return -ENAMETOOLONG;
    for (i = (int)strlen(ds->sysfs_root); i > 1 && ds->sysfs_root[i - 1] == '/'; i--)
        ds->sysfs_root[i - 1] = '\0';
    for (i = 0; i < n_emc_table; i++)
        if (emc_table_hz[i] == 0 || emc_table_hz[i] > GC_MAX_LEVEL_HZ)
            return -EINVAL;
    open_emc(ds, &ds->d[0], emc_table_hz, n_emc_table);
    ds->n = 1;
    board_path(ds, GC_CPUFREQ_DIR, dir, sizeof dir);
    fd = gc_sysfs_open(ds->sysfs_root, dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
    if (fd < 0)
        return 0; /* no cpufreq: no CPU domain */
    dh = fdopendir(fd);
    if (!dh) {
        close(fd);
        return 0;
    }
    while ((e = readdir(dh)) != NULL && n_pol < GC_MAX_CPU_POLICIES) {
        char *end;
        long p;

        if (strncmp(e->d_name, "policy", 6) != 0 || e->d_name[6] < '0' || e->d_name[6] > '9')
            continue;
        p = strtol(e->d_name + 6, &end, 10);
        if (*end || p < 0 || p > 4095)
            continue;
        policies[n_pol++] = (int)p;
    }
    closedir(dh);
    qsort(policies, (size_t)n_pol, sizeof *policies, cmp_int);
    for (i = 0; i < n_pol; i++)
        open_cpu(ds, &ds->d[ds->n++], policies[i]);
    return 0;
}

int gc_domains_open_board(gc_domains *ds, const gc_board *b)
{
    uint64_t table[GC_MAX_FREQS];
    int n = gc_board_emc_table_hz(b, table, GC_MAX_FREQS);

    return gc_domains_open(ds, b->sysfs_root, n ? table : NULL, n);
}

int gc_domain_find(const gc_domains *ds, const char *name)
{
    int i;

    for (i = 0; i < ds->n; i++)
        if (strcmp(ds->d[i].name, name) == 0)
            return i;
    return -1;
}

static int governor_text(gc_domains *ds, const gc_domain *d, char *out, size_t len)
{
    char path[GC_PATH_MAX];
    int rc;

    gc_domain_file(d, "scaling_governor", path, sizeof path);
    rc = gc_sysfs_read(ds->sysfs_root, path, out, len);
    if (rc < 0)
        set_err(ds, "%s: cannot read %s: %s", d->name, path, gc_sysfs_strerror(rc));
    return rc;
}

int gc_domain_read(gc_domains *ds, int i, gc_domain_state *st)
{
    const gc_domain *d;
    uint64_t v;
    int rc;

    if (i < 0 || i >= ds->n)
        return -EINVAL;
    d = &ds->d[i];
    memset(st, 0, sizeof *st);
    if (!d->readable) {
        set_err(ds, "%s is unavailable: %s", d->name, d->why);
        return -ENODEV;
    }
    if (d->kind == GC_DOMAIN_EMC_DEVFREQ)
        return gc_devfreq_emc_read(ds, d, st);
    if (d->kind == GC_DOMAIN_EMC) {
        if ((rc = dom_read_u64(ds, d, "rate", &st->rate_hz)) < 0 ||
            (rc = dom_read_u64(ds, d, "mrq_rate_locked", &v)) < 0)
            return rc;
        if (v > 1) {
            set_err(ds, "emc: mrq_rate_locked holds %llu, not 0 or 1", (unsigned long long)v);
            return -GC_EBOARD;
        }
        st->locked = (int)v;
        /* min_rate / max_rate: shown, not written */
        if (dom_read_u64(ds, d, "min_rate", &v) == 0)
            st->min_hz = v;
        if (dom_read_u64(ds, d, "max_rate", &v) == 0)
            st->max_hz = v;
        return 0;
    }
    if ((rc = governor_text(ds, d, st->governor, sizeof st->governor)) < 0 ||
        (rc = cpu_read_hz(ds, d, "scaling_min_freq", &st->min_hz)) < 0 ||
        (rc = cpu_read_hz(ds, d, "scaling_max_freq", &st->max_hz)) < 0)
        return rc;
    if (cpu_read_hz(ds, d, "scaling_cur_freq", &v) == 0)
        st->rate_hz = v;
    return 0;
}

static void mhz_list(const gc_domain *d, char *out, size_t len)
{
    size_t used = 0;
    int i;

    out[0] = '\0';
    for (i = 0; i < d->n_levels && used + 16 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%g", i ? " " : "",
                                 gc_hz_to_mhz(d->levels_hz[i]));
}

static uint64_t diff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* The level of d nearest to want_hz (ties to the lower). */
static uint64_t nearest(const gc_domain *d, uint64_t want_hz)
{
    uint64_t best = d->levels_hz[0];
    int i;

    for (i = 1; i < d->n_levels; i++)
        if (diff(d->levels_hz[i], want_hz) < diff(best, want_hz))
            best = d->levels_hz[i];
    return best;
}

static int check_one(gc_domains *ds, int i, uint64_t want_hz, const gc_domain_state *orig,
                     uint64_t *level_hz)
{
    const gc_domain *d = &ds->d[i];
    char levels[GC_ERR_MAX / 2];
    uint64_t level, cap = d->cap_hz;
    gc_domain_state now;
    int rc;

    if (!d->available) {
        set_err(ds, "%s is unavailable on this board: %s; nothing was changed", d->name, d->why);
        return -EINVAL;
    }
    mhz_list(d, levels, sizeof levels);
    level = nearest(d, want_hz);
    if (d->kind != GC_DOMAIN_CPU && diff(level, want_hz) > SLACK_HZ) {
        set_err(ds, "%s: %g MHz is not in its table (%s MHz): the EMC takes one of its rates "
                    "exactly (within 0.5 MHz); nothing was changed", d->name,
                gc_hz_to_mhz(want_hz), levels);
        return -EINVAL;
    }
    if (d->kind == GC_DOMAIN_CPU && (want_hz + SLACK_HZ < d->levels_hz[0] ||
                                     want_hz > d->levels_hz[d->n_levels - 1] + SLACK_HZ)) {
        set_err(ds, "%s: %g MHz is not in its table (%s MHz): a CPU clock from its lowest to its "
                    "highest level (%g..%g MHz) is snapped to each policy's nearest level, one "
                    "outside that range is refused; nothing was changed", d->name,
                gc_hz_to_mhz(want_hz), levels, gc_hz_to_mhz(d->levels_hz[0]),
                gc_hz_to_mhz(d->levels_hz[d->n_levels - 1]));
        return -EINVAL;
    }
    if (d->kind != GC_DOMAIN_EMC) {
        /* the ceiling the power mode set: scaling_max_freq (max_freq) before our first pin */
        if (orig && orig[i].saved) {
            cap = orig[i].max_hz;
        } else {
            if ((rc = gc_domain_read(ds, i, &now)) < 0)
                return rc;
            cap = now.max_hz;
        }
    }
    if (cap && level > cap) {
        set_err(ds, "%s: %g MHz is above the power mode's cap of %g MHz; nothing was changed",
                d->name, gc_hz_to_mhz(level), gc_hz_to_mhz(cap));
        return -EINVAL;
    }
    *level_hz = level;
    return 0;
}

int gc_domains_check(gc_domains *ds, uint64_t emc_hz, uint64_t cpu_hz,
                     const gc_domain_state *originals, uint64_t *level_hz)
{
    int i, rc, n_cpu = 0;

    for (i = 0; i < ds->n; i++)
        level_hz[i] = 0;
    if (emc_hz && (rc = check_one(ds, 0, emc_hz, originals, &level_hz[0])) < 0)
        return rc;
    if (!cpu_hz)
        return 0;
    for (i = 1; i < ds->n; i++) {
        if ((rc = check_one(ds, i, cpu_hz, originals, &level_hz[i])) < 0)
            return rc;
        n_cpu++;
    }
    if (!n_cpu) {
        set_err(ds, "cpu: no cpufreq policy in %s; nothing was changed", GC_CPUFREQ_DIR);
        return -EINVAL;
    }
    return 0;
}

static int verify(gc_domains *ds, int i, uint64_t level_hz)
{
    gc_domain_state st;
    const gc_domain *d = &ds->d[i];
    int rc = gc_domain_read(ds, i, &st);

    if (rc < 0)
        return rc;
    if (d->kind == GC_DOMAIN_EMC && (st.rate_hz != level_hz || !st.locked)) {
        set_err(ds, "emc: asked %g MHz locked, the board reports %g MHz%s (a power-mode cap? "
                    "check nvpmodel)", gc_hz_to_mhz(level_hz), gc_hz_to_mhz(st.rate_hz),
                st.locked ? "" : " unlocked");
        return -GC_EVERIFY;
    }
    if (d->kind != GC_DOMAIN_EMC && (st.min_hz != level_hz || st.max_hz != level_hz)) {
        set_err(ds, "%s: asked min = max = %g MHz, the board reports min %g max %g MHz (a "
                    "power-mode cap? check nvpmodel)", d->name, gc_hz_to_mhz(level_hz),
                gc_hz_to_mhz(st.min_hz), gc_hz_to_mhz(st.max_hz));
        return -GC_EVERIFY;
    }
    return 0;
}

/* CPU: min and max to the range, in the order that never makes min > max. */
static int cpu_set_range(gc_domains *ds, int i, uint64_t min_hz, uint64_t max_hz)
{
    const gc_domain *d = &ds->d[i];
    uint64_t cur_min = 0, cur_max = 0;
    int rc;

    if ((rc = cpu_read_hz(ds, d, "scaling_min_freq", &cur_min)) < 0 ||
        (rc = cpu_read_hz(ds, d, "scaling_max_freq", &cur_max)) < 0)
        return rc;
    /* raise the ceiling first when going up; unchanged values are not written */
    if (min_hz > cur_max) {
        if ((rc = cpu_write_hz(ds, d, "scaling_max_freq", max_hz)) < 0)
            return rc;
        return cpu_write_hz(ds, d, "scaling_min_freq", min_hz);
    }
    if (min_hz != cur_min && (rc = cpu_write_hz(ds, d, "scaling_min_freq", min_hz)) < 0)
        return rc;
    if (max_hz != cur_max && (rc = cpu_write_hz(ds, d, "scaling_max_freq", max_hz)) < 0)
        return rc;
    return 0;
}

int gc_domain_pin(gc_domains *ds, int i, uint64_t level_hz)
{
    const gc_domain *d;
    int rc;

    if (i < 0 || i >= ds->n || !level_hz)
        return -EINVAL;
    d = &ds->d[i];
    if (!d->available) {
        set_err(ds, "%s is unavailable: %s", d->name, d->why);
        return -ENODEV;
    }
    if (d->kind == GC_DOMAIN_EMC) {
        if ((rc = dom_write_u64(ds, d, "mrq_rate_locked", 1)) < 0 ||
            (rc = dom_write_u64(ds, d, "rate", level_hz)) < 0)
            return rc;
    } else if (d->kind == GC_DOMAIN_EMC_DEVFREQ) {
        if ((rc = gc_devfreq_emc_set_range(ds, d, level_hz, level_hz)) < 0)
            return rc;
    } else if ((rc = cpu_set_range(ds, i, level_hz, level_hz)) < 0) {
        return rc;
    }
    return verify(ds, i, level_hz);
}

int gc_domain_restore(gc_domains *ds, int i, const gc_domain_state *st)
{
    const gc_domain *d;
    char path[GC_PATH_MAX], gov[GC_NAME_MAX], first[GC_ERR_MAX] = "";
    gc_domain_state now;
    int rc, first_rc = 0, pass;

    if (i < 0 || i >= ds->n)
        return -EINVAL;
    d = &ds->d[i];
    if (d->kind == GC_DOMAIN_EMC_DEVFREQ)
        return gc_devfreq_emc_restore(ds, d, st);
    if (d->kind == GC_DOMAIN_EMC) {
        /* as saved already: nothing to write (an unlocked EMC's rate is its scaling's) */
        if (gc_domain_read(ds, i, &now) == 0 && now.locked == st->locked &&
            (!st->locked || now.rate_hz == st->rate_hz))
            return 0;
        /* a locked original: its rate while still locked, then the flag; 0 hands the EMC back
         * to the board's memory scaling */
        if (st->locked && st->rate_hz && (rc = dom_write_u64(ds, d, "rate", st->rate_hz)) < 0) {
            first_rc = rc;
            snprintf(first, sizeof first, "%s", ds->err);
        }
        if ((rc = dom_write_u64(ds, d, "mrq_rate_locked", (uint64_t)st->locked)) < 0 && !first_rc) {
            first_rc = rc;
            snprintf(first, sizeof first, "%s", ds->err);
        }
        if (!first_rc && (rc = gc_domain_read(ds, i, &now)) == 0 &&
            (now.locked != st->locked || (st->locked && now.rate_hz != st->rate_hz))) {
            first_rc = -GC_EVERIFY;
            snprintf(first, sizeof first, "emc: reads %g MHz locked %d after restoring %g MHz "
                     "locked %d", gc_hz_to_mhz(now.rate_hz), now.locked, gc_hz_to_mhz(st->rate_hz),
                     st->locked);
        }
    } else {
        if (st->governor[0]) {
            gc_domain_file(d, "scaling_governor", path, sizeof path);
            if (gc_sysfs_read(ds->sysfs_root, path, gov, sizeof gov) < 0 || strcmp(gov, st->governor)) {
                rc = gc_sysfs_write(ds->sysfs_root, path, st->governor);
                if (rc < 0) {
                    first_rc = rc;
                    snprintf(first, sizeof first, "%s: cannot write governor %s to %s: %s",
                             d->name, st->governor, path, gc_sysfs_strerror(rc));
                }
            }
        }
        /* the range in the safe order; where that fails, max then min, twice (a refused write
         * may succeed once the other bound has moved) */
        if (cpu_set_range(ds, i, st->min_hz, st->max_hz) < 0) {
            if (!first_rc) {
                first_rc = -EIO;
                snprintf(first, sizeof first, "%s", ds->err);
            }
            for (pass = 0; pass < 2; pass++) {
                cpu_write_hz(ds, d, "scaling_max_freq", st->max_hz);
                cpu_write_hz(ds, d, "scaling_min_freq", st->min_hz);
            }
        }
        if (gc_domain_read(ds, i, &now) == 0 && now.min_hz == st->min_hz &&
            now.max_hz == st->max_hz && (!st->governor[0] || !strcmp(now.governor, st->governor))) {
            first_rc = 0;
        } else if (!first_rc) {
            first_rc = -GC_EVERIFY;
            snprintf(first, sizeof first, "%s: reads governor %s min %g max %g MHz, not as saved",
                     d->name, now.governor, gc_hz_to_mhz(now.min_hz), gc_hz_to_mhz(now.max_hz));
        }
    }
    if (first_rc)
        snprintf(ds->err, sizeof ds->err, "%s", first);
    return first_rc;
}

int gc_domains_pin(gc_domains *ds, const uint64_t *level_hz, const gc_domain_state *originals)
{
    char err[GC_ERR_MAX];
    int i, j, rc;

    for (i = 0; i < ds->n; i++) {
        if (!level_hz[i])
            continue;
        if ((rc = gc_domain_pin(ds, i, level_hz[i])) == 0)
            continue;
        memcpy(err, ds->err, sizeof err);
        for (j = 0; j <= i; j++)
            if (level_hz[j] && originals[j].saved)
                gc_domain_restore(ds, j, &originals[j]);
        snprintf(ds->err, sizeof ds->err, "%s; the domains pinned so far were put back", err);
        return rc;
    }
    return 0;
}

int gc_domains_restore(gc_domains *ds, const gc_domain_state *st)
{
    char left[GC_ERR_MAX] = "";
    size_t used = 0;
    int i, rc, first_rc = 0;

    for (i = 0; i < ds->n; i++) {
        if (!st[i].saved)
            continue;
        if ((rc = gc_domain_restore(ds, i, &st[i])) < 0) {
            if (!first_rc)
                first_rc = rc;
            if (used < sizeof left)
                used += (size_t)snprintf(left + used, sizeof left - used, "%s%s", used ? "; " : "",
                                         ds->err);
        }
    }
    if (first_rc)
        snprintf(ds->err, sizeof ds->err, "%s", left);
    return first_rc;
}

int gc_domains_snapshot(gc_domains *ds, gc_domain_state *st)
{
    int i;

    for (i = 0; i < GC_MAX_DOMAINS; i++)
        memset(&st[i], 0, sizeof st[i]);
    /* a domain that cannot be read is left out (not saved): it can then not be pinned either
     * (gc_pin_mode refuses), and a GPU pin does not fail for it */
    for (i = 0; i < ds->n; i++)
        st[i].saved = ds->d[i].writable && gc_domain_read(ds, i, &st[i]) == 0;
    return 0;
}

int gc_domains_format(const gc_domains *ds, const gc_domain_state *st, char *out, size_t len)
{
    size_t used = strnlen(out, len);
    int i, n;

    for (i = 0; i < ds->n; i++) {
        const gc_domain *d = &ds->d[i];

        if (!st[i].saved)
            continue;
        if (d->kind == GC_DOMAIN_EMC)
            n = snprintf(out + used, len - used, "%s.rate_hz=%llu\n%s.locked=%d\n", d->name,
                         (unsigned long long)st[i].rate_hz, d->name, st[i].locked);
        else
            n = snprintf(out + used, len - used, "%s.governor=%s\n%s.min_hz=%llu\n%s.max_hz=%llu\n",
                         d->name, st[i].governor, d->name, (unsigned long long)st[i].min_hz,
                         d->name, (unsigned long long)st[i].max_hz);
        if (n < 0 || (size_t)n >= len - used)
            return -ENOSPC;
        used += (size_t)n;
    }
    return 0;
}

static int plain_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

int gc_domains_is_key(const char *key)
{
    const char *p;

    if (strncmp(key, "emc.", 4) == 0)
        return 1;
    if (strncmp(key, "cpu", 3) != 0 || key[3] < '0' || key[3] > '9')
        return 0;
    for (p = key + 3; *p >= '0' && *p <= '9'; p++)
        ;
    return *p == '.';
}

int gc_domains_parse(gc_domains *ds, const char *key, const char *value, gc_domain_state *st)
{
    const char *dot = strchr(key, '.');
    char name[GC_NAME_MAX];
    const char *field;
    unsigned bit;
    uint64_t v;
    int i;

    if (!dot || (size_t)(dot - key) >= sizeof name)
        return 0;
    memcpy(name, key, (size_t)(dot - key));
    name[dot - key] = '\0';
    if (!gc_domains_is_key(key))
        return 0;
    field = dot + 1;
    i = gc_domain_find(ds, name);
    if (i < 0 || !ds->d[i].writable) {
        set_err(ds, "the saved state names clock domain %s, which this board does not offer; "
                    "check the clocks by hand and delete it", name);
        return -GC_ESTATE;
    }
    if (ds->d[i].kind == GC_DOMAIN_EMC)
        bit = !strcmp(field, "rate_hz") ? K_RATE : !strcmp(field, "locked") ? K_LOCKED : 0;
    else
        bit = !strcmp(field, "governor") ? K_GOVERNOR : !strcmp(field, "min_hz") ? K_MIN
            : !strcmp(field, "max_hz") ? K_MAX : 0;
    if (!bit || (st[i].keys & bit))
        goto bad;
    st[i].keys |= bit;
    st[i].saved = 1;
    if (bit == K_GOVERNOR) {
        if (strlen(value) >= sizeof st[i].governor || (*value && !plain_name(value)))
            goto bad;
        snprintf(st[i].governor, sizeof st[i].governor, "%s", value);
        return 1;
    }
    if (gc_parse_u64(value, &v) < 0)
        goto bad;
    if (bit == K_LOCKED) {
        if (v > 1)
            goto bad;
        st[i].locked = (int)v;
    } else if (bit == K_RATE) {
        st[i].rate_hz = v;
    } else if (bit == K_MIN) {
        st[i].min_hz = v;
    } else {
        st[i].max_hz = v;
    }
    return 1;
bad:
    set_err(ds, "the saved state's line %s is damaged or repeated; check the clocks by hand and "
                "delete it", key);
    return -GC_ESTATE;
}

/* hz is one of d's levels; without a table (a domain restorable, not pinnable): a clock. */
static int level_of(const gc_domain *d, uint64_t hz)
{
    int i;

    if (d->n_levels == 0)
        return hz > 0 && hz <= GC_MAX_LEVEL_HZ;

    for (i = 0; i < d->n_levels; i++)
        if (d->levels_hz[i] == hz)
            return 1;
    return 0;
}

static int governor_offered(gc_domains *ds, const gc_domain *d, const char *gov)
{
    char path[GC_PATH_MAX], list[1024], *tok, *save = NULL;

    gc_domain_file(d, d->kind == GC_DOMAIN_CPU ? "scaling_available_governors" : "available_governors", path,
            sizeof path);
    if (gc_sysfs_read(ds->sysfs_root, path, list, sizeof list) < 0)
        return 1; /* no list: a plain name (checked when parsed) */
    for (tok = strtok_r(list, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
        if (!strcmp(tok, gov))
            return 1;
    return 0;
}

/* Domain i's saved values against the board: 0, or -GC_ESTATE with why (short: "saved governor
 * schedutil is not one it offers"). */
static int check_saved(gc_domains *ds, int i, const gc_domain_state *st, char *why, size_t len)
{
    const gc_domain *d = &ds->d[i];
    unsigned want = d->kind == GC_DOMAIN_EMC ? (K_RATE | K_LOCKED) : (K_GOVERNOR | K_MIN | K_MAX);

    if (st->keys != want) {
        snprintf(why, len, "its saved state is incomplete");
        return -GC_ESTATE;
    }
    /* the EMC's rate under its own scaling need not be a listed one: within the table */
    if (d->kind == GC_DOMAIN_EMC ? (!st->rate_hz || st->rate_hz > (d->n_levels ? d->levels_hz[d->n_levels - 1] : GC_MAX_LEVEL_HZ))
                                 : (!level_of(d, st->min_hz) || !level_of(d, st->max_hz) ||
                                    st->max_hz < st->min_hz)) {
        snprintf(why, len, "its saved clocks are not its levels now");
        return -GC_ESTATE;
    }
    if (d->kind != GC_DOMAIN_EMC && st->governor[0] && !governor_offered(ds, d, st->governor)) {
        snprintf(why, len, "saved governor %s is not one it offers now", st->governor);
        return -GC_ESTATE;
    }
    return 0;
}

int gc_domains_parse_done(gc_domains *ds, gc_domain_state *st)
{
    char why[GC_ERR_MAX / 2];
    int i;

    for (i = 0; i < ds->n; i++) {
        if (!st[i].saved || check_saved(ds, i, &st[i], why, sizeof why) == 0)
            continue;
        set_err(ds, "the saved state of %s: %s; check the clocks by hand and delete it",
                ds->d[i].name, why);
        return -GC_ESTATE;
    }
    return 0;
}


/* The start of reading a saved record's clock domains: the domains of the board under
 * sysfs_root opened, st cleared, the record's lines copied into text (GC_DOMAINS_RECORD_MAX
 * bytes) for strtok_r. */
static int record_begin(gc_domains *ds, const char *sysfs_root, const char *lines,
                        gc_domain_state *st, char *text)
{
    int rc;

    memset(st, 0, sizeof *st * GC_MAX_DOMAINS);
    if ((rc = gc_domains_open(ds, sysfs_root, NULL, 0)) < 0)
        return rc;
    if (snprintf(text, GC_DOMAINS_RECORD_MAX, "%s", lines) >= GC_DOMAINS_RECORD_MAX) {
        set_err(ds, "the saved state's clock domains are too long; check the clocks by hand and "
                    "delete it");
        return -GC_ESTATE;
    }
    return 0;
}

/* A saved record's line that is not "domain.key=value". */
static int record_damaged(gc_domains *ds)
{
    set_err(ds, "the saved state's clock domains are damaged; check the clocks by hand and "
                "delete it");
    return -GC_ESTATE;
}

int gc_domains_load_each(gc_domains *ds, const char *sysfs_root, const char *lines,
                         gc_domain_state *st, char *kept, size_t kept_len, char *left, size_t left_len)
{
    char text[GC_DOMAINS_RECORD_MAX], *line, *save = NULL, why[GC_ERR_MAX / 2];
    char foreign[GC_DOMAINS_RECORD_MAX] = ""; /* " name name ": named by the record, not the board's */
    int bad[GC_MAX_DOMAINS] = {0}, rc, i;
    size_t used = 0;

    kept[0] = left[0] = '\0';
    if ((rc = record_begin(ds, sysfs_root, lines, st, text)) < 0)
        return rc;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '='), *dot = strchr(line, '.'), name[GC_NAME_MAX + 2];

        if (!eq || !dot || dot > eq || (size_t)(dot - line) >= GC_NAME_MAX || !gc_domains_is_key(line))
            return record_damaged(ds);
        *eq = '\0';
        snprintf(name, sizeof name, "%.*s", (int)(dot - line), line);
        i = gc_domain_find(ds, name);
        /* the line is kept (for a later restore) where its domain cannot be put back now */
        if (i < 0 || !ds->d[i].writable) {
            char mark[GC_NAME_MAX + 3];

            snprintf(mark, sizeof mark, " %s ", name);
            if (!strstr(foreign, mark) && strlen(foreign) + strlen(mark) < sizeof foreign) {
                strcat(foreign, mark);
                gc_list_append(left, left_len, "%s (%s)", name, i < 0 ? "the board has no such clock "
                         "domain now" : ds->d[i].why);
            }
        } else if (gc_domains_parse(ds, line, eq + 1, st) < 0) {
            if (!bad[i])
                gc_list_append(left, left_len, "%s (its saved line %s is damaged or repeated)", name, line);
            bad[i] = 1;
        }
        if (i < 0 || !ds->d[i].writable || bad[i]) {
            rc = snprintf(kept + used, kept_len - used, "%s=%s\n", line, eq + 1);
            if (rc < 0 || (size_t)rc >= kept_len - used)
                return -ENOSPC;
            used += (size_t)rc;
        }
    }
    for (i = 0; i < ds->n; i++) {
        if (!st[i].saved || bad[i])
            continue;
        if (check_saved(ds, i, &st[i], why, sizeof why) < 0) {
            char one[GC_DOMAINS_RECORD_MAX] = "";
            gc_domain_state only[GC_MAX_DOMAINS];

            gc_list_append(left, left_len, "%s (%s)", ds->d[i].name, why);
            /* its lines as saved, kept for a later restore */
            memset(only, 0, sizeof only);
            only[i] = st[i];
            if (gc_domains_format(ds, only, one, sizeof one) < 0 ||
                snprintf(kept + used, kept_len - used, "%s", one) >= (int)(kept_len - used))
                return -ENOSPC;
            used += strlen(one);
            st[i].saved = 0;
        }
    }
    for (i = 0; i < ds->n; i++)
        if (bad[i])
            st[i].saved = 0;
    return 0;
}

int gc_domains_load_record(gc_domains *ds, const char *sysfs_root, const char *lines,
                           gc_domain_state *st)
{
    char text[GC_DOMAINS_RECORD_MAX], *line, *save = NULL;
    int rc;

    if ((rc = record_begin(ds, sysfs_root, lines, st, text)) < 0)
        return rc;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');

        if (!eq)
            return record_damaged(ds);
        *eq = '\0';
        rc = gc_domains_parse(ds, line, eq + 1, st);
        if (rc == 0) {
            set_err(ds, "the saved state's line %s is not a clock domain's", line);
            return -GC_ESTATE;
        }
        if (rc < 0)
            return rc;
    }
    return gc_domains_parse_done(ds, st);
}

int gc_domains_record_names(const char *lines, char *out, size_t len)
{
    char seen[GC_DOMAINS_RECORD_MAX] = ",";
    const char *p = lines;
    size_t used = 0;
    int n = 0;

    if (!len)
        return -ENOSPC;
    out[0] = '\0';
    while (p && *p) {
        const char *dot = strchr(p, '.'), *nl = strchr(p, '\n');
        char mark[GC_NAME_MAX + 3];
        int k;

        if (dot && (!nl || dot < nl) && dot > p && (size_t)(dot - p) < GC_NAME_MAX) {
            snprintf(mark, sizeof mark, ",%.*s,", (int)(dot - p), p);
            if (!strstr(seen, mark)) { /* a name once, in the record's order */
                if (strlen(seen) + strlen(mark) >= sizeof seen)
                    return -ENOSPC;
                strcat(seen, mark + 1);
                k = snprintf(out + used, len - used, "%s%.*s", used ? " " : "", (int)(dot - p), p);
                if (k < 0 || (size_t)k >= len - used)
                    return -ENOSPC;
                used += (size_t)k;
                n++;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* devfreq_emc.c - the memory clock as a devfreq device (Thor's bwmgr: jtop memory.py, jetson_stats
 * PRs 738 and 825): the EMC domain of a board without the BPMP debugfs EMC (domain.h).
 *
 * Its folder /sys/class/devfreq/NAME holds Hz, as the GPU's: available_frequencies (its table),
 * min_freq and max_freq (written: a pin is min = max = the level, as the GPU's pin), governor
 * (read, and put back where it changed), cur_freq (shown). The names come from the board table
 * (gen_boards.h, gc_emc_devfreq_names): govcore holds no list of its own. In a saved record it is
 * "emc" with the lines of a CPU policy (emc.governor, emc.min_hz, emc.max_hz): a govcore older
 * than this file finds no EMC on such a board and keeps those lines saved, never misreads them.
 */
#include "domain.h"
#include "gen_boards.h"
#include "err.h"
#include "sysfs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define DEVFREQ_CLASS "/sys/class/devfreq"

static int read_hz(gc_domains *ds, const gc_domain *d, const char *name, uint64_t *hz)
{
    char path[GC_PATH_MAX];
    int rc;

    gc_domain_file(d, name, path, sizeof path);
    rc = gc_sysfs_read_u64(ds->sysfs_root, path, hz);
    if (rc < 0)
        set_err(ds, "%s: cannot read %s: %s", d->name, path,
                rc == -GC_EBOARD ? "not a regular file" : gc_sysfs_strerror(rc));
    return rc;
}

static int write_hz(gc_domains *ds, const gc_domain *d, const char *name, uint64_t hz)
{
    char path[GC_PATH_MAX];
    int rc;

    gc_domain_file(d, name, path, sizeof path);
    rc = gc_sysfs_write_u64(ds->sysfs_root, path, hz);
    if (rc < 0)
        set_err(ds, "%s: cannot write %llu to %s: %s%s", d->name, (unsigned long long)hz, path,
                rc == -GC_EBOARD ? "not a regular file" : gc_sysfs_strerror(rc),
                (rc == -EACCES || rc == -EPERM) ? " (run as root, or through govcore serve)" : "");
    return rc;
}

int gc_devfreq_emc_open(gc_domains *ds, gc_domain *d)
{
    static const char *const files[] = {"min_freq", "max_freq"};
    char path[GC_PATH_MAX], text[4096];
    const char *const *name;
    int rc;

    for (name = gc_emc_devfreq_names; *name; name++) {
        snprintf(path, sizeof path, "%s%s/%s", strcmp(ds->sysfs_root, "/") ? ds->sysfs_root : "",
                 DEVFREQ_CLASS, *name);
        if (gc_sysfs_exists(ds->sysfs_root, path))
            break;
    }
    if (!*name)
        return 0;
    memset(d, 0, sizeof *d);
    d->kind = GC_DOMAIN_EMC_DEVFREQ;
    d->policy = -1;
    snprintf(d->name, sizeof d->name, "emc");
    snprintf(d->dir, sizeof d->dir, "%s", path);
    snprintf(d->devfreq, sizeof d->devfreq, "%s", *name);
    if ((rc = gc_domain_check_files(ds->sysfs_root, d, files, sizeof files / sizeof *files,
                                    "run as root, or through govcore serve")) < 0)
        return 1;
    d->readable = 1;
    d->writable = rc;
    gc_domain_file(d, "available_frequencies", path, sizeof path);
    if (gc_sysfs_read(ds->sysfs_root, path, text, sizeof text) < 0 ||
        gc_domain_parse_levels(text, 1, d->levels_hz, &d->n_levels) < 0) {
        d->available = 0;
        snprintf(d->why, sizeof d->why, "%s is missing or holds no list of Hz", path);
        return 1;
    }
    d->available = d->writable;
    return 1;
}

int gc_devfreq_emc_read(gc_domains *ds, const gc_domain *d, gc_domain_state *st)
{
    char path[GC_PATH_MAX];
    uint64_t v;
    int rc;

    memset(st, 0, sizeof *st);
    gc_domain_file(d, "governor", path, sizeof path);
    if (gc_sysfs_read(ds->sysfs_root, path, st->governor, sizeof st->governor) < 0)
        st->governor[0] = '\0'; /* no governor file: restored as a range alone */
    if ((rc = read_hz(ds, d, "min_freq", &st->min_hz)) < 0 ||
        (rc = read_hz(ds, d, "max_freq", &st->max_hz)) < 0)
        return rc;
    if (read_hz(ds, d, "cur_freq", &v) == 0)
        st->rate_hz = v;
    st->locked = st->min_hz == st->max_hz; /* shown as pinned; not a saved value */
    return 0;
}

int gc_devfreq_emc_set_range(gc_domains *ds, const gc_domain *d, uint64_t min_hz, uint64_t max_hz)
{
    uint64_t cur_min, cur_max;
    int rc;

    if ((rc = read_hz(ds, d, "min_freq", &cur_min)) < 0 ||
        (rc = read_hz(ds, d, "max_freq", &cur_max)) < 0)
        return rc;
    /* raise the ceiling first when going up: the board never sees min > max */
    if (min_hz > cur_max) {
        if ((rc = write_hz(ds, d, "max_freq", max_hz)) < 0)
            return rc;
        return write_hz(ds, d, "min_freq", min_hz);
    }
    if (min_hz != cur_min && (rc = write_hz(ds, d, "min_freq", min_hz)) < 0)
        return rc;
    if (max_hz != cur_max && (rc = write_hz(ds, d, "max_freq", max_hz)) < 0)
        return rc;
    return 0;
}

int gc_devfreq_emc_restore(gc_domains *ds, const gc_domain *d, const gc_domain_state *st)
{
    char path[GC_PATH_MAX], gov[GC_NAME_MAX], first[GC_ERR_MAX] = "";
    gc_domain_state now;
    int rc, first_rc = 0, pass;

    if (st->governor[0]) {
        gc_domain_file(d, "governor", path, sizeof path);
        if ((gc_sysfs_read(ds->sysfs_root, path, gov, sizeof gov) < 0 || strcmp(gov, st->governor)) &&
            (rc = gc_sysfs_write(ds->sysfs_root, path, st->governor)) < 0) {
            first_rc = rc;
            snprintf(first, sizeof first, "%s: cannot write governor %s to %s: %s", d->name,
                     st->governor, path, gc_sysfs_strerror(rc));
        }
    }
    /* the range in the safe order; where that fails, max then min, twice (a refused write may
     * succeed once the other bound has moved) */
    if (gc_devfreq_emc_set_range(ds, d, st->min_hz, st->max_hz) < 0) {
        if (!first_rc) {
            first_rc = -EIO;
            snprintf(first, sizeof first, "%s", ds->err);
        }
        for (pass = 0; pass < 2; pass++) {
            write_hz(ds, d, "max_freq", st->max_hz);
            write_hz(ds, d, "min_freq", st->min_hz);
        }
    }
    if (gc_devfreq_emc_read(ds, d, &now) == 0 && now.min_hz == st->min_hz && now.max_hz == st->max_hz &&
        (!st->governor[0] || !strcmp(now.governor, st->governor))) {
        first_rc = 0;
    } else if (!first_rc) {
        first_rc = -GC_EVERIFY;
        snprintf(first, sizeof first, "%s (devfreq %s): reads governor %s min %g max %g MHz, not as "
                 "saved", d->name, d->devfreq, now.governor, gc_hz_to_mhz(now.min_hz),
                 gc_hz_to_mhz(now.max_hz));
    }
    if (first_rc)
        snprintf(ds->err, sizeof ds->err, "%s", first);
    return first_rc;
}

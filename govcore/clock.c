/* clock.c - write the GPU clock range safely; save and restore the board's original state. */
#include "govcore.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC "# govcore saved GPU clock state"

static void set_err(gc_board *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
}

static void devfreq_file(const gc_board *b, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", b->devfreq_dir, name);
}

static int write_hz(gc_board *b, const char *name, uint64_t hz)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, name, path, sizeof path);
    rc = gc_sysfs_write_u64(path, hz);
    if (rc < 0)
        set_err(b, "cannot write %llu to %s: %s%s", (unsigned long long)hz, path, strerror(-rc),
                (rc == -EACCES || rc == -EPERM) ? " (run as root)" : "");
    return rc;
}

/* Read only the floor and ceiling: what a range write needs, two files instead of four. */
static int read_range(gc_board *b, gc_clock_state *st)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, "min_freq", path, sizeof path);
    if ((rc = gc_sysfs_read_u64(path, &st->min_hz)) == 0) {
        devfreq_file(b, "max_freq", path, sizeof path);
        rc = gc_sysfs_read_u64(path, &st->max_hz);
    }
    if (rc < 0)
        set_err(b, "cannot read %s: %s", path, strerror(-rc));
    return rc;
}

int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz)
{
    gc_clock_state st;
    int rc;

    if (min_hz == 0 || max_hz < min_hz) {
        set_err(b, "invalid clock range %llu..%llu Hz", (unsigned long long)min_hz,
                (unsigned long long)max_hz);
        return -EINVAL;
    }
    rc = read_range(b, &st);
    if (rc < 0)
        return rc;
    /* Raise the ceiling first when going up, lower the floor first when going down: at no
     * point may the board see min > max. Unchanged values are not written. */
    if (min_hz > st.max_hz) {
        if ((rc = write_hz(b, "max_freq", max_hz)) < 0)
            return rc;
        if ((rc = write_hz(b, "min_freq", min_hz)) < 0)
            return rc;
    } else {
        if (min_hz != st.min_hz && (rc = write_hz(b, "min_freq", min_hz)) < 0)
            return rc;
        if (max_hz != st.max_hz && (rc = write_hz(b, "max_freq", max_hz)) < 0)
            return rc;
    }
    rc = read_range(b, &st);
    if (rc < 0)
        return rc;
    if (st.min_hz != min_hz || st.max_hz != max_hz) {
        set_err(b, "clock did not take: asked min %.2f max %.2f MHz, board reports min %.2f max "
                   "%.2f MHz (a power-mode cap? check nvpmodel)",
                gc_hz_to_mhz(min_hz), gc_hz_to_mhz(max_hz), gc_hz_to_mhz(st.min_hz),
                gc_hz_to_mhz(st.max_hz));
        return -GC_EVERIFY;
    }
    return 0;
}

/* ---------------------------------------------------------------- saved state */

int gc_default_state_dir(char *out, size_t len)
{
    const char *env = getenv("PYDVFS_STATE_DIR");
    int n;

    if (env && *env)
        n = snprintf(out, len, "%s", env);
    else if (geteuid() == 0)
        n = snprintf(out, len, "/run/pydvfs");
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        n = snprintf(out, len, "%s/pydvfs", env);
    else
        n = snprintf(out, len, "/tmp/pydvfs-%u", (unsigned)geteuid());
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* FNV-1a, 64 bit: names the state file of one sysfs root. */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int resolve_dir(const char *state_dir, char *out, size_t len)
{
    if (state_dir && *state_dir) {
        int n = snprintf(out, len, "%s", state_dir);
        return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
    }
    return gc_default_state_dir(out, len);
}

int gc_state_path(const gc_board *b, const char *state_dir, char *out, size_t len)
{
    char dir[GC_PATH_MAX], real[PATH_MAX];
    const char *root = b->sysfs_root;
    int rc, n;

    rc = resolve_dir(state_dir, dir, sizeof dir);
    if (rc < 0)
        return rc;
    if (realpath(b->sysfs_root, real))
        root = real;
    n = snprintf(out, len, "%s/gpu-%016llx.state", dir, (unsigned long long)fnv1a64(root));
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

static int mkdir_p(const char *dir)
{
    char tmp[GC_PATH_MAX], *p;

    snprintf(tmp, sizeof tmp, "%s", dir);
    for (p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
{
    char path[GC_PATH_MAX], line[GC_PATH_MAX + 32];
    FILE *f;
    int rc, have = 0;

    rc = gc_state_path(b, state_dir, path, sizeof path);
    if (rc < 0)
        return rc;
    f = fopen(path, "re");
    if (!f) {
        rc = -errno;
        if (rc != -ENOENT)
            set_err(b, "cannot read state file %s: %s", path, strerror(-rc));
        return rc;
    }
    memset(st, 0, sizeof *st);
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '='), *nl = strchr(line, '\n');

        if (nl)
            *nl = '\0';
        if (line[0] == '#' || !eq)
            continue;
        *eq = '\0';
        if (strcmp(line, "governor") == 0) {
            snprintf(st->governor, sizeof st->governor, "%s", eq + 1);
            have |= 1;
        } else if (strcmp(line, "min_hz") == 0) {
            st->min_hz = strtoull(eq + 1, NULL, 10);
            have |= 2;
        } else if (strcmp(line, "max_hz") == 0) {
            st->max_hz = strtoull(eq + 1, NULL, 10);
            have |= 4;
        }
    }
    fclose(f);
    if (have != 7 || st->min_hz == 0 || st->max_hz < st->min_hz || !st->governor[0]) {
        set_err(b, "state file %s is damaged; check the clock by hand and delete it", path);
        return -GC_ESTATE;
    }
    return 0;
}

int gc_state_save(gc_board *b, const char *state_dir, int *saved_now)
{
    char dir[GC_PATH_MAX], path[GC_PATH_MAX], tmp[GC_PATH_MAX + 32];
    gc_clock_state st, old;
    FILE *f;
    int rc, fd;

    *saved_now = 0;
    if ((rc = resolve_dir(state_dir, dir, sizeof dir)) < 0 ||
        (rc = gc_state_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    rc = gc_state_load(b, state_dir, &old);
    if (rc == 0)
        return 0; /* the original state is already saved */
    if (rc != -ENOENT)
        return rc;
    if ((rc = gc_clock_read(b, &st)) < 0)
        return rc;
    if ((rc = mkdir_p(dir)) < 0) {
        set_err(b, "cannot create state folder %s: %s", dir, strerror(-rc));
        return rc;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "we");
    if (!f) {
        rc = -errno;
        set_err(b, "cannot write state file %s: %s", tmp, strerror(-rc));
        return rc;
    }
    fprintf(f, "%s; `pydvfs restore` or `govcore restore` puts it back\n", STATE_MAGIC);
    fprintf(f, "sysfs_root=%s\ndevfreq_dir=%s\ngovernor=%s\nmin_hz=%llu\nmax_hz=%llu\n",
            b->sysfs_root, b->devfreq_dir, st.governor, (unsigned long long)st.min_hz,
            (unsigned long long)st.max_hz);
    rc = (fflush(f) == 0 && fsync(fileno(f)) == 0) ? 0 : -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    /* link() will not replace a state another process saved in the meantime. */
    if (rc == 0 && link(tmp, path) < 0 && errno != EEXIST)
        rc = -errno;
    unlink(tmp);
    if (rc < 0) {
        set_err(b, "cannot write state file %s: %s", path, strerror(-rc));
        return rc;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    *saved_now = 1;
    return 0;
}

int gc_restore(gc_board *b, const char *state_dir, int *restored)
{
    char path[GC_PATH_MAX], gov_path[GC_PATH_MAX];
    gc_clock_state saved, now;
    int rc;

    *restored = 0;
    rc = gc_state_load(b, state_dir, &saved);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    if ((rc = gc_clock_read(b, &now)) < 0)
        return rc;
    if (strcmp(now.governor, saved.governor) != 0) {
        devfreq_file(b, "governor", gov_path, sizeof gov_path);
        rc = gc_sysfs_write(gov_path, saved.governor);
        if (rc < 0) {
            set_err(b, "cannot write governor %s to %s: %s", saved.governor, gov_path,
                    strerror(-rc));
            return rc;
        }
    }
    if ((rc = gc_set_range_hz(b, saved.min_hz, saved.max_hz)) < 0)
        return rc;
    if ((rc = gc_state_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    if (unlink(path) < 0 && errno != ENOENT) {
        rc = -errno;
        set_err(b, "clock restored, but cannot remove %s: %s", path, strerror(-rc));
        return rc;
    }
    *restored = 1;
    return 0;
}

int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
{
    char err[GC_ERR_MAX];
    int rc, saved_now, restored;

    if (gc_snap_hz(b, want_hz, level_hz) < 0) {
        set_err(b, "not a clock: %.3f MHz", gc_hz_to_mhz(want_hz));
        return -EINVAL;
    }
    rc = gc_state_save(b, state_dir, &saved_now);
    if (rc < 0)
        return rc;
    rc = gc_set_range_hz(b, *level_hz, *level_hz);
    if (rc == 0)
        return 0;
    /* Never leave the board half-written: put the original back, keep the first error. */
    memcpy(err, b->err, sizeof err);
    if (gc_restore(b, state_dir, &restored) == 0)
        snprintf(b->err, sizeof b->err, "%s; original clock state restored", err);
    else
        snprintf(b->err, sizeof b->err, "%s; restoring the original state also failed", err);
    return rc;
}

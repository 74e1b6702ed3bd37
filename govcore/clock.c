/* clock.c - write the GPU clock range safely; pin it, and put the saved original back. The saved
 * state's file is state.c's. */
#include "govcore.h"
#include "domain.h"
#include "err.h"
#include "state.h"
#include "powermode.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void devfreq_file(const gc_board *b, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", b->devfreq_dir, name);
}

static int write_hz(gc_board *b, const char *name, uint64_t hz)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, name, path, sizeof path);
    rc = gc_sysfs_write_u64(b->sysfs_root, path, hz);
    if (rc < 0)
        set_err(b, "cannot write %llu to %s: %s%s", (unsigned long long)hz, path, gc_sysfs_strerror(rc),
                (rc == -EACCES || rc == -EPERM) ? " (run as root)" : "");
    return rc;
}

/* Read only the floor and ceiling: what a range write needs, two files instead of four. */
static int read_range(gc_board *b, gc_clock_state *st)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, "min_freq", path, sizeof path);
    if ((rc = gc_sysfs_read_u64(b->sysfs_root, path, &st->min_hz)) == 0) {
        devfreq_file(b, "max_freq", path, sizeof path);
        rc = gc_sysfs_read_u64(b->sysfs_root, path, &st->max_hz);
    }
    if (rc < 0)
        set_err(b, "cannot read %s: %s", path, gc_sysfs_strerror(rc));
    return rc;
}

int gc_range_read(gc_board *b, gc_clock_state *st)
{
    char path[GC_PATH_MAX];
    int rc;

    memset(st, 0, sizeof *st);
    if ((rc = read_range(b, st)) < 0)
        return rc;
    devfreq_file(b, "governor", path, sizeof path);
    if (gc_sysfs_read(b->sysfs_root, path, st->governor, sizeof st->governor) < 0)
        st->governor[0] = '\0';
    return 0;
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

/* A power mode changed during a pin. nvpmodel lowers the devfreq max_freq; where the kernel has
 * no nvpmodel_clk_cap that is the only trace, and the saved original's max (the ceiling a pin
 * obeys, powermode.c) would hide it: a later pin went above the new mode and restore put the
 * old ceiling back. The record's pinned_hz is the max_freq the last pin left; a live max_freq
 * below it (and below the saved max) is the new mode's ceiling, and the saved original follows
 * it: later pins are capped by it, and restore puts it back. Said in b->warn. */
static int follow_power_mode(gc_board *b, const char *state_dir)
{
    char dom[GC_DOMAINS_RECORD_MAX];
    gc_state_file sf;
    gc_clock_state saved, live;
    uint64_t old_max, was_pinned;
    int rc;

    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc == -ENOENT || rc == -EDESTADDRREQ ? 0 : rc;
    rc = gc_state_read_record(b, &sf, &saved, dom, sizeof dom);
    if (rc < 0 || !saved.pinned_hz || read_range(b, &live) < 0 || live.max_hz >= saved.pinned_hz ||
        live.max_hz >= saved.max_hz || !gc_level_known(b, live.max_hz)) {
        gc_state_close(&sf);
        if (rc == 0 || rc == -ENOENT)
            b->err[0] = '\0'; /* (a range that could not be read: the pin says so itself) */
        return rc == -ENOENT ? 0 : rc;
    }
    old_max = saved.max_hz;
    was_pinned = saved.pinned_hz;
    saved.max_hz = live.max_hz;
    if (saved.min_hz > saved.max_hz)
        saved.min_hz = saved.max_hz;
    saved.pinned_hz = live.max_hz;
    rc = gc_state_rewrite(b, &sf, &saved, dom);
    gc_state_close(&sf);
    if (rc == 0)
        snprintf(b->warn, sizeof b->warn, "the power mode lowered the GPU's max_freq to %g MHz "
                 "during the pin (pinned at %g MHz): the saved original's ceiling follows it "
                 "(%g -> %g MHz), so pins stay under it and restore puts it back",
                 gc_hz_to_mhz(live.max_hz), gc_hz_to_mhz(was_pinned), gc_hz_to_mhz(old_max),
                 gc_hz_to_mhz(live.max_hz));
    return rc;
}

/* After a pin: the level it left, in the record (follow_power_mode reads it). */
static int record_pin(gc_board *b, const char *state_dir, uint64_t level_hz)
{
    char dom[GC_DOMAINS_RECORD_MAX];
    gc_state_file sf;
    gc_clock_state saved;
    int rc;

    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc;
    if ((rc = gc_state_read_record(b, &sf, &saved, dom, sizeof dom)) == 0 && saved.pinned_hz != level_hz) {
        saved.pinned_hz = level_hz;
        rc = gc_state_rewrite(b, &sf, &saved, dom);
    }
    gc_state_close(&sf);
    return rc;
}


/* Best effort, in the safe order: write what can be written even where something cannot be
 * read, and say exactly what is still not as saved. A saved value the board no longer offers (a
 * governor or a level gone from its tables) is never written: it is left, and named. */
/* gc_restore's GPU range: the saved min/max this board still offers, written in an order that
 * never makes min > max; what could not be written is added to retry, what the board no longer
 * offers to gone, and the first failure to *first_rc and first_err (each GC_ERR_MAX bytes). */
static void restore_range(gc_board *b, const gc_clock_state *saved, char *retry, char *gone, int *first_rc,
                          char *first_err)
{
    gc_clock_state now;
    int rc = 0, pass, min_ok = 0, max_ok = 0, min_use, max_use;

    /* what of it this board still offers */
    min_use = gc_level_known(b, saved->min_hz);
    max_use = gc_level_known(b, saved->max_hz);
    if (min_use && max_use && saved->max_hz < saved->min_hz)
        min_use = max_use = 0;
    /* The range: with the current one readable, gc_set_range_hz picks the order that never
     * makes min > max. Without it (or with one bound gone), write what can be written, max
     * then min, and once more whatever the board refused (a refused write may succeed once
     * the other bound has moved). */
    if (min_use && max_use && (rc = gc_set_range_hz(b, saved->min_hz, saved->max_hz)) == 0) {
        min_ok = max_ok = 1;
    } else {
        if (min_use && max_use && !*first_rc) {
            *first_rc = rc;
            snprintf(first_err, GC_ERR_MAX, "%s", b->err);
        }
        for (pass = 0; pass < 2 && !((min_ok || !min_use) && (max_ok || !max_use)); pass++) {
            if (max_use && !max_ok)
                max_ok = write_hz(b, "max_freq", saved->max_hz) == 0;
            if (min_use && !min_ok)
                min_ok = write_hz(b, "min_freq", saved->min_hz) == 0;
            if (!*first_rc && ((max_use && !max_ok) || (min_use && !min_ok))) {
                *first_rc = -EIO;
                snprintf(first_err, GC_ERR_MAX, "%s", b->err);
            }
        }
        if (read_range(b, &now) == 0) {
            min_ok = min_use && now.min_hz == saved->min_hz;
            max_ok = max_use && now.max_hz == saved->max_hz;
        }
        if (!min_use)
            gc_list_append(gone, GC_ERR_MAX, "min_freq (saved %g MHz is not %s)",
                     gc_hz_to_mhz(saved->min_hz), gc_level_known(b, saved->min_hz) ?
                     "at most the saved max" : "a level of this board");
        else if (!min_ok)
            gc_list_append(retry, GC_ERR_MAX, "min_freq");
        if (!max_use)
            gc_list_append(gone, GC_ERR_MAX, "max_freq (saved %g MHz is not %s)",
                     gc_hz_to_mhz(saved->max_hz), gc_level_known(b, saved->max_hz) ?
                     "at least the saved min" : "a level of this board");
        else if (!max_ok)
            gc_list_append(retry, GC_ERR_MAX, "max_freq");
    }
}

int gc_restore(gc_board *b, const char *state_dir, int *restored)
{
    char gov_path[GC_PATH_MAX], gov_now[GC_NAME_MAX], shown[GC_NAME_MAX];
    char retry[GC_ERR_MAX] = "", gone[GC_ERR_MAX] = "", first_err[GC_ERR_MAX] = "";
    char dom_lines[GC_DOMAINS_RECORD_MAX], kept[GC_DOMAINS_RECORD_MAX] = "";
    char dom_left[GC_ERR_MAX] = "";
    gc_state_file sf;
    gc_clock_state saved;
    gc_domains ds;
    gc_domain_state dst[GC_MAX_DOMAINS];
    int rc, first_rc = 0;

    *restored = 0;
    follow_power_mode(b, state_dir); /* a power mode changed during the pin: restore obeys it */
    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc == -ENOENT ? 0 : rc;
    if ((rc = gc_state_read_record(b, &sf, &saved, dom_lines, sizeof dom_lines)) < 0) {
        gc_state_close(&sf);
        return rc == -ENOENT ? 0 : rc;
    }
    /* the governor first: podgov moves the clock within min..max, so set the range last */
    if (saved.governor[0] && !gc_governor_known(b, saved.governor)) {
        gc_printable(saved.governor, shown, sizeof shown);
        gc_list_append(gone, sizeof gone, "governor (saved \"%s\" is not one this board offers)", shown);
    } else if (saved.governor[0]) {
        devfreq_file(b, "governor", gov_path, sizeof gov_path);
        if (gc_sysfs_read(b->sysfs_root, gov_path, gov_now, sizeof gov_now) < 0 ||
            strcmp(gov_now, saved.governor) != 0) {
            rc = gc_sysfs_write(b->sysfs_root, gov_path, saved.governor);
            if (rc < 0) {
                first_rc = rc;
                snprintf(first_err, sizeof first_err, "cannot write governor %s to %s: %s",
                         saved.governor, gov_path, gc_sysfs_strerror(rc));
                gc_list_append(retry, sizeof retry, "governor");
            }
        }
    }
    restore_range(b, &saved, retry, gone, &first_rc, first_err);
    /* every clock domain saved with the GPU (EMC, CPU policies), best effort */
    if (dom_lines[0]) {
        /* domain by domain: one that no longer matches the board is not written, stays in the
         * record and is named; every other is put back */
        if ((rc = gc_domains_load_each(&ds, b->sysfs_root, dom_lines, dst, kept, sizeof kept,
                                       dom_left, sizeof dom_left)) < 0) {
            gc_list_append(gone, sizeof gone, "clock domains (%s)", rc == -ENOSPC ? "too many" : ds.err);
        } else if ((rc = gc_domains_restore(&ds, dst)) < 0) {
            if (!first_rc) {
                first_rc = rc;
                snprintf(first_err, sizeof first_err, "%s", ds.err);
            }
            gc_list_append(retry, sizeof retry, "clock domains");
        }
    }
    if (retry[0]) {
        /* a write the board refused may succeed later: keep the state for a retry */
        rc = first_rc < 0 ? first_rc : -EIO;
        set_err(b, "restore incomplete, still not as saved: %s%s%s (saved governor %s, min %g, "
                   "max %g MHz); the saved state is kept: run restore again (`restore --force` "
                   "drops it): %s", retry, gone[0] ? "; " : "", gone,
                saved.governor[0] ? saved.governor : "(unknown)", gc_hz_to_mhz(saved.min_hz),
                gc_hz_to_mhz(saved.max_hz), first_err);
        gc_state_close(&sf);
        return rc;
    }
    if (dom_left[0]) {
        /* domains the board cannot take back now: their originals stay saved, the rest is
         * put back; the record keeps the GPU's original too, which is still the original */
        rc = gc_state_rewrite(b, &sf, &saved, kept);
        gc_state_close(&sf);
        if (rc < 0) {
            char err[GC_ERR_MAX];

            memcpy(err, b->err, sizeof err);
            set_err(b, "restore partial: left as they are: %s; and %s", dom_left, err);
            return rc;
        }
        set_err(b, "restore partial: put back the GPU%s and every other clock domain saved but "
                   "these, left as they are: %s%s%s; their originals stay in the saved state: "
                   "run restore again once the board offers them, or `restore --force` drops it",
                gone[0] ? " (as far as the board allows)" : "", dom_left, gone[0] ? "; " : "", gone);
        return -GC_ESTATE;
    }
    /* everything that can be put back is: the state has done its work */
    rc = gc_state_remove(b, &sf);
    gc_state_close(&sf);
    if (rc < 0) {
        char err[GC_ERR_MAX];

        memcpy(err, b->err, sizeof err);
        set_err(b, "clock restored, but %s", err);
        return rc;
    }
    *restored = 1;
    if (gone[0]) {
        set_err(b, "restore partial: the saved state no longer matches this board; wrote what it "
                   "still offers, left as it is: %s; the saved state is removed (nothing more "
                   "can be put back from it): check the clock with `status`", gone);
        return -GC_ESTATE;
    }
    return 0;
}

/* The original state, saved before the first change: the GPU's, and every other clock domain's
 * that can be put back (EMC, CPU policies), read from the board now (domain.c). */
int gc_state_save(gc_board *b, const char *state_dir, int *saved_now)
{
    gc_domains ds;
    gc_domain_state dst[GC_MAX_DOMAINS];
    char dom[GC_DOMAINS_RECORD_MAX] = "";
    int rc;

    *saved_now = 0;
    if ((rc = gc_domains_open(&ds, b->sysfs_root, NULL, 0)) < 0 ||
        (rc = gc_domains_snapshot(&ds, dst)) < 0 ||
        (rc = gc_domains_format(&ds, dst, dom, sizeof dom)) < 0) {
        set_err(b, "cannot save the clock domains' state: %s", rc == -ENOSPC ? "too many" : ds.err);
        return rc;
    }
    return gc_state_save_record(b, state_dir, dom, saved_now);
}

/* The level a pin writes: the table's nearest to want_hz, lowered to the power mode's cap (the
 * user's ceiling, read before the state is saved: powermode.c) unless b->above_power_mode. */
static int snap_within_mode(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
{
    if (gc_snap_hz(b, want_hz, level_hz) < 0) {
        set_err(b, "not a clock: %.3f MHz", gc_hz_to_mhz(want_hz));
        return -EINVAL;
    }
    return gc_power_cap_clamp(b, state_dir, level_hz);
}

int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
{
    char err[GC_ERR_MAX];
    int rc, saved_now, restored;

    b->warn[0] = '\0';
    if ((rc = follow_power_mode(b, state_dir)) < 0 ||
        (rc = snap_within_mode(b, want_hz, state_dir, level_hz)) < 0)
        return rc;
    rc = gc_state_save(b, state_dir, &saved_now);
    if (rc < 0)
        return rc;
    rc = gc_set_range_hz(b, *level_hz, *level_hz);
    if (rc == 0 && (rc = record_pin(b, state_dir, *level_hz)) == 0)
        return 0;
    /* Never leave the board half-written: put the original back, keep the first error. */
    memcpy(err, b->err, sizeof err);
    if (gc_restore(b, state_dir, &restored) == 0)
        snprintf(b->err, sizeof b->err, "%s; original clock state restored", err);
    else
        snprintf(b->err, sizeof b->err, "%s; restoring the original state also failed", err);
    return rc;
}

int gc_pin_mode(gc_board *b, gc_domains *ds, uint64_t gpu_hz, uint64_t emc_hz, uint64_t cpu_hz,
                const char *state_dir, uint64_t *gpu_level_hz, uint64_t *level_hz)
{
    char lines[GC_DOMAINS_RECORD_MAX], err[GC_ERR_MAX];
    gc_domains rec;
    gc_domain_state orig[GC_MAX_DOMAINS], *have = NULL;
    int rc, i, saved_now, restored;

    *gpu_level_hz = 0;
    b->warn[0] = '\0';
    for (i = 0; i < GC_MAX_DOMAINS; i++)
        level_hz[i] = 0;
    memset(orig, 0, sizeof orig);
    b->cap_hz = b->clamped_from_hz = 0;
    if ((rc = follow_power_mode(b, state_dir)) < 0)
        return rc;
    if (gpu_hz && (rc = snap_within_mode(b, gpu_hz, state_dir, gpu_level_hz)) < 0)
        return rc;
    /* a record saved already holds the originals: the CPU ceiling the power mode set is there */
    rc = gc_state_load_domains(b, state_dir, lines, sizeof lines);
    if (rc == 0) {
        if ((rc = gc_domains_load_record(&rec, ds->sysfs_root, lines, orig)) < 0) {
            snprintf(b->err, sizeof b->err, "%s", rec.err);
            return rc;
        }
        have = orig;
    } else if (rc != -ENOENT) {
        return rc;
    }
    /* every domain checked before anything is written */
    if ((rc = gc_domains_check(ds, emc_hz, cpu_hz, have, level_hz)) < 0) {
        snprintf(b->err, sizeof b->err, "%s", ds->err);
        return rc;
    }
    for (i = 0; have && i < ds->n; i++)
        if (level_hz[i] && !have[i].saved) {
            snprintf(b->err, sizeof b->err, "the saved state holds no original of %s (saved "
                     "before it could be written): run restore first; nothing was changed",
                     ds->d[i].name);
            return -EBUSY;
        }
    if ((rc = gc_state_save(b, state_dir, &saved_now)) < 0)
        return rc;
    if (!have) { /* the originals just saved */
        if ((rc = gc_state_load_domains(b, state_dir, lines, sizeof lines)) < 0 ||
            (rc = gc_domains_load_record(&rec, ds->sysfs_root, lines, orig)) < 0) {
            if (rc == -GC_ESTATE)
                snprintf(b->err, sizeof b->err, "%s", rec.err);
            goto undo;
        }
    }
    for (i = 0; i < ds->n; i++)
        if (level_hz[i] && !orig[i].saved) { /* never write what restore could not put back */
            snprintf(b->err, sizeof b->err, "%s: its original could not be saved", ds->d[i].name);
            rc = -EIO;
            goto undo;
        }
    if ((rc = gc_domains_pin(ds, level_hz, orig)) < 0) {
        snprintf(b->err, sizeof b->err, "%s", ds->err);
        goto undo;
    }
    if (*gpu_level_hz && ((rc = gc_set_range_hz(b, *gpu_level_hz, *gpu_level_hz)) < 0 ||
                          (rc = record_pin(b, state_dir, *gpu_level_hz)) < 0))
        goto undo;
    return 0;
undo:
    /* never half a mode: the whole record goes back */
    memcpy(err, b->err, sizeof err);
    if (gc_restore(b, state_dir, &restored) == 0)
        snprintf(b->err, sizeof b->err, "%s; the original clocks are restored", err);
    else
        snprintf(b->err, sizeof b->err, "%s; restoring the original clocks also failed: run "
                 "restore again", err);
    return rc;
}

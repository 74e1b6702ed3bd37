/* state.h - the saved state's file: where it lives and how it is written, read and removed
 * without anyone else being able to steer it (state.c). What is saved and put back is clock.c's.
 *
 * The file (one per board, i.e. per sysfs root) is versioned text:
 *     # govcore saved GPU clock state; ...
 *     format=1
 *     sysfs_root=...    devfreq_dir=...    (for people; not read back)
 *     governor=...      min_hz=...         max_hz=...
 *     emc.rate_hz=... emc.locked=... cpuN.governor=... cpuN.min_hz=... cpuN.max_hz=...
 *                       (format 2: the other clock domains' originals, domain.c's lines)
 *     pinned_hz=...     (optional: the GPU level the last pin set, clock.c's; a live max_freq
 *                       below it is a power mode lowered during the pin)
 * A file without a format line is format 1 (written before the line existed); a newer format
 * is refused as damaged here, naming the format, so a newer govcore's state is never misread.
 *
 * The public entry points (gc_default_state_dir, gc_state_path, gc_state_save, gc_state_load,
 * gc_state_drop) are declared in govcore.h.
 */
#ifndef GOVCORE_STATE_H
#define GOVCORE_STATE_H

#include "govcore.h"

#define GC_STATE_FORMAT 2
/* The other clock domains' originals in a record (format 2): lines NAME.FIELD=VALUE, at most
 * this many bytes, written and checked by domain.c; to this file they are text. */
#define GC_STATE_DOMAINS_MAX 3072

/* One board's state file, reached through its opened folder. */
typedef struct gc_state_file {
    int dfd;                        /* the state folder, opened and checked; -1 when closed */
    char name[64];                  /* the file's name in it */
    char path[GC_PATH_MAX];         /* folder/name, for messages */
} gc_state_file;


/* Open (creating it, mode 0700, if create) the state folder and check that no one else can
 * steer it. -ENOENT if it does not exist and create is 0; -GC_ESTATE (with b->err) if it is not
 * safe; -EINVAL (with b->err) for a relative folder. */
int gc_state_open(gc_board *b, const char *state_dir, int create, gc_state_file *sf);
void gc_state_close(gc_state_file *sf);

/* Read the saved state as it was saved (cur_hz 0), NOT checked against the board: -ENOENT if
 * none, -GC_ESTATE (with b->err) if it is damaged or not a regular file of ours. */
int gc_state_read(gc_board *b, const gc_state_file *sf, gc_clock_state *st);

/* gc_state_read, also giving the record's clock-domain lines ("key=value\n" each, "" if none)
 * in domains (len bytes; NULL: not wanted). They are checked against the board by domain.c. */
int gc_state_read_record(gc_board *b, const gc_state_file *sf, gc_clock_state *st, char *domains,
                         size_t len);

/* Save st unless a state is saved already: -EEXIST then (the first saved state is the original).
 * Atomic: an O_EXCL|O_NOFOLLOW temp file, mode 0600, put in place with linkat(). */
int gc_state_write(gc_board *b, const gc_state_file *sf, const gc_clock_state *st);

/* Replace the saved record by st and domains (the lines still to be put back): atomic, a temp
 * file renamed over it. Used by a restore that could put back only part of a record. */
int gc_state_rewrite(gc_board *b, const gc_state_file *sf, const gc_clock_state *st,
                     const char *domains);

/* gc_state_save with the other clock domains' originals (domains: their lines, "" for none),
 * which the caller read from the board first (clock.c). */
int gc_state_save_record(gc_board *b, const char *state_dir, const char *domains, int *saved_now);

/* Remove the state file (a symlink or other planted entry is removed, never followed). 0 if
 * there was none. */
int gc_state_remove(gc_board *b, const gc_state_file *sf);

/* Checks of saved values against this board: 1 if hz is one of its levels / name one of its
 * governors (a plain identifier where the board has no available_governors file). */
int gc_level_known(const gc_board *b, uint64_t hz);
int gc_governor_known(gc_board *b, const char *name);

/* Check a whole state against the board: -GC_ESTATE (with b->err, starting with what) if a
 * level or the governor is not the board's, or max < min. An empty governor is "unknown". */
int gc_state_check(gc_board *b, const gc_clock_state *st, const char *what);

#endif

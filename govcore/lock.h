/* lock.h - one owner per GPU: an advisory lock a process holds for as long as it governs.
 *
 * The lock is flock(2) on a file next to the board's state file (same folder, same name with
 * .lock for .state). The kernel drops it when the holder exits for any reason (kill -9
 * included), so a dead holder's lock is simply taken by the next process. The holder writes
 * its pid into the file, so a refused process can say who governs.
 *
 * Who takes it: the govcore verbs that change the board (pin, restore, apply) for the moment
 * they write, a Python process from its first pin/apply until its restore (or exit), and
 * `govcore serve` while one of its clients holds a pin. flock locks belong to an open file
 * description: one process takes it once per board and keeps the gc_lock.
 */
#ifndef GOVCORE_LOCK_H
#define GOVCORE_LOCK_H

#include "govcore.h"

#include <sys/types.h>

#define GC_LOCK_POLL_MS 10 /* how often a waiting acquire tries again */

typedef struct gc_lock {
    int fd;                       /* the locked file; -1 when not held */
    char path[GC_PATH_MAX];       /* the lock file */
} gc_lock;

/* A gc_lock that holds nothing. */
void gc_lock_init(gc_lock *lk);

/* Path of this board's lock file in state_dir (NULL: the default folder). */
int gc_lock_path(gc_board *b, const char *state_dir, char *out, size_t len);

/* Take the board's lock, trying for up to wait_ms. -EBUSY (with b->err naming the holder's
 * pid) if another process holds it; -EEXIST if lk already holds one; other -errno (with b->err)
 * if the file cannot be made. The state folder is created if missing; the lock file is created
 * 0600 and never followed through a symlink. */
int gc_lock_acquire(gc_board *b, const char *state_dir, int wait_ms, gc_lock *lk);

/* The pid holding this board's lock, 0 if none holds it (the file not existing included). A
 * holder that has not written its pid yet reads as -1. */
int gc_lock_holder(gc_board *b, const char *state_dir, pid_t *pid);

/* Drop the lock (no-op if not held). */
void gc_lock_release(gc_lock *lk);

/* Try once to take an exclusive flock on path (created 0600 if missing, not followed through a
 * symlink, must be a regular file of ours). 0 with *fd_out; -EBUSY if another holds it. Used
 * for the board lock and for `govcore serve`'s one-instance lock. */
int gc_flock_try(const char *path, int *fd_out);

#endif

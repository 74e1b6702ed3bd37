/* lock.h - one owner per GPU: an advisory lock a process holds for as long as it governs.
 *
 * The lock belongs to the GPU, not to a state folder: it is flock(2) on a file named after the
 * GPU's devfreq folder (its device and inode numbers, so every path to the same node, through
 * any sysfs root or bind mount, meets the same lock) in ONE folder per system, whatever
 * --state-dir or PYDVFS_STATE_DIR says:
 *     $PYDVFS_LOCK_DIR if set (absolute; tests set it to a temp folder), else
 *     /run/pydvfs/locks for root, else $XDG_RUNTIME_DIR/pydvfs/locks, else /tmp/pydvfs-locks-UID
 *     (a user's own boards: fake ones; a folder planted there is refused as not private).
 * The folder is private (owned by us, 0700, as the state folder). The kernel drops the lock
 * when the holder exits for any reason (kill -9 included), so a dead holder's lock is simply
 * taken by the next process. The holder writes its pid into the file, so a refused process can
 * say who governs. The file keeps a fixed size and is never truncated: once it exists, taking
 * and dropping the lock needs no disk space (a full /run must not stop a restore).
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
#define GC_LOCK_DIR_ENV "PYDVFS_LOCK_DIR"
#define GC_LOCK_DIR_ROOT "/run/pydvfs/locks"

typedef struct gc_lock {
    int fd;                       /* the locked file; -1 when not held */
    char path[GC_PATH_MAX];       /* the lock file */
} gc_lock;

/* A gc_lock that holds nothing. */
void gc_lock_init(gc_lock *lk);

/* The lock folder (see above). -EINVAL for a relative $PYDVFS_LOCK_DIR. */
int gc_lock_dir(char *out, size_t len);

/* Path of this GPU's lock file. -errno (with b->err) if the GPU's devfreq folder cannot be
 * opened or there is no lock folder. */
int gc_lock_path(gc_board *b, char *out, size_t len);

/* Take the GPU's lock, trying for up to wait_ms. -EBUSY (with b->err naming the holder's pid)
 * if another process holds it; -EEXIST if lk already holds one; other -errno (with b->err) if
 * the file cannot be made. The lock folder is created if missing; the lock file is created 0600
 * and never followed through a symlink. */
int gc_lock_acquire(gc_board *b, int wait_ms, gc_lock *lk);

/* The pid holding this GPU's lock, 0 if none holds it (the file not existing included). A
 * holder whose pid could not be read reads as -1. */
int gc_lock_holder(gc_board *b, pid_t *pid);

/* Drop the lock (no-op if not held). */
void gc_lock_release(gc_lock *lk);

/* Try once to take an exclusive flock on path (created 0600 if missing, not followed through a
 * symlink, must be a regular file of ours). 0 with *fd_out; -EBUSY if another holds it. Used
 * for `govcore serve`'s one-instance lock, whose holder unlinks the file (still locked) when it
 * ends: a lock taken on a file since unlinked is taken again on the new one. */
int gc_flock_try(const char *path, int *fd_out);

/* Where this GPU's saved original lives, whatever state folder saved it: the path of its state
 * file, kept beside the lock (gpu-<dev>-<ino>.original, private, never followed). find: 1 with
 * path, 0 none; mark: record state_path (atomic); unmark: forget it if it is state_path. */
int gc_original_find(gc_board *b, char *path, size_t len);
int gc_original_mark(gc_board *b, const char *state_path);
void gc_original_unmark(gc_board *b, const char *state_path);

/* Open dir (absolute; created with its missing parents, mode 0700, if create) as a private
 * folder: owned by us, writable by no one else, and every folder above it owned by root or us
 * and not writable by others unless sticky. what names it in messages ("state folder"). Used for
 * the lock folder and the state folder (state.c). Same returns as gc_state_open. */
int gc_private_dir_open(gc_board *b, const char *dir, int create, const char *what, int *dfd);

#endif

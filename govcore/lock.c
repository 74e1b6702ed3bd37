/* lock.c - one owner per GPU (see lock.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_PATH */
#endif
#include "lock.h"
#include "err.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME_FMT "gpu-%llx-%llx.lock"
#define PID_RECORD 16 /* the file's fixed size: a pid, blank-padded, and a newline */

/* The private folders (the lock folder here, the state folder in state.c): created 0700, owned
 * by the caller, writable by no one else, and no folder above them another user can change. */
int gc_mkdir_p(const char *dir)
{
    char tmp[GC_PATH_MAX], *p;

    snprintf(tmp, sizeof tmp, "%s", dir);
    for (p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Every folder above dir: owned by root or us, and not writable by others unless sticky. */
static int check_ancestors(gc_board *b, const char *dir, const char *what)
{
    char real[PATH_MAX], *slash;
    struct stat st;

    if (!realpath(dir, real))
        return 0; /* the folder itself was opened and checked; nothing more to learn */
    while ((slash = strrchr(real, '/')) != NULL) {
        if (slash == real)
            slash[1] = '\0';
        else
            *slash = '\0';
        if (stat(real, &st) < 0)
            break;
        if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
            ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
            set_err(b, "refusing %s %s: %s above it can be changed by another user "
                       "(owner uid %u, mode %03o); use a private folder", what, dir, real,
                    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
            return -GC_ESTATE;
        }
        if (slash == real)
            break;
    }
    return 0;
}

int gc_private_dir_open(gc_board *b, const char *dir, int create, const char *what, int *dfd)
{
    struct stat st;
    int rc, fd;

    *dfd = -1;
    if (dir[0] != '/') {
        set_err(b, "%s %s is not an absolute path", what, dir);
        return -EINVAL;
    }
    if (create && (rc = gc_mkdir_p(dir)) < 0) {
        set_err(b, "cannot create %s %s: %s", what, dir, strerror(-rc));
        return rc;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        if (rc == -ENOENT)
            return rc;
        if (rc == -ELOOP || rc == -ENOTDIR) {
            set_err(b, "refusing %s %s: it is a symbolic link or not a folder", what, dir);
            return -GC_ESTATE;
        }
        set_err(b, "cannot open %s %s: %s", what, dir, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        set_err(b, "cannot stat %s %s: %s", what, dir, strerror(-rc));
        goto close_fd;
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        set_err(b, "refusing %s %s: it must be owned by you (uid %u) and writable by no "
                   "one else (owner uid %u, mode %03o)", what, dir, (unsigned)geteuid(),
                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        rc = -GC_ESTATE;
        goto close_fd;
    }
    if ((rc = check_ancestors(b, dir, what)) < 0)
        goto close_fd;
    *dfd = fd;
    return 0;

close_fd:
    close(fd);
    return rc;
}

void gc_lock_init(gc_lock *lk)
{
    lk->fd = -1;
    lk->path[0] = '\0';
}

int gc_lock_dir(char *out, size_t len)
{
    const char *env = getenv(GC_LOCK_DIR_ENV);
    int n;

    if (env && *env) {
        if (env[0] != '/')
            return -EINVAL;
        n = snprintf(out, len, "%s", env);
    } else if (geteuid() == 0) {
        n = snprintf(out, len, "%s", GC_LOCK_DIR_ROOT);
    } else if ((env = getenv("XDG_RUNTIME_DIR")) && *env && env[0] == '/') {
        n = snprintf(out, len, "%s/pydvfs/locks", env);
    } else {
        /* a user without a runtime folder (boards they may write: fake ones). A name planted
         * there by someone else is refused as not private: a lock is never steered by it */
        n = snprintf(out, len, "/tmp/pydvfs-locks-%ld", (long)geteuid());
    }
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* The lock folder and this GPU's file name in it, with b->err on failure. */
static int lock_place(gc_board *b, char *dir, size_t dir_len, char *name, size_t name_len)
{
    struct stat st;
    int rc, fd;

    rc = gc_lock_dir(dir, dir_len);
    if (rc == -EINVAL) {
        set_err(b, "$%s must be an absolute path", GC_LOCK_DIR_ENV);
        return rc;
    }
    if (rc < 0) {
        set_err(b, "lock folder path is too long");
        return rc;
    }
    /* the key: the GPU's devfreq node itself, whichever path reached it */
    fd = gc_sysfs_open(b->sysfs_root, b->devfreq_dir, O_PATH | O_DIRECTORY);
    if (fd < 0) {
        set_err(b, "cannot open the GPU's devfreq folder %s: %s", b->devfreq_dir,
                gc_sysfs_strerror(fd));
        return fd;
    }
    rc = fstat(fd, &st) < 0 ? -errno : 0;
    close(fd);
    if (rc < 0) {
        set_err(b, "cannot stat the GPU's devfreq folder %s: %s", b->devfreq_dir, strerror(-rc));
        return rc;
    }
    snprintf(name, name_len, LOCK_NAME_FMT, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    return 0;
}

int gc_lock_path(gc_board *b, char *out, size_t len)
{
    char dir[GC_PATH_MAX], name[64];
    int rc, n;

    if ((rc = lock_place(b, dir, sizeof dir, name, sizeof name)) < 0)
        return rc;
    n = snprintf(out, len, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Try once to take the flock on name in folder dfd (AT_FDCWD: a path). */
static int flock_try_at(int dfd, const char *name, int *fd_out)
{
    struct stat st;
    int fd, rc;

    /* an existing file first: no O_CREAT, nothing new to allocate */
    fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT)
        fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                    0600);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto close_fd;
    }
    /* A planted file (another user's, a fifo, a device) is not a lock of ours. */
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        rc = -EPERM;
        goto close_fd;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        rc = (errno == EWOULDBLOCK) ? -EBUSY : -errno;
        goto close_fd;
    }
    *fd_out = fd;
    return 0;
close_fd:
    close(fd);
    return rc;
}

int gc_flock_try(const char *path, int *fd_out)
{
    struct stat held, named;
    int tries, rc;

    /* the holder removes the file when it ends (serve.c): a lock taken on a file no longer at
     * path is on a removed file, which a third instance would not see; take it again */
    for (tries = 0; tries < 8; tries++) {
        if ((rc = flock_try_at(AT_FDCWD, path, fd_out)) < 0)
            return rc;
        if (fstat(*fd_out, &held) == 0 && lstat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            return 0;
        close(*fd_out);
        *fd_out = -1;
    }
    return -EAGAIN;
}

/* The pid written in an open lock file, -1 if none is written. */
static pid_t read_pid_fd(int fd)
{
    char text[PID_RECORD + 8];
    ssize_t n;
    long v;
    char *end;

    n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    errno = 0;
    v = strtol(text, &end, 10);
    while (*end == ' ')
        end++;
    if (errno || end == text || v <= 0 || (*end != '\n' && *end != '\0'))
        return -1;
    return (pid_t)v;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Write the fixed-size record over the old one: no truncation, so no new block once the file
 * has its first one. */
static int write_record(int fd, long pid)
{
    char text[PID_RECORD + 1];

    if (pid > 0)
        snprintf(text, sizeof text, "%-*ld\n", PID_RECORD - 1, pid);
    else
        snprintf(text, sizeof text, "%*s\n", PID_RECORD - 1, "");
    return pwrite(fd, text, PID_RECORD, 0) == PID_RECORD ? 0 : -1;
}

int gc_lock_acquire(gc_board *b, int wait_ms, gc_lock *lk)
{
    char dir[GC_PATH_MAX], name[64];
    int rc, fd = -1, dfd, waited_ms = 0;
    pid_t holder;

    if (lk->fd >= 0)
        return -EEXIST;
    if ((rc = lock_place(b, dir, sizeof dir, name, sizeof name)) < 0)
        return rc;
    if ((size_t)snprintf(lk->path, sizeof lk->path, "%s/%s", dir, name) >= sizeof lk->path) {
        set_err(b, "lock file path too long");
        return -ENAMETOOLONG;
    }
    if ((rc = gc_private_dir_open(b, dir, 1, "lock folder", &dfd)) < 0)
        return rc;
    for (;;) {
        rc = flock_try_at(dfd, name, &fd);
        if (rc != -EBUSY || waited_ms >= wait_ms)
            break;
        sleep_ms(GC_LOCK_POLL_MS);
        waited_ms += GC_LOCK_POLL_MS;
    }
    if (rc == -EBUSY) {
        int pfd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

        holder = pfd < 0 ? -1 : read_pid_fd(pfd);
        if (pfd >= 0)
            close(pfd);
        if (holder > 0)
            set_err(b, "the GPU is governed by another process (pid %ld); wait for it to "
                       "finish, or `restore --force` takes the board back", (long)holder);
        else
            set_err(b, "the GPU is governed by another process (lock %s)", lk->path);
    } else if (rc == -EPERM) {
        set_err(b, "lock file %s is not a regular file of this user: refusing to use it", lk->path);
    } else if (rc < 0) {
        set_err(b, "cannot open lock file %s: %s", lk->path, strerror(-rc));
    }
    close(dfd);
    if (rc < 0)
        return rc;
    /* Ours now: whatever pid a dead holder left is replaced by ours. A full disk may refuse
     * the very first record of a new file; the lock holds all the same (the holder then reads
     * as unknown), so a restore on a full /run still works. */
    (void)write_record(fd, (long)getpid());
    lk->fd = fd;
    return 0;
}

int gc_lock_holder(gc_board *b, pid_t *pid)
{
    char dir[GC_PATH_MAX], name[64];
    int rc, fd, dfd;

    *pid = 0;
    if ((rc = lock_place(b, dir, sizeof dir, name, sizeof name)) < 0)
        return rc;
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : -errno;
    fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    close(dfd);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        close(fd); /* nobody holds it (closing drops our probe) */
        return 0;
    }
    rc = errno == EWOULDBLOCK ? 0 : -errno;
    if (rc == 0)
        *pid = read_pid_fd(fd);
    close(fd);
    return rc;
}

void gc_lock_release(gc_lock *lk)
{
    if (lk->fd < 0)
        return;
    /* Blank our pid before unlocking, so no one reads a stale holder; the file stays (removing
     * a lock file races with a process that has just opened it). */
    (void)write_record(lk->fd, 0);
    close(lk->fd);
    lk->fd = -1;
}

/* --- where this GPU's saved original lives (one per GPU, whatever state folder saved it) ---
 * A pointer file beside the lock, gpu-<dev>-<ino>.original, holds the path of the state file
 * that holds the GPU's original: a second saver in another state folder (or through a second
 * path to the board: a bind mount, another --sysfs-root) finds it there and is refused, instead
 * of saving the live pin as its "original". */

static int original_place(gc_board *b, int create, int *dfd, char *name, size_t name_len)
{
    char dir[GC_PATH_MAX], err[GC_ERR_MAX];
    int rc;

    memcpy(err, b->err, sizeof err); /* a lookup never replaces the caller's message */
    if ((rc = lock_place(b, dir, sizeof dir, name, name_len)) == 0) {
        char *dot = strrchr(name, '.');

        if (dot)
            snprintf(dot, name_len - (size_t)(dot - name), ".original");
        rc = gc_private_dir_open(b, dir, create, "lock folder", dfd);
    }
    memcpy(b->err, err, sizeof err);
    return rc;
}

int gc_original_find(gc_board *b, char *path, size_t len)
{
    char name[64];
    struct stat st;
    ssize_t n;
    int dfd, fd;

    if (original_place(b, 0, &dfd, name, sizeof name) < 0)
        return 0;
    fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close(dfd);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || len < 2) {
        close(fd);
        return 0;
    }
    n = read(fd, path, len - 1);
    close(fd);
    if (n <= 1 || path[0] != '/')
        return 0;
    path[n] = '\0';
    if (path[n - 1] == '\n')
        path[n - 1] = '\0';
    return strchr(path, '\n') ? 0 : 1;
}

int gc_original_mark(gc_board *b, const char *state_path)
{
    char name[64], tmp[96];
    size_t len = strlen(state_path);
    int dfd, fd, rc = 0;

    if ((rc = original_place(b, 1, &dfd, name, sizeof name)) < 0)
        return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", name, (long)getpid());
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
    } else {
        if (write(fd, state_path, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
            rc = -EIO;
        if (close(fd) < 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && renameat(dfd, tmp, dfd, name) < 0)
            rc = -errno;
        if (rc < 0)
            unlinkat(dfd, tmp, 0);
    }
    close(dfd);
    return rc;
}

void gc_original_unmark(gc_board *b, const char *state_path)
{
    char name[64], now[GC_PATH_MAX];
    int dfd;

    if (gc_original_find(b, now, sizeof now) != 1 || strcmp(now, state_path) != 0)
        return;
    if (original_place(b, 0, &dfd, name, sizeof name) < 0)
        return;
    unlinkat(dfd, name, 0);
    close(dfd);
}

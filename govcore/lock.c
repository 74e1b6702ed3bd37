/* lock.c - one owner per GPU (see lock.h). */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATE_SUFFIX ".state"
#define LOCK_SUFFIX ".lock"
#define PID_TEXT_MAX 24

static void set_err(gc_board *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
}

void gc_lock_init(gc_lock *lk)
{
    lk->fd = -1;
    lk->path[0] = '\0';
}

int gc_lock_path(gc_board *b, const char *state_dir, char *out, size_t len)
{
    size_t n, suffix = strlen(STATE_SUFFIX);
    int rc;

    /* The state file's name (clock.c hashes the sysfs root into it) with .lock for .state. */
    if ((rc = gc_state_path(b, state_dir, out, len)) < 0)
        return rc;
    n = strlen(out);
    if (n >= suffix && strcmp(out + n - suffix, STATE_SUFFIX) == 0)
        n -= suffix;
    if (n + strlen(LOCK_SUFFIX) + 1 > len)
        return -ENAMETOOLONG;
    memcpy(out + n, LOCK_SUFFIX, strlen(LOCK_SUFFIX) + 1);
    return 0;
}

/* Create the folders of path's parent that are missing, as clock.c creates the state folder. */
static int make_parent(const char *path)
{
    char dir[GC_PATH_MAX], *p;

    snprintf(dir, sizeof dir, "%s", path);
    p = strrchr(dir, '/');
    if (!p || p == dir)
        return 0;
    *p = '\0';
    return gc_mkdir_p(dir);
}

int gc_flock_try(const char *path, int *fd_out)
{
    struct stat st;
    int fd, rc;

    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
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

/* The pid written in a lock file, -1 if none is written (yet). */
static pid_t read_pid(const char *path)
{
    char text[PID_TEXT_MAX];
    ssize_t n;
    long v;
    char *end;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return -1;
    n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    errno = 0;
    v = strtol(text, &end, 10);
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

int gc_lock_acquire(gc_board *b, const char *state_dir, int wait_ms, gc_lock *lk)
{
    char text[PID_TEXT_MAX];
    int rc, fd = -1, n, waited_ms = 0;
    pid_t holder;

    if (lk->fd >= 0)
        return -EEXIST;
    if ((rc = gc_lock_path(b, state_dir, lk->path, sizeof lk->path)) < 0) {
        if (rc == -ENAMETOOLONG) /* gc_state_path said why for anything else */
            set_err(b, "lock file path too long");
        return rc;
    }
    if ((rc = make_parent(lk->path)) < 0) {
        set_err(b, "cannot create the state folder of %s: %s", lk->path, strerror(-rc));
        return rc;
    }
    for (;;) {
        rc = gc_flock_try(lk->path, &fd);
        if (rc != -EBUSY || waited_ms >= wait_ms)
            break;
        sleep_ms(GC_LOCK_POLL_MS);
        waited_ms += GC_LOCK_POLL_MS;
    }
    if (rc == -EBUSY) {
        holder = read_pid(lk->path);
        if (holder > 0)
            set_err(b, "the GPU is governed by another process (pid %ld); wait for it to finish, "
                       "or `restore --force` takes the board back", (long)holder);
        else
            set_err(b, "the GPU is governed by another process (lock %s)", lk->path);
        return rc;
    }
    if (rc == -EPERM) {
        set_err(b, "lock file %s is not a regular file of this user: refusing to use it", lk->path);
        return rc;
    }
    if (rc < 0) {
        set_err(b, "cannot open lock file %s: %s", lk->path, strerror(-rc));
        return rc;
    }
    /* Ours now: whatever pid a dead holder left is replaced by ours. */
    n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        rc = -errno;
        set_err(b, "cannot write lock file %s: %s", lk->path, strerror(-rc));
        close(fd);
        return rc;
    }
    lk->fd = fd;
    return 0;
}

int gc_lock_holder(gc_board *b, const char *state_dir, pid_t *pid)
{
    char path[GC_PATH_MAX];
    int rc, fd;

    *pid = 0;
    if ((rc = gc_lock_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        close(fd); /* nobody holds it (closing drops our probe) */
        return 0;
    }
    rc = errno == EWOULDBLOCK ? 0 : -errno;
    close(fd);
    if (rc == 0)
        *pid = read_pid(path);
    return rc;
}

void gc_lock_release(gc_lock *lk)
{
    if (lk->fd < 0)
        return;
    /* Clear our pid before unlocking, so no one reads a stale holder; the file stays (removing a
     * lock file races with a process that has just opened it). */
    if (ftruncate(lk->fd, 0) < 0) {
        /* the lock still goes with the close */
    }
    close(lk->fd);
    lk->fd = -1;
}

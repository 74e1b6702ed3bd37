/* sysfs_path.c - open a board file without ever leaving the sysfs root.
 *
 * A board path is root + an absolute path on the board. With a root other than "/", a symlink
 * (or "..") inside the tree must not lead out of it: a fake tree planted by another user could
 * otherwise make root write a file anywhere. The kernel checks this itself with openat2() and
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6+); where openat2 is missing, the opened
 * descriptor's real path is compared with the root's (after the open, so no rename can race the
 * check; nothing is read or written before it). The same check is the fallback when openat2
 * keeps answering EAGAIN (renames elsewhere on a busy system racing a ".." in the walk). Relative symlinks inside the tree, as sysfs
 * uses, keep working; absolute ones are refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_PATH, syscall() */
#endif
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif

/* struct open_how of linux/openat2.h, kept here so older headers build too. */
struct gc_open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#define GC_RESOLVE_NO_MAGICLINKS 0x02
#define GC_RESOLVE_BENEATH 0x08
#define OPENAT2_TRIES 16

static int is_whole_fs(const char *root)
{
    return !root || !*root || strcmp(root, "/") == 0;
}

/* 1 if real lies at or below real_root. */
static int inside(const char *real, const char *real_root)
{
    size_t n = strlen(real_root);

    if (strcmp(real_root, "/") == 0)
        return 1;
    return strncmp(real, real_root, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

/* The fallback: check where the descriptor really is. */
static int check_fd_beneath(int fd, const char *root)
{
    char link[64], real[PATH_MAX], real_root[PATH_MAX];
    ssize_t n;

    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, real, sizeof real - 1);
    if (n < 0 || !realpath(root, real_root))
        return -EXDEV; /* cannot prove it is inside: refuse */
    real[n] = '\0';
    return inside(real, real_root) ? 0 : -EXDEV;
}

static int open_beneath(const char *root, const char *path, int flags);

/* Board files are regular files (sysfs attributes, procfs device-tree entries, a fake tree's
 * files): a FIFO, socket or device planted in the tree must not block a verb (the daemon is
 * single-threaded), nor a symlink as the last component redirect it. So a file (not a folder,
 * not O_PATH) is opened O_NONBLOCK|O_NOFOLLOW|O_NOCTTY, checked with fstat, and handed back
 * blocking as usual. */
int gc_sysfs_open(const char *root, const char *path, int flags)
{
    struct stat st;
    int fd, fl, rc;

    if (flags & (O_PATH | O_DIRECTORY))
        return open_beneath(root, path, flags);
    fd = open_beneath(root, path, flags | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    if (fd == -ENXIO || fd == -ELOOP) /* a FIFO without reader (write), a symlink */
        return -EBADMSG;
    if (fd < 0)
        return fd;
    rc = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EBADMSG;
    if (rc < 0) {
        close(fd);
        return rc;
    }
    if (!(flags & O_NONBLOCK) && (fl = fcntl(fd, F_GETFL)) >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

static int open_beneath(const char *root, const char *path, int flags)
{
    struct gc_open_how how;
    size_t rlen;
    const char *rel;
    int root_fd, fd, rc, tries;

    if (is_whole_fs(root)) {
        fd = open(path, flags | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
    }
    rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/')
        rlen--;
    if (strncmp(path, root, rlen) != 0 || (path[rlen] != '/' && path[rlen] != '\0'))
        return -EXDEV;
    for (rel = path + rlen; *rel == '/'; rel++)
        ;
    if (!*rel)
        rel = ".";
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return -errno;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.resolve = GC_RESOLVE_BENEATH | GC_RESOLVE_NO_MAGICLINKS;
    /* EAGAIN: a rename anywhere on the system raced a ".." (sysfs links are ../../devices/..):
     * the kernel could not prove the walk stayed inside. Retry, then check by hand. */
    for (tries = 0; tries < OPENAT2_TRIES; tries++) {
        fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    if (fd < 0 && (errno == ENOSYS || errno == EPERM || errno == EAGAIN)) {
        /* no openat2 (older kernel, a seccomp filter that denies it) or a busy system */
        /* O_TRUNC only after the check: it would cut a file outside before we knew */
        fd = openat(root_fd, rel, (flags & ~O_TRUNC) | O_CLOEXEC);
        if (fd >= 0 && (rc = check_fd_beneath(fd, root)) < 0) {
            close(fd);
            close(root_fd);
            return rc;
        }
        if (fd >= 0 && (flags & O_TRUNC)) {
            struct stat st;

            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0) {
                rc = -errno;
                close(fd);
                close(root_fd);
                return rc;
            }
        }
    }
    rc = fd < 0 ? -errno : fd;
    close(root_fd);
    return rc;
}

const char *gc_sysfs_strerror(int rc)
{
    if (rc == -EXDEV)
        return "it leads outside the sysfs root (a symbolic link or '..' pointing out); refused";
    if (rc == -EBADMSG)
        return "it is not a regular file (a FIFO, socket, device or symbolic link), as board "
               "files are; refused";
    return strerror(-rc);
}

void gc_printable(const char *text, char *out, size_t len)
{
    size_t i = 0;

    if (len == 0)
        return;
    for (; *text && i + 1 < len; text++) {
        unsigned char c = (unsigned char)*text;

        if (c >= 0x20 && c < 0x7f) {
            out[i++] = (char)c;
        } else {
            if (i + 5 >= len)
                break;
            i += (size_t)snprintf(out + i, len - i, "\\x%02x", c);
        }
    }
    if (*text && len >= 4) { /* truncated: say so */
        if (i > len - 4)
            i = len - 4;
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
}

/* sysfs.c - whole-file reads and writes of board attributes: the raw I/O that the C tests
 * replace with a mock (tests/govcore/mock_sysfs.c); the helpers built on it are in
 * sysfs_values.c. */
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gc_sysfs_read(const char *root, const char *path, char *buf, size_t buf_len)
{
    int fd, err;
    ssize_t n;
    size_t used = 0;

    if (buf_len == 0)
        return -EINVAL;
    fd = gc_sysfs_open(root, path, O_RDONLY);
    if (fd < 0)
        return fd;
    for (;;) {
        n = read(fd, buf + used, buf_len - 1 - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            err = -errno;
            close(fd);
            return err;
        }
        if (n == 0 || used + (size_t)n >= buf_len - 1) {
            used += (size_t)n;
            break;
        }
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == ' ' ||
                        buf[used - 1] == '\t' || buf[used - 1] == '\0' || buf[used - 1] == '\r'))
        buf[--used] = '\0';
    return 0;
}

int gc_sysfs_write(const char *root, const char *path, const char *text)
{
    size_t len = strlen(text);
    ssize_t n;
    int fd, err = 0;

    /* O_TRUNC as `echo v > file` does: sysfs ignores it, a regular file needs it. */
    fd = gc_sysfs_open(root, path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        return fd;
    do {
        n = write(fd, text, len);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        err = -errno;
    else if ((size_t)n != len)
        err = -EIO;
    /* sysfs reports some write errors only at close */
    if (close(fd) < 0 && err == 0)
        err = -errno;
    return err;
}

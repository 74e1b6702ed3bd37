/* mock_sysfs.c - govcore's raw sysfs reads and writes over real files, with the kernel's
 * min <= max rule and failure injection. The number helpers (sysfs_values.c) are the real ones. */
#include "mock_sysfs.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct mock_sysfs mock;

void mock_reset(void)
{
    memset(&mock, 0, sizeof mock);
}

static const char *basename_of(const char *path)
{
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

int gc_sysfs_read(const char *root, const char *path, char *buf, size_t buf_len)
{
    int fd = gc_sysfs_open(root, path, O_RDONLY);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    size_t n;

    if (!f)
        return fd < 0 ? fd : -errno;
    n = fread(buf, 1, buf_len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\0'))
        buf[--n] = '\0';
    return 0;
}

/* The sibling file of path (same folder), e.g. max_freq next to min_freq. */
static int read_sibling(const char *root, const char *path, const char *name, uint64_t *out)
{
    char sib[1024];
    const char *base = basename_of(path);

    snprintf(sib, sizeof sib, "%.*s%s", (int)(base - path), path, name);
    return gc_sysfs_read_u64(root, sib, out);
}

int gc_sysfs_write(const char *root, const char *path, const char *text)
{
    const char *base = basename_of(path);
    uint64_t v = strtoull(text, NULL, 10), other;
    FILE *f;
    int fd;

    if (mock.n_writes < MOCK_LOG_MAX)
        snprintf(mock.log[mock.n_writes], sizeof mock.log[0], "%s=%s", base, text);
    mock.n_writes++;
    if (mock.fail_writes_to && strcmp(base, mock.fail_writes_to) == 0)
        return -mock.fail_errno;
    if (strcmp(base, "min_freq") == 0 && read_sibling(root, path, "max_freq", &other) == 0 && v > other) {
        mock.rejected++;
        return -EINVAL;
    }
    if (strcmp(base, "max_freq") == 0 && read_sibling(root, path, "min_freq", &other) == 0 && v < other) {
        mock.rejected++;
        return -EINVAL;
    }
    if (mock.ignore_writes_to && strcmp(base, mock.ignore_writes_to) == 0)
        return 0;
    fd = gc_sysfs_open(root, path, O_WRONLY | O_TRUNC);
    f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f)
        return fd < 0 ? fd : -errno;
    fputs(text, f);
    fclose(f);
    return 0;
}

/* sysfs_values.c - numbers and existence on top of the raw reads and writes of sysfs.c. */
#include "sysfs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

int gc_parse_u64(const char *text, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = text;

    if (!*p)
        return -EINVAL;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 0;
}

int gc_sysfs_read_u64(const char *root, const char *path, uint64_t *out)
{
    char buf[64], *end;
    const char *p;
    unsigned long long v;
    int rc = gc_sysfs_read(root, path, buf, sizeof buf);

    if (rc < 0)
        return rc;
    for (p = buf; *p == ' ' || *p == '\t'; p++)
        ;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    errno = 0;
    v = strtoull(p, &end, 10);
    if (errno != 0 || (*end != '\0' && *end != ' ' && *end != '\n'))
        return -EINVAL;
    *out = (uint64_t)v;
    return 0;
}

int gc_sysfs_write_u64(const char *root, const char *path, uint64_t value)
{
    char buf[32];

    snprintf(buf, sizeof buf, "%llu", (unsigned long long)value);
    return gc_sysfs_write(root, path, buf);
}

int gc_sysfs_exists(const char *root, const char *path)
{
    int fd = gc_sysfs_open(root, path, O_PATH);

    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

void gc_list_append(char *list, size_t len, const char *fmt, ...)
{
    size_t n = strnlen(list, len);
    va_list ap;

    if (n && n + 2 < len) {
        memcpy(list + n, "; ", 3);
        n += 2;
    }
    if (n + 1 >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(list + n, len - n, fmt, ap);
    va_end(ap);
}

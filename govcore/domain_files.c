/* domain_files.c - what every kind of clock domain shares (domain.c's EMC and CPU, devfreq_emc.c's
 * devfreq memory clock): a domain's file paths, its level lists, and the check of its files. */
#include "domain.h"
#include "sysfs.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gc_domain_file(const gc_domain *d, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", d->dir, name);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Whitespace-separated decimal values, times scale; sorted, duplicates dropped. */
int gc_domain_parse_levels(char *text, uint64_t scale, uint64_t *out, int *n)
{
    char *tok, *save = NULL;
    int i, m = 0;

    *n = 0;
    for (tok = strtok_r(text, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
        uint64_t v;

        if (gc_parse_u64(tok, &v) < 0 || v == 0 || v > GC_MAX_LEVEL_HZ / scale)
            return -GC_EBOARD;
        if (m == GC_MAX_FREQS)
            return -GC_EBOARD;
        out[m++] = v * scale;
    }
    qsort(out, (size_t)m, sizeof *out, cmp_u64);
    for (i = 0; i < m; i++)
        if (*n == 0 || out[*n - 1] != out[i])
            out[(*n)++] = out[i];
    return *n ? 0 : -GC_EBOARD;
}

/* 1 if the file exists as a regular file and opens with flags (O_WRONLY: nothing is written). */
static int opens(const char *root, const char *path, int flags)
{
    int fd = gc_sysfs_open(root, path, flags);

    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

void gc_domain_unavailable(gc_domain *d, const char *fmt, ...)
{
    va_list ap;

    d->available = 0;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
}

/* Check a domain's files: writable (1), or at least readable (0: shown, not pinned; why says
 * so), or neither (-1, why says so). */
int gc_domain_check_files(const char *root, gc_domain *d, const char *const *files, size_t n, const char *hint)
{
    char path[GC_PATH_MAX];
    size_t k;
    int all = 1;

    for (k = 0; k < n; k++) {
        gc_domain_file(d, files[k], path, sizeof path);
        if (opens(root, path, O_WRONLY))
            continue;
        if (!opens(root, path, O_RDONLY)) {
            gc_domain_unavailable(d, "%s is missing, not a regular file or not writable (%s)", path, hint);
            return -1;
        }
        gc_domain_unavailable(d, "%s is not writable (%s)", path, hint);
        all = 0;
    }
    return all;
}

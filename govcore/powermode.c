/* powermode.c - the power mode in force (nvpmodel) and the GPU cap a pin obeys (powermode.h). */
#include "powermode.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read a small regular file under the root into a fresh buffer (NUL-terminated): a fifo or a
 * folder planted at the path is refused at once (O_NONBLOCK, then fstat), and a file larger than
 * max is refused, not cut. 0, or -errno (-EINVAL: not a regular file, -EFBIG: too large). */
static int read_text(const char *root, const char *board_path, size_t max, char **out)
{
    char path[GC_PATH_MAX];
    struct stat st;
    size_t used = 0;
    ssize_t n;
    char *buf;
    int fd, rc = 0;

    *out = NULL;
    n = snprintf(path, sizeof path, "%s%s", strcmp(root, "/") == 0 ? "" : root, board_path);
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENAMETOOLONG;
    n = 0;
    fd = gc_sysfs_open(root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd == -EBADMSG) /* gc_sysfs_open: not a regular file (a FIFO, a symbolic link) */
        return -EINVAL;
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (!(buf = malloc(max + 1))) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        n = read(fd, buf + used, max + 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        used += (size_t)n;
        if (used > max) {
            rc = -EFBIG;
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[used] = '\0';
    if (strlen(buf) != used) { /* a NUL inside: not text */
        free(buf);
        return -EINVAL;
    }
    *out = buf;
    return 0;
}

/* "pmode:0002 fmode:quiet" (JetPack 5/6), or "pmode:0002" alone. */
int gc_nvpmodel_parse_status(const char *text, int *id)
{
    const char *p = text;
    long v = 0;
    int digits = 0;

    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    if (strncmp(p, "pmode:", 6) != 0)
        return -EINVAL;
    for (p += 6; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 6)
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (!digits || !(*p == '\0' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        return -EINVAL;
    *id = (int)v;
    return 0;
}

/* The value of key=VALUE inside a `< ... >` header: up to a blank or '>'. */
static int header_value(const char *hdr, const char *end, const char *key, char *out, size_t len)
{
    size_t klen = strlen(key), n = 0;
    const char *p;

    for (p = hdr; p + klen < end; p++) {
        if ((p == hdr || p[-1] == ' ' || p[-1] == '\t') && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            p += klen + 1;
            while (p < end && *p != ' ' && *p != '\t' && *p != '>') {
                if (n + 1 >= len || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                    return -EINVAL;
                out[n++] = *p++;
            }
            out[n] = '\0';
            return n ? 0 : -EINVAL;
        }
    }
    return -ENOENT;
}

/* A decimal Hz value, or -1 / 0 (no cap): 0 on success with *hz = 0 for "no cap". */
static int parse_conf_hz(const char *p, uint64_t *hz)
{
    uint64_t v = 0;
    int digits = 0;

    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "-1", 2) == 0 && (p[2] == '\0' || p[2] == ' ' || p[2] == '\t' || p[2] == '\r' || p[2] == '\n')) {
        *hz = 0;
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 12)
            return -EINVAL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (!digits || *p != '\0' || v > GC_MAX_LEVEL_HZ)
        return -EINVAL;
    *hz = v;
    return 0;
}

int gc_nvpmodel_parse_conf(const char *text, int id, char *name, size_t name_len, uint64_t *gpu_max_hz)
{
    const char *line = text, *nl, *end;
    char value[GC_NAME_MAX], buf[256];
    int in_block = 0, found = 0;

    name[0] = '\0';
    *gpu_max_hz = 0;
    for (; *line; line = nl ? nl + 1 : line + strlen(line)) {
        const char *p = line;
        size_t len;

        nl = strchr(line, '\n');
        len = nl ? (size_t)(nl - line) : strlen(line);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        if (len == 0 || *p == '#')
            continue;
        if (*p == '<') {
            char *endp;
            long v;

            if (found)
                break; /* the block we wanted is over */
            end = memchr(p, '>', len);
            if (!end)
                return -EINVAL;
            in_block = len >= 13 && strncmp(p + 1, " POWER_MODEL ", 13) == 0;
            if (!in_block)
                continue;
            if (header_value(p, end, "ID", value, sizeof value) < 0)
                return -EINVAL;
            errno = 0;
            v = strtol(value, &endp, 10);
            if (*endp || errno || v < 0)
                return -EINVAL;
            if (v != id) {
                in_block = 0;
                continue;
            }
            if (header_value(p, end, "NAME", name, name_len) < 0)
                return -EINVAL;
            found = 1;
            continue;
        }
        if (!in_block || !found || len < 4 || strncmp(p, "GPU", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
            continue;
        if (len >= sizeof buf)
            return -EINVAL;
        memcpy(buf, p + 3, len - 3);
        buf[len - 3] = '\0';
        p = buf;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "MAX_FREQ", 8) == 0 && (p[8] == ' ' || p[8] == '\t')) {
            if (parse_conf_hz(p + 8, gpu_max_hz) < 0)
                return -EINVAL;
        }
    }
    return found ? 0 : -ENOENT;
}

void gc_power_mode_read(gc_board *b, gc_power_mode *pm)
{
    char *text = NULL;
    int rc;

    memset(pm, 0, sizeof *pm);
    pm->id = -1;
    rc = read_text(b->sysfs_root, GC_NVPMODEL_STATUS, 4096, &text);
    if (rc < 0) {
        snprintf(pm->why, sizeof pm->why, "%s: %s", GC_NVPMODEL_STATUS,
                 rc == -ENOENT ? "not found (nvpmodel not installed?)"
                 : rc == -EINVAL ? "not a text file"
                 : rc == -EFBIG ? "too large to be nvpmodel's"
                 : gc_sysfs_strerror(rc));
        return;
    }
    rc = gc_nvpmodel_parse_status(text, &pm->id);
    free(text);
    if (rc < 0) {
        pm->id = -1;
        snprintf(pm->why, sizeof pm->why, "%s: garbled (expected \"pmode:NNNN ...\")", GC_NVPMODEL_STATUS);
        return;
    }
    /* from here the mode is known only with its name: where the conf does not give it, the id
     * is unknown too (-1), so that every reader (status, --json, the exporter) says "unknown" */
    rc = read_text(b->sysfs_root, GC_NVPMODEL_CONF, GC_NVPMODEL_CONF_MAX, &text);
    if (rc < 0) {
        snprintf(pm->why, sizeof pm->why, "%s: %s (status: mode %d)", GC_NVPMODEL_CONF,
                 rc == -ENOENT ? "not found"
                 : rc == -EINVAL ? "not a text file"
                 : rc == -EFBIG ? "too large to be nvpmodel's"
                 : gc_sysfs_strerror(rc), pm->id);
        pm->id = -1;
        return;
    }
    rc = gc_nvpmodel_parse_conf(text, pm->id, pm->name, sizeof pm->name, &pm->gpu_max_hz);
    free(text);
    if (rc == -ENOENT)
        snprintf(pm->why, sizeof pm->why, "%s has no POWER_MODEL ID=%d", GC_NVPMODEL_CONF, pm->id);
    else if (rc < 0)
        snprintf(pm->why, sizeof pm->why, "%s: garbled (status: mode %d)", GC_NVPMODEL_CONF, pm->id);
    else if (!pm->name[0])
        snprintf(pm->why, sizeof pm->why, "%s: POWER_MODEL ID=%d has no NAME", GC_NVPMODEL_CONF, pm->id);
    if (rc < 0 || !pm->name[0]) {
        pm->id = -1;
        pm->name[0] = '\0';
        pm->gpu_max_hz = 0;
    }
}

int gc_gpu_cap_read(gc_board *b, const char *state_dir, gc_gpu_cap *cap)
{
    gc_clock_state st;
    char *text = NULL;
    uint64_t limit;
    int rc, i;

    memset(cap, 0, sizeof *cap);
    rc = gc_state_load(b, state_dir, &st);
    if (rc == 0) {
        cap->from_saved = 1;
    } else if (rc == -ENOENT || rc == -EDESTADDRREQ || rc == -EACCES) {
        /* nothing saved (or no state folder to look in, or one this user may not open, as an
         * unprivileged reader such as the exporter finds root's): the board's max_freq now */
        if ((rc = gc_clock_read(b, &st)) < 0)
            return rc;
    } else {
        return rc;
    }
    cap->devfreq_max_hz = st.max_hz;
    if (read_text(b->sysfs_root, GC_NVPMODEL_CLK_CAP_GPU, 64, &text) == 0) {
        uint64_t hz;

        if (parse_conf_hz(text, &hz) == 0)
            cap->clk_cap_hz = hz;
        free(text);
    }
    limit = cap->devfreq_max_hz;
    if (cap->clk_cap_hz && (!limit || cap->clk_cap_hz < limit))
        limit = cap->clk_cap_hz;
    if (b->n_freqs < 1)
        return 0;
    cap->cap_hz = b->freqs_hz[0];
    for (i = 0; i < b->n_freqs; i++)
        if (!limit || b->freqs_hz[i] <= limit)
            cap->cap_hz = b->freqs_hz[i];
    return 0;
}

int gc_power_cap_clamp(gc_board *b, const char *state_dir, uint64_t *level_hz)
{
    gc_gpu_cap cap;
    int rc;

    b->cap_hz = 0;
    b->clamped_from_hz = 0;
    if (b->above_power_mode)
        return 0;
    if ((rc = gc_gpu_cap_read(b, state_dir, &cap)) < 0)
        return rc;
    b->cap_hz = cap.cap_hz;
    if (cap.cap_hz && *level_hz > cap.cap_hz) {
        b->clamped_from_hz = *level_hz;
        *level_hz = cap.cap_hz;
    }
    return 0;
}

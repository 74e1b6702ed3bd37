/* state.c - the saved state's file (see state.h).
 *
 * The state file decides what `restore` writes to the board, often as root, so nobody else may
 * be able to steer it (the OpenSSH/sudo rules for files root reads and writes):
 * - the folder is absolute, opened once (O_NOFOLLOW) and every file is reached through that
 *   descriptor (openat/linkat/unlinkat), so a folder swapped by a rename cannot redirect us;
 * - the folder must be owned by us and writable by no one else, and every folder above it owned
 *   by root or us and not writable by others unless sticky (/tmp);
 * - the state is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask, and put
 *   in place with linkat(), which never replaces an existing entry;
 * - only a regular file we own is read as a saved state: a symlink, fifo or folder at the state
 *   path is refused, never taken for "already saved" nor for "nothing saved";
 * - clock.c checks every value read back against the board before it writes it.
 * A refusal returns -GC_ESTATE with the reason in b->err.
 */
#include "state.h"
#include "err.h"
#include "lock.h"
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC "# govcore saved GPU clock state"
#define STATE_NAME_FMT "gpu-%016llx.state"
#define STATE_NODE_FMT "gpu-%llx-%llx.state" /* the devfreq node's device and inode */
#define STATE_TMP_MARK ".tmp."
#define STATE_MAX_BYTES 4096

/* What every refusal of a saved state tells people to do. */
#define STATE_WHAT_TO_DO "check the clock (`status`); as the user who saved it (root for the " \
                         "daemon) `govcore restore --force` or `pydvfs restore --force` drops it"

int gc_default_state_dir(char *out, size_t len)
{
    const char *env = getenv("PYDVFS_STATE_DIR");
    int n;

    if (env && *env)
        n = snprintf(out, len, "%s", env);
    else if (geteuid() == 0)
        n = snprintf(out, len, "/run/pydvfs");
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        n = snprintf(out, len, "%s/pydvfs", env);
    else
        return -EDESTADDRREQ; /* no private folder: a guessable /tmp name is what attackers plant */
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* FNV-1a, 64 bit: names the state file of one sysfs root. */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int resolve_dir(gc_board *b, const char *state_dir, char *out, size_t len)
{
    int rc;

    if (state_dir && *state_dir) {
        int n = snprintf(out, len, "%s", state_dir);
        rc = (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
    } else {
        rc = gc_default_state_dir(out, len);
    }
    if (rc == -EDESTADDRREQ)
        set_err(b, "no private folder for the saved clock state: $XDG_RUNTIME_DIR is not set; "
                   "pass --state-dir DIR (or set PYDVFS_STATE_DIR) to a folder only you can write");
    else if (rc < 0)
        set_err(b, "state folder path is too long");
    else if (out[0] != '/') {
        /* a relative folder depends on where each command runs: two would never meet */
        char shown[GC_PATH_MAX];

        gc_printable(out, shown, sizeof shown);
        set_err(b, "state folder '%s' is not an absolute path (--state-dir, PYDVFS_STATE_DIR, "
                   "state_dir=): give a folder starting with /", shown);
        rc = -EINVAL;
    }
    return rc;
}

/* The state file's name inside the folder. */
static void state_name(const gc_board *b, char *out, size_t len)
{
    char real[PATH_MAX];
    const char *root = realpath(b->sysfs_root, real) ? real : b->sysfs_root;
    struct stat st;
    int fd = gc_sysfs_open(b->sysfs_root, b->devfreq_dir, O_PATH | O_DIRECTORY);

    /* the GPU's devfreq node itself (as the lock): every path to the GPU (a bind mount, a second
     * --sysfs-root) meets one record; the root's name where the node cannot be reached */
    if (fd >= 0 && fstat(fd, &st) == 0)
        snprintf(out, len, STATE_NODE_FMT, (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    else
        snprintf(out, len, STATE_NAME_FMT, (unsigned long long)fnv1a64(root));
    if (fd >= 0)
        close(fd);
}

int gc_state_path(gc_board *b, const char *state_dir, char *out, size_t len)
{
    char dir[GC_PATH_MAX], name[64];
    int rc, n;

    if ((rc = resolve_dir(b, state_dir, dir, sizeof dir)) < 0)
        return rc;
    state_name(b, name, sizeof name);
    n = snprintf(out, len, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int gc_state_open(gc_board *b, const char *state_dir, int create, gc_state_file *sf)
{
    char dir[GC_PATH_MAX];
    int rc, n;

    sf->dfd = -1;
    if ((rc = resolve_dir(b, state_dir, dir, sizeof dir)) < 0)
        return rc;
    state_name(b, sf->name, sizeof sf->name);
    n = snprintf(sf->path, sizeof sf->path, "%s/%s", dir, sf->name);
    if (n < 0 || (size_t)n >= sizeof sf->path) {
        set_err(b, "state folder path is too long");
        return -ENAMETOOLONG;
    }
    return gc_private_dir_open(b, dir, create, "state folder", &sf->dfd);
}

void gc_state_close(gc_state_file *sf)
{
    if (sf->dfd >= 0)
        close(sf->dfd);
    sf->dfd = -1;
}

static int plain_identifier(const char *name)
{
    const char *p;

    for (p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

int gc_governor_known(gc_board *b, const char *name)
{
    char path[GC_PATH_MAX], list[1024], *tok, *save = NULL;

    if (!plain_identifier(name))
        return 0;
    snprintf(path, sizeof path, "%s/available_governors", b->devfreq_dir);
    if (gc_sysfs_read(b->sysfs_root, path, list, sizeof list) < 0)
        return 1;
    for (tok = strtok_r(list, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
        if (strcmp(tok, name) == 0)
            return 1;
    return 0;
}

int gc_level_known(const gc_board *b, uint64_t hz)
{
    int i;

    for (i = 0; i < b->n_freqs; i++)
        if (b->freqs_hz[i] == hz)
            return 1;
    return 0;
}

int gc_state_check(gc_board *b, const gc_clock_state *st, const char *what)
{
    if (!gc_level_known(b, st->min_hz) || !gc_level_known(b, st->max_hz) || st->max_hz < st->min_hz) {
        set_err(b, "%s: min %llu / max %llu Hz is not a range of this board's levels", what,
                (unsigned long long)st->min_hz, (unsigned long long)st->max_hz);
        return -GC_ESTATE;
    }
    if (st->governor[0] && !gc_governor_known(b, st->governor)) {
        char shown[GC_NAME_MAX];

        gc_printable(st->governor, shown, sizeof shown);
        set_err(b, "%s: governor \"%s\" is not one this board offers", what, shown);
        return -GC_ESTATE;
    }
    return 0;
}

/* A clock domain's key (format 2): NAME.FIELD, both plain names; what they mean is domain.c's. */
static int domain_key(const char *key)
{
    const char *dot = strchr(key, '.'), *p;

    if (!dot || dot == key || !dot[1])
        return 0;
    for (p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

/* Parse the text of a state file. -GC_ESTATE (with b->err) if it is not one we wrote. */
static int parse_state(gc_board *b, char *text, const char *path, gc_clock_state *st,
                       char *domains, size_t domains_len)
{
    char *line, *save = NULL, dom[GC_STATE_DOMAINS_MAX] = "";
    size_t dom_used = 0;
    int have = 0, bad = 0;
    uint64_t format = 1;

    memset(st, 0, sizeof *st);
    if (strncmp(text, STATE_MAGIC, strlen(STATE_MAGIC)) != 0)
        bad = 1;
    for (line = strtok_r(text, "\n", &save); line && !bad; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');

        if (line[0] == '#')
            continue;
        if (!eq) {
            bad = 1;
            break;
        }
        *eq = '\0';
        if (strcmp(line, "format") == 0 && !(have & 8)) {
            bad |= gc_parse_u64(eq + 1, &format) < 0;
            have |= 8;
        } else if (strcmp(line, "governor") == 0 && !(have & 1)) {
            int n = snprintf(st->governor, sizeof st->governor, "%s", eq + 1);
            bad |= n < 0 || (size_t)n >= sizeof st->governor;
            have |= 1;
        } else if (strcmp(line, "min_hz") == 0 && !(have & 2)) {
            bad |= gc_parse_u64(eq + 1, &st->min_hz) < 0;
            have |= 2;
        } else if (strcmp(line, "max_hz") == 0 && !(have & 4)) {
            bad |= gc_parse_u64(eq + 1, &st->max_hz) < 0;
            have |= 4;
        } else if (strcmp(line, "pinned_hz") == 0 && !(have & 16) && format >= 2) {
            bad |= gc_parse_u64(eq + 1, &st->pinned_hz) < 0 || st->pinned_hz > GC_MAX_LEVEL_HZ;
            have |= 16;
        } else if (format >= 2 && format <= GC_STATE_FORMAT && domain_key(line)) {
            /* a clock domain's original: checked against the board by domain.c */
            int n = snprintf(dom + dom_used, sizeof dom - dom_used, "%s=%s\n", line, eq + 1);
            bad |= n < 0 || (size_t)n >= sizeof dom - dom_used;
            if (!bad)
                dom_used += (size_t)n;
        } else if (format > GC_STATE_FORMAT) {
            break; /* a newer format's key: refused below, by its format */
        } else if (strcmp(line, "sysfs_root") != 0 && strcmp(line, "devfreq_dir") != 0) {
            bad = 1; /* an unknown or repeated key: not a file we wrote */
        }
    }
    if (!bad && format > GC_STATE_FORMAT) {
        set_err(b, "state file %s is of format %llu, written by a newer govcore (this one reads "
                   "format %d): restore with that version, or " STATE_WHAT_TO_DO, path,
                (unsigned long long)format, GC_STATE_FORMAT);
        return -GC_ESTATE;
    }
    /* the governor may be empty ("unknown"), but a plain identifier or nothing; min and max
     * clocks (whether this board still offers them, in that order, is restore's to say) */
    if (bad || (have & 7) != 7 || format == 0 || !plain_identifier(st->governor) || st->min_hz == 0 ||
        st->max_hz == 0 || st->min_hz > GC_MAX_LEVEL_HZ || st->max_hz > GC_MAX_LEVEL_HZ) {
        set_err(b, "state file %s is damaged; " STATE_WHAT_TO_DO, path);
        return -GC_ESTATE;
    }
    if (domains)
        snprintf(domains, domains_len, "%s", dom);
    return 0;
}

int gc_state_read(gc_board *b, const gc_state_file *sf, gc_clock_state *st)
{
    return gc_state_read_record(b, sf, st, NULL, 0);
}

int gc_state_read_record(gc_board *b, const gc_state_file *sf, gc_clock_state *st, char *domains,
                         size_t domains_len)
{
    char text[STATE_MAX_BYTES + 1];
    struct stat sb;
    size_t used = 0;
    ssize_t n;
    int fd, rc;

    /* O_NONBLOCK: a fifo planted at the path must not hang us before fstat refuses it */
    fd = openat(sf->dfd, sf->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        if (rc == -ENOENT)
            return rc;
        if (rc == -ELOOP) {
            set_err(b, "refusing state file %s: it is a symbolic link, not a state pydvfs wrote; "
                       STATE_WHAT_TO_DO, sf->path);
            return -GC_ESTATE;
        }
        set_err(b, "cannot read state file %s: %s", sf->path, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & (S_IWGRP | S_IWOTH))) {
        set_err(b, "refusing state file %s: not a regular file of yours writable only by you; "
                   STATE_WHAT_TO_DO, sf->path);
        rc = -GC_ESTATE;
        goto close_fd;
    }
    while (used < STATE_MAX_BYTES) {
        n = read(fd, text + used, STATE_MAX_BYTES - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            set_err(b, "cannot read state file %s: %s", sf->path, strerror(-rc));
            goto close_fd;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    text[used] = '\0';
    if (used == STATE_MAX_BYTES || strlen(text) != used) {
        set_err(b, "state file %s is damaged; " STATE_WHAT_TO_DO, sf->path);
        rc = -GC_ESTATE;
        goto close_fd;
    }
    rc = parse_state(b, text, sf->path, st, domains, domains_len);
close_fd:
    close(fd);
    return rc;
}

int gc_state_load_domains(gc_board *b, const char *state_dir, char *lines, size_t len)
{
    gc_state_file sf;
    gc_clock_state st;
    int rc;

    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc;
    rc = gc_state_read_record(b, &sf, &st, lines, len);
    gc_state_close(&sf);
    return rc;
}

int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
{
    gc_state_file sf;
    int rc;

    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc;
    rc = gc_state_read(b, &sf, st);
    gc_state_close(&sf);
    return rc;
}

/* Remove the temp files (<state>.tmp.<pid>) that processes killed mid-save left behind. */
static void clean_stray_tmp(int dfd)
{
    DIR *d;
    struct dirent *e;
    int fd = dup(dfd);

    if (fd < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        const char *mark = strstr(e->d_name, STATE_TMP_MARK), *p;
        char *end;
        long pid;

        if (strncmp(e->d_name, "gpu-", 4) != 0 || !mark)
            continue;
        p = mark + strlen(STATE_TMP_MARK);
        errno = 0;
        pid = strtol(p, &end, 10);
        if (end == p || *end || errno || pid <= 0 || pid > INT_MAX)
            continue;
        if (pid == (long)getpid() || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

static int write_record(gc_board *b, const gc_state_file *sf, const gc_clock_state *st,
                        const char *domains, int replace);

int gc_state_write(gc_board *b, const gc_state_file *sf, const gc_clock_state *st)
{
    return write_record(b, sf, st, NULL, 0);
}

int gc_state_rewrite(gc_board *b, const gc_state_file *sf, const gc_clock_state *st,
                     const char *domains)
{
    return write_record(b, sf, st, domains, 1);
}

static int write_record(gc_board *b, const gc_state_file *sf, const gc_clock_state *st,
                        const char *domains, int replace)
{
    char tmp[96], text[STATE_MAX_BYTES];
    size_t len, done = 0;
    ssize_t n;
    int fd, rc = 0;

    n = snprintf(text, sizeof text,
                 "%s; `pydvfs restore` or `govcore restore` puts it back\nformat=%d\n"
                 "sysfs_root=%s\ndevfreq_dir=%s\ngovernor=%s\nmin_hz=%llu\nmax_hz=%llu\n",
                 STATE_MAGIC, GC_STATE_FORMAT, b->sysfs_root, b->devfreq_dir, st->governor,
                 (unsigned long long)st->min_hz, (unsigned long long)st->max_hz);
    if (n < 0 || (size_t)n >= sizeof text || strchr(b->sysfs_root, '\n') ||
        strchr(b->devfreq_dir, '\n') || !plain_identifier(st->governor)) {
        set_err(b, "cannot save the clock state: the sysfs root path is too long or has a newline");
        return -EINVAL;
    }
    len = (size_t)n;
    if (st->pinned_hz) { /* the level the last pin set: a power-mode change shows against it */
        n = snprintf(text + len, sizeof text - len, "pinned_hz=%llu\n",
                     (unsigned long long)st->pinned_hz);
        if (n < 0 || (size_t)n >= sizeof text - len)
            return -EINVAL;
        len += (size_t)n;
    }
    if (domains && *domains) { /* the other clock domains' originals (domain.c's lines) */
        n = snprintf(text + len, sizeof text - len, "%s", domains);
        if (n < 0 || (size_t)n >= sizeof text - len) {
            set_err(b, "cannot save the clock state: too many clock domains");
            return -EINVAL;
        }
        len += (size_t)n;
    }
    clean_stray_tmp(sf->dfd);
    snprintf(tmp, sizeof tmp, "%s%s%ld", sf->name, STATE_TMP_MARK, (long)getpid());
    fd = openat(sf->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        set_err(b, "cannot create state file %s%s%ld: %s", sf->path, STATE_TMP_MARK,
                (long)getpid(), strerror(-rc));
        return rc;
    }
    if (fchmod(fd, 0600) < 0) /* whatever the umask was */
        rc = -errno;
    while (rc == 0 && done < len) {
        n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = n < 0 ? -errno : -EIO;
        else
            done += (size_t)n;
    }
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    /* linkat never replaces: a state another process saved in the meantime stays the original */
    if (rc == 0 && replace && renameat(sf->dfd, tmp, sf->dfd, sf->name) < 0)
        rc = -errno;
    else if (rc == 0 && !replace && linkat(sf->dfd, tmp, sf->dfd, sf->name, 0) < 0)
        rc = -errno;
    if (rc < 0 || !replace)
        unlinkat(sf->dfd, tmp, 0);
    if (rc < 0 && rc != -EEXIST)
        set_err(b, "cannot write state file %s: %s", sf->path, strerror(-rc));
    if (rc == 0)
        fsync(sf->dfd);
    return rc;
}

int gc_state_remove(gc_board *b, const gc_state_file *sf)
{
    struct stat st;
    int rc;

    /* a folder planted at the path: rmdir only an empty one (never recurse into it) */
    if (fstatat(sf->dfd, sf->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        rc = unlinkat(sf->dfd, sf->name, AT_REMOVEDIR);
    else
        rc = unlinkat(sf->dfd, sf->name, 0);
    if (rc < 0 && errno != ENOENT) {
        rc = -errno;
        set_err(b, "cannot remove state file %s: %s", sf->path, strerror(-rc));
        return rc;
    }
    gc_original_unmark(b, sf->path);
    return 0;
}

int gc_state_save_record(gc_board *b, const char *state_dir, const char *domains, int *saved_now)
{
    gc_state_file sf;
    gc_clock_state st, old;
    int rc;

    *saved_now = 0;
    if ((rc = gc_state_open(b, state_dir, 1, &sf)) < 0)
        return rc;
    rc = gc_state_read(b, &sf, &old);
    if (rc != -ENOENT)
        goto close_dir; /* 0: the original state is already saved; else refused */
    {
        /* One GPU, one original: a record another state folder (or another path to this GPU)
         * saved still stands, and its pin with it: saving the board now would take that pin for
         * the original */
        char where[GC_PATH_MAX], shown[GC_PATH_MAX];
        struct stat sb;

        if (gc_original_find(b, where, sizeof where) == 1 && strcmp(where, sf.path) != 0 &&
            lstat(where, &sb) == 0) {
            char *slash = strrchr(where, '/');

            gc_printable(where, shown, sizeof shown);
            if (slash)
                *slash = '\0';
            set_err(b, "the GPU's original clock state is already saved in %s, by another state "
                       "folder or another path to this board (its pin still stands: saving the "
                       "board now would keep that pin as the original); restore there first: "
                       "`govcore --state-dir %s restore` or `PYDVFS_STATE_DIR=%s pydvfs restore`",
                    shown, where, where);
            rc = -EBUSY;
            goto close_dir;
        }
    }
    if ((rc = gc_clock_read(b, &st)) < 0)
        goto close_dir;
    st.pinned_hz = 0;
    /* what we save must be restorable: check it now, while the board is still untouched */
    if ((rc = gc_state_check(b, &st, "the board's current clock state")) < 0)
        goto close_dir;
    rc = write_record(b, &sf, &st, domains, 0);
    if (rc == -EEXIST) { /* saved by someone else meanwhile: it must be a real state */
        rc = gc_state_read(b, &sf, &old);
    } else if (rc == 0) {
        *saved_now = 1;
        gc_original_mark(b, sf.path); /* best effort: where the next saver looks */
        if (st.min_hz == st.max_hz) /* pinned by another tool (jetson_clocks): say so now */
            snprintf(b->warn, sizeof b->warn, "the clock state saved as the original is itself a "
                     "pin (min = max = %g MHz, governor %s), as `jetson_clocks` or another tool "
                     "leaves it: `restore` will put back that pin, not the board's default",
                     gc_hz_to_mhz(st.min_hz), st.governor[0] ? st.governor : "(unknown)");
    }
close_dir:
    gc_state_close(&sf);
    return rc;
}

int gc_state_drop(gc_board *b, const char *state_dir, int *dropped)
{
    gc_state_file sf;
    struct stat st;
    int rc;

    *dropped = 0;
    if ((rc = gc_state_open(b, state_dir, 0, &sf)) < 0)
        return rc == -ENOENT ? 0 : rc;
    if (fstatat(sf.dfd, sf.name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        rc = gc_state_remove(b, &sf);
        *dropped = rc == 0;
    }
    gc_state_close(&sf);
    return rc;
}

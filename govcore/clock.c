/* clock.c - write the GPU clock range safely; save and restore the board's original state. */
#include "govcore.h"
#include "powermode.h"
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC "# govcore saved GPU clock state"

static void set_err(gc_board *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
}

static void devfreq_file(const gc_board *b, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", b->devfreq_dir, name);
}

static int write_hz(gc_board *b, const char *name, uint64_t hz)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, name, path, sizeof path);
    rc = gc_sysfs_write_u64(b->sysfs_root, path, hz);
    if (rc < 0)
        set_err(b, "cannot write %llu to %s: %s%s", (unsigned long long)hz, path, gc_sysfs_strerror(rc),
                (rc == -EACCES || rc == -EPERM) ? " (run as root)" : "");
    return rc;
}

/* Read only the floor and ceiling: what a range write needs, two files instead of four. */
static int read_range(gc_board *b, gc_clock_state *st)
{
    char path[GC_PATH_MAX];
    int rc;

    devfreq_file(b, "min_freq", path, sizeof path);
    if ((rc = gc_sysfs_read_u64(b->sysfs_root, path, &st->min_hz)) == 0) {
        devfreq_file(b, "max_freq", path, sizeof path);
        rc = gc_sysfs_read_u64(b->sysfs_root, path, &st->max_hz);
    }
    if (rc < 0)
        set_err(b, "cannot read %s: %s", path, gc_sysfs_strerror(rc));
    return rc;
}

int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz)
{
    gc_clock_state st;
    int rc;

    if (min_hz == 0 || max_hz < min_hz) {
        set_err(b, "invalid clock range %llu..%llu Hz", (unsigned long long)min_hz,
                (unsigned long long)max_hz);
        return -EINVAL;
    }
    rc = read_range(b, &st);
    if (rc < 0)
        return rc;
    /* Raise the ceiling first when going up, lower the floor first when going down: at no
     * point may the board see min > max. Unchanged values are not written. */
    if (min_hz > st.max_hz) {
        if ((rc = write_hz(b, "max_freq", max_hz)) < 0)
            return rc;
        if ((rc = write_hz(b, "min_freq", min_hz)) < 0)
            return rc;
    } else {
        if (min_hz != st.min_hz && (rc = write_hz(b, "min_freq", min_hz)) < 0)
            return rc;
        if (max_hz != st.max_hz && (rc = write_hz(b, "max_freq", max_hz)) < 0)
            return rc;
    }
    rc = read_range(b, &st);
    if (rc < 0)
        return rc;
    if (st.min_hz != min_hz || st.max_hz != max_hz) {
        set_err(b, "clock did not take: asked min %.2f max %.2f MHz, board reports min %.2f max "
                   "%.2f MHz (a power-mode cap? check nvpmodel)",
                gc_hz_to_mhz(min_hz), gc_hz_to_mhz(max_hz), gc_hz_to_mhz(st.min_hz),
                gc_hz_to_mhz(st.max_hz));
        return -GC_EVERIFY;
    }
    return 0;
}

/* ---------------------------------------------------------------- saved state
 *
 * The state file decides what `restore` writes to the board, often as root, so nobody else may
 * be able to steer it (the OpenSSH/sudo rules for files root reads and writes):
 * - the folder is opened once (O_NOFOLLOW) and every file is reached through that descriptor
 *   (openat/linkat/unlinkat), so a folder swapped by a rename cannot redirect us;
 * - the folder must be owned by us and writable by no one else, and every folder above it owned
 *   by root or us and not writable by others unless sticky (/tmp);
 * - the state is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask, and put
 *   in place with linkat(), which never replaces an existing entry;
 * - only a regular file we own is read as a saved state: a symlink, fifo or folder at the state
 *   path is refused, never taken for "already saved" nor for "nothing saved";
 * - every value read back is checked against the board (table, governors) before it is written.
 * A refusal returns -GC_ESTATE with the reason in b->err.
 */

#define STATE_NAME_FMT "gpu-%016llx.state"
#define STATE_TMP_MARK ".tmp."
#define STATE_MAX_BYTES 4096

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
    return rc;
}

/* The state file's name inside the folder. */
static void state_name(const gc_board *b, char *out, size_t len)
{
    char real[PATH_MAX];
    const char *root = realpath(b->sysfs_root, real) ? real : b->sysfs_root;

    snprintf(out, len, STATE_NAME_FMT, (unsigned long long)fnv1a64(root));
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
static int check_ancestors(gc_board *b, const char *dir)
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
            set_err(b, "refusing state folder %s: %s above it can be changed by another user "
                       "(owner uid %u, mode %03o); use a private --state-dir", dir, real,
                    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
            return -GC_ESTATE;
        }
        if (slash == real)
            break;
    }
    return 0;
}

/* Open the state folder once (creating it, mode 0700, if create) and check that no one else can
 * steer it. -ENOENT if it does not exist and create is 0. */
static int open_state_dir(gc_board *b, const char *state_dir, int create, int *dfd)
{
    char dir[GC_PATH_MAX];
    struct stat st;
    int rc, fd;

    *dfd = -1;
    if ((rc = resolve_dir(b, state_dir, dir, sizeof dir)) < 0)
        return rc;
    if (create && (rc = gc_mkdir_p(dir)) < 0) {
        set_err(b, "cannot create state folder %s: %s", dir, strerror(-rc));
        return rc;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        if (rc == -ENOENT)
            return rc;
        if (rc == -ELOOP || rc == -ENOTDIR) {
            set_err(b, "refusing state folder %s: it is a symbolic link or not a folder", dir);
            return -GC_ESTATE;
        }
        set_err(b, "cannot open state folder %s: %s", dir, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        set_err(b, "cannot stat state folder %s: %s", dir, strerror(-rc));
        goto close_fd;
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        set_err(b, "refusing state folder %s: it must be owned by you (uid %u) and writable by no "
                   "one else (owner uid %u, mode %03o)", dir, (unsigned)geteuid(),
                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        rc = -GC_ESTATE;
        goto close_fd;
    }
    if ((rc = check_ancestors(b, dir)) < 0)
        goto close_fd;
    *dfd = fd;
    return 0;

close_fd:
    close(fd);
    return rc;
}

/* A value of the state file: decimal digits only, no sign, no overflow. */
static int parse_state_hz(const char *text, uint64_t *out)
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

/* The governors this board offers may include name. Without an available_governors file, a
 * plain identifier is accepted. */
static int governor_known(gc_board *b, const char *name)
{
    char path[GC_PATH_MAX], list[1024], *tok, *save = NULL;
    const char *p;

    for (p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return 0;
    devfreq_file(b, "available_governors", path, sizeof path);
    if (gc_sysfs_read(b->sysfs_root, path, list, sizeof list) < 0)
        return 1;
    for (tok = strtok_r(list, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
        if (strcmp(tok, name) == 0)
            return 1;
    return 0;
}

static int level_known(const gc_board *b, uint64_t hz)
{
    int i;

    for (i = 0; i < b->n_freqs; i++)
        if (b->freqs_hz[i] == hz)
            return 1;
    return 0;
}

/* Check a clock state against this board before anything is written from it. An empty
 * governor means "unknown" (the board's file was empty): it is then left as it is. */
static int state_check(gc_board *b, const gc_clock_state *st, const char *what)
{
    if (!level_known(b, st->min_hz) || !level_known(b, st->max_hz) || st->max_hz < st->min_hz) {
        set_err(b, "%s: min %llu / max %llu Hz is not a range of this board's levels; check the "
                   "clock by hand (govcore status) and delete it", what,
                (unsigned long long)st->min_hz, (unsigned long long)st->max_hz);
        return -GC_ESTATE;
    }
    if (st->governor[0] && !governor_known(b, st->governor)) {
        char shown[GC_NAME_MAX];

        gc_printable(st->governor, shown, sizeof shown);
        set_err(b, "%s: governor \"%s\" is not one this board offers; check the clock by hand "
                   "and delete it", what, shown);
        return -GC_ESTATE;
    }
    return 0;
}

/* Parse the text of a state file. -GC_ESTATE (with b->err) if it is not one we wrote. */
static int parse_state(gc_board *b, char *text, const char *path, gc_clock_state *st)
{
    char *line, *save = NULL;
    int have = 0, bad = 0;

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
        if (strcmp(line, "governor") == 0 && !(have & 1)) {
            int n = snprintf(st->governor, sizeof st->governor, "%s", eq + 1);
            bad |= n < 0 || (size_t)n >= sizeof st->governor;
            have |= 1;
        } else if (strcmp(line, "min_hz") == 0 && !(have & 2)) {
            bad |= parse_state_hz(eq + 1, &st->min_hz) < 0;
            have |= 2;
        } else if (strcmp(line, "max_hz") == 0 && !(have & 4)) {
            bad |= parse_state_hz(eq + 1, &st->max_hz) < 0;
            have |= 4;
        } else if (strcmp(line, "sysfs_root") != 0 && strcmp(line, "devfreq_dir") != 0) {
            bad = 1; /* an unknown or repeated key: not a file we wrote */
        }
    }
    if (bad || have != 7) {
        set_err(b, "state file %s is damaged; check the clock by hand and delete it", path);
        return -GC_ESTATE;
    }
    return state_check(b, st, path);
}

/* Read the state file name in folder dfd. -ENOENT if there is none. */
static int load_at(gc_board *b, int dfd, const char *name, const char *path, gc_clock_state *st)
{
    char text[STATE_MAX_BYTES + 1];
    struct stat sb;
    size_t used = 0;
    ssize_t n;
    int fd, rc;

    /* O_NONBLOCK: a fifo planted at the path must not hang us before fstat refuses it */
    fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        if (rc == -ENOENT)
            return rc;
        if (rc == -ELOOP) {
            set_err(b, "refusing state file %s: it is a symbolic link, not a state pydvfs wrote; "
                       "check the clock by hand and delete it", path);
            return -GC_ESTATE;
        }
        set_err(b, "cannot read state file %s: %s", path, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & (S_IWGRP | S_IWOTH))) {
        set_err(b, "refusing state file %s: not a regular file of yours writable only by you; "
                   "check the clock by hand and delete it", path);
        rc = -GC_ESTATE;
        goto close_fd;
    }
    while (used < STATE_MAX_BYTES) {
        n = read(fd, text + used, STATE_MAX_BYTES - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            set_err(b, "cannot read state file %s: %s", path, strerror(-rc));
            goto close_fd;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    text[used] = '\0';
    if (used == STATE_MAX_BYTES || strlen(text) != used) {
        set_err(b, "state file %s is damaged; check the clock by hand and delete it", path);
        rc = -GC_ESTATE;
        goto close_fd;
    }
    rc = parse_state(b, text, path, st);
close_fd:
    close(fd);
    return rc;
}

int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
{
    char path[GC_PATH_MAX], name[64];
    int rc, dfd;

    if ((rc = gc_state_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    if ((rc = open_state_dir(b, state_dir, 0, &dfd)) < 0)
        return rc;
    state_name(b, name, sizeof name);
    rc = load_at(b, dfd, name, path, st);
    close(dfd);
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

/* Write text to a fresh temp file in dfd and link it in as name. EEXIST if name exists. */
static int write_state_at(gc_board *b, int dfd, const char *name, const char *path,
                          const char *text)
{
    char tmp[96];
    size_t len = strlen(text), done = 0;
    ssize_t n;
    int fd, rc = 0;

    clean_stray_tmp(dfd);
    snprintf(tmp, sizeof tmp, "%s%s%ld", name, STATE_TMP_MARK, (long)getpid());
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        set_err(b, "cannot create state file %s%s%ld: %s", path, STATE_TMP_MARK, (long)getpid(),
                strerror(-rc));
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
    if (rc == 0 && linkat(dfd, tmp, dfd, name, 0) < 0)
        rc = -errno;
    unlinkat(dfd, tmp, 0);
    if (rc < 0 && rc != -EEXIST)
        set_err(b, "cannot write state file %s: %s", path, strerror(-rc));
    if (rc == 0)
        fsync(dfd);
    return rc;
}

int gc_state_save(gc_board *b, const char *state_dir, int *saved_now)
{
    char path[GC_PATH_MAX], name[64], text[GC_PATH_MAX * 2 + 256];
    gc_clock_state st, old;
    int rc, dfd, n;

    *saved_now = 0;
    if ((rc = gc_state_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    if ((rc = open_state_dir(b, state_dir, 1, &dfd)) < 0)
        return rc;
    state_name(b, name, sizeof name);
    rc = load_at(b, dfd, name, path, &old);
    if (rc != -ENOENT)
        goto close_dir; /* 0: the original state is already saved; else refused */
    if ((rc = gc_clock_read(b, &st)) < 0)
        goto close_dir;
    /* what we save must be restorable: check it now, while the board is still untouched */
    if ((rc = state_check(b, &st, "the board's current clock state")) < 0)
        goto close_dir;
    n = snprintf(text, sizeof text,
                 "%s; `pydvfs restore` or `govcore restore` puts it back\n"
                 "sysfs_root=%s\ndevfreq_dir=%s\ngovernor=%s\nmin_hz=%llu\nmax_hz=%llu\n",
                 STATE_MAGIC, b->sysfs_root, b->devfreq_dir, st.governor,
                 (unsigned long long)st.min_hz, (unsigned long long)st.max_hz);
    if (n < 0 || (size_t)n >= sizeof text || strchr(b->sysfs_root, '\n') ||
        strchr(b->devfreq_dir, '\n')) {
        set_err(b, "cannot save the clock state: the sysfs root path is too long or has a newline");
        rc = -EINVAL;
        goto close_dir;
    }
    rc = write_state_at(b, dfd, name, path, text);
    if (rc == -EEXIST) /* saved by someone else meanwhile: it must be a real state */
        rc = load_at(b, dfd, name, path, &old);
    else if (rc == 0)
        *saved_now = 1;
close_dir:
    close(dfd);
    return rc;
}

/* Best effort, in the safe order: write what can be written even where something cannot be
 * read, and say exactly what is still not as saved. */
int gc_restore(gc_board *b, const char *state_dir, int *restored)
{
    char path[GC_PATH_MAX], name[64], gov_path[GC_PATH_MAX], gov_now[GC_NAME_MAX];
    char left[GC_ERR_MAX] = "", first_err[GC_ERR_MAX] = "";
    gc_clock_state saved, now;
    int rc, dfd, pass, min_ok = 0, max_ok = 0, gov_ok = 1, first_rc = 0;

    *restored = 0;
    if ((rc = gc_state_path(b, state_dir, path, sizeof path)) < 0)
        return rc;
    if ((rc = open_state_dir(b, state_dir, 0, &dfd)) < 0)
        return rc == -ENOENT ? 0 : rc;
    state_name(b, name, sizeof name);
    rc = load_at(b, dfd, name, path, &saved);
    if (rc < 0) {
        close(dfd);
        return rc == -ENOENT ? 0 : rc;
    }
    /* the governor first: podgov moves the clock within min..max, so set the range last */
    if (saved.governor[0]) {
        devfreq_file(b, "governor", gov_path, sizeof gov_path);
        if (gc_sysfs_read(b->sysfs_root, gov_path, gov_now, sizeof gov_now) < 0 ||
            strcmp(gov_now, saved.governor) != 0) {
            rc = gc_sysfs_write(b->sysfs_root, gov_path, saved.governor);
            if (rc < 0) {
                gov_ok = 0;
                first_rc = rc;
                snprintf(first_err, sizeof first_err, "cannot write governor %s to %s: %s",
                         saved.governor, gov_path, strerror(-rc));
            }
        }
    }
    /* The range: with the current one readable, gc_set_range_hz picks the order that never
     * makes min > max. Without it, try max then min, and once more whatever the board refused
     * (a refused write may succeed once the other bound has moved). */
    if ((rc = gc_set_range_hz(b, saved.min_hz, saved.max_hz)) == 0) {
        min_ok = max_ok = 1;
    } else {
        if (!first_rc) {
            first_rc = rc;
            snprintf(first_err, sizeof first_err, "%s", b->err);
        }
        for (pass = 0; pass < 2 && !(min_ok && max_ok); pass++) {
            if (!max_ok)
                max_ok = write_hz(b, "max_freq", saved.max_hz) == 0;
            if (!min_ok)
                min_ok = write_hz(b, "min_freq", saved.min_hz) == 0;
        }
        if (read_range(b, &now) == 0) {
            min_ok = now.min_hz == saved.min_hz;
            max_ok = now.max_hz == saved.max_hz;
        }
    }
    if (gov_ok && min_ok && max_ok) {
        rc = 0;
        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) {
            rc = -errno;
            set_err(b, "clock restored, but cannot remove %s: %s", path, strerror(-rc));
        }
        close(dfd);
        *restored = rc == 0;
        return rc;
    }
    snprintf(left, sizeof left, "%s%s%s", gov_ok ? "" : " governor", min_ok ? "" : " min_freq",
             max_ok ? "" : " max_freq");
    set_err(b, "restore incomplete, still not as saved:%s (saved governor %s, min %.2f, max "
               "%.2f MHz); the saved state is kept, run restore again: %s", left,
            saved.governor[0] ? saved.governor : "(unknown)", gc_hz_to_mhz(saved.min_hz),
            gc_hz_to_mhz(saved.max_hz), first_err);
    close(dfd);
    return first_rc < 0 ? first_rc : -EIO;
}

int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
{
    char err[GC_ERR_MAX];
    int rc, saved_now, restored;

    if (gc_snap_hz(b, want_hz, level_hz) < 0) {
        set_err(b, "not a clock: %.3f MHz", gc_hz_to_mhz(want_hz));
        return -EINVAL;
    }
    /* the power mode is the user's ceiling: read before the state is saved (powermode.c) */
    if ((rc = gc_power_cap_clamp(b, state_dir, level_hz)) < 0)
        return rc;
    rc = gc_state_save(b, state_dir, &saved_now);
    if (rc < 0)
        return rc;
    rc = gc_set_range_hz(b, *level_hz, *level_hz);
    if (rc == 0)
        return 0;
    /* Never leave the board half-written: put the original back, keep the first error. */
    memcpy(err, b->err, sizeof err);
    if (gc_restore(b, state_dir, &restored) == 0)
        snprintf(b->err, sizeof b->err, "%s; original clock state restored", err);
    else
        snprintf(b->err, sizeof b->err, "%s; restoring the original state also failed", err);
    return rc;
}

/* policy_load.c - load a tree that `pydvfs train` compiled into a model folder (policy.so).
 *
 * Loading a shared object runs its code. Before that happens:
 *  - as root (euid 0), the folder, every folder above it up to / and the files read from it
 *    must be owned by root or by the caller's real uid and writable by neither group nor others
 *    (the rule sshd's StrictModes and sudo apply to the files root reads). The path is resolved
 *    once, then walked from / one component at a time with O_NOFOLLOW, checking each open
 *    folder with fstat; files are opened relative to the checked folder with O_NOFOLLOW, and
 *    policy.so is copied into a memfd, hashed and loaded from it (/proc/self/fd/N): what is checked is what is loaded, even if a
 *    path is swapped for a symlink in between;
 *  - manifest.txt must match the folder: its format is this build's, policy_tree.c and
 *    policy.so have the SHA-256 it records;
 *  - policy.so must be an ELF object for this CPU (e_machine); the message names both.
 * After loading, the tree's feature names and class clocks must be the manifest's.
 */
#include "policy.h"
#include "sha256.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GC_NO_DLOPEN
#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#define GC_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define GC_ELF_MACHINE EM_AARCH64
#elif defined(__arm__)
#define GC_ELF_MACHINE EM_ARM
#elif defined(__i386__)
#define GC_ELF_MACHINE EM_386
#elif defined(__riscv)
#define GC_ELF_MACHINE EM_RISCV
#else
#define GC_ELF_MACHINE EM_NONE
#endif
#endif

#define MANIFEST_NAME "manifest.txt"
#define MANIFEST_MAX_BYTES 65536

const char *gc_elf_machine_name(int e_machine)
{
    switch (e_machine) {
    case 62: return "x86_64";   /* EM_X86_64 */
    case 183: return "aarch64"; /* EM_AARCH64 */
    case 40: return "arm";      /* EM_ARM */
    case 3: return "i386";      /* EM_386 */
    case 243: return "riscv";   /* EM_RISCV */
    default: return "an unknown CPU";
    }
}

/* Owned by root or the real uid, writable by neither group nor others. */
static int trusted(const struct stat *st)
{
    return (st->st_uid == 0 || st->st_uid == getuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* A folder above the model folder may also be sticky (as /tmp is, 1777 root): no one else can
 * rename or replace what root or you own in it, and the folder below is checked in turn. */
static int trusted_above(const struct stat *st)
{
    return trusted(st) || ((st->st_uid == 0 || st->st_uid == getuid()) && (st->st_mode & S_ISVTX));
}

static int refuse_untrusted(const char *what, const struct stat *st, char *err, size_t len)
{
    snprintf(err, len, "refusing to load a policy as root: %s is %s (owner uid %u, mode %04o); "
             "every folder above policy.so and the files in it must be owned by root (or you) "
             "and writable by no one else (a folder above may be sticky, as /tmp is): chown root "
             "and chmod go-w, or keep the model folder "
             "under a root-owned path such as /opt or /usr/local/share",
             what, (st->st_mode & (S_IWGRP | S_IWOTH)) ? "writable by group or others"
                                                      : "owned by another user",
             (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
    return -EPERM;
}

/* The model folder, opened. As root, walked from / with every folder checked (see top). */
static int open_model_dir(const char *model_dir, int as_root, int *dirfd, char *err, size_t len)
{
    char real[PATH_MAX], walked[PATH_MAX] = "", *comp, *after, *save = NULL;
    struct stat st;
    int fd, next, rc;

    if (!as_root) {
        fd = open(model_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            snprintf(err, len, "cannot open the model folder %s: %s (run `pydvfs train` to make "
                     "one)", model_dir, strerror(-rc));
            return rc;
        }
        *dirfd = fd;
        return 0;
    }
    if (!realpath(model_dir, real)) {
        rc = -errno;
        snprintf(err, len, "cannot open the model folder %s: %s", model_dir, strerror(-rc));
        return rc;
    }
    fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (!trusted_above(&st)) {
        close(fd);
        return refuse_untrusted("/", &st, err, len);
    }
    for (comp = strtok_r(real, "/", &save); comp; comp = after) {
        size_t used = strlen(walked);

        after = strtok_r(NULL, "/", &save); /* NULL: comp is the model folder itself */

        snprintf(walked + used, sizeof walked - used, "/%s", comp);
        next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = -errno;
        close(fd);
        if (next < 0) {
            snprintf(err, len, "refusing to load a policy as root: %s changed while it was "
                     "checked (%s): a symlink was swapped in, or it was removed", walked,
                     strerror(-rc));
            return rc == -ELOOP || rc == -ENOTDIR ? -EPERM : rc;
        }
        fd = next;
        if (fstat(fd, &st) < 0) {
            rc = -errno;
            close(fd);
            return rc;
        }
        if (!(after ? trusted_above(&st) : trusted(&st))) {
            rc = refuse_untrusted(walked, &st, err, len);
            close(fd);
            return rc;
        }
    }
    *dirfd = fd;
    return 0;
}

/* A regular file in the model folder, never through a symlink; as root, checked like the
 * folders. */
static int open_model_file(int dirfd, const char *model_dir, const char *name, int as_root,
                           int *out_fd, char *err, size_t len)
{
    struct stat st;
    int fd, rc;

    /* O_NONBLOCK: a fifo planted under the name must not hang us before fstat refuses it */
    fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        if (rc == -ELOOP) {
            snprintf(err, len, "refusing to load %s/%s: it is a symbolic link (a model folder "
                     "holds its own files)", model_dir, name);
            return -EPERM;
        }
        snprintf(err, len, "cannot open %s/%s: %s (a model folder from `pydvfs train` holds "
                 "policy.so, policy_tree.c and " MANIFEST_NAME "; train again to make one)",
                 model_dir, name, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, len, "refusing %s/%s: it is not a regular file (a model folder holds its own "
                 "files)", model_dir, name);
        close(fd);
        return -EINVAL;
    }
    if (as_root && !trusted(&st)) {
        char what[GC_PATH_MAX];

        snprintf(what, sizeof what, "%s/%s", model_dir, name);
        rc = refuse_untrusted(what, &st, err, len);
        close(fd);
        return rc;
    }
    *out_fd = fd;
    return 0;
}

int gc_model_file_open(const char *model_dir, const char *name, int *out_fd, char *err, size_t len)
{
    int as_root = geteuid() == 0, dirfd, rc, fl;

    if ((rc = open_model_dir(model_dir, as_root, &dirfd, err, len)) < 0)
        return rc;
    rc = open_model_file(dirfd, model_dir, name, as_root, out_fd, err, len);
    close(dirfd);
    if (rc == 0 && (fl = fcntl(*out_fd, F_GETFL)) >= 0)
        (void)fcntl(*out_fd, F_SETFL, fl & ~O_NONBLOCK);
    return rc;
}

#ifdef GC_NO_DLOPEN

int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t len)
{
    (void)out;
    *handle = NULL;
    snprintf(err, len, "--model-dir %s: this govcore is a static build that loads no code; its "
             "tree is compiled in (govcore --version). Rebuild it with your tree: make -C govcore "
             "release POLICY=%s/policy_tree.c", model_dir, model_dir);
    return -ENOTSUP;
}

void gc_tree_close(void *handle)
{
    (void)handle;
}

#else

/* A private copy of fd's file in an anonymous memory file. The dynamic loader treats two objects
 * with the same device and inode as one, and inode numbers are reused once a file is deleted (a
 * retrained model in a tmpfs, say): dlopen of a new policy.so could return a deleted one still
 * loaded. A memfd's inode is unique while it is mapped, and the copy is what is hashed, checked
 * and loaded, so nothing can change it in between. */
static int copy_to_memfd(int fd, int *out)
{
    char buf[16384];
    off_t off = 0;
    ssize_t n, w, done;
    int mfd = memfd_create("pydvfs-policy", MFD_CLOEXEC), rc;

    if (mfd < 0)
        return -errno;
    for (;;) {
        n = pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : 0;
            break;
        }
        for (done = 0; done < n; done += w)
            if ((w = write(mfd, buf + done, (size_t)(n - done))) < 0 && errno != EINTR) {
                rc = -errno;
                close(mfd);
                return rc;
            } else if (w < 0) {
                w = 0;
            }
        off += n;
    }
    if (rc < 0) {
        close(mfd);
        return rc;
    }
    *out = mfd;
    return 0;
}

static int elf_machine_of_fd(int fd, int *e_machine)
{
    unsigned char h[EI_NIDENT + 4];
    ssize_t n;

    n = pread(fd, h, sizeof h, 0);
    if (n < 0)
        return -errno;
    if (n < (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0)
        return -ENOEXEC;
    /* e_machine follows e_ident and the 2-byte e_type, in the file's byte order */
    *e_machine = h[EI_DATA] == ELFDATA2MSB ? (h[EI_NIDENT + 2] << 8 | h[EI_NIDENT + 3])
                                           : (h[EI_NIDENT + 3] << 8 | h[EI_NIDENT + 2]);
    return 0;
}

struct manifest {
    char text[MANIFEST_MAX_BYTES + 1];
    int format;
    const char *features;      /* space-separated names, in score() order */
    const char *classes_mhz;   /* space-separated clocks */
    const char *tree_sha256;   /* of policy_tree.c */
    const char *policy_so_sha256;
    const char *board;         /* the board the data came from (pydvfs.boards id, "-" unknown) */
    const char *levels_mhz;    /* the training data's GPU clock table, space-separated */
    const char *measure;       /* optional: the energy the labels minimise (module, cpu-gpu) */
    const char *class_saving_pct; /* optional, one per class: the expected saving vs MAXN ... */
    const char *class_spread_pct; /* ... and its spread (%), from the training data */
    const char *ffg_saving_pct;   /* optional: the same of the FFG clock */
    const char *ffg_spread_pct;
};

/* "key value" lines; '#' starts a comment line. Unknown keys are allowed (newer writers). */
static int manifest_parse(int fd, struct manifest *m, const char *model_dir, char *err, size_t len)
{
    char *line, *save = NULL, *val;
    ssize_t n;

    memset(m, 0, sizeof *m);
    m->format = -1;
    n = pread(fd, m->text, MANIFEST_MAX_BYTES + 1, 0);
    if (n < 0 || n > MANIFEST_MAX_BYTES) {
        snprintf(err, len, "%s/" MANIFEST_NAME " cannot be read or is too large", model_dir);
        return -EBADMSG;
    }
    m->text[n] = '\0';
    for (line = strtok_r(m->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !(val = strchr(line, ' ')))
            continue;
        *val++ = '\0';
        if (strcmp(line, "format") == 0)
            m->format = atoi(val);
        else if (strcmp(line, "features") == 0)
            m->features = val;
        else if (strcmp(line, "classes_mhz") == 0)
            m->classes_mhz = val;
        else if (strcmp(line, "tree_sha256") == 0)
            m->tree_sha256 = val;
        else if (strcmp(line, "policy_so_sha256") == 0)
            m->policy_so_sha256 = val;
        else if (strcmp(line, "board") == 0)
            m->board = val;
        else if (strcmp(line, "levels_mhz") == 0)
            m->levels_mhz = val;
        else if (strcmp(line, "measure") == 0)
            m->measure = val;
        else if (strcmp(line, "class_saving_pct") == 0)
            m->class_saving_pct = val;
        else if (strcmp(line, "class_spread_pct") == 0)
            m->class_spread_pct = val;
        else if (strcmp(line, "ffg_saving_pct") == 0)
            m->ffg_saving_pct = val;
        else if (strcmp(line, "ffg_spread_pct") == 0)
            m->ffg_spread_pct = val;
    }
    if (m->format != GC_MODEL_FORMAT) {
        snprintf(err, len, "%s/" MANIFEST_NAME ": model format %d, this build reads format %d: "
                 "train the model again with this version", model_dir, m->format, GC_MODEL_FORMAT);
        return -EBADMSG;
    }
    if (!m->features || !m->classes_mhz || !m->tree_sha256 || !m->policy_so_sha256) {
        snprintf(err, len, "%s/" MANIFEST_NAME " lacks features, classes_mhz, tree_sha256 or "
                 "policy_so_sha256", model_dir);
        return -EBADMSG;
    }
    return 0;
}

static int check_hash(int fd, const char *want, const char *model_dir, const char *name,
                      char *err, size_t len)
{
    char hex[GC_SHA256_HEX_LEN + 1];
    int rc;

    if ((rc = gc_sha256_fd(fd, hex)) < 0)
        return rc;
    if (strcmp(hex, want) != 0) {
        snprintf(err, len, "refusing the model %s: %s does not match " MANIFEST_NAME " (sha256 "
                 "%.12s..., the manifest says %.12s...): the folder was changed after `pydvfs "
                 "train`; train again", model_dir, name, hex, want);
        return -EBADMSG;
    }
    return 0;
}

/* A /proc/self/fd/N name for fd that no loaded object carries: fd itself (returns -1), or a
 * duplicate the caller closes after dlopen (returns it); < -1 if none can be made. */
static int unused_fd_name(int fd, char *path, size_t len)
{
    int cur = fd, dup_fd = -1, tries;

    for (tries = 0; tries < 256; tries++) {
        void *loaded;

        snprintf(path, len, "/proc/self/fd/%d", cur);
        loaded = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (!loaded)
            return dup_fd;
        dlclose(loaded);
        cur = fcntl(fd, F_DUPFD_CLOEXEC, cur + 1);
        if (dup_fd >= 0)
            close(dup_fd);
        if (cur < 0)
            return -2;
        dup_fd = cur;
    }
    if (dup_fd >= 0)
        close(dup_fd);
    return -2;
}

/* The manifest's board and levels_mhz (optional: a folder trained before they were recorded
 * has neither; then the table is unknown). A table that is not ascending clocks is refused. */
static int manifest_origin(const struct manifest *man, gc_tree_model *out, const char *model_dir,
                           char *err, size_t len)
{
    char buf[MANIFEST_MAX_BYTES + 1], *tok, *save = NULL, *end;

    if (man->board && strcmp(man->board, "-") != 0) {
        size_t n = strlen(man->board);
        size_t i;

        for (i = 0; i < n; i++)
            if (!isalnum((unsigned char)man->board[i]) && man->board[i] != '-' && man->board[i] != '_')
                break;
        if (n == 0 || n >= sizeof out->board_id || i != n) {
            snprintf(err, len, "%s/" MANIFEST_NAME ": board is not a board id", model_dir);
            return -EBADMSG;
        }
        memcpy(out->board_id, man->board, n + 1);
    }
    if (!man->levels_mhz || strcmp(man->levels_mhz, "-") == 0)
        return 0;
    snprintf(buf, sizeof buf, "%s", man->levels_mhz);
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        double v = strtod(tok, &end);

        if (*end || !(v > 0.0 && v < 1e6) || out->n_levels >= GC_TREE_MAX_LEVELS ||
            (out->n_levels && v <= out->levels_mhz[out->n_levels - 1])) {
            snprintf(err, len, "%s/" MANIFEST_NAME ": levels_mhz is not an ascending list of clocks "
                     "(MHz); train again", model_dir);
            return -EBADMSG;
        }
        out->levels_mhz[out->n_levels++] = v;
    }
    return 0;
}

/* n finite numbers (n_max at most) of a space-separated list into out; -1 if it is not one. */
static int number_list(const char *text, double *out, int n_max)
{
    char buf[MANIFEST_MAX_BYTES + 1], *tok, *save = NULL, *end;
    int n = 0;

    snprintf(buf, sizeof buf, "%s", text);
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        double v = strtod(tok, &end);

        if (*end || !isfinite(v) || n >= n_max)
            return -1;
        out[n++] = v;
    }
    return n;
}

/* What the folder knows of its own decisions (optional: a folder without these keys gates
 * nothing): the measure, and the expected saving and spread per class and of the FFG clock,
 * one per class (spreads >= 0). The origin is a user's folder. */
static int manifest_knows(const struct manifest *man, gc_tree_model *out, const char *model_dir,
                          char *err, size_t len)
{
    double ffg[2];
    int n;

    snprintf(out->origin, sizeof out->origin, "%s", GC_ORIGIN_USER);
    out->calibrated = -1;
    if (man->measure && strcmp(man->measure, "-") != 0) {
        const char *mm;

        if (gc_measure_parse(man->measure, &mm) < 0) {
            snprintf(err, len, "%s/" MANIFEST_NAME ": measure is not an energy measure", model_dir);
            return -EBADMSG;
        }
        snprintf(out->measure, sizeof out->measure, "%s", mm);
    }
    if (!man->class_saving_pct || !man->class_spread_pct || !man->ffg_saving_pct || !man->ffg_spread_pct)
        return 0;
    if (number_list(man->class_saving_pct, out->class_saving_pct, GC_MAX_CLASSES) != out->n_classes ||
        number_list(man->class_spread_pct, out->class_spread_pct, GC_MAX_CLASSES) != out->n_classes ||
        number_list(man->ffg_saving_pct, &ffg[0], 1) != 1 || number_list(man->ffg_spread_pct, &ffg[1], 1) != 1 ||
        ffg[1] < 0.0) {
        snprintf(err, len, "%s/" MANIFEST_NAME ": the expected savings are not one number per class "
                 "(and one for FFG); train again", model_dir);
        return -EBADMSG;
    }
    for (n = 0; n < out->n_classes; n++)
        if (out->class_spread_pct[n] < 0.0) {
            snprintf(err, len, "%s/" MANIFEST_NAME ": a negative spread; train again", model_dir);
            return -EBADMSG;
        }
    out->ffg_saving_pct = ffg[0];
    out->ffg_spread_pct = ffg[1];
    out->has_savings = 1;
    return 0;
}

/* The loaded tree's feature names and class clocks are the manifest's. */
static int tree_matches(const gc_tree_model *t, const struct manifest *m)
{
    char buf[MANIFEST_MAX_BYTES + 1], *tok, *save = NULL, *end;
    int i = 0;

    snprintf(buf, sizeof buf, "%s", m->features);
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++)
        if (i >= t->n_features || strcmp(tok, t->feature_names[i]) != 0)
            return 0;
    if (i != t->n_features)
        return 0;
    snprintf(buf, sizeof buf, "%s", m->classes_mhz);
    i = 0;
    save = NULL;
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++)
        if (i >= t->n_classes || strtod(tok, &end) != t->classes_mhz[i] || *end)
            return 0;
    return i == t->n_classes;
}

int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t len)
{
    struct manifest *man = NULL;
    const gc_tree_model *m;
    char proc_path[64];
    int as_root = geteuid() == 0, dirfd = -1, mfd = -1, tfd = -1, fd = -1, sofd = -1, machine = 0, rc;
    int namefd;
    void *h = NULL;

    *handle = NULL;
    if (!(man = malloc(sizeof *man)))
        return -ENOMEM;
    if ((rc = open_model_dir(model_dir, as_root, &dirfd, err, len)) < 0)
        goto free_manifest;
    if ((rc = open_model_file(dirfd, model_dir, MANIFEST_NAME, as_root, &mfd, err, len)) < 0)
        goto close_dir;
    if ((rc = manifest_parse(mfd, man, model_dir, err, len)) < 0)
        goto close_manifest;
    if ((rc = open_model_file(dirfd, model_dir, "policy_tree.c", as_root, &tfd, err, len)) < 0)
        goto close_manifest;
    if ((rc = check_hash(tfd, man->tree_sha256, model_dir, "policy_tree.c", err, len)) < 0)
        goto close_tree;
    if ((rc = open_model_file(dirfd, model_dir, "policy.so", as_root, &fd, err, len)) < 0)
        goto close_tree;
    rc = copy_to_memfd(fd, &sofd);
    close(fd);
    if (rc < 0) {
        snprintf(err, len, "cannot read %s/policy.so: %s", model_dir, strerror(-rc));
        goto close_tree;
    }
    if ((rc = check_hash(sofd, man->policy_so_sha256, model_dir, "policy.so", err, len)) < 0)
        goto close_so;
    if ((rc = elf_machine_of_fd(sofd, &machine)) < 0) {
        snprintf(err, len, "%s/policy.so is not an ELF shared object", model_dir);
        goto close_so;
    }
    if (machine != GC_ELF_MACHINE) {
        snprintf(err, len, "%s/policy.so is built for %s, but this program runs on %s: let "
                 "`pydvfs apply --model-dir %s` rebuild it from policy_tree.c (needs a C compiler), "
                 "or use the static govcore with the tree compiled in (make -C govcore release "
                 "POLICY=%s/policy_tree.c)", model_dir, gc_elf_machine_name(machine),
                 gc_elf_machine_name(GC_ELF_MACHINE), model_dir, model_dir);
        rc = -ENOEXEC;
        goto close_so;
    }
    /* the checked copy itself, not a path; under a name no loaded object has (dlopen returns
     * an object already loaded under the same name: a policy.so loaded earlier from a
     * descriptor number reused since would stand in for this one) */
    if ((namefd = unused_fd_name(sofd, proc_path, sizeof proc_path)) < -1) {
        snprintf(err, len, "cannot load %s/policy.so: no free descriptor", model_dir);
        rc = -EMFILE;
        goto close_so;
    }
    h = dlopen(proc_path, RTLD_NOW | RTLD_LOCAL);
    if (namefd >= 0)
        close(namefd);
    if (!h) {
        snprintf(err, len, "cannot load %s/policy.so: %s", model_dir, dlerror());
        rc = -ENOEXEC;
        goto close_so;
    }
    m = (const gc_tree_model *)dlsym(h, "gc_tree");
    if (!m || !m->score || m->n_classes < 1 || m->n_features > GC_MAX_FEATURES ||
        m->n_classes > GC_MAX_CLASSES) {
        snprintf(err, len, "%s/policy.so is not a pydvfs policy (no valid gc_tree symbol)", model_dir);
        rc = -EINVAL;
        goto close_handle;
    }
    if (!tree_matches(m, man)) {
        snprintf(err, len, "refusing the model %s: the tree in policy.so has other features or "
                 "class clocks than " MANIFEST_NAME "; train again", model_dir);
        rc = -EBADMSG;
        goto close_handle;
    }
    /* the fields policy.so defines; the training board and table are the manifest's */
    memset(out, 0, sizeof *out);
    memcpy(out, m, offsetof(gc_tree_model, board_id));
    if ((rc = manifest_origin(man, out, model_dir, err, len)) < 0 ||
        (rc = manifest_knows(man, out, model_dir, err, len)) < 0)
        goto close_handle;
    *handle = h;
    h = NULL;
    rc = 0;
close_handle:
    if (h)
        dlclose(h);
close_so:
    close(sofd);
close_tree:
    close(tfd);
close_manifest:
    close(mfd);
close_dir:
    close(dirfd);
free_manifest:
    free(man);
    return rc;
}

void gc_tree_close(void *handle)
{
    if (handle)
        dlclose(handle);
}

#endif

/* roofline.txt, the board's time and power curves fitted by `pydvfs train`, read as data with the
 * checks every file of a model folder gets (gc_model_file_open). */
#define RL_MAX_FILE 65536
#define RL_MAX_LINE 4096

/* A whole-string finite number; -EINVAL otherwise. */
static int rl_number(const char *s, double *out)
{
    char *end;

    if (!*s || isspace((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    *out = strtod(s, &end);
    if (errno || *end || !isfinite(*out))
        return -EINVAL;
    return 0;
}

/* A comma-separated list of finite numbers, 1..GC_ROOFLINE_MAX_VF of them. */
static int rl_list(char *s, double *out, int *n)
{
    char *tok, *save = NULL;

    *n = 0;
    for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= GC_ROOFLINE_MAX_VF || rl_number(tok, &out[*n]) < 0)
            return -EINVAL;
        (*n)++;
    }
    return *n > 0 ? 0 : -EINVAL;
}

static const char *const rl_keys[] = {"version", "k_gauge", "q_gcyc",   "m_s",     "h0_s",
                                      "h1_s",    "p_idle_w", "c_w",     "c_idle_w", "e_mem_j",
                                      "vf_mhz",  "vf_v",    NULL};

int gc_roofline_load(const char *path, gc_roofline *out, char *err, size_t len)
{
    double *scalar[] = {NULL, &out->k_gauge, &out->q_gcyc, &out->m_s, &out->h0_s, &out->h1_s,
                        &out->p_idle_w, &out->c_w, &out->c_idle_w, &out->e_mem_j};
    char line[RL_MAX_LINE + 2];
    int seen[12] = {0}, n_line = 0, n_v = 0, i, k, rc = -EINVAL;
    double version = 0;
    size_t total = 0;
    FILE *f;

    memset(out, 0, sizeof *out);
    /* a model folder's file: the checks policy.so gets (as root: no one else's folder, no link,
     * no fifo), so that its first line never shows a file the caller could not read */
    {
        char dir[GC_PATH_MAX];
        const char *slash = strrchr(path, '/');
        int fd;

        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == path)
            snprintf(dir, sizeof dir, "/");
        else
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        if ((rc = gc_model_file_open(dir, slash ? slash + 1 : path, &fd, err, len)) < 0) {
            if (rc == -ENOENT)
                snprintf(err, len, "cannot read the roofline model %s: %s (run `pydvfs train` to "
                         "make one)", path, strerror(ENOENT));
            return rc == -ENOENT ? -ENOENT : rc;
        }
        if (!(f = fdopen(fd, "r"))) {
            rc = -errno;
            close(fd);
            snprintf(err, len, "cannot read the roofline model %s: %s", path, strerror(-rc));
            return rc;
        }
        rc = -EINVAL;
    }
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        char *eq, *value;

        n_line++;
        total += l;
        if (total > RL_MAX_FILE || (l > RL_MAX_LINE && line[l - 1] != '\n')) {
            snprintf(err, len, "%s:%d: file or line too long for a roofline model", path, n_line);
            goto close_file;
        }
        if (l && line[l - 1] == '\n')
            line[--l] = 0;
        if (l == 0 || line[0] == '#')
            continue;
        eq = strchr(line, '=');
        if (!eq) {
            snprintf(err, len, "%s:%d: expected key=value", path, n_line);
            goto close_file;
        }
        *eq = 0;
        value = eq + 1;
        for (k = 0; rl_keys[k] && strcmp(rl_keys[k], line) != 0; k++)
            ;
        if (!rl_keys[k] || seen[k]) {
            snprintf(err, len, "%s:%d: %s key '%s'", path, n_line, rl_keys[k] ? "repeated" : "unknown",
                     line);
            goto close_file;
        }
        seen[k] = 1;
        if (k == 10 || k == 11) {
            int *count = k == 10 ? &out->n_vf : &n_v;

            if (rl_list(value, k == 10 ? out->vf_mhz : out->vf_v, count) < 0) {
                snprintf(err, len, "%s:%d: %s must be 1..%d comma-separated numbers", path, n_line,
                         line, GC_ROOFLINE_MAX_VF);
                goto close_file;
            }
        } else if (rl_number(value, k == 0 ? &version : scalar[k]) < 0 ||
                   (k > 0 && *scalar[k] < 0.0)) {
            snprintf(err, len, "%s:%d: %s must be a finite number >= 0, got '%s'", path, n_line,
                     line, value);
            goto close_file;
        }
    }
    if (ferror(f)) {
        snprintf(err, len, "%s: read error", path);
        rc = -EIO;
        goto close_file;
    }
    for (k = 0; rl_keys[k]; k++)
        if (!seen[k]) {
            snprintf(err, len, "%s: missing key '%s'", path, rl_keys[k]);
            goto close_file;
        }
    if (version != 1.0) {
        snprintf(err, len, "%s: roofline format version %g, this build reads version 1", path,
                 version);
        goto close_file;
    }
    if (!(out->k_gauge > 0.0)) {
        snprintf(err, len, "%s: k_gauge must be > 0", path);
        goto close_file;
    }
    if (n_v != out->n_vf) {
        snprintf(err, len, "%s: vf_mhz and vf_v differ in length", path);
        goto close_file;
    }
    for (i = 0; i < out->n_vf; i++)
        if (!(out->vf_v[i] > 0.0) || (i > 0 && !(out->vf_mhz[i] > out->vf_mhz[i - 1]))) {
            snprintf(err, len, "%s: the V/f table needs ascending clocks and voltages > 0", path);
            goto close_file;
        }
    rc = 0;
close_file:
    fclose(f);
    return rc;
}

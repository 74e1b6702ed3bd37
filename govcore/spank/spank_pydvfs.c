/* spank_pydvfs.c - governed Slurm jobs: a SPANK plugin built from govcore's sources
 * (`make -C govcore spank`, where Slurm's spank.h is installed; docs/slurm.md).
 *
 *   srun|sbatch --dvfs=auto|online|MHZ|off [--dvfs-workload=model=..,layers=..,hidden=..,seq_len=..]
 *
 * In slurmstepd (as root, once per step and node) the step is governed from
 * slurm_spank_init_post_opt to slurm_spank_exit: the GPU's lock is taken (one owner per GPU),
 * the clock is pinned (auto: the board's built-in policy, mlg with a workload, else ffg; MHZ:
 * that clock, snapped to the table; online: nothing pinned, the job's own `pydvfs run --policy
 * online` searches), govcore's sampler integrates the rails, and at the step's end (normal, a
 * time-out, scancel, a killed task: slurmstepd outlives its tasks) the board is restored and the
 * node's energy written to slurm-JOB.STEP.NODE.dvfs.json in the job's submit folder. Where
 * slurmstepd itself dies, the lock dies with it and slurm_spank_job_epilog restores the board
 * from its saved state. A step started inside a governed step on the same node (srun inside a
 * governed batch script) only measures: the outer step owns the board.
 *
 * plugstack.conf arguments: sysfs_root=DIR, state_dir=DIR, lock_dir=DIR (each may hold %n, the
 * node's name: a test cluster gives every node its own fake board), default=MODE (the mode of a
 * job that gives no --dvfs), default_partitions=P1,P2 (the default only in these partitions),
 * rate_hz=HZ (the sampler's rate; 0: the sensor's).
 */
#include "govcore.h"
#include "lock.h"
#include "policy.h"
#include "sampler.h"

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

SPANK_PLUGIN(pydvfs, 1);

#define LOCK_WAIT_MS 2000
#define OWNER_FILE "spank-owner" /* in the state folder: the job whose step owns the board */

/* plugstack.conf's arguments (node patterns keep their %n) */
static char conf_sysfs_root[GC_PATH_MAX] = "/";
static char conf_state_dir[GC_PATH_MAX] = "";
static char conf_lock_dir[GC_PATH_MAX] = "";
static char conf_default[32] = "off";
static char conf_partitions[256] = "";
static double conf_rate_hz = 0.0;

/* the job's options */
static char opt_mode[32] = "";
static char opt_workload[1024] = "";

/* the step being governed (slurmstepd) */
static struct {
    int active;       /* 1 between init_post_opt and exit */
    int owner;        /* 1: this step pinned the board and holds its lock */
    int online;       /* 1: the job governs the board itself (--dvfs=online) */
    char root[GC_PATH_MAX];
    char mode[32];
    char node[GC_NAME_MAX];
    char state_dir[GC_PATH_MAX];
    const char *policy; /* what chose the clock: a policy's name, "pin", "online", "outer step" */
    uint64_t level_hz;  /* 0: nothing pinned */
    gc_board board;
    gc_lock lock;
    gc_sampler *sampler;
    gc_snapshot start;
    char err[GC_ERR_MAX];
} st;

/* A mode is off, auto, online or a clock (gc_parse_mhz's grammar). */
static int mode_check(const char *mode, char *err, size_t len)
{
    uint64_t hz;

    if (!strcmp(mode, "off") || !strcmp(mode, "auto") || !strcmp(mode, "online"))
        return 0;
    if (gc_parse_mhz(mode, strlen(mode), &hz) == 0)
        return 0;
    snprintf(err, len, "--dvfs: expected auto, online, off or a clock in MHz (%s), got '%s'",
             GC_MHZ_GRAMMAR, mode);
    return -EINVAL;
}

/* Parse a workload's text into w: the one workload grammar (gc_workload_parse and
 * gc_workload_check, policy.c), as `govcore apply --workload`, the daemon and pydvfs read it. */
static int workload_parse(const char *text, gc_workload *w, char *err, size_t len)
{
    char model[GC_MODEL_NAME_MAX];
    unsigned have = 0;

    *w = (gc_workload){0, -1.0, 0, 0, 0, GC_PEFT_NONE, 0, 0, 0, GC_PRECISION_FP32, 0, 0};
    if (gc_workload_parse(text, w, model, sizeof model, &have, err, len) < 0)
        return -EINVAL;
    if ((have & GC_WORKLOAD_REQUIRED) != GC_WORKLOAD_REQUIRED) {
        snprintf(err, len, "--dvfs-workload needs model=..,layers=..,hidden=..,seq_len=..");
        return -EINVAL;
    }
    return gc_workload_check(w, err, len) < 0 ? -EINVAL : 0;
}

static int opt_dvfs_cb(int val, const char *optarg, int remote)
{
    char err[GC_ERR_MAX];

    (void)val;
    (void)remote;
    if (!optarg || mode_check(optarg, err, sizeof err) < 0) {
        slurm_error("pydvfs: %s", optarg ? err : "--dvfs needs a value");
        return -1;
    }
    snprintf(opt_mode, sizeof opt_mode, "%s", optarg);
    return 0;
}

static int opt_workload_cb(int val, const char *optarg, int remote)
{
    char err[GC_ERR_MAX];
    gc_workload w;

    (void)val;
    (void)remote;
    if (!optarg || strlen(optarg) >= sizeof opt_workload || workload_parse(optarg, &w, err, sizeof err) < 0) {
        slurm_error("pydvfs: %s", optarg && strlen(optarg) < sizeof opt_workload ? err
                                                                                 : "--dvfs-workload: missing or too long");
        return -1;
    }
    snprintf(opt_workload, sizeof opt_workload, "%s", optarg);
    return 0;
}

static struct spank_option options[] = {
    {"dvfs", "auto|online|MHZ|off",
     "GPU clock of the job's steps on each node (pydvfs): auto = the board's policy, online = "
     "the job searches it, MHZ = that clock, off = the board's own governor",
     1, 0, opt_dvfs_cb},
    {"dvfs-workload", "model=..,layers=..,hidden=..,seq_len=..",
     "the workload --dvfs=auto decides for (pydvfs's --workload spelling)", 1, 0, opt_workload_cb},
    SPANK_OPTIONS_TABLE_END};

/* pattern with every %n replaced by node; -ENAMETOOLONG if it does not fit. */
static int expand(const char *pattern, const char *node, char *out, size_t len)
{
    size_t o = 0;
    const char *p;

    for (p = pattern; *p; p++) {
        const char *add = p[0] == '%' && p[1] == 'n' ? node : NULL;
        size_t n = add ? strlen(add) : 1;

        if (o + n >= len)
            return -ENAMETOOLONG;
        memcpy(out + o, add ? add : p, n);
        o += n;
        p += add ? 1 : 0;
    }
    out[o] = '\0';
    return 0;
}

static int parse_args(int ac, char **av)
{
    int i;

    for (i = 0; i < ac; i++) {
        const char *a = av[i], *eq = strchr(a, '=');
        char *end;
        size_t klen = eq ? (size_t)(eq - a) : 0;
        struct { const char *key; char *dst; size_t len; } text[] = {
            {"sysfs_root", conf_sysfs_root, sizeof conf_sysfs_root},
            {"state_dir", conf_state_dir, sizeof conf_state_dir},
            {"lock_dir", conf_lock_dir, sizeof conf_lock_dir},
            {"default", conf_default, sizeof conf_default},
            {"default_partitions", conf_partitions, sizeof conf_partitions},
        };
        size_t k;
        int found = 0;

        for (k = 0; eq && k < sizeof text / sizeof text[0]; k++)
            if (strlen(text[k].key) == klen && !strncmp(a, text[k].key, klen)) {
                if (strlen(eq + 1) >= text[k].len) {
                    slurm_error("pydvfs: plugstack.conf: %s is too long", text[k].key);
                    return -1;
                }
                snprintf(text[k].dst, text[k].len, "%s", eq + 1);
                found = 1;
            }
        if (!found && eq && klen == 7 && !strncmp(a, "rate_hz", 7)) {
            conf_rate_hz = strtod(eq + 1, &end);
            found = *end == '\0' && end != eq + 1 && conf_rate_hz >= 0;
        }
        if (!found) {
            slurm_error("pydvfs: plugstack.conf: unknown or bad argument '%s' (known: sysfs_root=, "
                        "state_dir=, lock_dir=, default=, default_partitions=, rate_hz=)", a);
            return -1;
        }
    }
    if (!strcmp(conf_default, "off") || !strcmp(conf_default, "auto"))
        return 0;
    slurm_error("pydvfs: plugstack.conf: default= is auto or off, not '%s'", conf_default);
    return -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    size_t i;

    if (parse_args(ac, av) < 0)
        return -1;
    for (i = 0; options[i].name; i++)
        if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
            return -1;
    return 0;
}

/* The node's name in slurmstepd / the epilog: slurmd puts it in their own environment (several
 * slurmd may share a host, so not the host name). Never the job's environment: an srun inside a
 * batch script carries the batch node's SLURMD_NODENAME to every node. */
static int node_name(char *out, size_t len)
{
    const char *env = getenv("SLURMD_NODENAME");

    if (env && *env) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    return gethostname(out, len) == 0 ? 0 : -errno;
}

/* Open this node's board with the plugstack's folders; the lock folder goes to govcore's lock
 * code through its one setting, $PYDVFS_LOCK_DIR (this process is slurmstepd's or the epilog's
 * own, never the job's). */
static int open_node_board(gc_board *b, char *state_dir, size_t state_len, char *node,
                           size_t node_len)
{
    char lock_dir[GC_PATH_MAX];
    int rc;

    if ((rc = node_name(node, node_len)) < 0)
        return rc;
    if (expand(conf_sysfs_root, node, st.root, sizeof st.root) < 0 ||
        expand(conf_state_dir, node, state_dir, state_len) < 0 ||
        expand(conf_lock_dir, node, lock_dir, sizeof lock_dir) < 0)
        return -ENAMETOOLONG;
    if (*lock_dir && setenv(GC_LOCK_DIR_ENV, lock_dir, 1) < 0)
        return -errno;
    if (!*state_dir && (rc = gc_default_state_dir(state_dir, state_len)) < 0)
        return rc;
    return gc_board_open(b, st.root);
}

/* The job's mode: its --dvfs, else plugstack's default where it applies to the partition. */
static void job_mode(spank_t sp, char *out, size_t len)
{
    char part[128] = "", list[sizeof conf_partitions], *p, *save = NULL;

    if (*opt_mode) {
        snprintf(out, len, "%s", opt_mode);
        return;
    }
    snprintf(out, len, "%s", conf_default);
    if (!*conf_partitions)
        return;
    spank_getenv(sp, "SLURM_JOB_PARTITION", part, sizeof part);
    snprintf(list, sizeof list, "%s", conf_partitions);
    for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!strcmp(p, part))
            return;
    snprintf(out, len, "off");
}

/* 1 if the board's lock is held by another step of this job (its owner file names the job). */
static int owned_by_job(uint32_t job)
{
    char path[GC_PATH_MAX + 32], text[32] = "";
    FILE *f;

    snprintf(path, sizeof path, "%s/" OWNER_FILE, st.state_dir);
    if (!(f = fopen(path, "re")))
        return 0;
    if (!fgets(text, sizeof text, f))
        text[0] = '\0';
    fclose(f);
    return strtoul(text, NULL, 10) == job;
}

static void owner_mark(uint32_t job, int set)
{
    char path[GC_PATH_MAX + 32];
    FILE *f;

    snprintf(path, sizeof path, "%s/" OWNER_FILE, st.state_dir);
    if (!set) {
        unlink(path);
    } else if (gc_mkdir_p(st.state_dir) == 0 && (f = fopen(path, "we"))) {
        fprintf(f, "%u\n", job);
        fclose(f);
    }
}

/* Pin the board as the mode says (the lock is held). 0 or -errno with st.board.err. */
static int govern(void)
{
    gc_decision d;
    gc_workload w;
    uint64_t hz;
    int rc, policy;

    if (strcmp(st.mode, "auto")) { /* a clock */
        gc_parse_mhz(st.mode, strlen(st.mode), &hz);
        if ((rc = gc_check_near_table(&st.board, hz)) < 0)
            return rc;
        st.policy = "pin";
        return gc_pin_hz(&st.board, hz, st.state_dir, &st.level_hz);
    }
    if (*opt_workload && workload_parse(opt_workload, &w, st.board.err, sizeof st.board.err) < 0)
        return -EINVAL;
    policy = *opt_workload ? GC_POLICY_MLG : GC_POLICY_FFG;
    st.policy = gc_policy_name(policy);
    rc = gc_apply(&st.board, gc_builtin_for(st.board.board_id, NULL), NULL, policy, *opt_workload ? &w : NULL,
                  st.state_dir, &d);
    st.level_hz = rc == 0 ? d.level_hz : 0;
    return rc;
}

/* Take the board's lock and pin it as the mode says; a step inside a step of the same job that
 * owns the board only measures. 0, or -1 with the error logged. */
static int take_board(uint32_t job)
{
    int rc = gc_lock_acquire(&st.board, 0, &st.lock);

    if (rc == -EBUSY && owned_by_job(job)) {
        st.policy = "outer step";
        return 0;
    }
    if (rc == -EBUSY)
        rc = gc_lock_acquire(&st.board, LOCK_WAIT_MS, &st.lock);
    if (rc < 0) {
        slurm_error("pydvfs: %s: %s", st.node, st.board.err[0] ? st.board.err : strerror(-rc));
        return -1;
    }
    st.owner = 1;
    if ((rc = govern()) < 0) {
        int restored;

        slurm_error("pydvfs: %s: --dvfs=%s: %s", st.node, st.mode, st.board.err[0] ? st.board.err : strerror(-rc));
        gc_restore(&st.board, st.state_dir, &restored);
        gc_lock_release(&st.lock);
        return -1;
    }
    owner_mark(job, 1);
    slurm_info("pydvfs: %s: job %u governed: %s, %g MHz", st.node, job, st.policy, gc_hz_to_mhz(st.level_hz));
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    gc_sampler_config cfg = {conf_rate_hz, 0, 1024};
    uint32_t job = 0, step = 0;
    int rc;

    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_ALLOCATOR || spank_context() == S_CTX_LOCAL) {
        char cwd[GC_PATH_MAX];

        /* the epilog finds the energy files through SPANK_PYDVFS_ENERGY_DIR */
        if (*opt_mode && strcmp(opt_mode, "off") && getcwd(cwd, sizeof cwd))
            spank_job_control_setenv(sp, "PYDVFS_ENERGY_DIR", cwd, 1);
        return 0;
    }
    if (!spank_remote(sp))
        return 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    job_mode(sp, st.mode, sizeof st.mode);
    if (!strcmp(st.mode, "off") || step == SLURM_EXTERN_CONT)
        return 0;
    gc_lock_init(&st.lock);
    if ((rc = open_node_board(&st.board, st.state_dir, sizeof st.state_dir, st.node, sizeof st.node)) < 0) {
        slurm_error("pydvfs: %s: no board to govern: %s", st.node, st.board.err[0] ? st.board.err : strerror(-rc));
        return -1;
    }
    if (!strcmp(st.mode, "online")) {
        /* the job's own `pydvfs run --policy online` governs: it is given this node's board and
         * folders (as root; another user's job governs through `govcore serve`), and the step's
         * end restores whatever it leaves */
        const char *lock_dir = getenv(GC_LOCK_DIR_ENV);

        if (spank_setenv(sp, "PYDVFS_SYSFS_ROOT", st.root, 1) != ESPANK_SUCCESS ||
            spank_setenv(sp, "PYDVFS_STATE_DIR", st.state_dir, 1) != ESPANK_SUCCESS ||
            (lock_dir && spank_setenv(sp, GC_LOCK_DIR_ENV, lock_dir, 1) != ESPANK_SUCCESS)) {
            slurm_error("pydvfs: %s: cannot set the job's environment", st.node);
            return -1;
        }
        st.online = 1;
        st.policy = "online";
    } else if ((rc = take_board(job)) < 0) {
        return -1;
    }
    st.active = 1;
    if ((rc = gc_sampler_create(&st.sampler, &st.board, &cfg)) < 0 || (rc = gc_sampler_start(st.sampler)) < 0 ||
        (rc = gc_sampler_snapshot(st.sampler, &st.start)) < 0) {
        snprintf(st.err, sizeof st.err, "no energy: %s", st.board.err[0] ? st.board.err : strerror(-rc));
        gc_sampler_free(st.sampler);
        st.sampler = NULL;
    }
    return 0;
}

/* A JSON string of plain text (names and messages: quotes and controls dropped). */
static void json_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20)
            fputc(*s, f);
    fputc('"', f);
}

/* The energy record, one JSON object (docs/slurm.md). *text is malloc'd; NULL if out of memory. */
static char *energy_json(uint32_t job, const char *stepname, const gc_window *w, int restored)
{
    char *text = NULL;
    size_t len = 0;
    int r, known;
    FILE *f = open_memstream(&text, &len);

    if (!f)
        return NULL;
    fprintf(f, "{\"node\": ");
    json_text(f, st.node);
    fprintf(f, ", \"job\": %u, \"step\": \"%s\", \"mode\": ", job, stepname);
    json_text(f, st.mode);
    fprintf(f, ", \"policy\": ");
    json_text(f, st.policy ? st.policy : "none");
    fprintf(f, ", \"board\": ");
    json_text(f, st.board.board_id);
    fprintf(f, ", \"model\": ");
    json_text(f, st.board.model);
    fprintf(f, ", \"level_mhz\": %.6g, \"governed\": %s, \"restored\": %s", gc_hz_to_mhz(st.level_hz),
            st.owner && !st.online ? "true" : "false", restored ? "true" : "false");
    if (w) {
        fprintf(f, ", \"duration_s\": %.6f, \"samples\": %llu", w->duration_ns / 1e9,
                (unsigned long long)w->samples);
        for (r = 0; r < GC_N_ROLES; r++) {
            double j = gc_window_role_j(st.sampler, w, r, &known);

            fprintf(f, ", \"%s_j\": ", gc_role_names[r]);
            if (known)
                fprintf(f, "%.6f", j);
            else
                fprintf(f, "null");
        }
    }
    fprintf(f, ", \"error\": ");
    json_text(f, st.err);
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* slurm-JOB.STEP.NODE.dvfs.json in the job's submit folder (beside slurm-JOB.out), created, never
 * overwritten, by a child running as the job's user: the folder is the user's to name, so root
 * writes nothing there. */
static void write_energy(spank_t sp, uint32_t job, const char *stepname, const char *text)
{
    char dir[GC_PATH_MAX] = "", path[GC_PATH_MAX * 2];
    uid_t uid = 0;
    gid_t gid = 0;
    int status = 0;
    pid_t pid;

    if (spank_getenv(sp, "SLURM_SUBMIT_DIR", dir, sizeof dir) != ESPANK_SUCCESS || !*dir)
        return;
    snprintf(path, sizeof path, "%s/slurm-%u.%s.%s.dvfs.json", dir, job, stepname, st.node);
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return;
    if ((pid = fork()) == 0) { /* async-signal-safe calls only: this process has threads */
        size_t n = strlen(text);
        int fd;

        if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
            _exit(EPERM);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            _exit(errno & 0x7f);
        _exit(write(fd, text, n) == (ssize_t)n && close(fd) == 0 ? 0 : EIO);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        slurm_error("pydvfs: %s: cannot write %s: %s", st.node, path,
                    pid > 0 && WIFEXITED(status) ? strerror(WEXITSTATUS(status)) : "the writer failed");
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    uint32_t job = 0, step = 0;
    gc_snapshot end;
    gc_window w;
    char *text, stepname[16];
    int have_w = 0, restored = 0, rc;

    (void)ac;
    (void)av;
    if (!spank_remote(sp) || !st.active)
        return 0;
    st.active = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    if (st.sampler && gc_sampler_snapshot(st.sampler, &end) == 0 && gc_window_diff(&st.start, &end, &w) == 0)
        have_w = 1;
    if (st.online && gc_lock_acquire(&st.board, LOCK_WAIT_MS, &st.lock) == 0)
        st.owner = 1; /* the job's governor has ended: what it left is put back */
    if (st.owner) {
        if ((rc = gc_restore(&st.board, st.state_dir, &restored)) < 0) {
            snprintf(st.err, sizeof st.err, "restore: %s", st.board.err[0] ? st.board.err : strerror(-rc));
            slurm_error("pydvfs: %s: %s", st.node, st.err);
        }
        owner_mark(job, 0);
        gc_lock_release(&st.lock);
    }
    if (step == SLURM_BATCH_SCRIPT)
        snprintf(stepname, sizeof stepname, "batch");
    else
        snprintf(stepname, sizeof stepname, "%u", step);
    text = energy_json(job, stepname, have_w ? &w : NULL, restored);
    gc_sampler_free(st.sampler); /* its thread stopped before write_energy forks */
    st.sampler = NULL;
    if (text)
        write_energy(sp, job, stepname, text);
    free(text);
    return 0;
}

/* The job's end on each node: where a step's slurmstepd died without its exit hook, its lock
 * died with it and its saved state is still there; put it back. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    char state_dir[GC_PATH_MAX], node[GC_NAME_MAX];
    gc_lock lk;
    int restored = 0, rc;

    (void)sp;
    gc_lock_init(&lk);
    /* this process (slurmstepd's epilog) has not run slurm_spank_init: read the arguments here */
    if (parse_args(ac, av) < 0)
        return -1;
    if (open_node_board(&st.board, state_dir, sizeof state_dir, node, sizeof node) < 0)
        return 0; /* no board here: nothing to put back */
    if (gc_lock_acquire(&st.board, 0, &lk) < 0)
        return 0; /* someone governs it: theirs to restore */
    snprintf(st.state_dir, sizeof st.state_dir, "%s", state_dir);
    owner_mark(0, 0);
    rc = gc_restore(&st.board, state_dir, &restored);
    gc_lock_release(&lk);
    if (rc < 0)
        slurm_error("pydvfs: %s: epilog restore: %s", node, st.board.err[0] ? st.board.err : strerror(-rc));
    else if (restored)
        slurm_info("pydvfs: %s: the epilog restored the board a dead step left pinned", node);
    return 0;
}

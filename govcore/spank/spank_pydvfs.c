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
 * A step the node cannot govern as asked never fails its launch (a failed batch launch drains the
 * node and tells the user nothing): it starts, and its tasks (slurm_spank_task_init, in the task
 * as the user, before the job's program) write the reason to the job's stderr and exit non-zero.
 * A job governed only by plugstack's default= runs ungoverned instead, saying why. What govcore
 * says (a decision that keeps the board's own governor, a restore's warning) goes to the job's
 * output and the energy file.
 *
 * plugstack.conf arguments: sysfs_root=DIR, state_dir=DIR, lock_dir=DIR (each may hold %n, the
 * node's name: a test cluster gives every node its own fake board), default=MODE (the mode of a
 * job that gives no --dvfs), default_partitions=P1,P2 (the default only in these partitions),
 * rate_hz=HZ (the sampler's rate; 0: the sensor's), record=PYDVFS (the pydvfs program: at a
 * governed batch step's end, while the job still runs, `PYDVFS slurm-energy --record JOB --dir
 * SUBMIT_DIR` keeps the job's energy summary in its AdminComment).
 */
#include "govcore.h"
#include "lock.h"
#include "policy.h"
#include "sampler.h"

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

SPANK_PLUGIN(pydvfs, 1);

#define LOCK_WAIT_MS 2000
#define OWNER_FILE "spank-owner" /* in the state folder: the job whose step owns the board (written
                                  * before its pin; the epilog restores only its own job's) */
#define MAX_NOTES 6
/* The exit status of a refused step's tasks */
#define EXIT_REFUSED 2 /* the clock asked for is not one this node's board takes (bad input) */
#define EXIT_NODE 1    /* the node cannot govern: no board, a pin made outside Slurm, a failed pin */
#define EXIT_BUSY 75   /* EX_TEMPFAIL: another job's step governs the GPU */

/* plugstack.conf's arguments (node patterns keep their %n) */
static char conf_sysfs_root[GC_PATH_MAX] = "/";
static char conf_state_dir[GC_PATH_MAX] = "";
static char conf_lock_dir[GC_PATH_MAX] = "";
static char conf_default[32] = "off";
static char conf_partitions[256] = "";
static double conf_rate_hz = 0.0;
static char conf_record[GC_PATH_MAX] = "";
#define RECORD_WAIT_MS 30000 /* the record's program: killed past this (the job waits for it) */

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
    int asked;                /* 1: the job gave --dvfs; 0: plugstack's default governs it */
    int refuse_rc;            /* not 0: the step is refused, its tasks exit with this status */
    char refused[GC_ERR_MAX]; /* why the step was not governed ("" if it was) */
    char kept[GC_ERR_MAX];    /* gc_kept_reason of a decision that left the board to itself */
    int n_notes;              /* what govcore said: the job's stderr and the energy file */
    char notes[MAX_NOTES][GC_ERR_MAX];
} st;

/* Something govcore said about this step, for the job's output and the energy file. */
static void note(const char *fmt, ...)
{
    va_list ap;

    if (st.n_notes >= MAX_NOTES)
        return;
    va_start(ap, fmt);
    vsnprintf(st.notes[st.n_notes++], GC_ERR_MAX, fmt, ap);
    va_end(ap);
}

/* The step is not governed, and why. A job that asked (--dvfs) is refused: its tasks say so and
 * exit with rc (slurm_spank_task_init); a job under plugstack's default runs ungoverned. */
static void not_governed(int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(st.refused, sizeof st.refused, fmt, ap);
    va_end(ap);
    if (st.asked)
        st.refuse_rc = rc;
    slurm_info("pydvfs: %s: --dvfs=%s%s not governed: %s", st.node, st.mode, st.asked ? "" : " (default=)",
               st.refused);
}

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

/* At submission, a clock no board of govcore's table takes: above every table's top level by
 * more than one level step (gc_check_near_table's rule, on the built-in policies' tables). The
 * node checks the clock against its own board again. 0, or -EINVAL with err. */
static int clock_in_some_table(const char *mode, char *err, size_t len)
{
    double mhz, top = 0, limit = 0;
    uint64_t hz;
    int i;

    if (gc_parse_mhz(mode, strlen(mode), &hz) < 0)
        return 0; /* not a clock */
    for (i = 0; i < gc_n_builtin_policies; i++) {
        const gc_tree_model *m = gc_builtin_policies[i].tree;
        int n = m ? m->n_levels : 0;

        if (n >= 2 && 2 * m->levels_mhz[n - 1] - m->levels_mhz[n - 2] > limit) {
            top = m->levels_mhz[n - 1];
            limit = 2 * top - m->levels_mhz[n - 2];
        }
    }
    mhz = gc_hz_to_mhz(hz);
    if (limit <= 0 || mhz <= limit)
        return 0;
    snprintf(err, len, "--dvfs=%s: %g MHz is above the top GPU clock of every board in govcore's table "
             "(the highest is %g MHz) by more than one level", mode, mhz, top);
    return -EINVAL;
}

static int opt_dvfs_cb(int val, const char *optarg, int remote)
{
    char err[GC_ERR_MAX];

    (void)val;
    if (!optarg || mode_check(optarg, err, sizeof err) < 0 ||
        (!remote && clock_in_some_table(optarg, err, sizeof err) < 0)) {
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
            {"record", conf_record, sizeof conf_record},
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
            /* 0 (the sensor's rate) or a rate the sampler takes: nothing that integrates nothing */
            conf_rate_hz = strtod(eq + 1, &end);
            found = *end == '\0' && end != eq + 1 && isfinite(conf_rate_hz) &&
                    (conf_rate_hz == 0 || (conf_rate_hz >= GC_SAMPLER_MIN_RATE_HZ &&
                                           conf_rate_hz <= GC_SAMPLER_MAX_RATE_HZ));
            if (!found) {
                slurm_error("pydvfs: plugstack.conf: rate_hz= is 0 (the sensor's rate) or %g..%g samples "
                            "a second, not '%s'", GC_SAMPLER_MIN_RATE_HZ, GC_SAMPLER_MAX_RATE_HZ, eq + 1);
                return -1;
            }
        }
        if (!found) {
            slurm_error("pydvfs: plugstack.conf: unknown or bad argument '%s' (known: sysfs_root=, "
                        "state_dir=, lock_dir=, default=, default_partitions=, rate_hz=, record=)", a);
            return -1;
        }
    }
    if (conf_sysfs_root[0] != '/') {
        slurm_error("pydvfs: plugstack.conf: sysfs_root= is an absolute folder (%%n: the node's name), "
                    "not '%s'", conf_sysfs_root);
        return -1;
    }
    if ((*conf_state_dir && *conf_state_dir != '/') || (*conf_lock_dir && *conf_lock_dir != '/')) {
        slurm_error("pydvfs: plugstack.conf: state_dir= and lock_dir= are absolute folders, not '%s'",
                    *conf_state_dir && *conf_state_dir != '/' ? conf_state_dir : conf_lock_dir);
        return -1;
    }
    if (*conf_record && *conf_record != '/') {
        slurm_error("pydvfs: plugstack.conf: record= is the pydvfs program's absolute path, not '%s'", conf_record);
        return -1;
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

/* The job named by the board's owner file (0: none): the job whose step holds, or last held, the
 * board's lock and pinned it. */
static uint32_t owner_job(const char *state_dir)
{
    char path[GC_PATH_MAX + 32], text[32] = "";
    FILE *f;

    snprintf(path, sizeof path, "%s/" OWNER_FILE, state_dir);
    if (!(f = fopen(path, "re")))
        return 0;
    if (!fgets(text, sizeof text, f))
        text[0] = '\0';
    fclose(f);
    return (uint32_t)strtoul(text, NULL, 10);
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

/* Pin the board as the mode says (the lock is held). 0 or -errno with st.board.err; what govcore
 * says about it (a decision that keeps the board's own governor, a pin's warning) in st. */
static int govern(void)
{
    const gc_tree_model *m;
    char outside[GC_ERR_MAX];
    gc_decision d;
    gc_workload w;
    uint64_t hz;
    int rc, policy;

    st.board.warn[0] = '\0';
    if (strcmp(st.mode, "auto")) { /* a clock */
        gc_parse_mhz(st.mode, strlen(st.mode), &hz);
        if ((rc = gc_check_near_table(&st.board, hz)) < 0)
            return rc;
        st.policy = "pin";
        rc = gc_pin_hz(&st.board, hz, st.state_dir, &st.level_hz);
        if (rc == 0 && st.board.clamped_from_hz)
            note("%g MHz lowered to %g MHz, the power mode's GPU cap", gc_hz_to_mhz(st.board.clamped_from_hz),
                 gc_hz_to_mhz(st.level_hz));
    } else {
        if (*opt_workload && workload_parse(opt_workload, &w, st.board.err, sizeof st.board.err) < 0)
            return -EINVAL;
        policy = *opt_workload ? GC_POLICY_MLG : GC_POLICY_FFG;
        st.policy = gc_policy_name(policy);
        m = gc_builtin_for(st.board.board_id, NULL);
        rc = gc_apply(&st.board, m, NULL, policy, *opt_workload ? &w : NULL, st.state_dir, &d);
        st.level_hz = rc == 0 ? d.level_hz : 0;
        if (rc == 0) {
            gc_kept_reason(&d, st.kept, sizeof st.kept);
            gc_outside_reason(m, policy, *opt_workload ? &w : NULL, outside, sizeof outside);
            if (*outside)
                note("%s", outside);
            if (d.clamped_from_hz)
                note("%g MHz lowered to %g MHz, the power mode's GPU cap", gc_hz_to_mhz(d.clamped_from_hz),
                     gc_hz_to_mhz(d.level_hz));
        }
    }
    if (rc == 0 && st.board.warn[0])
        note("%s", st.board.warn);
    return rc;
}

/* Take the board's lock and pin it as the mode says; a step inside a step of the same job that
 * owns the board only measures. A board this step cannot govern: not_governed says why. */
static void take_board(uint32_t job)
{
    gc_clock_state saved;
    uint32_t holder;
    int rc = gc_lock_acquire(&st.board, 0, &st.lock);

    if (rc == -EBUSY && owner_job(st.state_dir) == job) {
        st.policy = "outer step";
        return;
    }
    if (rc == -EBUSY)
        rc = gc_lock_acquire(&st.board, LOCK_WAIT_MS, &st.lock);
    if (rc == -EBUSY && (holder = owner_job(st.state_dir)) != 0) {
        not_governed(EXIT_BUSY, "the GPU is governed by job %u's step (waited %g s): run on another node, "
                     "ask for the node whole (--exclusive), or --dvfs=off", holder, LOCK_WAIT_MS / 1e3);
        return;
    }
    if (rc < 0) {
        not_governed(rc == -EBUSY ? EXIT_BUSY : EXIT_NODE, "the GPU's lock: %s",
                     st.board.err[0] ? st.board.err : strerror(-rc));
        return;
    }
    /* a saved state no step of this job made: a pin made outside Slurm (root's `pydvfs pin`);
     * a step's restore would undo it */
    rc = gc_state_load(&st.board, st.state_dir, &saved);
    if (rc != -ENOENT && owner_job(st.state_dir) != job) {
        not_governed(EXIT_NODE, rc == 0 ? "the board holds a pin made outside Slurm (its saved state in %s): "
                     "it stays; `pydvfs restore` as root ends it" : "the board's saved state in %s: %s",
                     st.state_dir, st.board.err);
        gc_lock_release(&st.lock);
        return;
    }
    st.owner = 1;
    owner_mark(job, 1); /* before the pin: the epilog restores only a pin its own job made */
    if ((rc = govern()) < 0) {
        int restored;

        not_governed(rc == -EINVAL ? EXIT_REFUSED : EXIT_NODE, "%s", st.board.err[0] ? st.board.err : strerror(-rc));
        gc_restore(&st.board, st.state_dir, &restored);
        owner_mark(job, 0);
        gc_lock_release(&st.lock);
        st.owner = 0;
        return;
    }
    slurm_info("pydvfs: %s: job %u governed: %s, %g MHz%s%s", st.node, job, st.policy, gc_hz_to_mhz(st.level_hz),
               st.kept[0] ? "; " : "", st.kept);
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

        /* the epilog finds the energy files through SPANK_PYDVFS_ENERGY_DIR: a job that asks
         * for a mode, or one that plugstack's default may govern */
        if (((*opt_mode && strcmp(opt_mode, "off")) || (!*opt_mode && strcmp(conf_default, "off"))) &&
            getcwd(cwd, sizeof cwd))
            spank_job_control_setenv(sp, "PYDVFS_ENERGY_DIR", cwd, 1);
        return 0;
    }
    if (!spank_remote(sp))
        return 0;
    /* From here on nothing fails the step's launch (a failed batch launch drains the node):
     * what cannot be governed is said by the step's tasks (slurm_spank_task_init). */
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    job_mode(sp, st.mode, sizeof st.mode);
    st.asked = *opt_mode != '\0';
    if (!strcmp(st.mode, "off") || step == SLURM_EXTERN_CONT)
        return 0;
    gc_lock_init(&st.lock);
    st.active = 1;
    if ((rc = open_node_board(&st.board, st.state_dir, sizeof st.state_dir, st.node, sizeof st.node)) < 0) {
        not_governed(EXIT_NODE, "no board to govern: %s", st.board.err[0] ? st.board.err : strerror(-rc));
        return 0;
    }
    if (st.board.warning[0])
        note("%s", st.board.warning);
    if (!strcmp(st.mode, "online")) {
        /* the job's own `pydvfs run --policy online` governs: it is given this node's board and
         * folders (as root; another user's job governs through `govcore serve`), and the step's
         * end restores whatever it leaves */
        const char *lock_dir = getenv(GC_LOCK_DIR_ENV);
        gc_clock_state saved;

        if ((rc = gc_state_load(&st.board, st.state_dir, &saved)) != -ENOENT) {
            not_governed(EXIT_NODE, "the board holds a pin made outside this step (its saved state in %s): "
                         "it stays", st.state_dir);
        } else if (spank_setenv(sp, "PYDVFS_SYSFS_ROOT", st.root, 1) != ESPANK_SUCCESS ||
                   spank_setenv(sp, "PYDVFS_STATE_DIR", st.state_dir, 1) != ESPANK_SUCCESS ||
                   (lock_dir && spank_setenv(sp, GC_LOCK_DIR_ENV, lock_dir, 1) != ESPANK_SUCCESS)) {
            not_governed(EXIT_NODE, "cannot set the job's environment");
        } else {
            st.online = 1;
            st.policy = "online";
        }
    } else {
        take_board(job);
    }
    if (st.refuse_rc)
        return 0; /* its tasks exit at once: nothing to measure */
    if ((rc = gc_sampler_create(&st.sampler, &st.board, &cfg)) < 0 || (rc = gc_sampler_start(st.sampler)) < 0 ||
        (rc = gc_sampler_snapshot(st.sampler, &st.start)) < 0) {
        snprintf(st.err, sizeof st.err, "no energy: %s", st.board.err[0] ? st.board.err : strerror(-rc));
        gc_sampler_free(st.sampler);
        st.sampler = NULL;
    }
    return 0;
}

static int energy_path(spank_t sp, char *out, size_t len);

/* In each task, as the job's user, before the job's program: the first task of the step on this
 * node writes what was said about the step to the job's stderr (and that its energy file's name
 * is taken, where it is); a refused step's tasks exit. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    char path[GC_PATH_MAX * 2];
    struct stat sb;
    int task = 0, i;

    (void)ac;
    (void)av;
    if (!spank_remote(sp) || !st.active)
        return 0;
    if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS)
        task = 0;
    if (task == 0) {
        for (i = 0; i < st.n_notes; i++)
            dprintf(STDERR_FILENO, "pydvfs: %s: %s\n", st.node, st.notes[i]);
        if (st.kept[0])
            dprintf(STDERR_FILENO, "pydvfs: %s: --dvfs=%s (%s) %s\n", st.node, st.mode, st.policy, st.kept);
        if (st.refused[0])
            dprintf(STDERR_FILENO, "pydvfs: %s: --dvfs=%s%s: not governed: %s%s\n", st.node, st.mode,
                    st.asked ? "" : " (the partition's default)", st.refused,
                    st.refuse_rc ? "; the step's tasks did not start" : "; the step runs ungoverned");
        if (!st.refuse_rc && energy_path(sp, path, sizeof path) == 0 && lstat(path, &sb) == 0)
            dprintf(STDERR_FILENO, "pydvfs: %s: %s is there already (not this step's): this step's energy "
                    "cannot be recorded there\n", st.node, path);
    }
    if (st.refuse_rc)
        _exit(st.refuse_rc);
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
    fprintf(f, ", \"not_governed\": ");
    if (st.refused[0])
        json_text(f, st.refused);
    else
        fprintf(f, "null");
    fprintf(f, ", \"refused\": %s, \"kept_reason\": ", st.refuse_rc ? "true" : "false");
    if (st.kept[0])
        json_text(f, st.kept);
    else
        fprintf(f, "null");
    fprintf(f, ", \"warnings\": [");
    for (r = 0; r < st.n_notes; r++) {
        fprintf(f, r ? ", " : "");
        json_text(f, st.notes[r]);
    }
    fprintf(f, "]");
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

/* The step's energy file: slurm-JOB.STEP.NODE.dvfs.json in the job's submit folder. 0 or -1. */
static int energy_path(spank_t sp, char *out, size_t len)
{
    char dir[GC_PATH_MAX] = "";
    uint32_t job = 0, step = 0;

    if (spank_getenv(sp, "SLURM_SUBMIT_DIR", dir, sizeof dir) != ESPANK_SUCCESS || !*dir ||
        spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
        return -1;
    if (step == SLURM_BATCH_SCRIPT)
        snprintf(out, len, "%s/slurm-%u.batch.%s.dvfs.json", dir, job, st.node);
    else
        snprintf(out, len, "%s/slurm-%u.%u.%s.dvfs.json", dir, job, step, st.node);
    return 0;
}

/* The job's supplementary groups, as its tasks have them (Slurm's list, else the user's from
 * the group database): *n of them in out. */
static void job_groups(spank_t sp, uid_t uid, gid_t gid, gid_t *out, int *n)
{
    gid_t *gids = NULL;
    int count = 0, max = *n;
    struct passwd pw, *found = NULL;
    char buf[4096];

    if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &count) == ESPANK_SUCCESS && gids && count > 0) {
        *n = count < max ? count : max;
        memcpy(out, gids, (size_t)*n * sizeof *out);
        return;
    }
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found &&
        getgrouplist(pw.pw_name, gid, out, n) >= 0)
        return;
    out[0] = gid;
    *n = 1;
}

/* slurm-JOB.STEP.NODE.dvfs.json in the job's submit folder (beside slurm-JOB.out), created, never
 * overwritten, by a child running as the job's user with the job's groups: the folder is the
 * user's to name, so root writes nothing there. 0, or -1 with why in st.err. */
static int write_energy(spank_t sp, const char *text)
{
    char path[GC_PATH_MAX * 2];
    uid_t uid = 0;
    gid_t gid = 0, groups[256];
    int status = 0, n_groups = 256;
    pid_t pid;

    if (energy_path(sp, path, sizeof path) < 0)
        return 0;
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return 0;
    job_groups(sp, uid, gid, groups, &n_groups);
    if ((pid = fork()) == 0) { /* async-signal-safe calls only: this process has threads */
        size_t n = strlen(text);
        int fd;

        if (setgroups((size_t)n_groups, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
            _exit(EPERM);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            _exit(errno & 0x7f);
        _exit(write(fd, text, n) == (ssize_t)n && close(fd) == 0 ? 0 : EIO);
    }
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == EEXIST)
        snprintf(st.err, sizeof st.err, "cannot write %s: a file of that name is there already (not this "
                 "step's: left as it is); the energy is not recorded", path);
    else
        snprintf(st.err, sizeof st.err, "cannot write %s: %s", path,
                 pid > 0 && WIFEXITED(status) ? strerror(WEXITSTATUS(status)) : "the writer failed");
    return -1;
}

/* The job's energy summary into its AdminComment (plugstack's record=): `PYDVFS slurm-energy
 * --record JOB --dir SUBMIT_DIR`, as root, at the batch step's end (Slurm refuses the update once
 * the job has finished); what it says on failure goes to the job's output and the slurmd log. */
static void record_job(spank_t sp, uint32_t job)
{
    char dir[GC_PATH_MAX] = "", id[16], said[GC_ERR_MAX] = "";
    size_t n = 0;
    int fds[2], status = 0, waited = 0;
    struct pollfd pfd;
    pid_t pid;

    if (!*conf_record || spank_getenv(sp, "SLURM_SUBMIT_DIR", dir, sizeof dir) != ESPANK_SUCCESS || !*dir ||
        pipe2(fds, O_CLOEXEC) < 0)
        return;
    snprintf(id, sizeof id, "%u", job);
    if ((pid = fork()) == 0) { /* async-signal-safe calls only until exec */
        int null = open("/dev/null", O_RDWR);

        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(fds[1], 2) < 0)
            _exit(126);
        execl(conf_record, conf_record, "slurm-energy", "--record", id, "--dir", dir, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    while (pid > 0) { /* its stderr (the first line kept), to its end or the bound */
        char buf[256];
        ssize_t r;
        int ready = poll(&pfd, 1, 100);

        if (ready == 0 && (waited += 100) >= RECORD_WAIT_MS)
            break;
        if (ready < 0 && errno != EINTR)
            break;
        if (ready <= 0)
            continue;
        if ((r = read(fds[0], buf, sizeof buf)) <= 0)
            break;
        if ((size_t)r > sizeof said - 1 - n)
            r = (ssize_t)(sizeof said - 1 - n);
        memcpy(said + n, buf, (size_t)r);
        n += (size_t)r;
    }
    close(fds[0]);
    said[n] = '\0';
    if (pid > 0 && waited >= RECORD_WAIT_MS)
        kill(pid, SIGKILL);
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *nl = strchr(said, '\n');

        if (nl)
            *nl = '\0';
        slurm_error("pydvfs: %s: the job's energy record (%s slurm-energy --record %s): %s", st.node, conf_record, id,
                    *said ? said : waited >= RECORD_WAIT_MS ? "killed after 30 s" : "it failed");
    }
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    uint32_t job = 0, step = 0;
    gc_snapshot end;
    gc_window w;
    char *text, stepname[16];
    int have_w = 0, restored = 0, rc, said;

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
    said = st.n_notes; /* what task_init said; what the end adds goes to the job's output here */
    if (st.owner) {
        st.board.warn[0] = '\0';
        if ((rc = gc_restore(&st.board, st.state_dir, &restored)) < 0)
            snprintf(st.err, sizeof st.err, "restore: %s", st.board.err[0] ? st.board.err : strerror(-rc));
        if (st.board.warn[0])
            note("restore: %s", st.board.warn);
        if (rc == 0 || restored) /* a state kept for a retry stays this job's: its epilog tries again */
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
    for (; said < st.n_notes; said++)
        slurm_error("pydvfs: %s: %s", st.node, st.notes[said]);
    if (st.err[0])
        slurm_error("pydvfs: %s: %s", st.node, st.err);
    if (text && write_energy(sp, text) < 0)
        slurm_error("pydvfs: %s: %s", st.node, st.err);
    free(text);
    if (step == SLURM_BATCH_SCRIPT)
        record_job(sp, job);
    return 0;
}

/* The job's end on each node: where a step of this job died with its slurmstepd (no exit hook),
 * its lock died with it and its saved state is still there; put it back. Only a pin this job's
 * step made (the owner file names the job): a pin made outside Slurm (root's `pydvfs pin`) or by
 * another job stays. Never fails: a failed epilog drains the node. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    char state_dir[GC_PATH_MAX], node[GC_NAME_MAX];
    const char *env = getenv("SLURM_JOB_ID");
    uint32_t job = 0;
    gc_lock lk;
    int restored = 0, rc;

    gc_lock_init(&lk);
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || !job)
        job = env ? (uint32_t)strtoul(env, NULL, 10) : 0;
    /* this process (slurmstepd's epilog) has not run slurm_spank_init: read the arguments here */
    if (!job || parse_args(ac, av) < 0)
        return 0;
    if (open_node_board(&st.board, state_dir, sizeof state_dir, node, sizeof node) < 0)
        return 0; /* no board here: nothing to put back */
    if (owner_job(state_dir) != job || gc_lock_acquire(&st.board, 0, &lk) < 0)
        return 0; /* not this job's pin, or someone governs it: not the epilog's to restore */
    snprintf(st.state_dir, sizeof st.state_dir, "%s", state_dir);
    if (owner_job(state_dir) != job) { /* another job's step took the board meanwhile */
        gc_lock_release(&lk);
        return 0;
    }
    rc = gc_restore(&st.board, state_dir, &restored);
    if (rc == 0 || restored)
        owner_mark(0, 0);
    gc_lock_release(&lk);
    if (rc < 0)
        slurm_error("pydvfs: %s: epilog restore: %s", node, st.board.err[0] ? st.board.err : strerror(-rc));
    else if (restored)
        slurm_info("pydvfs: %s: the epilog restored the board job %u's dead step left pinned", node, job);
    return 0;
}

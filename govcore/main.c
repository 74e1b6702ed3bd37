/* main.c - the standalone `govcore` binary: the on-board mechanism with only libc + pthreads.
 *
 *   govcore [--sysfs-root DIR] [--state-dir DIR] [--json] VERB [ARGS]
 *
 * Errors are one line on stderr and exit status 2.
 */
#include "govcore.h"
#include "policy.h"
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 2

struct options {
    const char *sysfs_root; /* NULL: $PYDVFS_SYSFS_ROOT, else "/" */
    const char *state_dir;  /* NULL: gc_default_state_dir() */
    int json;
    const char *verb;
    int argc;               /* the verb's own arguments (and options) */
    char **argv;
    int cmd_argc;           /* a command after `--`, for verbs that run one */
    char **cmd_argv;
};

static const char usage_text[] =
    "usage: govcore [--sysfs-root DIR] [--state-dir DIR] [--json] VERB [ARGS]\n"
    "\n"
    "The on-board half of pydvfs: discover the Jetson GPU and its INA3221 power rails,\n"
    "pin and restore the GPU clock.\n"
    "\n"
    "verbs:\n"
    "  status        board, GPU clock state, available levels, power rails\n"
    "  pin MHZ       pin the GPU clock to the available level nearest MHZ; the original\n"
    "                governor/min/max are saved first\n"
    "  restore       put back the state saved before the first change (idempotent)\n"
    "  apply --model M --layers L --hidden D --seq-len S [--util PCT] [--policy P]\n"
    "        [--model-dir DIR] [--dry-run]\n"
    "                choose the energy-optimal clock for a workload and pin it; P is mlg\n"
    "                (learned tree, default), ffg (best fixed clock), rules (paper A),\n"
    "                maxn (restore the board's own governor) or roofline (the physical\n"
    "                model's optimum; needs DIR); DIR holds a model from `pydvfs train`\n"
    "                (default: the tree built into this binary)\n"
    "  measure [--rate HZ] -- CMD...\n"
    "                run CMD (no shell) while sampling the INA3221 rails; print its time,\n"
    "                energy per rail, CPU+GPU energy, average power and GPU load (CMD's\n"
    "                output goes to stderr). Exits with\n"
    "                CMD's status (128+N if a signal N ended it); 2 if CMD cannot start\n"
    "\n"
    "options:\n"
    "  --sysfs-root DIR  resolve every board path under DIR (env PYDVFS_SYSFS_ROOT; default /)\n"
    "  --state-dir DIR   folder of saved clock states (env PYDVFS_STATE_DIR)\n"
    "  --json            machine-readable output\n";

static int fail(const char *fmt, ...)
{
    va_list ap;

    fputs("govcore: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

static int fail_board(const gc_board *b, int rc)
{
    return fail("%s", b->err[0] ? b->err : strerror(-rc));
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int open_board(const struct options *o, gc_board *b)
{
    const char *root = o->sysfs_root;
    int rc;

    if (!root || !*root)
        root = getenv("PYDVFS_SYSFS_ROOT");
    rc = gc_board_open(b, (root && *root) ? root : "/");
    return rc < 0 ? fail_board(b, rc) : 0;
}

static int cmd_status(const struct options *o)
{
    gc_board b;
    gc_clock_state st, saved;
    char state_path[GC_PATH_MAX];
    int rc, i, load = -1, have_saved;

    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_clock_read(&b, &st)) < 0)
        return fail_board(&b, rc);
    gc_gpu_load_permille(&b, &load);
    if ((rc = gc_state_path(&b, o->state_dir, state_path, sizeof state_path)) < 0)
        return fail_board(&b, rc);
    rc = gc_state_load(&b, o->state_dir, &saved);
    if (rc < 0 && rc != -ENOENT)
        return fail_board(&b, rc);
    have_saved = rc == 0;

    if (o->json) {
        printf("{\n  \"sysfs_root\": ");
        json_str(b.sysfs_root);
        printf(",\n  \"model\": ");
        json_str(b.model);
        printf(",\n  \"gpu\": ");
        json_str(b.gpu_name);
        printf(",\n  \"devfreq_dir\": ");
        json_str(b.devfreq_dir);
        printf(",\n  \"governor\": ");
        json_str(st.governor);
        printf(",\n  \"cur_mhz\": %.6g,\n  \"min_mhz\": %.6g,\n  \"max_mhz\": %.6g,\n",
               gc_hz_to_mhz(st.cur_hz), gc_hz_to_mhz(st.min_hz), gc_hz_to_mhz(st.max_hz));
        printf("  \"pinned\": %s,\n  \"available_mhz\": [", st.min_hz == st.max_hz ? "true" : "false");
        for (i = 0; i < b.n_freqs; i++)
            printf("%s%.6g", i ? ", " : "", gc_hz_to_mhz(b.freqs_hz[i]));
        printf("],\n  \"gpu_load_pct\": ");
        if (load >= 0)
            printf("%.1f", load / 10.0);
        else
            printf("null");
        printf(",\n  \"rails\": [");
        for (i = 0; i < b.n_rails; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(b.rails[i].name);
            printf(", \"kind\": \"%s\"}", b.rails[i].kind == GC_RAIL_HWMON ? "hwmon" : "ina3221x");
        }
        printf("],\n  \"sensor_interval_ms\": ");
        if (b.sensor_interval_ms > 0)
            printf("%d", b.sensor_interval_ms);
        else
            printf("null");
        printf(",\n  \"saved_state\": ");
        if (have_saved) {
            printf("{\"path\": ");
            json_str(state_path);
            printf(", \"governor\": ");
            json_str(saved.governor);
            printf(", \"min_mhz\": %.6g, \"max_mhz\": %.6g}", gc_hz_to_mhz(saved.min_hz),
                   gc_hz_to_mhz(saved.max_hz));
        } else {
            printf("null");
        }
        printf("\n}\n");
        return 0;
    }
    printf("board     %s\n", b.model[0] ? b.model : "(unknown model)");
    printf("sysfs     %s\n", b.sysfs_root);
    printf("gpu       %s (%s)\n", b.gpu_name, b.devfreq_dir);
    printf("governor  %s\n", st.governor);
    printf("clock     %g MHz (min %g, max %g MHz)%s\n", gc_hz_to_mhz(st.cur_hz),
           gc_hz_to_mhz(st.min_hz), gc_hz_to_mhz(st.max_hz),
           st.min_hz == st.max_hz ? ", pinned" : "");
    printf("levels   ");
    for (i = 0; i < b.n_freqs; i++)
        printf(" %g", gc_hz_to_mhz(b.freqs_hz[i]));
    printf(" MHz (%d)\n", b.n_freqs);
    if (load >= 0)
        printf("gpu load  %.1f %%\n", load / 10.0);
    printf("rails    ");
    for (i = 0; i < b.n_rails; i++)
        printf("%s %s", i ? "," : "", b.rails[i].name);
    if (b.n_rails == 0)
        printf(" none found (no INA3221 sensor)");
    printf("\n");
    if (have_saved)
        printf("saved     %s (governor %s, min %g, max %g MHz); `govcore restore` puts it back\n",
               state_path, saved.governor, gc_hz_to_mhz(saved.min_hz), gc_hz_to_mhz(saved.max_hz));
    else
        printf("saved     nothing (the board is as it was)\n");
    return 0;
}

static int parse_mhz(const char *text, double *mhz)
{
    char *end;

    errno = 0;
    *mhz = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || gc_mhz_to_hz(*mhz) == 0)
        return -EINVAL;
    return 0;
}

static int cmd_pin(const struct options *o)
{
    gc_board b;
    double mhz;
    uint64_t level_hz;
    char state_path[GC_PATH_MAX];
    int rc, snapped;

    if (o->argc != 1)
        return fail("pin takes one clock in MHz, e.g. `govcore pin 714`");
    if (parse_mhz(o->argv[0], &mhz) < 0)
        return fail("not a clock: '%s' (expected a positive number of MHz)", o->argv[0]);
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    rc = gc_pin_hz(&b, gc_mhz_to_hz(mhz), o->state_dir, &level_hz);
    if (rc < 0)
        return fail_board(&b, rc);
    gc_state_path(&b, o->state_dir, state_path, sizeof state_path);
    snapped = level_hz != gc_mhz_to_hz(mhz);
    if (o->json) {
        printf("{\"requested_mhz\": %.6g, \"freq_mhz\": %.6g, \"snapped\": %s, \"state_file\": ",
               mhz, gc_hz_to_mhz(level_hz), snapped ? "true" : "false");
        json_str(state_path);
        printf("}\n");
    } else if (snapped) {
        printf("pinned the GPU clock to %g MHz (asked %g MHz: snapped to the nearest level)\n",
               gc_hz_to_mhz(level_hz), mhz);
    } else {
        printf("pinned the GPU clock to %g MHz\n", gc_hz_to_mhz(level_hz));
    }
    return 0;
}

static int cmd_restore(const struct options *o)
{
    gc_board b;
    gc_clock_state st;
    int rc, restored;

    if (o->argc != 0)
        return fail("restore takes no arguments");
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_restore(&b, o->state_dir, &restored)) < 0)
        return fail_board(&b, rc);
    if ((rc = gc_clock_read(&b, &st)) < 0)
        return fail_board(&b, rc);
    if (o->json) {
        printf("{\"restored\": %s, \"governor\": ", restored ? "true" : "false");
        json_str(st.governor);
        printf(", \"min_mhz\": %.6g, \"max_mhz\": %.6g}\n", gc_hz_to_mhz(st.min_hz),
               gc_hz_to_mhz(st.max_hz));
    } else if (restored) {
        printf("restored governor %s, min %g MHz, max %g MHz\n", st.governor,
               gc_hz_to_mhz(st.min_hz), gc_hz_to_mhz(st.max_hz));
    } else {
        printf("nothing to restore (no saved state for this board)\n");
    }
    return 0;
}

/* The value after option argv[*i], or NULL (with an error printed) if there is none. */
static const char *opt_value(const struct options *o, int *i)
{
    if (*i + 1 >= o->argc || strncmp(o->argv[*i + 1], "--", 2) == 0) {
        fail("%s needs a value", o->argv[*i]);
        return NULL;
    }
    return o->argv[++*i];
}

static int parse_number(const char *name, const char *text, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(*out))
        return fail("%s: not a number: '%s'", name, text);
    return 0;
}

static int cmd_apply(const struct options *o)
{
    gc_workload w = {0, -1.0, 0, 0, 0};
    gc_tree_model model = gc_builtin_tree;
    gc_roofline roofline;
    const gc_roofline *rl = NULL;
    double x[GC_MAX_FEATURES];
    gc_decision d;
    gc_board b;
    const char *model_name = NULL, *model_dir = NULL, *v;
    char err[GC_ERR_MAX] = "";
    void *handle = NULL;
    int policy = GC_POLICY_MLG, dry_run = 0, rc, i, have = 0;

    for (i = 0; i < o->argc; i++) {
        const char *a = o->argv[i];
        double *num = NULL;
        int bit = 0;

        if (strcmp(a, "--dry-run") == 0) {
            dry_run = 1;
            continue;
        }
        if (!(v = opt_value(o, &i)))
            return EXIT_USAGE;
        if (strcmp(a, "--model") == 0) {
            model_name = v;
            bit = 1;
        } else if (strcmp(a, "--policy") == 0) {
            if (gc_policy_parse(v, &policy) < 0)
                return fail("unknown policy '%s': expected mlg, ffg, rules, maxn or roofline", v);
        } else if (strcmp(a, "--model-dir") == 0) {
            model_dir = v;
        } else if (strcmp(a, "--layers") == 0) {
            num = &w.layers;
            bit = 2;
        } else if (strcmp(a, "--hidden") == 0) {
            num = &w.hidden;
            bit = 4;
        } else if (strcmp(a, "--seq-len") == 0) {
            num = &w.seq_len;
            bit = 8;
        } else if (strcmp(a, "--util") == 0) {
            num = &w.gpu_util_pct;
            bit = 16;
        } else {
            return fail("apply: unknown option '%s' (see govcore --help)", a);
        }
        if (num && parse_number(a, v, num) != 0)
            return EXIT_USAGE;
        have |= bit;
    }
    if ((have & 15) != 15)
        return fail("apply needs --model, --layers, --hidden and --seq-len");
    if ((have & 16) && !(w.gpu_util_pct >= 0.0 && w.gpu_util_pct <= 100.0))
        return fail("--util must be within 0..100 %% (got %g)", w.gpu_util_pct);
    if (gc_model_family(model_name, &w.is_decoder) < 0)
        return fail("unknown model type '%s': expected an encoder (bert, roberta, deberta, ...) "
                    "or a decoder (pythia, gpt, llama, ...)", model_name);
    if (policy == GC_POLICY_ROOFLINE) {
        char path[GC_PATH_MAX];

        if (!model_dir)
            return fail("the roofline policy needs --model-dir (a folder from `pydvfs train`)");
        snprintf(path, sizeof path, "%s/roofline.txt", model_dir);
        if (gc_roofline_load(path, &roofline, err, sizeof err) < 0)
            return fail("%s", err);
        rl = &roofline;
    }
    if (model_dir && (rc = gc_tree_load(model_dir, &model, &handle, err, sizeof err)) < 0)
        return fail("%s", err);
    if ((rc = open_board(o, &b)) != 0) {
        gc_tree_close(handle);
        return rc;
    }
    rc = dry_run ? gc_decide(&b, &model, rl, policy, &w, &d)
                 : gc_apply(&b, &model, rl, policy, &w, o->state_dir, &d);
    if (rc < 0) {
        gc_tree_close(handle);
        return fail_board(&b, rc);
    }
    if (o->json) {
        printf("{\"freq_mhz\": ");
        if (d.level_hz == 0)
            printf("null, \"proposed_mhz\": null");
        else
            printf("%.6g, \"proposed_mhz\": %.6g", gc_hz_to_mhz(d.level_hz), d.proposed_mhz);
        printf(", \"policy\": \"%s\", \"model\": ", gc_policy_name(policy));
        json_str(model.name);
        printf(", \"dry_run\": %s, \"workload\": {\"model\": ", dry_run ? "true" : "false");
        json_str(model_name);
        printf(", \"layers\": %.17g, \"hidden\": %.17g, \"seq_len\": %.17g, \"util_pct\": ",
               w.layers, w.hidden, w.seq_len);
        if (w.gpu_util_pct >= 0)
            printf("%.17g", w.gpu_util_pct);
        else
            printf("null");
        printf("}, \"features\": {");
        if (gc_features(&model, &w, x, err, sizeof err) == 0)
            for (i = 0; i < model.n_features; i++) {
                printf("%s", i ? ", " : "");
                json_str(model.feature_names[i]);
                printf(": %.17g", x[i]);
            }
        printf("}}\n");
    } else if (d.level_hz == 0) {
        printf("policy %s: MAXN (the board's own governor)%s\n", gc_policy_name(policy),
               dry_run ? " (dry run)" : "");
    } else {
        printf("policy %s: GPU clock %g MHz%s\n", gc_policy_name(policy), gc_hz_to_mhz(d.level_hz),
               dry_run ? " (dry run: nothing written)" : "");
    }
    gc_tree_close(handle);
    return 0;
}

/* Rails that make up "CPU+GPU energy": the AGX Orin names, else the JetPack 4 ones. */
static const char *const cpu_gpu_rails[2][2] = {{"VDD_CPU_CV", "VDD_GPU_SOC"}, {"CPU", "GPU"}};

/* Sum of the CPU and GPU rails' energy; 0 with *found = 0 if the board has neither set. */
static double cpu_gpu_energy_j(const gc_sampler *s, const gc_window *w, int *found)
{
    int set, k, j;
    double sum = 0;

    for (set = 0; set < 2; set++) {
        *found = 0;
        for (j = 0; j < 2; j++)
            for (k = 0; k < w->n_rails; k++)
                if (strcmp(gc_sampler_rail_name(s, k), cpu_gpu_rails[set][j]) == 0) {
                    sum += w->energy_j[k];
                    *found = 1;
                }
        if (*found)
            return sum;
    }
    return 0;
}

/* Start argv; wait for it. -errno (with *exec_err) if it could not be started. A CLOEXEC pipe
 * carries the child's exec errno back: if exec succeeds the pipe just closes. */
static int run_child(char **argv, int *status)
{
    int fds[2], child_errno = 0, rc;
    ssize_t n;
    pid_t pid;
    struct sigaction ign, old_int, old_quit;

    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        close(fds[0]);
        close(fds[1]);
        return rc;
    }
    if (pid == 0) {
        close(fds[0]);
        /* the command's stdout goes to our stderr: our stdout carries only the report */
        if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
            _exit(127);
        execvp(argv[0], argv);
        child_errno = errno;
        if (write(fds[1], &child_errno, sizeof child_errno) < 0)
            _exit(127);
        _exit(127);
    }
    close(fds[1]);
    /* Like time(1): Ctrl-C goes to the command, and we still report what it used. */
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    do {
        n = read(fds[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return n == (ssize_t)sizeof child_errno ? -child_errno : 0;
}

static int cmd_measure(const struct options *o)
{
    gc_sampler_config cfg = {0};
    gc_sampler *s;
    gc_snapshot a, z;
    gc_window w;
    gc_board b;
    double total_j = 0, cpu_gpu_j;
    int rc, i, status = 0, exit_status, have_cpu_gpu;

    for (i = 0; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--rate") == 0 && i + 1 < o->argc) {
            char *end;
            errno = 0;
            cfg.rate_hz = strtod(o->argv[++i], &end);
            if (errno || *end || !(cfg.rate_hz >= GC_SAMPLER_MIN_RATE_HZ) ||
                cfg.rate_hz > GC_SAMPLER_MAX_RATE_HZ)
                return fail("--rate takes a rate in Hz, %g <= HZ <= %.0f", GC_SAMPLER_MIN_RATE_HZ,
                            GC_SAMPLER_MAX_RATE_HZ);
        } else {
            return fail("measure: unexpected '%s' (usage: govcore measure [--rate HZ] -- CMD...)",
                        o->argv[i]);
        }
    }
    if (o->cmd_argc == 0)
        return fail("measure needs a command after `--`, e.g. `govcore measure -- sleep 1`");
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_sampler_create(&s, &b, &cfg)) < 0)
        return fail_board(&b, rc);
    if ((rc = gc_sampler_start(s)) < 0) {
        gc_sampler_free(s);
        return fail("cannot start the sampler thread: %s", strerror(-rc));
    }
    gc_sampler_snapshot(s, &a);
    rc = run_child(o->cmd_argv, &status);
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    if (rc < 0) {
        gc_sampler_free(s);
        return fail("cannot run '%s': %s", o->cmd_argv[0], strerror(-rc));
    }
    gc_window_diff(&a, &z, &w);
    exit_status = WIFEXITED(status) ? WEXITSTATUS(status)
                  : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    for (i = 0; i < w.n_rails; i++)
        total_j += w.energy_j[i];
    cpu_gpu_j = cpu_gpu_energy_j(s, &w, &have_cpu_gpu);

    if (o->json) {
        double dur_s = (double)w.duration_ns / 1e9;

        printf("{\n  \"command\": [");
        for (i = 0; i < o->cmd_argc; i++) {
            printf("%s", i ? ", " : "");
            json_str(o->cmd_argv[i]);
        }
        printf("],\n  \"exit_status\": %d,\n  \"duration_s\": %.9g,\n  \"energy_j\": {",
               exit_status, dur_s);
        for (i = 0; i < w.n_rails; i++) {
            printf("%s", i ? ", " : "");
            json_str(gc_sampler_rail_name(s, i));
            printf(": %.9g", w.energy_j[i]);
        }
        printf("},\n  \"total_energy_j\": %.9g,\n  \"cpu_gpu_energy_j\": ", total_j);
        if (have_cpu_gpu)
            printf("%.9g", cpu_gpu_j);
        else
            printf("null");
        printf(",\n  \"avg_power_w\": {");
        for (i = 0; i < w.n_rails; i++) {
            printf("%s", i ? ", " : "");
            json_str(gc_sampler_rail_name(s, i));
            printf(": %.9g", w.avg_power_w[i]);
        }
        printf("},\n  \"total_avg_power_w\": %.9g,\n  \"gpu_util_pct\": ",
               dur_s > 0 ? total_j / dur_s : 0.0);
        if (w.gpu_util_pct >= 0)
            printf("%.6g", w.gpu_util_pct);
        else
            printf("null");
        printf(",\n  \"samples\": %llu,\n  \"read_errors\": %llu,\n  \"rate_hz\": %.6g\n}\n",
               (unsigned long long)w.samples, (unsigned long long)w.read_errors, w.rate_hz);
    } else {
        double dur_s = (double)w.duration_ns / 1e9;

        printf("command   %s exited with status %d\n", o->cmd_argv[0], exit_status);
        printf("time      %.3f s\n", dur_s);
        for (i = 0; i < w.n_rails; i++)
            printf("%-9s %-16s %12.3f J  %8.3f W avg\n", i ? "" : "energy",
                   gc_sampler_rail_name(s, i), w.energy_j[i], w.avg_power_w[i]);
        printf("%-9s %-16s %12.3f J  %8.3f W avg\n", "", "total", total_j,
               dur_s > 0 ? total_j / dur_s : 0.0);
        if (have_cpu_gpu)
            printf("cpu+gpu   %.3f J  %.3f W avg\n", cpu_gpu_j, dur_s > 0 ? cpu_gpu_j / dur_s : 0.0);
        if (w.gpu_util_pct >= 0)
            printf("gpu load  %.1f %%\n", w.gpu_util_pct);
        printf("samples   %llu at %.1f Hz, %llu read errors\n", (unsigned long long)w.samples,
               w.rate_hz, (unsigned long long)w.read_errors);
    }
    gc_sampler_free(s);
    fflush(stdout);
    return exit_status;
}

struct verb {
    const char *name;
    int (*run)(const struct options *o);
};

static const struct verb verbs[] = {
    {"status", cmd_status},
    {"pin", cmd_pin},
    {"restore", cmd_restore},
    {"apply", cmd_apply},
    {"measure", cmd_measure},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    static char *positional[64];
    struct options o = {0};
    const struct verb *v;
    int i;

    o.argv = positional;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            o.cmd_argv = argv + i + 1;
            o.cmd_argc = argc - i - 1;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--sysfs-root") == 0 || strcmp(a, "--state-dir") == 0) {
            if (i + 1 >= argc)
                return fail("%s needs a folder", a);
            if (strcmp(a, "--sysfs-root") == 0)
                o.sysfs_root = argv[++i];
            else
                o.state_dir = argv[++i];
        } else if (!o.verb) {
            if (a[0] == '-')
                return fail("unknown option '%s' (see govcore --help)", a);
            o.verb = a;
        } else if (o.argc < (int)(sizeof positional / sizeof positional[0])) {
            /* the verb's own arguments and options */
            positional[o.argc++] = argv[i];
        } else {
            return fail("too many arguments");
        }
    }
    if (!o.verb)
        return fail("no verb given (see govcore --help)");
    for (v = verbs; v->name; v++)
        if (strcmp(v->name, o.verb) == 0)
            return v->run(&o);
    return fail("unknown verb '%s' (see govcore --help)", o.verb);
}

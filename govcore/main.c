/* main.c - the standalone `govcore` binary: the on-board mechanism with only libc + pthreads.
 *
 *   govcore [--sysfs-root DIR] [--state-dir DIR] [--json] VERB [ARGS]
 *
 * Errors are one line on stderr and exit status 2.
 */
#include "client.h"
#include "govcore.h"
#include "lock.h"
#include "policy.h"
#include "report.h"
#include "sampler.h"
#include "serve.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define LOCK_WAIT_MS 1000 /* a verb waits this long for another one's moment with the board */
#define EXIT_BAD_READINGS 3 /* measure --strict: more than GC_SAMPLER_MAX_INTERPOLATED_PCT of a
                               rail's window interpolated, or a negative reading */

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
    "       govcore --version\n"
    "\n"
    "The on-board half of pydvfs: discover the Jetson board, its GPU and its power rails,\n"
    "pin and restore the GPU clock.\n"
    "\n"
    "verbs:\n"
    "  status        board and JetPack, GPU clock state, available levels, power rails and\n"
    "                which make the module's and the CPU+GPU energy (docs/boards.md), the\n"
    "                power mode and its GPU cap, the memory (EMC) and CPU clocks\n"
    "  pin MHZ [--nearest] [--above-power-mode] [--emc MHZ] [--cpu MHZ]\n"
    "                pin the GPU clock to the available level nearest MHZ; the original\n"
    "                governor/min/max are saved first. MHZ more than one level outside\n"
    "                the board's table is refused unless --nearest. A level above the\n"
    "                power mode's GPU cap (max_freq before the first pin, nvpmodel's cap)\n"
    "                is lowered to it, with a notice, unless --above-power-mode. --emc pins\n"
    "                the memory clock (one of its rates), --cpu every cpufreq policy (each\n"
    "                one's nearest level), as one with the GPU: a clock not in a table or\n"
    "                above the power mode's cap is refused before anything is written\n"
    "  restore [--force]\n"
    "                put back the state saved before the first change (idempotent); while\n"
    "                another process governs the GPU only with --force\n"
    "  apply --workload model=M,layers=L,hidden=D,seq_len=S[,util_pct=PCT][,peft=none|lora|qlora]\n"
    "        [,rank=R][,trainable_params=N][,weight_bits=32|16|8|4][,precision=fp32|fp16|bf16]\n"
    "        [,batch_size=B][,tokens_per_step=T] [--policy P]\n"
    "        [--model-dir DIR] [--energy module|cpu-gpu] [--objective energy|edp|ed2p]\n"
    "        [--max-slowdown PCT] [--dry-run] [--above-power-mode]\n"
    "                (--model M --layers L --hidden D --seq-len S [--util PCT] also work)\n"
    "                choose the energy-optimal clock for a workload and pin it; P is one\n"
    "                of the policies below (default mlg); DIR holds a model from `pydvfs train`\n"
    "                (default: the built-in policy of this board for --energy, module\n"
    "                energy unless cpu-gpu; a tree pins only where its training data expects\n"
    "                a clear saving against MAXN). --max-slowdown raises the\n"
    "                level to the lowest whose step time, predicted by DIR's roofline.txt,\n"
    "                is within PCT %% of the top level's; --objective edp|ed2p (energy x\n"
    "                time, x time^2) needs the whole curve: --policy roofline only\n"
    "  measure [--rate HZ] [--strict] [-o FILE] -- CMD...\n"
    "                run CMD (no shell) while sampling the power rails; print its time,\n"
    "                energy per rail, the module's and the CPU+GPU energy (with their\n"
    "                rails), average power and GPU load on stderr, or to FILE (a new\n"
    "                one); CMD keeps stdout and stderr, as under time(1). A rail with more than %g %% of the time\n"
    "                interpolated over failed reads, or a negative reading, is warned about\n"
    "                (--strict: exit 3). Exits with\n"
    "                CMD's status (128+N if a signal N ended it); 2 if CMD cannot start\n"
    "  serve [--socket PATH] [--group NAME] [--policy-dir DIR] [--idle-timeout S] [--allow-non-root]\n"
    "                the daemon through which members of group NAME (default pydvfs) govern\n"
    "                the GPU without root (default socket " GC_SERVE_SOCKET "). A connection\n"
    "                idle S seconds (default 60, 0: never) is closed unless it holds a pin or\n"
    "                a sampler window. Needs root; --allow-non-root only for a board this\n"
    "                user may write (a fake one). See docs/serve.md\n"
    "\n"
    "Without root, status/pin/restore/apply go through the daemon (PYDVFS_SOCKET names its\n"
    "socket). A pin made through it lasts as long as the connection: the board is restored\n"
    "when this command exits.\n"
    "\n"
    "options:\n"
    "  --sysfs-root DIR  resolve every board path under DIR (env PYDVFS_SYSFS_ROOT; default /)\n"
    "  --state-dir DIR   folder of saved clock states (env PYDVFS_STATE_DIR)\n"
    "  --json            machine-readable output\n"
    "  --version         version, git describe and the built-in policies\n";

/* The usage, then the policies from their table (policy.c's gc_policies). */
static void print_usage(void)
{
    int i;

    printf(usage_text, GC_SAMPLER_MAX_INTERPOLATED_PCT); /* the one format: the limit */
    printf("\npolicies (apply --policy P):\n");
    for (i = 0; i < gc_n_policies; i++)
        printf("  %-12s  %s\n", gc_policies[i].name, gc_policies[i].help);
}

/* One line on stderr, whatever the message quotes (an argument, a board file's text): control
 * and non-ASCII bytes are shown escaped (gc_printable). */
static int fail(const char *fmt, ...)
{
    char msg[GC_ERR_MAX * 2], shown[GC_ERR_MAX * 2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gc_printable(msg, shown, sizeof shown);
    fprintf(stderr, "govcore: error: %s\n", shown);
    return EXIT_USAGE;
}

/* The same lines as `pydvfs --version` (pydvfs/version.py): after the first, gc_version_text's. */
static int print_version(void)
{
    char text[GC_VERSION_TEXT_MAX];

    printf("govcore %s", gc_version);
    if (gc_git_describe[0])
        printf(" (git %s)", gc_git_describe);
    printf("\n");
    if (gc_version_text(text, sizeof text) < 0)
        return fail("the version text does not fit in %d bytes", GC_VERSION_TEXT_MAX);
    fputs(text, stdout);
    return 0;
}

static int fail_board(const gc_board *b, int rc)
{
    return fail("%s", b->err[0] ? b->err : strerror(-rc));
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

static const char no_daemon[] =
    "cannot change the GPU clock without root: run as root, or start the daemon (`sudo "
    "systemctl enable --now govcore` or `sudo govcore serve`) and join its group (`sudo usermod "
    "-aG pydvfs $USER`, then log in again)";

/* The daemon's socket when a verb should go through `govcore serve`: $PYDVFS_SOCKET, else (not
 * root, and the clock files not writable here) the default socket if it exists. NULL: act on
 * the board directly (b NULL: the board is not open yet, only the variable counts). */
static const char *daemon_socket(const gc_board *b)
{
    const char *env = getenv("PYDVFS_SOCKET");
    char path[GC_PATH_MAX];

    if (env && *env)
        return env;
    if (!b || geteuid() == 0)
        return NULL;
    snprintf(path, sizeof path, "%s/max_freq", b->devfreq_dir);
    if (access(path, W_OK) == 0)
        return NULL;
    return access(GC_SERVE_SOCKET, F_OK) == 0 ? GC_SERVE_SOCKET : NULL;
}

/* One request to the daemon; its reply (one line of JSON, the verb's --json record) is printed
 * as it is, an error reply as our one-line error. */
static int via_daemon(const char *socket_path, const char *request, int pinning)
{
    static char reply[GC_CLIENT_REPLY_MAX];
    char err[GC_ERR_MAX];
    int rc;

    if ((rc = gc_client_request(socket_path, request, reply, sizeof reply, err, sizeof err)) < 0)
        return fail("%s", err);
    if (gc_client_reply_error(reply, err, sizeof err))
        return fail("%s", err);
    puts(reply);
    if (pinning)
        fprintf(stderr, "govcore: note: a pin through the daemon lasts while its connection "
                        "does: the board is restored now that this command ends (govern a run "
                        "with `pydvfs run` or the Python API)\n");
    return 0;
}

/* A number in the protocol's plain decimal (no exponent). */
static void plain_decimal(char *out, size_t len, double v)
{
    size_t n;

    snprintf(out, len, "%.6f", v);
    n = strlen(out);
    while (n > 1 && out[n - 1] == '0')
        out[--n] = '\0';
    if (n > 1 && out[n - 1] == '.')
        out[--n] = '\0';
}


static const char *role_label(int role)
{
    return role == GC_ROLE_MODULE ? "module" : role == GC_ROLE_CPU_GPU ? "cpu+gpu" : "gpu";
}

/* "roles     module = VDD_IN; cpu+gpu = VDD_CPU_GPU_CV; gpu: no rail of its own" */
static void print_roles(const gc_board *b)
{
    int role, k;

    printf("roles    ");
    for (role = 0; role < GC_N_ROLES; role++) {
        printf("%s %s", role ? ";" : "", role_label(role));
        if (b->role_n[role] < 0)
            printf(": not known");
        else if (b->role_n[role] == 0)
            printf(": no rail of its own");
        for (k = 0; k < b->role_n[role]; k++)
            printf("%s%s", k ? " + " : " = ", b->rails[b->role_rail[role][k]].name);
        if (b->role_n[role] > 0 && b->role_partial[role])
            printf(" (partial: a rail of the table is missing)");
    }
    printf("\n");
}

/* Board text (a governor) as gc_printable shows it: no raw control byte reaches the terminal. */
static const char *shown(const char *board_text, char *out, size_t len)
{
    gc_printable(board_text, out, len);
    return out;
}

static int cmd_status(const struct options *o)
{
    char text[GC_NAME_MAX * 4];
    gc_board b;
    gc_status st;
    int rc, i;

    if (o->argc != 0)
        return fail("status takes no arguments (got '%s')", o->argv[0]);
    if (daemon_socket(NULL))
        return via_daemon(daemon_socket(NULL), "status", 0);
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_status_read(&b, o->state_dir, &st)) < 0)
        return fail_board(&b, rc);
    if (b.warning[0])
        fprintf(stderr, "govcore status: warning: %s\n", b.warning);
    if (gc_status_live(&b, &st) && gc_status_all_zero(&st))
        fprintf(stderr, "govcore status: warning: every power rail reads 0 W: the sensor is off, or "
                        "this is a fake board nobody animates (`pydvfs fake-board DIR --animate MODEL`); "
                        "energies will be 0\n");
    if (o->json) {
        gc_json_status(stdout, &b, &st, 0);
        putchar('\n');
        return 0;
    }
    printf("board     %s: %s", b.board_id[0] ? b.board_id : "unknown", b.model[0] ? b.model : "(no model)");
    if (b.jetpack > 0)
        printf(" (JetPack %d, L4T %s)", b.jetpack, b.l4t);
    else if (b.l4t[0])
        printf(" (L4T %s)", b.l4t);
    printf("\n");
    printf("sysfs     %s\n", b.sysfs_root);
    printf("gpu       %s (%s)\n", b.gpu_name, b.devfreq_dir);
    printf("governor  %s\n", shown(st.clock.governor, text, sizeof text));
    printf("clock     %g MHz (min %g, max %g MHz)%s\n", gc_hz_to_mhz(st.clock.cur_hz),
           gc_hz_to_mhz(st.clock.min_hz), gc_hz_to_mhz(st.clock.max_hz),
           st.clock.min_hz == st.clock.max_hz ? ", pinned" : "");
    printf("levels   ");
    for (i = 0; i < b.n_freqs; i++)
        printf(" %g", gc_hz_to_mhz(b.freqs_hz[i]));
    printf(" MHz (%d)\n", b.n_freqs);
    if (st.have_live && st.live.gpu_util_pct >= 0)
        printf("gpu load  %.1f %%\n", st.live.gpu_util_pct);
    else if (st.load_permille >= 0)
        printf("gpu load  %.1f %%\n", st.load_permille / 10.0);
    printf("rails    ");
    for (i = 0; i < b.n_rails; i++)
        printf("%s %s", i ? "," : "", b.rails[i].name);
    if (b.n_rails == 0)
        printf(" none found (no power sensor)");
    printf("\n");
    for (i = 0; i < b.n_skipped; i++)
        printf("skipped   %s: %s\n", b.skipped[i].name, b.skipped[i].why);
    print_roles(&b);
    if (st.have_live) {
        printf("power    ");
        for (i = 0; i < st.live.n_rails; i++)
            printf("%s %s %.2f W", i ? "," : "", b.rails[i].name, st.live.avg_power_w[i]);
        for (i = 0; i < GC_N_ROLES; i++)
            if (st.role_w[i] >= 0)
                printf("; %s %.2f W", role_label(i), st.role_w[i]);
        printf("\n");
    }
    gc_print_domains(stdout, &st.domains, st.dom_now);
    gc_text_power_mode(stdout, &st.mode, st.have_cap ? &st.cap : NULL);
    putchar('\n');
    if (st.have_saved)
        printf("saved     %s (governor %s, min %g, max %g MHz); `govcore restore` puts it back\n",
               st.state_path, shown(st.saved.governor, text, sizeof text), gc_hz_to_mhz(st.saved.min_hz),
               gc_hz_to_mhz(st.saved.max_hz));
    else if (st.no_state_dir)
        printf("saved     not known: no private state folder ($XDG_RUNTIME_DIR is not set); "
               "pass --state-dir DIR (or set PYDVFS_STATE_DIR) to look there\n");
    else
        printf("saved     nothing (the board is as it was)\n");
    return 0;
}

/* 1 if this process may write the GPU's clock files. */
static int board_writable(const gc_board *b)
{
    char path[GC_PATH_MAX];

    snprintf(path, sizeof path, "%s/max_freq", b->devfreq_dir);
    return access(path, W_OK) == 0;
}

/* The levels a joint pin set, as text: ", the EMC to 2133 MHz, every CPU policy (cpu0, cpu4)
 * to 1036.8 MHz"; a CPU clock asked between levels says what each policy got. */
static void print_mode(const gc_domains *ds, const uint64_t *level_hz, uint64_t cpu_hz)
{
    int i, first = 1, snapped = 0;

    if (level_hz[0])
        printf(", the EMC to %g MHz", gc_hz_to_mhz(level_hz[0]));
    for (i = 1; i < ds->n; i++)
        snapped |= level_hz[i] && level_hz[i] != cpu_hz;
    if (!cpu_hz)
        return;
    printf(", every CPU policy");
    for (i = 1; i < ds->n; i++) {
        if (!level_hz[i])
            continue;
        if (snapped)
            printf("%s %s to %g MHz", first ? ":" : ",", ds->d[i].name, gc_hz_to_mhz(level_hz[i]));
        else
            printf("%s%s", first ? " (" : ", ", ds->d[i].name);
        first = 0;
    }
    if (snapped)
        printf(" (asked %.12g MHz: snapped to each policy's nearest level)", gc_hz_to_mhz(cpu_hz));
    else
        printf(") to %g MHz", gc_hz_to_mhz(cpu_hz));
}

/* request ("pin MHZ") with the joint pin's keys appended as given (checked: at most 13 bytes) */
static const char *pin_request(char *request, size_t len, const char *emc_text, const char *cpu_text)
{
    size_t n = strlen(request);

    if (emc_text)
        n += (size_t)snprintf(request + n, len - n, " emc_mhz=%s", emc_text);
    if (cpu_text && n < len)
        snprintf(request + n, len - n, " cpu_mhz=%s", cpu_text);
    return request;
}

/* The one-line notice of a pin the power mode's cap lowered (pydvfs says the same). */
static void note_clamped(const gc_board *b, const char *verb)
{
    fprintf(stderr, "govcore %s: note: %g MHz is above the power mode's GPU cap: pinned %g MHz "
                    "(--above-power-mode lifts the cap)\n", verb, gc_hz_to_mhz(b->clamped_from_hz),
            gc_hz_to_mhz(b->cap_hz));
}

static int cmd_pin(const struct options *o)
{
    char hint[160];
    gc_board b;
    gc_lock lk;
    gc_domains ds;
    double mhz;
    uint64_t want_hz, level_hz, emc_hz = 0, cpu_hz = 0, levels[GC_MAX_DOMAINS];
    char request[128] = "pin ";
    const char *socket_path;
    char state_path[GC_PATH_MAX];
    const char *text = NULL, *emc_text = NULL, *cpu_text = NULL;
    int rc, snapped, nearest = 0, above = 0, i, extra = 0, joint;

    for (i = 0; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--nearest") == 0)
            nearest = 1;
        else if (strcmp(o->argv[i], "--above-power-mode") == 0)
            above = 1;
        else if (strcmp(o->argv[i], "--emc") == 0 || strcmp(o->argv[i], "--cpu") == 0) {
            const char **slot = o->argv[i][2] == 'e' ? &emc_text : &cpu_text;
            if (i + 1 >= o->argc)
                return fail("%s needs a clock in MHz", o->argv[i]);
            *slot = o->argv[++i];
        } else if (!text)
            text = o->argv[i];
        else
            extra = 1;
    }
    if (!text || extra)
        return fail("pin takes one clock in MHz, e.g. `govcore pin 714` [--nearest] "
                    "[--above-power-mode] [--emc MHZ] [--cpu MHZ]");
    if (gc_parse_mhz(text, strlen(text), &want_hz) < 0) {
        gc_mhz_hint(text, strlen(text), hint, sizeof hint);
        return fail("not a clock: '%s' (expected " GC_MHZ_GRAMMAR ")%s", text, hint);
    }
    if (emc_text && gc_parse_mhz(emc_text, strlen(emc_text), &emc_hz) < 0) {
        gc_mhz_hint(emc_text, strlen(emc_text), hint, sizeof hint);
        return fail("--emc: not a clock: '%s' (expected " GC_MHZ_GRAMMAR ")%s", emc_text, hint);
    }
    if (cpu_text && gc_parse_mhz(cpu_text, strlen(cpu_text), &cpu_hz) < 0) {
        gc_mhz_hint(cpu_text, strlen(cpu_text), hint, sizeof hint);
        return fail("--cpu: not a clock: '%s' (expected " GC_MHZ_GRAMMAR ")%s", cpu_text, hint);
    }
    joint = emc_hz || cpu_hz;
    mhz = gc_hz_to_mhz(want_hz);
    if (above && daemon_socket(NULL))
        return fail("--above-power-mode is not available through the daemon: run as root");
    if (!(socket_path = daemon_socket(NULL))) {
        if ((rc = open_board(o, &b)) != 0)
            return rc;
        if (!nearest && gc_check_near_table(&b, want_hz) < 0)
            return fail("%s; pass --nearest to pin the nearest level anyway", b.err);
        socket_path = daemon_socket(&b);
    }
    if (socket_path) {
        if (above)
            return fail("--above-power-mode is not available through the daemon: run as root");
        /* the clocks as asked: the daemon applies the same rules (the one snap, in gc_pin_hz;
         * far outside the table refused unless nearest=1; the EMC and CPU clocks checked and
         * snapped there too). Checked above: at most 13 bytes */
        snprintf(request + 4, sizeof request - 4, "%s%s", text, nearest ? " nearest=1" : "");
        return via_daemon(socket_path, pin_request(request, sizeof request, emc_text, cpu_text), 1);
    }
    if (!board_writable(&b))
        return fail("%s", no_daemon);
    /* the EMC's rates: the kernel's list (available_rates), else the board table's */
    if (joint && (rc = gc_domains_open_board(&ds, &b)) < 0)
        return fail("cannot read the clock domains: %s", strerror(-rc));
    gc_lock_init(&lk);
    if ((rc = gc_lock_acquire(&b, LOCK_WAIT_MS, &lk)) < 0)
        return fail_board(&b, rc);
    b.above_power_mode = above;
    if (joint)
        rc = gc_pin_mode(&b, &ds, want_hz, emc_hz, cpu_hz, o->state_dir, &level_hz, levels);
    else
        rc = gc_pin_hz(&b, want_hz, o->state_dir, &level_hz);
    gc_lock_release(&lk);
    if (rc < 0)
        return fail_board(&b, rc);
    gc_state_path(&b, o->state_dir, state_path, sizeof state_path);
    snapped = level_hz != want_hz;
    if (b.warn[0])
        fprintf(stderr, "govcore: warning: %s\n", b.warn);
    if (b.clamped_from_hz)
        note_clamped(&b, "pin");
    if (o->json) {
        gc_json_pin(stdout, &b, mhz, level_hz, state_path, joint ? &ds : NULL, joint ? levels : NULL);
        putchar('\n');
        return 0;
    }
    printf("pinned the GPU clock to %g MHz", gc_hz_to_mhz(level_hz));
    if (b.clamped_from_hz)
        printf(" (asked %g MHz: the power mode's GPU cap)", mhz);
    else if (snapped)
        printf(" (asked %.12g MHz: snapped to the nearest level)", mhz);
    if (joint)
        print_mode(&ds, levels, cpu_hz);
    printf("\n");
    return 0;
}

/* After a restore: the board's governor/min/max as they are now, for the report. cur_freq is
 * not needed; where even these cannot be read, the restore still succeeded: say so. */
static void report_restored(const struct options *o, gc_board *b, int restored, const char *domains)
{
    char text[GC_NAME_MAX * 4];
    gc_clock_state st;
    int rc;

    memset(&st, 0, sizeof st);
    if ((rc = gc_clock_read(b, &st)) < 0) {
        fprintf(stderr, "govcore: note: cannot read the clock back (%s): cur_freq unknown\n",
                b->err[0] ? b->err : strerror(-rc));
        if (gc_range_read(b, &st) < 0) {
            if (o->json)
                printf("{\"restored\": %s, \"governor\": null, \"min_mhz\": null, "
                       "\"max_mhz\": null, \"domains\": []}\n", restored ? "true" : "false");
            else
                printf("%s (the clock cannot be read back now)\n", restored ?
                       "restored the saved clock state" : "nothing to restore");
            return;
        }
    }
    if (o->json) {
        gc_json_restore(stdout, restored, &st, restored ? domains : "");
        putchar('\n');
    } else if (restored) {
        char names[GC_ERR_MAX], *p;

        /* the other clock domains put back with the GPU: named, "emc, cpu0, cpu4" */
        snprintf(names, sizeof names, "%s", domains);
        for (p = names; (p = strchr(p, ' ')) != NULL; p++) {
            memmove(p + 1, p, strlen(p) + 1);
            *p = ',';
            p++;
        }
        printf("restored governor %s, min %g MHz, max %g MHz%s%s\n",
               st.governor[0] ? shown(st.governor, text, sizeof text) : "(unknown)",
               gc_hz_to_mhz(st.min_hz), gc_hz_to_mhz(st.max_hz),
               names[0] ? "; and " : "", names);
    } else {
        printf("nothing to restore (no saved state for this board)\n");
    }
}

static int cmd_restore(const struct options *o)
{
    gc_board b;
    gc_lock lk;
    int rc, restored = 0, dropped = 0, force = o->argc == 1 && strcmp(o->argv[0], "--force") == 0;
    char lines[GC_DOMAINS_RECORD_MAX], names[GC_ERR_MAX / 2];

    if (o->argc != 0 && !force)
        return fail("restore takes no arguments but --force");
    if (daemon_socket(NULL))
        return via_daemon(daemon_socket(NULL), "restore", 0);
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if (daemon_socket(&b))
        return via_daemon(daemon_socket(&b), "restore", 0);
    /* root may write the clock files: one that is missing is named by the restore itself */
    if (geteuid() != 0 && !board_writable(&b))
        return fail("%s", no_daemon);
    gc_lock_init(&lk);
    rc = gc_lock_acquire(&b, LOCK_WAIT_MS, &lk);
    if (rc < 0 && force)
        fprintf(stderr, "govcore: warning: %s; restoring anyway (--force)\n", b.err);
    else if (rc < 0)
        return fail_board(&b, rc);
    /* the domains the record holds, to name them once they are back */
    if (gc_state_load_domains(&b, o->state_dir, lines, sizeof lines) < 0 ||
        gc_domains_record_names(lines, names, sizeof names) < 0)
        names[0] = '\0';
    rc = gc_restore(&b, o->state_dir, &restored);
    if (rc < 0 && force) {
        /* --force: whatever could not be put back, the state does not stay behind */
        fprintf(stderr, "govcore: warning: %s\n", b.err);
        if ((rc = gc_state_drop(&b, o->state_dir, &dropped)) == 0 && dropped)
            fprintf(stderr, "govcore: warning: dropped the saved state (--force); the clock is "
                            "left as it is now\n");
    }
    gc_lock_release(&lk);
    if (rc < 0)
        return fail_board(&b, rc);
    report_restored(o, &b, restored, names);
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

static int apply_via_daemon(const char *socket_path, int policy, const char *model_name,
                            const gc_workload *w, const char *model_dir, const char *measure,
                            const gc_goal *goal, int dry_run)
{
    char request[GC_PATH_MAX], layers[32], hidden[32], seq_len[32], util[48] = "", bound[64] = "";
    char method[256];

    if (model_dir)
        return fail("through the daemon only the built-in tree or one root installed can be used "
                    "(`pydvfs` passes tree=NAME for " GC_SERVE_POLICY_DIR "/NAME); not --model-dir");
    plain_decimal(layers, sizeof layers, w->layers);
    plain_decimal(hidden, sizeof hidden, w->hidden);
    plain_decimal(seq_len, sizeof seq_len, w->seq_len);
    if (w->gpu_util_pct >= 0) {
        strcpy(util, " util_pct=");
        plain_decimal(util + strlen(util), sizeof util - strlen(util), w->gpu_util_pct);
    }
    if (goal->max_slowdown_pct >= 0) {
        strcpy(bound, " max_slowdown_pct=");
        plain_decimal(bound + strlen(bound), sizeof bound - strlen(bound), goal->max_slowdown_pct);
    }
    gc_method_format(w, method, sizeof method);
    snprintf(request, sizeof request, "apply policy=%s model=%s layers=%s hidden=%s seq_len=%s%s%s "
             "objective=%s%s energy=%s%s", gc_policy_name(policy), model_name, layers, hidden, seq_len, util,
             method, gc_objective_name(goal->objective), bound, measure, dry_run ? " dry_run=1" : "");
    return via_daemon(socket_path, request, !dry_run && !(gc_policy_of(policy)->flags & GC_POLICY_PINS_NOTHING));
}

/* The value of label key in a spec gc_workload_parse took (printable, no blanks, key=value
 * items), or "" where it has none: the workload's name, which the policies do not read. */
static void spec_label(const char *spec, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    const char *item;

    out[0] = '\0';
    for (item = spec; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL)
        if (strncmp(item, key, k) == 0 && item[k] == '=') {
            size_t n = strcspn(item + k + 1, ",");

            snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), item + k + 1);
            return;
        }
}

static int cmd_apply(const struct options *o)
{
    gc_workload w = {0, -1.0, 0, 0, 0, GC_PEFT_NONE, 0, 0, 0, GC_PRECISION_FP32, 0, 0};
    char model_name[GC_MODEL_NAME_MAX] = "", name[GC_MODEL_NAME_MAX] = "";
    gc_tree_model model = gc_builtin_tree;
    gc_roofline roofline;
    const gc_roofline *rl = NULL;
    gc_goal goal = {GC_OBJECTIVE_ENERGY, -1.0};
    gc_decision d;
    gc_board b;
    gc_lock lk;
    const char *model_dir = NULL, *measure = gc_energy_measures[0], *v;
    char why[GC_ERR_MAX];
    char err[GC_ERR_MAX] = "";
    void *handle = NULL;
    unsigned have = 0;
    int policy = GC_POLICY_MLG, dry_run = 0, above = 0, rc, i;

    for (i = 0; i < o->argc; i++) {
        const char *a = o->argv[i];
        int field = -1;

        if (strcmp(a, "--dry-run") == 0) {
            dry_run = 1;
            continue;
        }
        if (strcmp(a, "--above-power-mode") == 0) {
            above = 1;
            continue;
        }
        if (!(v = opt_value(o, &i)))
            return EXIT_USAGE;
        if (strcmp(a, "--workload") == 0) {
            if (gc_workload_parse(v, &w, model_name, sizeof model_name, &have, err, sizeof err) < 0)
                return fail("--%s", err);
            spec_label(v, "name", name, sizeof name);
            continue;
        }
        if (strcmp(a, "--model") == 0) {
            field = GC_WF_MODEL;
        } else if (strcmp(a, "--policy") == 0) {
            if (gc_policy_parse(v, &policy) < 0) {
                char names[128];

                gc_policy_list(names, sizeof names);
                return fail("unknown policy '%s': expected %s", v, names);
            }
        } else if (strcmp(a, "--model-dir") == 0) {
            model_dir = v;
        } else if (strcmp(a, "--energy") == 0) {
            if (gc_measure_parse(v, &measure) < 0)
                return fail("unknown energy measure '%s': expected %s or %s", v, gc_energy_measures[0],
                            gc_energy_measures[1]);
        } else if (strcmp(a, "--objective") == 0) {
            if (gc_objective_parse(v, &goal.objective) < 0)
                return fail("unknown objective '%s': expected energy, edp or ed2p", v);
        } else if (strcmp(a, "--max-slowdown") == 0) {
            if (parse_number(a, v, &goal.max_slowdown_pct) != 0)
                return EXIT_USAGE;
            if (goal.max_slowdown_pct < 0)
                return fail("--max-slowdown must be a finite %% >= 0 (got %g)", goal.max_slowdown_pct);
        } else if (strcmp(a, "--layers") == 0) {
            field = GC_WF_LAYERS;
        } else if (strcmp(a, "--hidden") == 0) {
            field = GC_WF_HIDDEN;
        } else if (strcmp(a, "--seq-len") == 0) {
            field = GC_WF_SEQ_LEN;
        } else if (strcmp(a, "--util") == 0) {
            field = GC_WF_UTIL_PCT;
        } else {
            return fail("apply: unknown option '%s' (see govcore --help)", a);
        }
        if (field < 0)
            continue;
        /* the flags are the --workload keys of the same name: one grammar */
        if (have & (1u << field))
            return fail("--workload: %s given twice", gc_workload_fields[field].key);
        have |= 1u << field;
        if (gc_workload_set(&w, field, v, strlen(v), model_name, sizeof model_name, err, sizeof err) < 0)
            return fail("--%s", err);
    }
    if ((have & GC_WORKLOAD_REQUIRED) != GC_WORKLOAD_REQUIRED)
        return fail("apply needs --workload model=..,layers=..,hidden=..,seq_len=.. (or --model, "
                    "--layers, --hidden and --seq-len)");
    if (gc_workload_check(&w, err, sizeof err) < 0)
        return fail("%s", err);
    if (above && !dry_run && daemon_socket(NULL))
        return fail("--above-power-mode is not available through the daemon: run as root");
    if (daemon_socket(NULL))
        return apply_via_daemon(daemon_socket(NULL), policy, model_name, &w, model_dir, measure, &goal,
                                dry_run);
    /* the time curve a slowdown bound needs, where a model folder is given (else gc_decide_goal
     * says what is missing) */
    if ((gc_policy_of(policy)->flags & GC_POLICY_NEEDS_MODEL_DIR) ||
        (goal.max_slowdown_pct >= 0 && !(gc_policy_of(policy)->flags & GC_POLICY_PINS_NOTHING) && model_dir)) {
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
    if (!dry_run && daemon_socket(&b)) {
        gc_tree_close(handle);
        if (above)
            return fail("--above-power-mode is not available through the daemon: run as root");
        return apply_via_daemon(daemon_socket(&b), policy, model_name, &w, model_dir, measure, &goal, dry_run);
    }
    if (!model_dir) /* the built-in policy of this board and measure */
        model = *gc_builtin_for(b.board_id, measure);
    if (!dry_run && !board_writable(&b)) {
        gc_tree_close(handle);
        return fail("%s", no_daemon);
    }
    gc_lock_init(&lk);
    if (dry_run) {
        rc = gc_decide_goal(&b, &model, rl, policy, &w, &goal, &d);
    } else if ((rc = gc_lock_acquire(&b, LOCK_WAIT_MS, &lk)) == 0) {
        b.above_power_mode = above;
        rc = gc_apply_goal(&b, &model, rl, policy, &w, &goal, o->state_dir, &d);
        gc_lock_release(&lk);
    }
    if (rc < 0) {
        gc_tree_close(handle);
        return fail_board(&b, rc);
    }
    if (d.mapped_from_mhz > 0 && d.level_hz)
        fprintf(stderr, "govcore apply: note: the policy was trained on %s's clock table (%g..%g MHz); "
                        "its %g MHz maps to %g MHz here (the same fraction of the top level, snapped "
                        "to this board's table); `pydvfs run --policy online` measures this board's "
                        "own best clock\n", model.board_id[0] ? model.board_id : "another board",
                model.levels_mhz[0], model.levels_mhz[model.n_levels - 1], d.mapped_from_mhz,
                gc_hz_to_mhz(d.policy_level_hz));
    if (d.clamped_from_hz)
        note_clamped(&b, "apply");
    gc_kept_reason(&d, why, sizeof why);
    if (why[0])
        fprintf(stderr, "govcore apply: %s\n", why);
    gc_outside_reason(&model, policy, &w, why, sizeof why);
    if (why[0])
        fprintf(stderr, "govcore apply: note: %s\n", why);
    if (o->json) {
        gc_json_decision(stdout, &model, model_name, name, &w, &d, dry_run, dry_run || !d.level_hz ? NULL : b.warn);
        putchar('\n');
    } else if (d.level_hz == 0) {
        printf("policy %s: MAXN (the board's own governor)%s\n", gc_policy_name(policy),
               dry_run ? " (dry run)" : "");
    } else {
        printf("policy %s: GPU clock %g MHz%s\n", gc_policy_name(policy), gc_hz_to_mhz(d.level_hz),
               dry_run ? " (dry run: nothing written)" : "");
        if (goal.objective != GC_OBJECTIVE_ENERGY || goal.max_slowdown_pct >= 0) {
            printf("objective %s", gc_objective_name(goal.objective));
            if (goal.max_slowdown_pct >= 0)
                printf(", step time within %g %% of the top level's", goal.max_slowdown_pct);
            putchar('\n');
        }
        if (d.policy_level_hz != d.level_hz)
            printf("bound     %s chose %g MHz; %g MHz meets the %g %% slowdown bound\n", gc_policy_name(policy),
                   gc_hz_to_mhz(d.policy_level_hz), gc_hz_to_mhz(d.level_hz), goal.max_slowdown_pct);
        if (d.trade_vs_hz && d.trade_vs_hz != d.level_hz)
            printf("trade     %g MHz against %g MHz (the top level), predicted by the roofline model: "
                   "J/step %+.1f %%, s/step %+.1f %%\n", gc_hz_to_mhz(d.level_hz),
                   gc_hz_to_mhz(d.trade_vs_hz), d.trade_j_pct, d.trade_s_pct);
    }
    if (!dry_run && b.warn[0]) /* the original it saved is itself a pin */
        fprintf(stderr, "govcore: warning: %s\n", b.warn);
    gc_tree_close(handle);
    return 0;
}

/* One line on stderr per rail whose readings were bad. */
static void warn_quality(const gc_sampler *s, const gc_window *w, int strict)
{
    int i;

    for (i = 0; i < w->n_rails; i++)
        if (w->interpolated_pct[i] > GC_SAMPLER_MAX_INTERPOLATED_PCT || w->negative_readings[i])
            fprintf(stderr, "govcore: %s: rail %s: %llu failed reads, %.1f %% of the time "
                            "interpolated or held, %llu negative readings (counted as 0 W)\n",
                    strict ? "error" : "warning", gc_sampler_rail_name(s, i),
                    (unsigned long long)w->failed_reads[i], w->interpolated_pct[i],
                    (unsigned long long)w->negative_readings[i]);
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
        /* the command keeps stdout and stderr (as under time(1)): the report goes to stderr or -o */
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

/* module / cpu+gpu / gpu energy, each with the rails that make it (none counted twice). */
static void print_role_energies(FILE *out, const gc_sampler *s, const gc_window *w, double dur_s)
{
    const int *rails;
    int role, k, n, known;

    for (role = 0; role < GC_N_ROLES; role++) {
        double j = gc_window_role_j(s, w, role, &known);

        n = gc_sampler_role(s, role, &rails);
        if (n == 0)
            continue; /* the board has no rail of its own for it (a GPU rail) */
        if (!known) {
            fprintf(out, "%-9s not known (%s)\n", role_label(role),
                   gc_sampler_board_id(s)[0] ? "a rail of the table is missing" : "board not in the table");
            continue;
        }
        fprintf(out, "%-9s %12.3f J  %8.3f W avg  (", role_label(role), j, dur_s > 0 ? j / dur_s : 0.0);
        for (k = 0; k < n; k++)
            fprintf(out, "%s%s", k ? " + " : "", gc_sampler_rail_name(s, rails[k]));
        fprintf(out, ")%s\n", gc_sampler_role_partial(s, role) ? " partial: a rail of the table is missing" : "");
    }
}

static int cmd_measure(const struct options *o)
{
    gc_sampler_config cfg = {0};
    gc_sampler *s;
    gc_snapshot a, z;
    gc_window w;
    gc_board b;
    int rc, i, status = 0, exit_status, strict = 0;
    const char *out_path = NULL;
    FILE *out = stderr; /* the report: stderr, or -o FILE; CMD keeps stdout */

    for (i = 0; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--strict") == 0) {
            strict = 1;
        } else if ((strcmp(o->argv[i], "-o") == 0 || strcmp(o->argv[i], "--output") == 0) &&
                   i + 1 < o->argc) {
            out_path = o->argv[++i];
        } else if (strcmp(o->argv[i], "--rate") == 0 && i + 1 < o->argc) {
            char *end;
            errno = 0;
            cfg.rate_hz = strtod(o->argv[++i], &end);
            if (errno || *end || !(cfg.rate_hz >= GC_SAMPLER_MIN_RATE_HZ) ||
                cfg.rate_hz > GC_SAMPLER_MAX_RATE_HZ)
                return fail("--rate takes a rate in Hz, %g <= HZ <= %.0f", GC_SAMPLER_MIN_RATE_HZ,
                            GC_SAMPLER_MAX_RATE_HZ);
        } else {
            return fail("measure: unexpected '%s' (usage: govcore measure [--rate HZ] [--strict] "
                        "[-o FILE] -- CMD...)",
                        o->argv[i]);
        }
    }
    if (o->cmd_argc == 0)
        return fail("measure needs a command after `--`, e.g. `govcore measure -- sleep 1`");
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_sampler_create(&s, &b, &cfg)) < 0)
        return fail_board(&b, rc);
    if (out_path) { /* a new file, made before CMD runs: an existing one is not ours to replace */
        int fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

        if (fd < 0 || !(out = fdopen(fd, "w"))) {
            rc = errno;
            if (fd >= 0)
                close(fd);
            gc_sampler_free(s);
            return fail("-o %s: %s%s", out_path, strerror(rc),
                        rc == EEXIST ? " (give a new file name)" : "");
        }
    }
    if (b.warning[0])
        fprintf(stderr, "govcore measure: warning: %s\n", b.warning);
    if ((rc = gc_sampler_start(s)) < 0) {
        gc_sampler_free(s);
        if (out != stderr)
            fclose(out);
        return fail("cannot start the sampler thread: %s", strerror(-rc));
    }
    gc_sampler_snapshot(s, &a);
    rc = run_child(o->cmd_argv, &status);
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    if (rc < 0) {
        gc_sampler_free(s);
        if (out != stderr)
            fclose(out);
        return fail("cannot run '%s': %s", o->cmd_argv[0], strerror(-rc));
    }
    gc_window_diff(&a, &z, &w);
    exit_status = WIFEXITED(status) ? WEXITSTATUS(status)
                  : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (o->json) {
        fprintf(out, "{\n  \"command\": [");
        for (i = 0; i < o->cmd_argc; i++) {
            fprintf(out, "%s", i ? ", " : "");
            gc_json_str(out, o->cmd_argv[i]);
        }
        fprintf(out, "],\n  \"exit_status\": %d,\n  ", exit_status);
        gc_json_measure_fields(out, s, &w, "\n  ");
        fprintf(out, "\n}\n");
    } else {
        double dur_s = (double)w.duration_ns / 1e9;
        char why[256];

        fprintf(out, "command   %s exited with status %d\n", o->cmd_argv[0], exit_status);
        fprintf(out, "time      %.3f s\n", dur_s);
        if (gc_window_no_energy(&w, why, sizeof why)) {
            fprintf(out, "energy    none: %s\n", why);
        } else {
            for (i = 0; i < w.n_rails; i++)
                fprintf(out, "%-9s %-16s %12.3f J  %8.3f W avg\n", i ? "" : "energy",
                        gc_sampler_rail_name(s, i), w.energy_j[i], w.avg_power_w[i]);
            print_role_energies(out, s, &w, dur_s);
        }
        if (w.gpu_util_pct >= 0)
            fprintf(out, "gpu load  %.1f %%\n", w.gpu_util_pct);
        fprintf(out, "samples   %llu at %.1f Hz, %llu read errors\n", (unsigned long long)w.samples,
                w.rate_hz, (unsigned long long)w.read_errors);
    }
    if (out != stderr) {
        if (fclose(out) != 0)
            fprintf(stderr, "govcore measure: error: cannot write %s: %s\n", out_path, strerror(errno));
    } else {
        fflush(stderr);
    }
    if (!w.readings_ok) {
        warn_quality(s, &w, strict);
        if (strict)
            exit_status = EXIT_BAD_READINGS;
    }
    gc_sampler_free(s);
    return exit_status;
}

static int cmd_serve(const struct options *o)
{
    gc_serve_config cfg = {0};
    const char *v;
    int i;

    cfg.sysfs_root = o->sysfs_root && *o->sysfs_root ? o->sysfs_root : getenv("PYDVFS_SYSFS_ROOT");
    cfg.state_dir = o->state_dir;
    cfg.idle_timeout_s = -1.0; /* GC_SERVE_IDLE_S */
    for (i = 0; i < o->argc; i++) {
        const char *a = o->argv[i];

        if (strcmp(a, "--allow-non-root") == 0) {
            cfg.allow_non_root = 1;
            continue;
        }
        if (strcmp(a, "--socket") != 0 && strcmp(a, "--group") != 0 && strcmp(a, "--policy-dir") != 0 &&
            strcmp(a, "--idle-timeout") != 0)
            return fail("serve: unknown option '%s' (usage: govcore serve [--socket PATH] "
                        "[--group NAME] [--policy-dir DIR] [--idle-timeout S] [--allow-non-root])", a);
        if (!(v = opt_value(o, &i)))
            return EXIT_USAGE;
        if (strcmp(a, "--socket") == 0)
            cfg.socket_path = v;
        else if (strcmp(a, "--group") == 0)
            cfg.group = v;
        else if (strcmp(a, "--idle-timeout") == 0) {
            if (parse_number("--idle-timeout", v, &cfg.idle_timeout_s) != 0)
                return EXIT_USAGE;
            if (cfg.idle_timeout_s < 0 || cfg.idle_timeout_s > 86400)
                return fail("--idle-timeout: seconds from 0 (never) to 86400, not '%s'", v);
        } else
            cfg.policy_dir = v;
    }
    if (cfg.sysfs_root && !*cfg.sysfs_root)
        cfg.sysfs_root = NULL;
    return gc_serve(&cfg);
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
    {"serve", cmd_serve},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    static char *positional[64];
    struct options o = {0};
    const struct verb *v;
    int i, dashdash = 0;

    o.argv = positional;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            o.cmd_argv = argv + i + 1;
            o.cmd_argc = argc - i - 1;
            dashdash = 1;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "help") == 0) {
            print_usage();
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            return print_version();
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--sysfs-root") == 0 || strcmp(a, "--state-dir") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0')
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
        if (strcmp(v->name, o.verb) == 0) {
            /* only measure runs a command: pin/apply would leave the clock pinned, CMD never run */
            if (dashdash && v->run != cmd_measure)
                return fail("%s runs no command: `-- CMD` is for measure (`pydvfs %s ... -- CMD` holds "
                            "the clock while CMD runs)", o.verb, o.verb);
            return v->run(&o);
        }
    return fail("unknown verb '%s' (see govcore --help)", o.verb);
}

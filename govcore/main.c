/* main.c - the standalone `govcore` binary: the on-board mechanism with only libc + pthreads.
 *
 *   govcore [--sysfs-root DIR] [--state-dir DIR] [--json] VERB [ARGS]
 *
 * Errors are one line on stderr and exit status 2.
 */
#include "cli.h"
#include "serve.h"

#include <stdlib.h>
#include <string.h>

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

/* cmd_board.c - the board's verbs: `govcore status`, `pin` and `restore`, each parsed here,
 * done by the library (or the daemon) and printed by cli_text.c. */
#include "cli.h"
#include "lock.h"

#include <string.h>
#include <unistd.h>

int cmd_status(const struct options *o)
{
    gc_board b;
    gc_status st;
    int rc;

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
    print_status(&b, &st);
    return 0;
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

int cmd_pin(const struct options *o)
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
    print_pinned(&b, mhz, level_hz, snapped, joint ? &ds : NULL, levels, cpu_hz);
    return 0;
}

int cmd_restore(const struct options *o)
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

/* cli_text.c - the records the verbs of the `govcore` binary print as text (the JSON ones are
 * report.c's): status, a pin, a restore, apply's decision and measure's report. */
#include "cli.h"

#include <string.h>

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

/* status, as text: the board, its clock, levels, load, rails, roles, power, domains, mode and
 * the saved state. */
void print_status(const gc_board *b, const gc_status *st)
{
    char text[GC_NAME_MAX * 4];
    int i;

    printf("board     %s: %s", b->board_id[0] ? b->board_id : "unknown", b->model[0] ? b->model : "(no model)");
    if (b->jetpack > 0)
        printf(" (JetPack %d, L4T %s)", b->jetpack, b->l4t);
    else if (b->l4t[0])
        printf(" (L4T %s)", b->l4t);
    printf("\n");
    printf("sysfs     %s\n", b->sysfs_root);
    printf("gpu       %s (%s)\n", b->gpu_name, b->devfreq_dir);
    printf("governor  %s\n", shown(st->clock.governor, text, sizeof text));
    printf("clock     %g MHz (min %g, max %g MHz)%s\n", gc_hz_to_mhz(st->clock.cur_hz),
           gc_hz_to_mhz(st->clock.min_hz), gc_hz_to_mhz(st->clock.max_hz),
           st->clock.min_hz == st->clock.max_hz ? ", pinned" : "");
    printf("levels   ");
    for (i = 0; i < b->n_freqs; i++)
        printf(" %g", gc_hz_to_mhz(b->freqs_hz[i]));
    printf(" MHz (%d)\n", b->n_freqs);
    if (st->have_live && st->live.gpu_util_pct >= 0)
        printf("gpu load  %.1f %%\n", st->live.gpu_util_pct);
    else if (st->load_permille >= 0)
        printf("gpu load  %.1f %%\n", st->load_permille / 10.0);
    printf("rails    ");
    for (i = 0; i < b->n_rails; i++)
        printf("%s %s", i ? "," : "", b->rails[i].name);
    if (b->n_rails == 0)
        printf(" none found (no power sensor)");
    printf("\n");
    for (i = 0; i < b->n_skipped; i++)
        printf("skipped   %s: %s\n", b->skipped[i].name, b->skipped[i].why);
    print_roles(b);
    if (st->have_live) {
        printf("power    ");
        for (i = 0; i < st->live.n_rails; i++)
            printf("%s %s %.2f W", i ? "," : "", b->rails[i].name, st->live.avg_power_w[i]);
        for (i = 0; i < GC_N_ROLES; i++)
            if (st->role_w[i] >= 0)
                printf("; %s %.2f W", role_label(i), st->role_w[i]);
        printf("\n");
    }
    gc_print_domains(stdout, &st->domains, st->dom_now);
    gc_text_power_mode(stdout, &st->mode, st->have_cap ? &st->cap : NULL);
    putchar('\n');
    if (st->have_saved)
        printf("saved     %s (governor %s, min %g, max %g MHz); `govcore restore` puts it back\n",
               st->state_path, shown(st->saved.governor, text, sizeof text), gc_hz_to_mhz(st->saved.min_hz),
               gc_hz_to_mhz(st->saved.max_hz));
    else if (st->no_state_dir)
        printf("saved     not known: no private state folder ($XDG_RUNTIME_DIR is not set); "
               "pass --state-dir DIR (or set PYDVFS_STATE_DIR) to look there\n");
    else
        printf("saved     nothing (the board is as it was)\n");
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

/* pin, as text: the level, why it is not the one asked, and the joint pin's other clocks (ds
 * NULL: the GPU alone). */
void print_pinned(const gc_board *b, double mhz, uint64_t level_hz, int snapped, const gc_domains *ds,
                  const uint64_t *levels, uint64_t cpu_hz)
{
    printf("pinned the GPU clock to %g MHz", gc_hz_to_mhz(level_hz));
    if (b->clamped_from_hz)
        printf(" (asked %g MHz: the power mode's GPU cap)", mhz);
    else if (snapped)
        printf(" (asked %.12g MHz: snapped to the nearest level)", mhz);
    if (ds)
        print_mode(ds, levels, cpu_hz);
    printf("\n");
}

/* After a restore: the board's governor/min/max as they are now, for the report. cur_freq is
 * not needed; where even these cannot be read, the restore still succeeded: say so. */
void report_restored(const struct options *o, gc_board *b, int restored, const char *domains)
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

/* apply's decision: its notices on stderr (mapped onto this board's table, lowered by the power
 * mode's cap, MAXN kept and why, a workload outside the training), then the record. */
void print_decision(const struct options *o, const gc_board *b, const gc_tree_model *model,
                    const struct apply_args *a, const gc_decision *d)
{
    char why[GC_ERR_MAX];

    if (d->mapped_from_mhz > 0 && d->level_hz)
        fprintf(stderr, "govcore apply: note: the policy was trained on %s's clock table (%g..%g MHz); "
                        "its %g MHz maps to %g MHz here (the same fraction of the top level, snapped "
                        "to this board's table); `pydvfs run --policy online` measures this board's "
                        "own best clock\n", model->board_id[0] ? model->board_id : "another board",
                model->levels_mhz[0], model->levels_mhz[model->n_levels - 1], d->mapped_from_mhz,
                gc_hz_to_mhz(d->policy_level_hz));
    if (d->clamped_from_hz)
        note_clamped(b, "apply");
    gc_kept_reason(d, why, sizeof why);
    if (why[0])
        fprintf(stderr, "govcore apply: %s\n", why);
    gc_outside_reason(model, a->policy, &a->w, why, sizeof why);
    if (why[0])
        fprintf(stderr, "govcore apply: note: %s\n", why);
    if (o->json) {
        gc_json_decision(stdout, model, a->model_name, a->name, &a->w, d, a->dry_run, a->dry_run || !d->level_hz ? NULL : b->warn);
        putchar('\n');
    } else {
        char head[128], lines[1024];

        gc_decision_head(head, sizeof head, d);
        gc_decision_goal_lines(lines, sizeof lines, d, a->measure);
        printf("%s%s\n%s", head, !a->dry_run ? "" : d->level_hz ? " (dry run: nothing written)" : " (dry run)",
               lines);
    }
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

/* measure's report, into out (stderr, or -o FILE): --json's record, or the text. */
void print_measure(FILE *out, const struct options *o, const gc_sampler *s, const gc_window *w,
                   int exit_status)
{
    int i;

    if (o->json) {
        fprintf(out, "{\n  \"command\": [");
        for (i = 0; i < o->cmd_argc; i++) {
            fprintf(out, "%s", i ? ", " : "");
            gc_json_str(out, o->cmd_argv[i]);
        }
        fprintf(out, "],\n  \"exit_status\": %d,\n  ", exit_status);
        gc_json_measure_fields(out, s, w, "\n  ");
        fprintf(out, "\n}\n");
    } else {
        double dur_s = (double)w->duration_ns / 1e9;
        char why[256];

        fprintf(out, "command   %s exited with status %d\n", o->cmd_argv[0], exit_status);
        fprintf(out, "time      %.3f s\n", dur_s);
        if (gc_window_no_energy(w, why, sizeof why)) {
            fprintf(out, "energy    none: %s\n", why);
        } else {
            for (i = 0; i < w->n_rails; i++)
                fprintf(out, "%-9s %-16s %12.3f J  %8.3f W avg\n", i ? "" : "energy",
                        gc_sampler_rail_name(s, i), w->energy_j[i], w->avg_power_w[i]);
            print_role_energies(out, s, w, dur_s);
        }
        if (w->gpu_util_pct >= 0)
            fprintf(out, "gpu load  %.1f %%\n", w->gpu_util_pct);
        fprintf(out, "samples   %llu at %.1f Hz, %llu read errors\n", (unsigned long long)w->samples,
                w->rate_hz, (unsigned long long)w->read_errors);
    }
}

/* report.c - the records govcore reports, as JSON (see report.h). */
#include "report.h"
#include "sysfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One notice where the mode in force is not among the modes the board table knows for the board
 * (its row's and its variants'): nothing fails, its GPU cap is read from the board as any mode's.
 * Added to b->warning once (a daemon reads the status of one board handle many times); the same
 * words as pydvfs.boards.mode_notice. */
static void note_unknown_mode(gc_board *b, const gc_power_mode *pm)
{
    char name[GC_NAME_MAX], note[GC_NAME_MAX * 2 + 160];
    size_t used;
    int p, i;

    if (pm->id < 0 || !b->board_id[0])
        return;
    for (p = 0; p < GC_N_BOARD_PROFILES && strcmp(gc_board_profiles[p].id, b->board_id) != 0; p++)
        ;
    if (p == GC_N_BOARD_PROFILES)
        return;
    for (i = 0; i < GC_PROFILE_MODES_MAX && gc_board_profiles[p].mode_ids[i] >= 0; i++)
        if (gc_board_profiles[p].mode_ids[i] == pm->id)
            return;
    gc_printable(pm->name, name, sizeof name);
    snprintf(note, sizeof note, "power mode %d (%s) is not among the board table's modes of %s: its "
                                "GPU cap is read from the board, as any mode's", pm->id, name, b->board_id);
    if (strstr(b->warning, note))
        return;
    used = strlen(b->warning);
    snprintf(b->warning + used, sizeof b->warning - used, "%s%s", used ? "; " : "", note);
}

int gc_status_read(gc_board *b, const char *state_dir, gc_status *st)
{
    int rc;

    memset(st, 0, sizeof *st);
    st->load_permille = -1;
    if ((rc = gc_clock_read(b, &st->clock)) < 0)
        return rc;
    if (gc_domains_open_board(&st->domains, b) == 0) {
        int i;

        for (i = 0; i < st->domains.n; i++)
            st->dom_now[i].saved = st->domains.d[i].readable &&
                                   gc_domain_read(&st->domains, i, &st->dom_now[i]) == 0;
    }
    if (gc_gpu_load_permille(b, &st->load_permille) < 0)
        st->load_permille = -1;
    rc = gc_state_path(b, state_dir, st->state_path, sizeof st->state_path);
    if (rc == -EDESTADDRREQ) { /* the board can still be shown; a saved state cannot be looked up */
        st->no_state_dir = 1;
        gc_power_mode_read(b, &st->mode);
        note_unknown_mode(b, &st->mode);
        st->have_cap = gc_gpu_cap_read(b, state_dir, &st->cap) == 0;
        return 0;
    }
    if (rc < 0)
        return rc;
    rc = gc_state_load(b, state_dir, &st->saved);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    st->have_saved = rc == 0;
    gc_power_mode_read(b, &st->mode);
    note_unknown_mode(b, &st->mode);
    st->have_cap = gc_gpu_cap_read(b, state_dir, &st->cap) == 0;
    return 0;
}

int gc_status_live(gc_board *b, gc_status *st)
{
    gc_sampler_config cfg = {0};
    gc_sampler *s = NULL;
    gc_snapshot a, z;
    struct timespec nap = {0, GC_LIVE_WINDOW_MS * 1000000L};
    int found = 0, role;

    st->have_live = 0;
    for (role = 0; role < GC_N_ROLES; role++)
        st->role_w[role] = -1.0;
    if (b->n_rails == 0 || gc_sampler_create(&s, b, &cfg) < 0)
        return 0;
    if (gc_sampler_start(s) < 0)
        goto free_sampler;
    gc_sampler_snapshot(s, &a);
    while (nanosleep(&nap, &nap) < 0 && errno == EINTR)
        ;
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    if (gc_window_diff(&a, &z, &st->live) < 0 || st->live.duration_ns <= 0)
        goto free_sampler;
    for (role = 0; role < GC_N_ROLES; role++) {
        double j = gc_window_role_j(s, &st->live, role, &found);

        st->role_w[role] = found ? j / (st->live.duration_ns / 1e9) : -1.0;
    }
    st->have_live = 1;
free_sampler:
    gc_sampler_free(s);
    return st->have_live;
}

int gc_status_all_zero(const gc_status *st)
{
    int k;

    if (!st->have_live)
        return 0;
    for (k = 0; k < st->live.n_rails; k++)
        if (st->live.avg_power_w[k] != 0.0)
            return 0;
    return st->live.n_rails > 0;
}

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), 0 where the byte at s does not start one. */
static int utf8_len(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    int n, k;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    for (k = 1; k < n; k++) {
        if (s[k] < lo || s[k] > hi)
            return 0; /* also the string's end: '\0' is no continuation byte */
        lo = 0x80;
        hi = 0xbf;
    }
    return n;
}

/* A JSON string. Bytes that are not UTF-8 (a board file's garbage) are written as the text
 * \xNN, as pydvfs's --json writes them: the document stays valid JSON, the same from both. */
void gc_json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        int n;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, f);
        else if ((n = utf8_len(p)) > 0) {
            fwrite(p, 1, (size_t)n, f);
            p += n;
            continue;
        } else
            fprintf(f, "\\\\x%02x", c);
        p++;
    }
    fputc('"', f);
}

void gc_json_status(FILE *f, const gc_board *b, const gc_status *st, int one_line)
{
    const char *sep = one_line ? " " : "\n  ", *first = one_line ? "" : "\n  ";
    int i;

    fprintf(f, "{%s\"sysfs_root\": ", first);
    gc_json_str(f, b->sysfs_root);
    fprintf(f, ",%s\"model\": ", sep);
    gc_json_str(f, b->model);
    fprintf(f, ",%s\"board\": ", sep);
    if (b->board_id[0])
        gc_json_str(f, b->board_id);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"jetpack\": ", sep);
    if (b->jetpack > 0)
        fprintf(f, "%d", b->jetpack);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"l4t\": ", sep);
    if (b->l4t[0])
        gc_json_str(f, b->l4t);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"gpu\": ", sep);
    gc_json_str(f, b->gpu_name);
    fprintf(f, ",%s\"devfreq_dir\": ", sep);
    gc_json_str(f, b->devfreq_dir);
    fprintf(f, ",%s\"governor\": ", sep);
    gc_json_str(f, st->clock.governor);
    fprintf(f, ",%s\"cur_mhz\": %.6g,%s\"min_mhz\": %.6g,%s\"max_mhz\": %.6g,", sep,
            gc_hz_to_mhz(st->clock.cur_hz), sep, gc_hz_to_mhz(st->clock.min_hz), sep,
            gc_hz_to_mhz(st->clock.max_hz));
    fprintf(f, "%s\"pinned\": %s,%s\"available_mhz\": [", sep,
            st->clock.min_hz == st->clock.max_hz ? "true" : "false", sep);
    for (i = 0; i < b->n_freqs; i++)
        fprintf(f, "%s%.6g", i ? ", " : "", gc_hz_to_mhz(b->freqs_hz[i]));
    fprintf(f, "],%s\"gpu_load_pct\": ", sep);
    if (st->load_permille >= 0)
        fprintf(f, "%.1f", st->load_permille / 10.0);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"rails\": [", sep);
    for (i = 0; i < b->n_rails; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        gc_json_str(f, b->rails[i].name);
        fprintf(f, ", \"kind\": \"%s\"}", gc_rail_kind_name(b->rails[i].kind));
    }
    fprintf(f, "],%s\"skipped_rails\": [", sep);
    for (i = 0; i < b->n_skipped; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        gc_json_str(f, b->skipped[i].name);
        fprintf(f, ", \"why\": ");
        gc_json_str(f, b->skipped[i].why);
        fputc('}', f);
    }
    fprintf(f, "],%s", sep);
    gc_json_roles_board(f, b);
    fprintf(f, ",%s\"warning\": ", sep);
    if (b->warning[0])
        gc_json_str(f, b->warning);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"sensor_interval_ms\": ", sep);
    if (b->sensor_interval_ms > 0)
        fprintf(f, "%d", b->sensor_interval_ms);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"saved_state\": ", sep);
    if (st->have_saved) {
        fprintf(f, "{\"path\": ");
        gc_json_str(f, st->state_path);
        fprintf(f, ", \"governor\": ");
        gc_json_str(f, st->saved.governor);
        fprintf(f, ", \"min_mhz\": %.6g, \"max_mhz\": %.6g}", gc_hz_to_mhz(st->saved.min_hz),
                gc_hz_to_mhz(st->saved.max_hz));
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",%s\"saved_state_known\": %s", sep, st->no_state_dir ? "false" : "true");
    fprintf(f, ",%s\"domains\": ", sep);
    gc_json_domains(f, &st->domains, st->dom_now);
    fprintf(f, ",%s", sep);
    gc_json_power_fields(f, &st->mode, st->have_cap ? &st->cap : NULL, sep);
    fprintf(f, ",%s\"live\": ", sep);
    if (st->have_live) {
        fprintf(f, "{\"power_w\": {");
        for (i = 0; i < st->live.n_rails; i++) {
            fprintf(f, "%s", i ? ", " : "");
            gc_json_str(f, b->rails[i].name);
            fprintf(f, ": %.3f", st->live.avg_power_w[i]);
        }
        fprintf(f, "}");
        for (i = 0; i < GC_N_ROLES; i++) {
            fprintf(f, ", \"%s_power_w\": ", gc_role_names[i]);
            if (st->role_w[i] >= 0)
                fprintf(f, "%.3f", st->role_w[i]);
            else
                fprintf(f, "null");
        }
        fprintf(f, ", \"gpu_load_pct\": ");
        if (st->live.gpu_util_pct >= 0)
            fprintf(f, "%.1f}", st->live.gpu_util_pct);
        else
            fprintf(f, "null}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, "%s}", one_line ? "" : "\n");
}

/* x as the shortest decimal that reads back as the same double (13.3, not 13.300000000000001):
 * what a user typed in a workload comes back as typed. */
static void json_num(FILE *f, double x)
{
    char buf[32];
    int prec;

    for (prec = 15; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (prec == 17)
        snprintf(buf, sizeof buf, "%.17g", x);
    fputs(buf, f);
}

static void json_mhz_or_null(FILE *f, uint64_t hz)
{
    if (hz)
        fprintf(f, "%.6g", gc_hz_to_mhz(hz));
    else
        fprintf(f, "null");
}

void gc_json_pin(FILE *f, const gc_board *b, double requested_mhz, uint64_t level_hz,
                 const char *state_path, const gc_domains *ds, const uint64_t *domain_level_hz)
{
    int i, first = 1;

    fprintf(f, "{\"requested_mhz\": %.12g, \"freq_mhz\": ", requested_mhz);
    json_mhz_or_null(f, level_hz);
    fprintf(f, ", \"freq_hz\": ");
    if (level_hz)
        fprintf(f, "%llu", (unsigned long long)level_hz);
    else
        fprintf(f, "null");
    fprintf(f, ", \"snapped\": %s, \"state_file\": ",
            level_hz && level_hz != gc_mhz_to_hz(requested_mhz) ? "true" : "false");
    gc_json_str(f, state_path);
    fprintf(f, ", \"power_cap_mhz\": ");
    json_mhz_or_null(f, b->cap_hz);
    fprintf(f, ", \"clamped_from_mhz\": ");
    json_mhz_or_null(f, b->clamped_from_hz);
    if (b->warn[0]) {
        fputs(", \"warning\": ", f);
        gc_json_str(f, b->warn);
    }
    if (ds) {
        fprintf(f, ", \"domains\": {");
        for (i = 0; i < ds->n; i++) {
            if (!domain_level_hz[i])
                continue;
            fprintf(f, "%s", first ? "" : ", ");
            gc_json_str(f, ds->d[i].name);
            fprintf(f, ": %.6g", gc_hz_to_mhz(domain_level_hz[i]));
            first = 0;
        }
        fputc('}', f);
    }
    fputc('}', f);
}

void gc_json_power_fields(FILE *f, const gc_power_mode *pm, const gc_gpu_cap *cap, const char *sep)
{
    fprintf(f, "\"power_mode\": {\"id\": ");
    if (pm->id >= 0)
        fprintf(f, "%d", pm->id);
    else
        fprintf(f, "null");
    fprintf(f, ", \"name\": ");
    if (pm->name[0])
        gc_json_str(f, pm->name);
    else
        fprintf(f, "null");
    fprintf(f, ", \"gpu_max_mhz\": ");
    json_mhz_or_null(f, pm->gpu_max_hz);
    fprintf(f, ", \"unknown\": ");
    if (pm->why[0])
        gc_json_str(f, pm->why);
    else
        fprintf(f, "null");
    fprintf(f, "},%s\"gpu_cap\": ", sep);
    if (!cap) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"cap_mhz\": ");
    json_mhz_or_null(f, cap->cap_hz);
    fprintf(f, ", \"devfreq_max_mhz\": ");
    json_mhz_or_null(f, cap->devfreq_max_hz);
    fprintf(f, ", \"from_saved\": %s, \"nvpmodel_clk_cap_mhz\": ", cap->from_saved ? "true" : "false");
    json_mhz_or_null(f, cap->clk_cap_hz);
    fputc('}', f);
}

void gc_text_power_mode(FILE *f, const gc_power_mode *pm, const gc_gpu_cap *cap)
{
    char shown[GC_ERR_MAX];

    if (pm->id >= 0 && pm->name[0]) {
        gc_printable(pm->name, shown, sizeof shown);
        fprintf(f, "mode      %s (nvpmodel %d)", shown, pm->id);
    } else {
        gc_printable(pm->why, shown, sizeof shown);
        fprintf(f, "mode      unknown (%s)", shown);
    }
    if (!cap || !cap->cap_hz) {
        fprintf(f, "; GPU cap unknown");
        return;
    }
    fprintf(f, "; GPU cap %g MHz (max_freq %s %g MHz", gc_hz_to_mhz(cap->cap_hz),
            cap->from_saved ? "saved before the first pin" : "now", gc_hz_to_mhz(cap->devfreq_max_hz));
    if (cap->clk_cap_hz)
        fprintf(f, ", nvpmodel_clk_cap %g MHz", gc_hz_to_mhz(cap->clk_cap_hz));
    fprintf(f, ")");
}

void gc_json_restore(FILE *f, int restored, const gc_clock_state *now, const char *domains)
{
    const char *p = domains ? domains : "";
    int first = 1;

    fprintf(f, "{\"restored\": %s, \"governor\": ", restored ? "true" : "false");
    gc_json_str(f, now->governor);
    fprintf(f, ", \"min_mhz\": %.6g, \"max_mhz\": %.6g, \"domains\": [", gc_hz_to_mhz(now->min_hz),
            gc_hz_to_mhz(now->max_hz));
    while (*p) { /* "emc cpu0 cpu4": plain names */
        size_t n = strcspn(p, " ");

        fprintf(f, "%s\"%.*s\"", first ? "" : ", ", (int)n, p);
        first = 0;
        p += n;
        p += *p == ' ';
    }
    fprintf(f, "]}");
}

/* What the tree expects of its choice, why it kept the board at MAXN, and where the tree comes
 * from (pydvfs's Decision has the same keys). */
static void gc_json_knows(FILE *f, const gc_tree_model *m, const gc_workload *w, const gc_decision *d)
{
    char why[GC_ERR_MAX];
    double range[2];

    fprintf(f, ", \"expected_saving_pct\": ");
    if (d->has_expectation)
        fprintf(f, "%.17g, \"saving_spread_pct\": %.17g", d->expected_saving_pct, d->saving_spread_pct);
    else
        fprintf(f, "null, \"saving_spread_pct\": null");
    fprintf(f, ", \"saving_range_pct\": ");
    if (gc_saving_range(m, d, range))
        fprintf(f, "[%.15g, %.15g]", range[0], range[1]); /* the table's 2-decimal values, as written */
    else
        fprintf(f, "null");
    fprintf(f, ", \"kept_from_mhz\": ");
    json_mhz_or_null(f, d->kept_maxn ? d->kept_from_hz : 0);
    gc_kept_reason(d, why, sizeof why);
    fprintf(f, ", \"kept_reason\": ");
    if (why[0])
        gc_json_str(f, why);
    else
        fprintf(f, "null");
    gc_outside_reason(m, d->policy, w, why, sizeof why);
    fprintf(f, ", \"outside_training\": ");
    if (why[0])
        gc_json_str(f, why);
    else
        fprintf(f, "null");
    fprintf(f, ", \"origin\": {\"kind\": ");
    if (m->origin[0])
        gc_json_str(f, gc_tree_origin_kind(m));
    else
        fprintf(f, "null");
    fprintf(f, ", \"source\": ");
    if (m->origin[0])
        gc_json_str(f, m->origin);
    else
        fprintf(f, "null");
    fprintf(f, ", \"board\": ");
    if (m->board_id[0])
        gc_json_str(f, m->board_id);
    else
        fprintf(f, "null");
    fprintf(f, ", \"measure\": ");
    if (m->measure[0])
        gc_json_str(f, m->measure);
    else
        fprintf(f, "null");
    fprintf(f, ", \"calibrated\": %s}", m->calibrated < 0 ? "null" : m->calibrated ? "true" : "false");
}

void gc_json_decision(FILE *f, const gc_tree_model *m, const char *model_name, const char *name,
                      const gc_workload *w, const gc_decision *d, int dry_run, const char *warning)
{
    double x[GC_MAX_FEATURES];
    char err[GC_ERR_MAX];
    int i;

    fprintf(f, "{\"freq_mhz\": ");
    if (d->level_hz == 0)
        fprintf(f, "null, \"proposed_mhz\": null");
    else
        fprintf(f, "%.6g, \"proposed_mhz\": %.6g", gc_hz_to_mhz(d->level_hz), d->proposed_mhz);
    fprintf(f, ", \"policy_mhz\": ");
    if (d->policy_level_hz == 0)
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", gc_hz_to_mhz(d->policy_level_hz));
    fprintf(f, ", \"objective\": {\"kind\": \"%s\", \"max_slowdown_pct\": ",
            gc_objective_name(d->goal.objective));
    if (d->goal.max_slowdown_pct >= 0)
        fprintf(f, "%.17g}", d->goal.max_slowdown_pct);
    else
        fprintf(f, "null}");
    fprintf(f, ", \"trade\": ");
    if (d->trade_vs_hz == 0)
        fprintf(f, "null");
    else
        fprintf(f, "{\"vs_mhz\": %.6g, \"j_per_step_pct\": %.17g, \"s_per_step_pct\": %.17g, "
                   "\"basis\": \"roofline\"}", gc_hz_to_mhz(d->trade_vs_hz), d->trade_j_pct, d->trade_s_pct);
    fprintf(f, ", \"policy\": \"%s\", \"model\": ", gc_policy_name(d->policy));
    gc_json_str(f, m->name);
    fprintf(f, ", \"mapped_from_mhz\": ");
    if (d->mapped_from_mhz > 0)
        fprintf(f, "%.6g", d->mapped_from_mhz);
    else
        fprintf(f, "null");
    fprintf(f, ", \"trained_on\": {\"board\": ");
    if (m->board_id[0])
        gc_json_str(f, m->board_id);
    else
        fprintf(f, "null");
    fprintf(f, ", \"levels_mhz\": [");
    for (i = 0; i < m->n_levels; i++)
        fprintf(f, "%s%.6g", i ? ", " : "", m->levels_mhz[i]);
    fprintf(f, "]}");
    gc_json_knows(f, m, w, d);
    fprintf(f, ", \"power_cap_mhz\": ");
    json_mhz_or_null(f, d->cap_hz);
    fprintf(f, ", \"clamped_from_mhz\": ");
    json_mhz_or_null(f, d->clamped_from_hz);
    fprintf(f, ", \"dry_run\": %s, \"workload\": {\"model\": ", dry_run ? "true" : "false");
    gc_json_str(f, model_name);
    fprintf(f, ", \"layers\": ");
    json_num(f, w->layers);
    fprintf(f, ", \"hidden\": ");
    json_num(f, w->hidden);
    fprintf(f, ", \"seq_len\": ");
    json_num(f, w->seq_len);
    fprintf(f, ", \"util_pct\": ");
    if (w->gpu_util_pct >= 0)
        json_num(f, w->gpu_util_pct);
    else
        fprintf(f, "null");
    if (name && *name) { /* a label: as pydvfs's JSON has it */
        fprintf(f, ", \"name\": ");
        gc_json_str(f, name);
    }
    /* how it trains; a count not given is null, as pydvfs's Workload has it */
    fprintf(f, ", \"peft\": \"%s\"", gc_peft_names[w->peft >= 0 && w->peft < GC_PEFT_COUNT ? w->peft : 0]);
    {
        const double nums[] = {w->rank, w->trainable_params, w->weight_bits, w->batch_size};
        static const char *const keys[] = {"rank", "trainable_params", "weight_bits", "batch_size"};

        for (i = 0; i < 4; i++)
            if (nums[i] > 0) {
                fprintf(f, ", \"%s\": ", keys[i]);
                json_num(f, nums[i]);
            } else
                fprintf(f, ", \"%s\": null", keys[i]);
    }
    fprintf(f, ", \"precision\": \"%s\", \"tokens_per_step\": ",
            gc_precision_names[w->precision >= 0 && w->precision < GC_PRECISION_COUNT ? w->precision : 0]);
    if (w->tokens_per_step > 0)
        json_num(f, w->tokens_per_step);
    else
        fprintf(f, "null");
    fprintf(f, "}, \"features\": {");
    if (gc_features(m, w, x, err, sizeof err) == 0)
        for (i = 0; i < m->n_features; i++) {
            fprintf(f, "%s", i ? ", " : "");
            gc_json_str(f, m->feature_names[i]);
            fprintf(f, ": %.17g", x[i]);
        }
    fprintf(f, "}");
    if (warning && *warning) {
        fputs(", \"warning\": ", f);
        gc_json_str(f, warning);
    }
    fputc('}', f);
}

void gc_json_roles_board(FILE *f, const gc_board *b)
{
    int role, k;

    fprintf(f, "\"roles\": {");
    for (role = 0; role < GC_N_ROLES; role++) {
        fprintf(f, "%s\"%s\": ", role ? ", " : "", gc_role_names[role]);
        if (b->role_n[role] < 0) {
            fprintf(f, "null");
            continue;
        }
        fputc('[', f);
        for (k = 0; k < b->role_n[role]; k++) {
            fprintf(f, "%s", k ? ", " : "");
            gc_json_str(f, b->rails[b->role_rail[role][k]].name);
        }
        fputc(']', f);
    }
    fputc('}', f);
    fprintf(f, ", \"module_partial\": %s",
            b->role_n[GC_ROLE_MODULE] > 0 && b->role_partial[GC_ROLE_MODULE] ? "true" : "false");
}

/* The same for a sampler's rails. */
static void json_roles_sampler(FILE *f, const gc_sampler *s)
{
    const int *rails;
    int role, k, n;

    fprintf(f, "\"roles\": {");
    for (role = 0; role < GC_N_ROLES; role++) {
        fprintf(f, "%s\"%s\": ", role ? ", " : "", gc_role_names[role]);
        n = gc_sampler_role(s, role, &rails);
        if (n < 0) {
            fprintf(f, "null");
            continue;
        }
        fputc('[', f);
        for (k = 0; k < n; k++) {
            fprintf(f, "%s", k ? ", " : "");
            gc_json_str(f, gc_sampler_rail_name(s, rails[k]));
        }
        fputc(']', f);
    }
    fputc('}', f);
    fprintf(f, ", \"module_partial\": %s", gc_sampler_role_partial(s, GC_ROLE_MODULE) ? "true" : "false");
}

/* The reading-quality keys (the same in pydvfs's Measurement.to_dict): per rail the failed reads,
 * the share of the window interpolated or held over them and the negative readings; the rails
 * with any of those; and whether all readings were good. */
static void json_quality_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep)
{
    static const char *const keys[] = {"failed_reads", "interpolated_pct", "negative_readings"};
    int i, k, n;

    for (k = 0; k < 3; k++) {
        fprintf(f, ",%s\"%s\": {", sep, keys[k]);
        for (i = 0; i < w->n_rails; i++) {
            fprintf(f, "%s", i ? ", " : "");
            gc_json_str(f, gc_sampler_rail_name(s, i));
            if (k == 1)
                fprintf(f, ": %.6g", w->interpolated_pct[i]);
            else
                fprintf(f, ": %llu", (unsigned long long)(k == 0 ? w->failed_reads[i] : w->negative_readings[i]));
        }
        fprintf(f, "}");
    }
    fprintf(f, ",%s\"incomplete_rails\": [", sep);
    for (i = 0, n = 0; i < w->n_rails; i++)
        if (w->failed_reads[i] || w->negative_readings[i]) {
            fprintf(f, "%s", n++ ? ", " : "");
            gc_json_str(f, gc_sampler_rail_name(s, i));
        }
    fprintf(f, "],%s\"readings_ok\": %s", sep, w->readings_ok ? "true" : "false");
}

/* A number, or null where the energy is not known (fewer than GC_MIN_READINGS readings). */
static void json_energy(FILE *f, int known, double v)
{
    if (known)
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* known: the window has enough readings for an energy (gc_window_no_energy). */
static void window_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep, int known)
{
    double dur_s = (double)w->duration_ns / 1e9, role_j;
    int i, role_known;

    fprintf(f, "\"duration_s\": %.9g,%s\"board\": ", dur_s, sep);
    if (gc_sampler_board_id(s)[0])
        gc_json_str(f, gc_sampler_board_id(s));
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"energy_j\": {", sep);
    for (i = 0; i < w->n_rails; i++) {
        fprintf(f, "%s", i ? ", " : "");
        gc_json_str(f, gc_sampler_rail_name(s, i));
        fputs(": ", f);
        json_energy(f, known, w->energy_j[i]);
    }
    fprintf(f, "}");
    for (i = 0; i < GC_N_ROLES; i++) {
        role_j = gc_window_role_j(s, w, i, &role_known);
        fprintf(f, ",%s\"%s_energy_j\": ", sep, gc_role_names[i]);
        json_energy(f, known && role_known, role_j);
    }
    fprintf(f, ",%s", sep);
    json_roles_sampler(f, s);
    fprintf(f, ",%s\"avg_power_w\": {", sep);
    for (i = 0; i < w->n_rails; i++) {
        fprintf(f, "%s", i ? ", " : "");
        gc_json_str(f, gc_sampler_rail_name(s, i));
        fputs(": ", f);
        json_energy(f, known, w->avg_power_w[i]);
    }
    fprintf(f, "},%s\"gpu_util_pct\": ", sep);
    if (w->gpu_util_pct >= 0)
        fprintf(f, "%.6g", w->gpu_util_pct);
    else
        fprintf(f, "null");
    fprintf(f, ",%s\"samples\": %llu,%s\"read_errors\": %llu,%s\"rate_hz\": %.6g", sep,
            (unsigned long long)w->samples, sep, (unsigned long long)w->read_errors, sep, w->rate_hz);
    json_quality_fields(f, s, w, sep);
}

void gc_json_domains(FILE *f, const gc_domains *ds, const gc_domain_state *now)
{
    int i, j;

    fprintf(f, "[");
    for (i = 0; i < ds->n; i++) {
        const gc_domain *d = &ds->d[i];
        const gc_domain_state *st = &now[i];

        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        gc_json_str(f, d->name);
        fprintf(f, ", \"kind\": \"%s\", \"available\": %s, \"why\": ",
                d->kind == GC_DOMAIN_CPU ? "cpu" : "emc", d->available ? "true" : "false");
        if (d->available)
            fprintf(f, "null");
        else
            gc_json_str(f, d->why);
        fprintf(f, ", \"levels_mhz\": [");
        for (j = 0; j < d->n_levels; j++)
            fprintf(f, "%s%.6g", j ? ", " : "", gc_hz_to_mhz(d->levels_hz[j]));
        fprintf(f, "]");
        if (d->kind == GC_DOMAIN_EMC_DEVFREQ) { /* Thor's bwmgr: its range is the ceiling */
            fprintf(f, ", \"cap_mhz\": null, \"devfreq\": ");
            gc_json_str(f, d->devfreq);
        } else if (d->kind == GC_DOMAIN_EMC) {
            fprintf(f, ", \"cap_mhz\": ");
            if (d->cap_hz)
                fprintf(f, "%.6g", gc_hz_to_mhz(d->cap_hz));
            else
                fprintf(f, "null");
        } else {
            fprintf(f, ", \"related_cpus\": ");
            gc_json_str(f, d->related_cpus);
        }
        if (!st->saved) {
            fprintf(f, ", \"cur_mhz\": null, \"pinned\": null}");
            continue;
        }
        if (d->kind == GC_DOMAIN_EMC_DEVFREQ) {
            fprintf(f, ", \"governor\": ");
            gc_json_str(f, st->governor);
            fprintf(f, ", \"cur_mhz\": %.6g, \"min_mhz\": %.6g, \"max_mhz\": %.6g, \"locked\": %s, "
                    "\"pinned\": %s}", gc_hz_to_mhz(st->rate_hz), gc_hz_to_mhz(st->min_hz),
                    gc_hz_to_mhz(st->max_hz), st->locked ? "true" : "false", st->locked ? "true" : "false");
        } else if (d->kind == GC_DOMAIN_EMC) {
            fprintf(f, ", \"cur_mhz\": %.6g, \"locked\": %s, \"pinned\": %s}",
                    gc_hz_to_mhz(st->rate_hz), st->locked ? "true" : "false",
                    st->locked ? "true" : "false");
        } else {
            fprintf(f, ", \"governor\": ");
            gc_json_str(f, st->governor);
            fprintf(f, ", \"cur_mhz\": ");
            if (st->rate_hz)
                fprintf(f, "%.6g", gc_hz_to_mhz(st->rate_hz));
            else
                fprintf(f, "null");
            fprintf(f, ", \"min_mhz\": %.6g, \"max_mhz\": %.6g, \"pinned\": %s}",
                    gc_hz_to_mhz(st->min_hz), gc_hz_to_mhz(st->max_hz),
                    st->min_hz == st->max_hz ? "true" : "false");
        }
    }
    fprintf(f, "]");
}

void gc_print_domains(FILE *f, const gc_domains *ds, const gc_domain_state *now)
{
    int i;

    for (i = 0; i < ds->n; i++) {
        const gc_domain *d = &ds->d[i];
        const gc_domain_state *st = &now[i];
        char shown[GC_ERR_MAX];

        if (!st->saved) {
            gc_printable(d->why, shown, sizeof shown);
            fprintf(f, "%-9s unavailable: %s\n", d->name, shown);
        } else if (d->kind == GC_DOMAIN_EMC_DEVFREQ) {
            gc_printable(st->governor, shown, sizeof shown);
            fprintf(f, "%-9s %g MHz, %s (devfreq %s, min %g max %g MHz; %d rates %g..%g MHz)", d->name,
                    gc_hz_to_mhz(st->rate_hz), st->locked ? "pinned (min_freq = max_freq)"
                    : "the board's memory scaling", d->devfreq, gc_hz_to_mhz(st->min_hz),
                    gc_hz_to_mhz(st->max_hz), d->n_levels, d->n_levels ? gc_hz_to_mhz(d->levels_hz[0]) : 0.0,
                    d->n_levels ? gc_hz_to_mhz(d->levels_hz[d->n_levels - 1]) : 0.0);
        } else if (d->kind == GC_DOMAIN_EMC) {
            fprintf(f, "%-9s %g MHz, %s (%d rates %g..%g MHz", d->name, gc_hz_to_mhz(st->rate_hz),
                    st->locked ? "pinned (mrq_rate_locked 1)" : "the board's memory scaling",
                    d->n_levels, d->n_levels ? gc_hz_to_mhz(d->levels_hz[0]) : 0.0,
                    d->n_levels ? gc_hz_to_mhz(d->levels_hz[d->n_levels - 1]) : 0.0);
            if (d->cap_hz)
                fprintf(f, ", cap %g MHz", gc_hz_to_mhz(d->cap_hz));
            fprintf(f, ")");
        } else {
            gc_printable(st->governor, shown, sizeof shown);
            fprintf(f, "%-9s %s, min %g max %g MHz%s (CPUs %s; %d levels %g..%g MHz)", d->name,
                    shown, gc_hz_to_mhz(st->min_hz), gc_hz_to_mhz(st->max_hz),
                    st->min_hz == st->max_hz ? ", pinned" : "", d->related_cpus, d->n_levels,
                    d->n_levels ? gc_hz_to_mhz(d->levels_hz[0]) : 0.0,
                    d->n_levels ? gc_hz_to_mhz(d->levels_hz[d->n_levels - 1]) : 0.0);
        }
        if (st->saved && !d->available) { /* shown (readable), not pinnable here: why */
            gc_printable(d->why, shown, sizeof shown);
            fprintf(f, "; cannot be pinned: %s", shown);
        }
        if (st->saved)
            fputc('\n', f);
    }
}

void gc_json_window_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep)
{
    window_fields(f, s, w, sep, 1);
}

int gc_window_no_energy(const gc_window *w, char *why, size_t len)
{
    if (w->samples >= GC_MIN_READINGS)
        return 0;
    snprintf(why, len, "%llu reading%s of the rails in %.3f s: an energy needs at least %d (the "
             "command ended before the sensor's next update); measure something longer",
             (unsigned long long)w->samples, w->samples == 1 ? "" : "s",
             (double)w->duration_ns / 1e9, GC_MIN_READINGS);
    return 1;
}

void gc_json_measure_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep)
{
    char why[256];
    int none = gc_window_no_energy(w, why, sizeof why);

    window_fields(f, s, w, sep, !none);
    fprintf(f, ",%s\"no_energy_reason\": ", sep);
    if (none)
        gc_json_str(f, why);
    else
        fputs("null", f);
}

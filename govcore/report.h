/* report.h - the records govcore reports, as JSON: one writer per record, shared by the verbs
 * (indented, on stdout) and by `govcore serve` (one line per reply). The pydvfs CLI prints the
 * same keys (tests compare the two).
 *
 * Writers print no trailing newline. `one_line` = 0 gives the verbs' indented layout.
 */
#ifndef GOVCORE_REPORT_H
#define GOVCORE_REPORT_H

#include "domain.h"
#include "govcore.h"
#include "policy.h"
#include "powermode.h"
#include "sampler.h"

#include <stdio.h>

/* What `status` shows: the clock now, the GPU load and the saved state. */
typedef struct gc_status {
    gc_clock_state clock;
    int load_permille;              /* -1 if the board has no load file */
    int have_saved;                 /* a state is saved (the board was changed) */
    gc_clock_state saved;           /* governor/min/max saved before the first change */
    char state_path[GC_PATH_MAX];
    int no_state_dir;               /* no private state folder (a user without $XDG_RUNTIME_DIR and
                                     * no --state-dir): whether a state is saved is not known */
    int have_live;                  /* live is filled (gc_status_live) */
    gc_window live;                 /* watts per rail and GPU load over a short window */
    double role_w[GC_N_ROLES];      /* watts per rail role over that window (module, CPU+GPU,
                                       GPU; gc_role_names); < 0 where the role is not known */
    gc_domains domains;             /* the EMC and CPU policies (unavailable ones with a reason) */
    gc_domain_state dom_now[GC_MAX_DOMAINS]; /* each one's state where readable (saved = 1) */
    gc_power_mode mode;             /* the power mode in force (id -1: unknown, mode.why says why) */
    int have_cap;                   /* cap is filled (0: the saved state or max_freq unreadable) */
    gc_gpu_cap cap;                 /* the GPU cap a pin obeys (powermode.h) */
} gc_status;

/* Read the status of a board. -errno with b->err. */
int gc_status_read(gc_board *b, const char *state_dir, gc_status *st);

/* Watts per rail and GPU load over one short sampler window (GC_LIVE_WINDOW_MS), into st->live
 * (the rails in the board's order). 1 if filled, 0 if there is nothing to sample. */
#define GC_LIVE_WINDOW_MS 250
int gc_status_live(gc_board *b, gc_status *st);
/* 1 if every rail of the live window read 0 W (the sensor off, or a fake board nobody animates). */
int gc_status_all_zero(const gc_status *st);

/* A JSON string literal (control characters escaped). */
void gc_json_str(FILE *f, const char *s);

void gc_json_status(FILE *f, const gc_board *b, const gc_status *st, int one_line);
/* The clock domains beside the GPU, as a JSON list (status's "domains"). */
void gc_json_domains(FILE *f, const gc_domains *ds, const gc_domain_state *now);
/* The same as text, one line per domain, each line starting with prefix. */
void gc_print_domains(FILE *f, const gc_domains *ds, const gc_domain_state *now);
/* A pin's record after gc_pin_hz or gc_pin_mode: the level (null: the GPU left as it was), the
 * state file, what the power mode's cap did (b->cap_hz, b->clamped_from_hz: power_cap_mhz null
 * where lifted or none known, clamped_from_mhz null where not clamped), "warning" where b->warn
 * is set (the original saved is itself a pin), and with ds "domains": {name: level MHz} of the
 * other clock domains it set (domain_level_hz[i], 0: untouched). */
void gc_json_pin(FILE *f, const gc_board *b, double requested_mhz, uint64_t level_hz,
                 const char *state_path, const gc_domains *ds, const uint64_t *domain_level_hz);
/* The power mode and the GPU cap fields of status, without braces: "power_mode": {...},
 * "gpu_cap": {...} (sep between them). */
void gc_json_power_fields(FILE *f, const gc_power_mode *pm, const gc_gpu_cap *cap, const char *sep);
/* One line of text for status: the mode's name and id, and the GPU cap (no newline). */
void gc_text_power_mode(FILE *f, const gc_power_mode *pm, const gc_gpu_cap *cap);
void gc_json_restore(FILE *f, int restored, const gc_clock_state *now, const char *domains);
/* An apply decision: the clock, the policy's own level, the goal and its predicted trade, the
 * policy, the model and the features the tree saw (the workload's "name" where name is set and
 * not ""); "warning" where warning is set (the pin's
 * b->warn: the original it saved is itself a pin). */
void gc_json_decision(FILE *f, const gc_tree_model *m, const char *model_name, const char *name,
                      const gc_workload *w, const gc_decision *d, int dry_run, const char *warning);

/* "roles": {"module": [rails] | null, ...}: which rails make each role (null: not known; []: the
 * board has no such role), then "module_partial": true where the module is summed over the rails
 * present, an optional rail of the table missing (gc_board.role_partial). */
void gc_json_roles_board(FILE *f, const gc_board *b);

/* A window's fields (the Measurement of pydvfs), without the braces: duration_s, board,
 * energy_j, module_energy_j, cpu_gpu_energy_j, gpu_energy_j (each by rail role, null where
 * not known: no sum over "all rails"), roles, avg_power_w, gpu_util_pct, samples, read_errors, rate_hz and the reading-quality keys. sep goes between two
 * fields. */
void gc_json_window_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep);

/* A measurement needs two readings of the rails: with fewer (`measure -- true`) it reports no
 * energy. gc_window_no_energy: 1 with the reason in why (the same words as pydvfs measure), or
 * 0. gc_json_measure_fields: gc_json_window_fields with the energies and powers null in that
 * case, then no_energy_reason (null or the reason). */
#define GC_MIN_READINGS 2
int gc_window_no_energy(const gc_window *w, char *why, size_t len);
void gc_json_measure_fields(FILE *f, const gc_sampler *s, const gc_window *w, const char *sep);

#endif

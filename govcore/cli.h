/* cli.h - what the verbs of the `govcore` binary share: the parsed command line, the one-line
 * error and its exit status, opening the board, the way to the daemon, and the text records of
 * each verb (cli_text.c). main.c dispatches; each verb (cmd_board.c, cmd_apply.c,
 * cmd_measure.c) parses its arguments, calls the library and prints. */
#ifndef GOVCORE_CLI_H
#define GOVCORE_CLI_H

#include "domain.h"
#include "err.h"
#include "govcore.h"
#include "policy.h"
#include "report.h"
#include "sampler.h"

#include <stdio.h>

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

/* The verbs. */
int cmd_status(const struct options *o);
int cmd_pin(const struct options *o);
int cmd_restore(const struct options *o);
int cmd_apply(const struct options *o);
int cmd_measure(const struct options *o);

/* cli.c: the shared front end. fail: one line on stderr ("govcore: error: ..."), EXIT_USAGE. */
int fail(const char *fmt, ...) GC_PRINTF(1, 2);
int fail_board(const gc_board *b, int rc);
int open_board(const struct options *o, gc_board *b);
extern const char no_daemon[];
const char *daemon_socket(const gc_board *b);
int via_daemon(const char *socket_path, const char *request, int pinning);
int board_writable(const gc_board *b);
const char *opt_value(const struct options *o, int *i);
int parse_number(const char *name, const char *text, double *out);
const char *shown(const char *board_text, char *out, size_t len);
const char *role_label(int role);
void note_clamped(const gc_board *b, const char *verb);

/* What `govcore apply` was asked (cmd_apply.c parses it; cli_text.c prints its decision). */
struct apply_args {
    gc_workload w;
    char model_name[GC_MODEL_NAME_MAX]; /* the model type (bert, pythia, ...) */
    char name[GC_MODEL_NAME_MAX];       /* the spec's name=, "" where it gives none */
    gc_goal goal;
    const char *model_dir;              /* NULL: the built-in policy of the board */
    const char *measure;
    int policy, dry_run, above;
};

/* cli_text.c: each verb's record, as text (or --json where the verb's record is printed here). */
void print_status(const gc_board *b, const gc_status *st);
void print_pinned(const gc_board *b, double mhz, uint64_t level_hz, int snapped, const gc_domains *ds,
                  const uint64_t *levels, uint64_t cpu_hz);
void report_restored(const struct options *o, gc_board *b, int restored, const char *domains);
void print_decision(const struct options *o, const gc_board *b, const gc_tree_model *model,
                    const struct apply_args *a, const gc_decision *d);
void print_measure(FILE *out, const struct options *o, const gc_sampler *s, const gc_window *w,
                   int exit_status);

#endif

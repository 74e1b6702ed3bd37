/* cmd_apply.c - `govcore apply`: parse the workload and the goal, decide (and pin) through the
 * library or the daemon, print the decision (cli_text.c). */
#include "cli.h"
#include "lock.h"
#include "protocol.h"
#include "serve.h"

#include <string.h>

static int apply_via_daemon(const char *socket_path, int policy, const char *model_name,
                            const gc_workload *w, const char *model_dir, const char *measure,
                            const gc_goal *goal, int dry_run)
{
    gc_request rq;
    char request[GC_REQ_MAX + 1], err[GC_ERR_MAX];

    if (model_dir)
        return fail("through the daemon only the built-in tree or one root installed can be used "
                    "(`pydvfs` passes tree=NAME for " GC_SERVE_POLICY_DIR "/NAME); not --model-dir");
    memset(&rq, 0, sizeof rq);
    rq.policy = policy;
    rq.workload = *w;
    snprintf(rq.model, sizeof rq.model, "%s", model_name);
    rq.goal = *goal;
    rq.measure = measure;
    rq.dry_run = dry_run;
    if (gc_request_format_apply(&rq, request, sizeof request, err, sizeof err) < 0)
        return fail("%s", err);
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

/* apply's options into p: the workload (--workload, or the flags of its keys), the policy, the
 * model folder, the measure and the goal. 0, or EXIT_USAGE with the error printed. */
static int parse_apply(const struct options *o, struct apply_args *p)
{
    static const gc_workload no_workload = {0, -1.0, 0, 0, 0, GC_PEFT_NONE, 0, 0, 0, GC_PRECISION_FP32, 0, 0};
    static const gc_goal no_goal = {GC_OBJECTIVE_ENERGY, -1.0};
    char err[GC_ERR_MAX] = "";
    const char *v;
    unsigned have = 0;
    int i;

    memset(p, 0, sizeof *p);
    p->w = no_workload;
    p->goal = no_goal;
    p->measure = gc_energy_measures[0];
    p->policy = GC_POLICY_MLG;
    for (i = 0; i < o->argc; i++) {
        const char *a = o->argv[i];
        int field = -1;

        if (strcmp(a, "--dry-run") == 0) {
            p->dry_run = 1;
            continue;
        }
        if (strcmp(a, "--above-power-mode") == 0) {
            p->above = 1;
            continue;
        }
        if (!(v = opt_value(o, &i)))
            return EXIT_USAGE;
        if (strcmp(a, "--workload") == 0) {
            if (gc_workload_parse(v, &p->w, p->model_name, sizeof p->model_name, &have, err, sizeof err) < 0)
                return fail("--%s", err);
            spec_label(v, "name", p->name, sizeof p->name);
            continue;
        }
        if (strcmp(a, "--model") == 0) {
            field = GC_WF_MODEL;
        } else if (strcmp(a, "--policy") == 0) {
            if (gc_policy_parse(v, &p->policy) < 0) {
                char names[128];

                gc_policy_list(names, sizeof names);
                return fail("unknown policy '%s': expected %s", v, names);
            }
        } else if (strcmp(a, "--model-dir") == 0) {
            p->model_dir = v;
        } else if (strcmp(a, "--energy") == 0) {
            if (gc_measure_parse(v, &p->measure) < 0)
                return fail("unknown energy measure '%s': expected %s or %s", v, gc_energy_measures[0],
                            gc_energy_measures[1]);
        } else if (strcmp(a, "--objective") == 0) {
            if (gc_objective_parse(v, &p->goal.objective) < 0)
                return fail("unknown objective '%s': expected energy, edp or ed2p", v);
        } else if (strcmp(a, "--max-slowdown") == 0) {
            if (parse_number(a, v, &p->goal.max_slowdown_pct) != 0)
                return EXIT_USAGE;
            if (p->goal.max_slowdown_pct < 0)
                return fail("--max-slowdown must be a finite %% >= 0 (got %g)", p->goal.max_slowdown_pct);
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
        if (gc_workload_set(&p->w, field, v, strlen(v), p->model_name, sizeof p->model_name, err, sizeof err) < 0)
            return fail("--%s", err);
    }
    if ((have & GC_WORKLOAD_REQUIRED) != GC_WORKLOAD_REQUIRED)
        return fail("apply needs --workload model=..,layers=..,hidden=..,seq_len=.. (or --model, "
                    "--layers, --hidden and --seq-len)");
    if (gc_workload_check(&p->w, err, sizeof err) < 0)
        return fail("%s", err);
    return 0;
}

/* The model folder's roofline curve (where the policy or a slowdown bound needs it) and tree.
 * 0, or EXIT_USAGE with the error printed. */
static int load_policy(const struct apply_args *a, gc_roofline *roofline, const gc_roofline **rl,
                       gc_tree_model *model, void **handle)
{
    char err[GC_ERR_MAX] = "";

    /* the time curve a slowdown bound needs, where a model folder is given (else gc_decide_goal
     * says what is missing) */
    if ((gc_policy_of(a->policy)->flags & GC_POLICY_NEEDS_MODEL_DIR) ||
        (a->goal.max_slowdown_pct >= 0 && !(gc_policy_of(a->policy)->flags & GC_POLICY_PINS_NOTHING) && a->model_dir)) {
        char path[GC_PATH_MAX];

        if (!a->model_dir)
            return fail("the roofline policy needs --model-dir (a folder from `pydvfs train`)");
        snprintf(path, sizeof path, "%s/roofline.txt", a->model_dir);
        if (gc_roofline_load(path, roofline, err, sizeof err) < 0)
            return fail("%s", err);
        *rl = roofline;
    }
    if (a->model_dir && gc_tree_load(a->model_dir, model, handle, err, sizeof err) < 0)
        return fail("%s", err);
    return 0;
}

int cmd_apply(const struct options *o)
{
    struct apply_args a;
    gc_tree_model model = gc_builtin_tree;
    gc_roofline roofline;
    const gc_roofline *rl = NULL;
    gc_decision d;
    gc_board b;
    gc_lock lk;
    void *handle = NULL;
    int rc;

    if ((rc = parse_apply(o, &a)) != 0)
        return rc;
    if (a.above && !a.dry_run && daemon_socket(NULL))
        return fail("--above-power-mode is not available through the daemon: run as root");
    if (daemon_socket(NULL))
        return apply_via_daemon(daemon_socket(NULL), a.policy, a.model_name, &a.w, a.model_dir, a.measure,
                                &a.goal, a.dry_run);
    if ((rc = load_policy(&a, &roofline, &rl, &model, &handle)) != 0)
        return rc;
    if ((rc = open_board(o, &b)) != 0) {
        gc_tree_close(handle);
        return rc;
    }
    if (!a.dry_run && daemon_socket(&b)) {
        gc_tree_close(handle);
        if (a.above)
            return fail("--above-power-mode is not available through the daemon: run as root");
        return apply_via_daemon(daemon_socket(&b), a.policy, a.model_name, &a.w, a.model_dir, a.measure,
                                &a.goal, a.dry_run);
    }
    if (!a.model_dir) /* the built-in policy of this board and measure */
        model = *gc_builtin_for(b.board_id, a.measure);
    if (!a.dry_run && !board_writable(&b)) {
        gc_tree_close(handle);
        return fail("%s", no_daemon);
    }
    gc_lock_init(&lk);
    if (a.dry_run) {
        rc = gc_decide_goal(&b, &model, rl, a.policy, &a.w, &a.goal, &d);
    } else if ((rc = gc_lock_acquire(&b, LOCK_WAIT_MS, &lk)) == 0) {
        b.above_power_mode = a.above;
        rc = gc_apply_goal(&b, &model, rl, a.policy, &a.w, &a.goal, o->state_dir, &d);
        gc_lock_release(&lk);
    }
    if (rc < 0) {
        gc_tree_close(handle);
        return fail_board(&b, rc);
    }
    print_decision(o, &b, &model, &a, &d);
    if (!a.dry_run && b.warn[0]) /* the original it saved is itself a pin */
        fprintf(stderr, "govcore: warning: %s\n", b.warn);
    gc_tree_close(handle);
    return 0;
}

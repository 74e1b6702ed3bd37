/* policy.h - where a GPU clock is chosen. Policies only *propose* a clock in MHz; gc_decide
 * clamps the proposal to the board's table (the core, not the policy, has the last word), and
 * gc_apply sets it through clock.c.
 *
 * The interface of these files, one responsibility each:
 *   workload.c      the workload grammar (keys, bounds, spec parser, checks), model families
 *   features.c      the feature vector of a workload a tree reads
 *   policy_table.c  the policies' table (one entry per policy, as devfreq's governors) and
 *                   which built-in tree a board and measure get
 *   decide.c        the decision: map, check, snap, gate, bound, trade; why MAXN was kept; act
 *   roofline.c      the roofline model's time and energy, objectives and argmin
 *   policy_load.c   the checked loader of a model folder (policy.so, manifest, roofline.txt)
 *
 * Features are named; a trained tree lists the names it was trained on (in order) and
 * gc_features() computes each from a workload, so Python and C cannot disagree on the order.
 */
#ifndef GOVCORE_POLICY_H
#define GOVCORE_POLICY_H

#include "govcore.h"

#define GC_MAX_FEATURES 16
#define GC_MAX_CLASSES 32
/* The layout of gc_tree_model a policy.so is built against, and the format of a model folder's
 * manifest.txt (written by `pydvfs train`). A folder of another format is refused. */
#define GC_MODEL_FORMAT 1
#define GC_TREE_MAX_LEVELS 64    /* the training table a tree names (gc_tree_model.levels_mhz) */
#define GC_TREE_BOARD_MAX 32
#define GC_TREE_ORIGIN_MAX 24
#define GC_TREE_MEASURE_MAX 16
/* A foreign table is mapped by the fraction of its top level while the two top levels are
 * within this factor of each other; beyond it the policy declines (docs/policy.md). */
#define GC_TREE_MAP_MAX_RATIO 2.0

/* A policy is an index of gc_policies (policy_table.c), the one table of them. These names are for
 * the code that means one policy in particular (the protocol's default, the tests); adding a
 * policy is adding an entry to the table, nothing else. */
enum gc_policy {
    GC_POLICY_MLG = 0,      /* the learned decision tree */
    GC_POLICY_FFG = 1,      /* the best fixed clock of the training data */
    GC_POLICY_RULES = 2,    /* the paper's published rules */
    GC_POLICY_MAXN = 3,     /* the board's own governor state: restore, pin nothing */
    GC_POLICY_ROOFLINE = 4  /* the frequency-aware roofline model's argmin over the levels */
};

/* How a workload trains (issue 28): the trained share and the precisions. Zero is the default
 * of every field below: full fine-tuning in fp32, today's meaning. */
enum gc_peft { GC_PEFT_NONE = 0, GC_PEFT_LORA = 1, GC_PEFT_QLORA = 2, GC_PEFT_COUNT = 3 };
enum gc_precision { GC_PRECISION_FP32 = 0, GC_PRECISION_FP16 = 1, GC_PRECISION_BF16 = 2,
                    GC_PRECISION_COUNT = 3 };
#define GC_DEFAULT_LORA_RANK 8 /* PEFT's LoraConfig default r: a LoRA workload naming no rank */

/* What the policies know of a workload. */
typedef struct gc_workload {
    int is_decoder;      /* 0: encoder (BERT family), 1: decoder (Pythia / GPT family) */
    double gpu_util_pct; /* measured GPU utilisation, 0..100; negative if unknown */
    double layers;       /* transformer layers */
    double hidden;       /* hidden size */
    double seq_len;      /* average tokens per training sample */
    int peft;               /* enum gc_peft */
    double rank;            /* LoRA rank; 0: not given (GC_DEFAULT_LORA_RANK) */
    double trainable_params; /* trained parameters; 0: not given (from peft and rank) */
    double weight_bits;     /* 32, 16, 8 or 4 (8/4 quantised: qlora); 0: not given */
    int precision;          /* enum gc_precision: the compute's (fp16/bf16: autocast) */
    double batch_size;      /* samples per step; 0: not given */
    double tokens_per_step; /* real tokens per step; 0: not given */
} gc_workload;

/* The names of enum gc_peft ("none", "lora", "qlora") and enum gc_precision ("fp32", "fp16",
 * "bf16"), in their order: the one list of them (pydvfs reads it). */
extern const char *const gc_peft_names[GC_PEFT_COUNT];
extern const char *const gc_precision_names[GC_PRECISION_COUNT];
/* The training-method keys of a workload, in the order reports list them: peft, rank,
 * trainable_params, weight_bits, precision, batch_size, tokens_per_step. */
#define GC_N_METHOD_KEYS 7
extern const char *const gc_method_keys[GC_N_METHOD_KEYS];
/* The one grammar of a workload (docs/policy.md, "The workload grammar"): `govcore apply
 * --workload`, the daemon's apply requests and pydvfs (through the extension) all read it here.
 * Its keys are gc_workload_fields' names, each at most once, spelled exactly. A number is plain
 * decimal (gc_parse_decimal: ASCII digits, at most one '.' between digits; no sign, exponent,
 * hex, '_' or blank) within its key's bounds, whole where the key counts something; a spec
 * (key=value,...) is at most GC_WORKLOAD_SPEC_MAX bytes of printable ASCII without blanks. */
#define GC_NUMBER_DIGITS 15      /* digits (both sides of the point) a plain decimal may have */
#define GC_WORKLOAD_SPEC_MAX 1023
#define GC_MODEL_NAME_MAX 32     /* a model type's buffer (bert, pythia, ...) */
/* What no Jetson trains (gc_workload_check): layer-stack weights (12 L d^2) that do not fit in
 * the largest module's memory (AGX Thor, 128 GB) even at 4 bits (QLoRA's; a workload of the
 * library may describe a bigger GPU's run at its own bits: the Perseus stages), or more trainable
 * parameters than a model of the shape can have: GC_MAX_STACK_FACTOR x the 12 L d^2 of the
 * stack (gated MLPs reach about 2.2x) plus input and output embeddings of GC_MAX_VOCAB tokens. */
#define GC_MAX_MEMORY_BYTES 128e9
#define GC_MIN_WEIGHT_BITS 4
#define GC_MAX_STACK_FACTOR 4.0
#define GC_MAX_VOCAB 262144.0
enum gc_workload_kind { GC_WK_LABEL, GC_WK_NAME, GC_WK_WHOLE, GC_WK_DECIMAL };
typedef struct gc_workload_field {
    const char *key;
    int kind;        /* GC_WK_LABEL: a sweep's label, not read by the policies (name, task,
                      * model_size); GC_WK_NAME: model, peft, precision; else a number */
    double min, max; /* a number's bounds, inclusive */
} gc_workload_field;
/* The fields' indices in gc_workload_fields: the shape, gc_method_keys' seven in their order,
 * then the keys a sweep records. */
enum gc_workload_field_index {
    GC_WF_MODEL, GC_WF_LAYERS, GC_WF_HIDDEN, GC_WF_SEQ_LEN, GC_WF_UTIL_PCT,
    GC_WF_PEFT, GC_WF_RANK, GC_WF_TRAINABLE_PARAMS, GC_WF_WEIGHT_BITS, GC_WF_PRECISION,
    GC_WF_BATCH_SIZE, GC_WF_TOKENS_PER_STEP,
    GC_WF_NAME, GC_WF_TASK, GC_WF_HEADS, GC_WF_PARAMS, GC_WF_MODEL_SIZE,
    GC_N_WORKLOAD_FIELDS
};
/* The keys every workload gives (bits 1 << index, as gc_workload_parse sets *have). */
#define GC_WORKLOAD_REQUIRED \
    (1u << GC_WF_MODEL | 1u << GC_WF_LAYERS | 1u << GC_WF_HIDDEN | 1u << GC_WF_SEQ_LEN)
extern const gc_workload_field gc_workload_fields[GC_N_WORKLOAD_FIELDS];
/* The index of the key s[0..n) in gc_workload_fields, or -1. */
int gc_workload_field_of(const char *s, size_t n);
/* Plain decimal: digits, at most one '.' with a digit on each side, at most GC_NUMBER_DIGITS
 * digits; the one grammar of a number in a workload and a daemon request. -EINVAL otherwise. */
int gc_parse_decimal(const char *s, size_t n, double *out);
/* Set field f of w from its text value[0..n) (model: its name into model[model_len], its
 * family into w->is_decoder). -EINVAL with one line naming the key in err; the value is quoted
 * at the end as " (got '...')", which a front end that never echoes input cuts off. */
int gc_workload_set(gc_workload *w, int f, const char *value, size_t n, char *model, size_t model_len,
                    char *err, size_t len);
/* Parse a spec "key=value,key=value,..." into w, model and *have (bit 1 << field index); the
 * keys it requires and gc_workload_check are the caller's (govcore adds --layers etc.). */
int gc_workload_parse(const char *spec, gc_workload *w, char *model, size_t model_len, unsigned *have,
                      char *err, size_t len);
/* Every field of w within its bounds (a workload built by pydvfs's API comes here too), the keys
 * that agree with each other (rank needs peft lora/qlora and is at most hidden; 8/4-bit weights
 * need qlora; qlora's weights are 8/4 bits; trainable_params at least one rank-r adapter,
 * r x hidden), and a workload some Jetson can train (GC_MAX_MEMORY_BYTES, GC_MAX_STACK_FACTOR).
 * -EINVAL with one line in err. */
int gc_workload_check(const gc_workload *w, char *err, size_t len);
/* The range of the built-in policies' training workloads (tools/gen_policies.py: the paper's
 * models and the SFT decoders of pydvfs/sim/workloads.py on the characterisation tasks; a test
 * holds these to that catalogue): a workload outside it gets a notice, not a refusal. */
#define GC_TRAINED_LAYERS_MIN 2.0
#define GC_TRAINED_LAYERS_MAX 32.0
#define GC_TRAINED_HIDDEN_MIN 128.0
#define GC_TRAINED_HIDDEN_MAX 3072.0
#define GC_TRAINED_SEQ_LEN_MIN 13.32
#define GC_TRAINED_SEQ_LEN_MAX 53.24
#define GC_TRAINED_ROUNDING 0.005 /* a value within 0.5 % of the range (typed rounded) is inside it */
/* " peft=lora rank=16 ..." (a leading space each): the keys that are not the default, numbers
 * in the protocol's plain decimal (gc_plain_decimal). "" if it does not fit in len. */
void gc_method_format(const gc_workload *w, char *out, size_t len);
/* A number as the protocol reads it (gc_parse_decimal's grammar, v >= 0): the fewest decimal
 * places that read back as v exactly (13.3, 64), or, where GC_NUMBER_DIGITS digits cannot, the
 * nearest such decimal. */
void gc_plain_decimal(char *out, size_t len, double v);
/* Compute per token of a transformer layer stack (paper B's proxy): 12 L d^2 + 3 L S d
 * (features.c: the tree's log10_c_tok and intensity, and the roofline model's work). */
double gc_c_tok(const gc_workload *w);
/* The weights' bits as the GEMMs read them: as given, else 4 for qlora, 16 for lora in
 * fp16/bf16, else 32 (pydvfs.policy.features.effective_weight_bits). */
double gc_weight_bits(const gc_workload *w);
/* The trained share of the layer stack's weights, 12 L d^2: trainable_params where given, else 1
 * for full fine-tuning and 4 r d L (rank-r adapters on the query and value projections) for
 * LoRA; at most 1 (pydvfs.policy.features.trainable_share). */
double gc_trainable_share(const gc_workload *w);

/* A decision tree exported by tools/export_policy.py (m2cgen) or by `pydvfs train`. */
typedef struct gc_tree_model {
    const char *name;                     /* where it came from, e.g. "builtin: sim sweep" */
    void (*score)(double *input, double *output); /* m2cgen: class probabilities */
    int n_features;
    const char *const *feature_names;     /* in the order score() expects them */
    int n_classes;
    const double *classes_mhz;            /* class i means classes_mhz[i]; 0 means MAXN */
    double default_util_pct[2];           /* used when util is unknown: encoder, decoder */
    double ffg_mhz;                       /* the best fixed clock of the same training data */
    const char *data_file;                /* provenance: the training data (file name) */
    const char *data_sha256;              /* its SHA-256 (hex; "" if it was not a file) */
    const char *trained_utc;              /* when the tree was fitted, ISO 8601 UTC */
    /* The board and GPU clock table the tree was trained on (docs/policy.md, "On another
     * board"): the built-in tree's are in policy_tree.c; a model folder's come from its
     * manifest (keys board, levels_mhz), never from policy.so (gc_tree_load copies only the
     * fields above from it, so a policy.so built before these existed still loads).
     * n_levels 0: not known (then proposals are snapped to the board's table as they are). */
    char board_id[GC_TREE_BOARD_MAX];     /* pydvfs.boards id, e.g. "agx-orin"; "" unknown */
    int n_levels;
    double levels_mhz[GC_TREE_MAX_LEVELS]; /* ascending */
    /* Where the tree comes from and what it knows of its own decisions (docs/policy.md, "Never
     * worse than the board's own governor"). A built-in's come from govcore/gen_policies_builtin.c
     * (tools/gen_policies.py); a model folder's from its manifest (optional keys measure,
     * class_saving_pct, class_spread_pct, ffg_saving_pct, ffg_spread_pct), the origin set by
     * the loader. has_savings 0: the expected savings are not known (then nothing is gated). */
    char origin[GC_TREE_ORIGIN_MAX];      /* GC_ORIGIN_BUILTIN, GC_ORIGIN_USER, ...; "" unknown */
    char measure[GC_TREE_MEASURE_MAX];    /* the energy it minimises: "module", "cpu-gpu"; "" unknown */
    int calibrated;                       /* 1: trained on a calibrated profile, 0: an estimate, -1 unknown */
    int has_savings;
    /* per class: the saving against MAXN (%) at the class clock of the training workloads the
     * tree sends there, their mean and standard deviation; the same of the FFG clock over all */
    double class_saving_pct[GC_MAX_CLASSES];
    double class_spread_pct[GC_MAX_CLASSES];
    double ffg_saving_pct;
    double ffg_spread_pct;
} gc_tree_model;

/* A policy's origin (gc_tree_model.origin). The board's own store of runs adds its own. */
#define GC_ORIGIN_BUILTIN "built-in"
#define GC_ORIGIN_USER "user folder"
#define GC_ORIGIN_BOARD_LEARNED "board-learned" /* reserved: a tree refitted on the board's runs */

/* What a tree's knowledge is, as a decision's origin "kind" says it (its "source" is m->origin):
 * a built-in trained on a calibrated simulator profile "calibrated", on an estimate "estimate"
 * (docs/policy.md, "Decisions that hold on the board a user has"); any other tree its origin. */
const char *gc_tree_origin_kind(const gc_tree_model *m);

/* A tree pins a clock only where its expected saving against MAXN is clearly positive: the
 * expected saving minus GC_SAVING_MARGIN_SD spreads above 0 (docs/policy.md); else the board is
 * left to its own governor. */
#define GC_SAVING_MARGIN_SD 1.0

/* The built-in policies, one per board of the table and energy measure (generated from
 * pydvfs/data/boards.json, pydvfs/energy.py and the boards' simulator profiles by
 * tools/gen_policies.py into govcore/gen_policies_builtin.c). */
typedef struct gc_builtin_policy {
    const char *board_id;
    const char *measure;
    const gc_tree_model *tree;
} gc_builtin_policy;
extern const gc_builtin_policy gc_builtin_policies[];
extern const int gc_n_builtin_policies;
extern const char *const gc_energy_measures[]; /* pydvfs.energy.MEASURES, NULL-terminated; [0] the default */
extern const char gc_builtin_fallback_board[];  /* whose policy a board the table does not know gets */
/* Parse an energy measure's name; -EINVAL otherwise. */
int gc_measure_parse(const char *name, const char **measure);
/* The built-in policy of board_id ("" or an id without one: gc_builtin_fallback_board's,
 * mapped onto the board's table by gc_map_to_board) for measure (NULL: the default). NULL for
 * a measure that is none. */
const gc_tree_model *gc_builtin_for(const char *board_id, const char *measure);

/* What a built-in's clock is expected to save against MAXN across its board's uncertainty family
 * (docs/policy.md, "Decisions that hold on the board a user has"): per board and measure, each
 * class clock the family training chose (a class that keeps MAXN has none) with the [worst,
 * best] member's mean saving (%) over its class's training workloads. Generated with the
 * policies by tools/gen_policies.py from pydvfs/data/policy-ranges.json into
 * govcore/gen_policy_ranges.c (the one computation that writes both). */
typedef struct gc_builtin_range {
    double mhz;
    double range_pct[2]; /* [low, high] */
} gc_builtin_range;
typedef struct gc_builtin_ranges {
    const char *board_id;
    const char *measure;
    int n;
    const gc_builtin_range *classes; /* NULL where n is 0 */
    double util_min_pct; /* the least GPU load at MAXN among the training workloads (%); 0: unknown */
} gc_builtin_ranges;
extern const gc_builtin_ranges gc_builtin_saving_ranges[];
extern const int gc_n_builtin_saving_ranges;

/* The frequency-aware roofline model (pydvfs/policy/roofline.py has the derivation): board
 * constants fitted by `pydvfs train`, read as data from model_dir/roofline.txt. Per token of a
 * workload with L layers, hidden d, S tokens per sample, at clock f (GHz):
 *   a = (12 L d^2 + 3 L S d) / k_gauge + q_gcyc L / S      clock-scaled work, Gcycles
 *   b = m_s d L + (h0_s + h1_s L) / S                      clock-independent time, s
 *   E = p_idle_w a / f + (p_idle_w b + e_mem_j d L) + c_w a V(f)^2 + c_idle_w b f V(f)^2   J
 * with V(f) the rail voltage (V), linear in the vf table and flat outside it. */
#define GC_ROOFLINE_MAX_VF 32
typedef struct gc_roofline {
    double k_gauge;  /* proxy-FLOPs per Gcycle (the time scale's gauge) */
    double q_gcyc;   /* fill/drain Gcycles per layer and sequence */
    double m_s;      /* s per proxy byte of traffic (1 / bandwidth) */
    double h0_s;     /* host s per sequence */
    double h1_s;     /* host s per layer and sequence */
    double p_idle_w; /* static power, W */
    double c_w;      /* switched capacitance while computing, W per GHz V^2 */
    double c_idle_w; /* ... while waiting (clock tree), W per GHz V^2 */
    double e_mem_j;  /* J per proxy byte of traffic */
    int n_vf;
    double vf_mhz[GC_ROOFLINE_MAX_VF]; /* ascending */
    double vf_v[GC_ROOFLINE_MAX_VF];
} gc_roofline;

/* What a policy minimises where a whole curve of the workload is known (the roofline policy),
 * and a slowdown bound (zeus's MaxSlowdownConstraint) for every policy that pins a clock. The
 * objective's value is the power of the step time in its cost: E, E t, E t^2. */
enum gc_objective {
    GC_OBJECTIVE_ENERGY = 0,
    GC_OBJECTIVE_EDP = 1,
    GC_OBJECTIVE_ED2P = 2,
    GC_OBJECTIVE_COUNT = 3 /* how many there are (gc_objective_name of 0 .. GC_OBJECTIVE_COUNT-1) */
};
typedef struct gc_goal {
    int objective;           /* enum gc_objective */
    double max_slowdown_pct; /* predicted step time within this % of the top level's; < 0: no bound */
} gc_goal;

/* Parse "energy" / "edp" / "ed2p". -EINVAL otherwise. */
int gc_objective_parse(const char *name, int *objective);
const char *gc_objective_name(int objective);

/* Parse a roofline.txt strictly: every key once, no unknown key, finite numbers >= 0, an
 * ascending V/f table. -EINVAL / -ENOENT with a message in err (file:line). */
int gc_roofline_load(const char *path, gc_roofline *out, char *err, size_t len);

/* Open the file name of a model folder, with the checks policy.so gets (policy_load.c): never
 * through a symlink, a regular file only (opened non-blocking first, so a fifo cannot hang
 * us), and as root the folder, every folder above it and the file owned by root or the real
 * uid and writable by no one else. 0 with *fd (blocking, ready to read); -errno with err. */
int gc_model_file_open(const char *model_dir, const char *name, int *fd, char *err, size_t len);
/* Predicted energy per token (J) of a workload at a clock (MHz). */
double gc_roofline_energy_j(const gc_roofline *r, const gc_workload *w, double mhz);
/* Predicted time per token (s, in the model's gauge: ratios are what it knows) at a clock (MHz):
 * t = a/f + b, falling with the clock. */
double gc_roofline_time_s(const gc_roofline *r, const gc_workload *w, double mhz);
/* 1 where level i of levels_hz (ascending, n > 0) predicts a step time within max_slowdown_pct %
 * of the top level's (always without a bound, max_slowdown_pct < 0, and for the top level). */
int gc_roofline_within_bound(const gc_roofline *r, const gc_workload *w, double max_slowdown_pct,
                             const uint64_t *levels_hz, int n, int i);
/* The index of the level within the bound with the lowest predicted E t^objective; ties: the
 * lower. The top level is always within the bound, so there is one. */
int gc_roofline_argmin(const gc_roofline *r, const gc_workload *w, int objective, double max_slowdown_pct,
                       const uint64_t *levels_hz, int n);
/* The level of levels_hz (ascending, n > 0) with the lowest predicted energy; ties: the lower. */
int gc_propose_roofline(const gc_roofline *r, const gc_workload *w, const uint64_t *levels_hz, int n,
                        double *mhz);

/* The tree compiled into this build (govcore/policy_tree.c, generated, or the POLICY of a
 * release build) and the SHA-256 of that C file (version.c). */
extern const gc_tree_model gc_builtin_tree;
extern const char gc_builtin_tree_sha256[];

/* This build: the package version, `git describe` of the tree it was built from ("" if not
 * built from a clone), and whether it can load a policy.so (the static release cannot). */
extern const char gc_version[];
extern const char gc_git_describe[];
extern const int gc_can_load_policies;
/* The lines of `--version` after its first ("PROG VERSION (git ...)"), each ending in '\n':
 * what decides the clock in this build, read from what is compiled in (the built-in policies of
 * gen_policies_builtin.c with that file's SHA-256, or the one tree of a release built with its own
 * POLICY) and how the build loads policies. govcore and pydvfs print these same lines.
 * -ENOSPC if they do not fit in len (GC_VERSION_TEXT_MAX always does). */
#define GC_VERSION_TEXT_MAX 4096
int gc_version_text(char *out, size_t len);

/* The family of a model type name (case-insensitive): *is_decoder = 0 for encoders (bert,
 * roberta, deberta, ...), 1 for decoders (pythia, gpt, llama, ...). -EINVAL if unknown. */
int gc_model_family(const char *model, int *is_decoder);

/* The policies, registered as devfreq's governors are: one entry each, in gc_policies[]
 * (policy_table.c). Names, help text (`govcore --help`, pydvfs's POLICY_NAMES and POLICY_HELP) and
 * what gc_decide_goal checks before it asks a policy all come from the entry. */
#define GC_POLICY_NEEDS_MODEL_DIR 1u /* needs a model folder's roofline.txt (the curve) */
#define GC_POLICY_TAKES_OBJECTIVE 2u /* minimises the goal's objective (and bound) over a curve */
#define GC_POLICY_PINS_NOTHING 4u    /* the board's own governor: no clock, any goal, no bound */
#define GC_POLICY_NO_WORKLOAD 8u     /* proposes without reading the workload (w may be NULL) */
typedef struct gc_policy_entry {
    const char *name;
    const char *help;  /* one line */
    unsigned flags;    /* GC_POLICY_* above */
    /* The proposal in MHz (0: MAXN, the board's own governor), under goal (a bound only for a
     * policy that TAKES_OBJECTIVE; for the others the bound is applied after). rl is non-NULL
     * for a policy that NEEDS_MODEL_DIR. 0, or -errno with b->err saying why. */
    int (*propose)(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, const gc_workload *w,
                   const gc_goal *goal, double *mhz);
} gc_policy_entry;
extern const gc_policy_entry gc_policies[];
extern const int gc_n_policies;

/* The entry of a policy, or NULL for a number that is none. */
const gc_policy_entry *gc_policy_of(int policy);
/* Parse a policy's name (an entry's). -EINVAL otherwise. */
int gc_policy_parse(const char *name, int *policy);
const char *gc_policy_name(int policy);
/* "mlg, ffg, rules, maxn or roofline": the names, for an error message (cut to len). */
void gc_policy_list(char *out, size_t len);

/* Feature vector for the tree's feature names. -EINVAL (with err) for an unknown name. */
int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t err_len);

/* Proposals, in MHz. */
int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t len);
double gc_propose_rules(const gc_workload *w);

/* The decision: what the policy proposes, and the board level it becomes. level_hz 0 means
 * MAXN: the maxn policy, or a tree that judged this workload too spiky to pin. The roofline
 * policy needs rl (NULL otherwise allowed: then it fails with -EINVAL).
 *
 * With a goal (gc_decide_goal; NULL: minimum energy, no bound): the roofline policy minimises
 * the goal's objective over the levels; edp/ed2p with mlg, ffg or rules is -EINVAL (they give
 * one clock, not a curve); MAXN pins nothing and takes any goal. A slowdown bound raises the policy's level to the lowest level at or
 * above it whose predicted step time (rl's t(f)) is within the bound of the top level's; the
 * roofline policy takes its objective's argmin over those levels. It needs rl (-EINVAL without)
 * except for MAXN, which pins nothing (the board's own governor is as fast as the board). The
 * trade is predicted whenever rl is given and a level is pinned. */
/* Why a decision left the board to its own governor (gc_decision.kept_maxn; gc_kept_reason
 * says it, with the way to the saving): the expected saving is not clearly positive
 * (GC_SAVING_MARGIN_SD); or a built-in's workload is more host-bound (its GPU load at MAXN
 * below) than every workload it was trained on: the board's own governor already runs the GPU
 * low there, and the tree's clock would be an extrapolation that can cost more than MAXN; or a
 * built-in's tree keeps MAXN because no clock saves on every board of its uncertainty family
 * (GC_KEPT_NO_SAFE_CLOCK: kept_from_hz 0) (docs/policy.md). */
enum gc_kept { GC_KEPT_NOT = 0, GC_KEPT_NOT_CLEAR = 1, GC_KEPT_BELOW_TRAINED_LOAD = 2, GC_KEPT_NO_SAFE_CLOCK = 3 };

typedef struct gc_decision {
    int policy;
    double proposed_mhz;      /* 0 for MAXN */
    uint64_t level_hz;        /* 0 for MAXN */
    gc_goal goal;             /* what was minimised, under what bound */
    uint64_t policy_level_hz; /* the level before the slowdown bound (0: MAXN) */
    uint64_t trade_vs_hz;     /* the reference of the trade, the top level; 0: no trade predicted */
    double trade_s_pct;       /* predicted step time at level_hz against trade_vs_hz, % */
    double trade_j_pct;       /* predicted energy per step at level_hz against trade_vs_hz, % */
    uint64_t clamped_from_hz; /* gc_apply: the level the power mode's cap lowered (0: none) */
    uint64_t cap_hz;          /* gc_apply: the cap the pin obeyed (0: none known, or lifted) */
    double mapped_from_mhz;   /* the tree's clock on its own training table, where this board's
                               * table differs and it was mapped (gc_map_to_board); 0: not mapped */
    /* What the tree expects of its choice (mlg, ffg; the tree's has_savings): the saving
     * against MAXN (%) and its spread, from its training data. kept_maxn: not clearly positive
     * (GC_SAVING_MARGIN_SD), so the board is left to its own governor (level_hz 0); the level
     * it would have pinned is kept_from_hz. */
    int has_expectation;
    double expected_saving_pct;
    double saving_spread_pct;
    int kept_maxn; /* 0, or why the board was left to its own governor: enum gc_kept */
    uint64_t kept_from_hz;
    double util_pct, trained_util_min_pct; /* GC_KEPT_BELOW_TRAINED_LOAD: the workload's, the least trained */
} gc_decision;

/* A clock of the tree's training table on this board's (mlg, ffg and rules propose clocks of
 * the table they were learned on). Same top level (within 0.5 MHz) or an unknown training
 * table: *mapped = 0 and the clock is left to be snapped as it is. Else the same fraction of
 * the top level: mhz * top_board / top_tree, *mapped = 1 (the caller snaps it to the board's
 * table). -EINVAL (with err: it points to the online search) where the two top levels differ
 * by more than GC_TREE_MAP_MAX_RATIO. */
int gc_map_to_board(const gc_tree_model *m, const gc_board *b, double *mhz, int *mapped, char *err,
                    size_t err_len);

/* The range of d's saving against MAXN across the family (gc_builtin_saving_ranges) where m is
 * a built-in and the policy mlg: [0, 0] where the board is left at MAXN, else the lowest low and
 * highest high of the classes whose clock is d's proposal (within 0.5 MHz). 1 and out set; 0:
 * none is known (another policy or tree, or a proposal mapped onto another board's table). */
int gc_saving_range(const gc_tree_model *m, const gc_decision *d, double out[2]);

/* The one line that says why a decision left the board to its own governor (d->kept_maxn),
 * for every front end; "" where it did not. */
void gc_kept_reason(const gc_decision *d, char *out, size_t len);

/* A decision in words (decision_text.c), the one text of both front ends:
 * gc_decision_head: "policy P: GPU clock X MHz" or "policy P: MAXN (the board's own governor)";
 * gc_decision_goal_lines: the goal (where not the default: energy, no bound, the default measure),
 * the bound's move and the roofline's predicted trade, each line ending in '\n' ("" for MAXN);
 * gc_goal_text: "module energy per step, step time within 5 % of the fastest clock's";
 * gc_measure_label: "module" or "CPU+GPU". measure NULL: the default. */
void gc_decision_head(char *out, size_t len, const gc_decision *d);
void gc_decision_goal_lines(char *out, size_t len, const gc_decision *d, const char *measure);
void gc_goal_text(char *out, size_t len, const gc_goal *g, const char *measure);
const char *gc_measure_label(const char *measure);

/* The one line that says a workload lies outside what the built-in policy was trained on
 * (GC_TRAINED_*: the mlg policy's tree of origin GC_ORIGIN_BUILTIN), for every front end (a
 * notice, and "outside_training" in the JSON); "" where it does not. */
void gc_outside_reason(const gc_tree_model *m, int policy, const gc_workload *w, char *out, size_t len);

/* w may be NULL for a policy flagged GC_POLICY_NO_WORKLOAD (ffg, maxn). */
int gc_decide_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                   const gc_workload *w, const gc_goal *goal, gc_decision *d);
int gc_decide(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
              const gc_workload *w, gc_decision *d);

/* Decide and act: pin the level (or, for MAXN, restore the board's own state). */
int gc_apply_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                  const gc_workload *w, const gc_goal *goal, const char *state_dir, gc_decision *d);
int gc_apply(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
             const gc_workload *w, const char *state_dir, gc_decision *d);

/* Load a tree compiled by `pydvfs train` (model_dir/policy.so, symbol gc_tree), after the
 * checks of policy_load.c. The handle must stay open while the model is used; close it with
 * gc_tree_close. Errors, with err saying why and what to do:
 *   -EPERM    as root: a folder or file is not owned by root/the real uid, is writable by
 *             group or others, or is a symlink
 *   -EBADMSG  manifest.txt is missing a field, of another format, or does not match the files
 *   -ENOEXEC  policy.so is built for another CPU (or is not ELF)
 *   -ENOTSUP  this is the static build, which loads no code
 *   -ENOENT   a file of the folder is missing; -EINVAL: policy.so has no valid gc_tree */
int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t len);
void gc_tree_close(void *handle);

/* "x86_64", "aarch64", ... for an ELF e_machine value. */
const char *gc_elf_machine_name(int e_machine);

#endif

# The contract between Python and govcore (govcore/govcore.h). Units are in the names:
# _hz devfreq clocks, _ms sensor interval. Every function returns 0 or -errno.
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t

cdef extern from "govcore.h" nogil:
    enum:
        GC_PATH_MAX
        GC_NAME_MAX
        GC_MODEL_MAX
        GC_ERR_MAX
        GC_MAX_FREQS
        GC_MAX_RAILS
        GC_MAX_SKIPPED
        GC_RAIL_HWMON
        GC_RAIL_INA3221X
        GC_RAIL_POWER
        GC_N_ROLES
        GC_EVERIFY                 # errno: the board reported other clock values than written
        GC_ESTATE                  # errno: the saved state file is damaged
        GC_EBOARD                  # errno: a board file holds malformed data

    ctypedef struct gc_rail:
        char name[GC_NAME_MAX]     # the rail's label, e.g. "VDD_GPU_SOC"
        int kind                   # GC_RAIL_HWMON (mV x mA files) or GC_RAIL_INA3221X (mW file)
        char voltage_path[GC_PATH_MAX]     # bus voltage file, mV
        char current_path[GC_PATH_MAX]     # current file, mA
        char power_path[GC_PATH_MAX]       # power file, mW (ina3221x)

    ctypedef struct gc_skipped_channel:
        char name[GC_NAME_MAX]     # the channel's label, made printable
        char why[GC_PATH_MAX]      # "disabled: .../in2_enable is 0", ".../in3_input cannot be read: ..."

    ctypedef struct gc_board:
        char sysfs_root[GC_PATH_MAX]       # every board path resolves under it
        char model[GC_MODEL_MAX]            # device-tree model (made printable)
        char board_id[GC_NAME_MAX]          # the board table's id, "" if unknown
        int jetpack                         # 0 if unknown
        char l4t[GC_NAME_MAX]               # "R36.4.0", "" if unknown
        char gpu_name[GC_NAME_MAX]          # of_node name of the GPU
        char devfreq_dir[GC_PATH_MAX]      # the GPU's devfreq folder
        char load_path[GC_PATH_MAX]        # GPU load file (0..1000), "" if none
        int n_freqs
        uint64_t freqs_hz[GC_MAX_FREQS]      # available levels, ascending, Hz
        int n_rails
        gc_rail rails[GC_MAX_RAILS]
        int role_n[GC_N_ROLES]             # rails per role; 0 none, -1 not known
        int role_rail[GC_N_ROLES][GC_MAX_RAILS]
        int role_partial[GC_N_ROLES]       # 1: summed over the rails present, an optional one missing
        int n_skipped                      # channels found and not taken as rails
        gc_skipped_channel skipped[GC_MAX_SKIPPED]
        char warning[GC_ERR_MAX]           # what discovery could not settle, "" if nothing
        int sensor_interval_ms     # INA3221 update_interval, 0 if unknown
        char err[GC_ERR_MAX]              # detail of the last failure
        char warn[GC_ERR_MAX]             # what a successful pin has to say ("" if nothing)
        int above_power_mode       # set before a pin: 1 lets it go above the power mode's cap
        uint64_t cap_hz            # after gc_pin_hz: the cap it obeyed (0: none, or lifted)
        uint64_t clamped_from_hz   # after gc_pin_hz: the level the cap lowered, else 0

    ctypedef struct gc_clock_state:
        uint64_t cur_hz
        uint64_t min_hz
        uint64_t max_hz
        char governor[GC_NAME_MAX]

    const char *gc_rail_kind_name(int kind)
    const char *gc_role_names[]
    uint64_t gc_mhz_to_hz(double mhz)
    double gc_hz_to_mhz(uint64_t hz)
    const char *GC_MHZ_GRAMMAR             # the clock grammar in words
    int gc_parse_mhz(const char *text, size_t len, uint64_t *hz)   # the one clock grammar
    void gc_mhz_hint(const char *text, size_t len, char *out, size_t out_len)
    int gc_board_open(gc_board *b, const char *sysfs_root)
    int gc_clock_read(gc_board *b, gc_clock_state *st)
    int gc_range_read(gc_board *b, gc_clock_state *st)
    int gc_gpu_load_permille(gc_board *b, int *load_permille)
    int gc_snap_hz(const gc_board *b, uint64_t want_hz, uint64_t *level_hz)
    int gc_check_near_table(gc_board *b, uint64_t want_hz)
    int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz)
    int gc_default_state_dir(char *out, size_t length)
    int gc_state_path(gc_board *b, const char *state_dir, char *out, size_t length)
    int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
    int gc_state_drop(gc_board *b, const char *state_dir, int *dropped)
    int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
    int gc_restore(gc_board *b, const char *state_dir, int *restored)


# The clocks beside the GPU's (govcore/domain.h): the EMC (BPMP debugfs) and each cpufreq policy.
cdef extern from "sysfs.h" nogil:
    int gc_sysfs_read(const char *root, const char *path, char *buf, size_t buf_len)

cdef extern from "domain.h" nogil:
    enum:
        GC_MAX_DOMAINS
        GC_DOMAINS_RECORD_MAX
        GC_DOMAIN_EMC
        GC_DOMAIN_CPU
        GC_DOMAIN_EMC_DEVFREQ

    ctypedef struct gc_domain:
        int kind                   # GC_DOMAIN_EMC, GC_DOMAIN_CPU or GC_DOMAIN_EMC_DEVFREQ (Thor's bwmgr)
        char name[GC_NAME_MAX]     # "emc", "cpu0", "cpu4", ...
        char dir[GC_PATH_MAX]
        int policy
        char related_cpus[GC_NAME_MAX]
        char devfreq[GC_NAME_MAX]  # EMC_DEVFREQ: its devfreq name ("bwmgr"); else ""
        int readable               # shown (its state can be read)
        int writable               # restorable
        int available              # pinnable (writable, with a table)
        char why[256]              # why not available
        int n_levels
        uint64_t levels_hz[GC_MAX_FREQS]
        uint64_t cap_hz            # EMC: max_rate / nvpmodel_clk_cap/emc; 0 none

    ctypedef struct gc_domains:
        char sysfs_root[GC_PATH_MAX]
        int n
        gc_domain d[17]
        char err[GC_ERR_MAX]

    ctypedef struct gc_domain_state:
        int saved
        char governor[GC_NAME_MAX]
        uint64_t min_hz
        uint64_t max_hz
        uint64_t rate_hz
        int locked

    int gc_domains_open(gc_domains *ds, const char *sysfs_root, const uint64_t *emc_table_hz,
                        int n_emc_table)
    int gc_domains_open_board(gc_domains *ds, const gc_board *b)
    int gc_domain_read(gc_domains *ds, int i, gc_domain_state *st)
    int gc_pin_mode(gc_board *b, gc_domains *ds, uint64_t gpu_hz, uint64_t emc_hz, uint64_t cpu_hz,
                    const char *state_dir, uint64_t *gpu_level_hz, uint64_t *level_hz)


# The power mode in force and the GPU cap a pin obeys (govcore/powermode.h).
    int gc_state_load_domains(gc_board *b, const char *state_dir, char *lines, size_t len)
    int gc_domains_record_names(const char *lines, char *out, size_t len)

cdef extern from "powermode.h" nogil:
    ctypedef struct gc_power_mode:
        int id                     # -1 unknown
        char name[GC_NAME_MAX]     # "" unknown
        uint64_t gpu_max_hz        # the mode's GPU MAX_FREQ in nvpmodel.conf; 0 none/unknown
        char why[GC_ERR_MAX]       # why id or name is unknown

    ctypedef struct gc_gpu_cap:
        uint64_t devfreq_max_hz    # max_freq before the first pin
        int from_saved
        uint64_t clk_cap_hz        # nvpmodel_clk_cap/gpu; 0 absent
        uint64_t cap_hz            # the highest level at or under both

    void gc_power_mode_read(gc_board *b, gc_power_mode *pm)
    int gc_nvpmodel_parse_status(const char *text, int *id)
    int gc_nvpmodel_parse_conf(const char *text, int id, char *name, size_t name_len, uint64_t *gpu_max_hz)
    int gc_gpu_cap_read(gc_board *b, const char *state_dir, gc_gpu_cap *cap)


# One owner per GPU (govcore/lock.h): flock on a file named after the GPU's devfreq node, in one
# lock folder per system whatever the state folder.
cdef extern from "lock.h" nogil:
    ctypedef int pid_t
    ctypedef struct gc_lock:
        int fd                     # the locked file; -1 when not held
        char path[512]             # the lock file

    void gc_lock_init(gc_lock *lk)
    int gc_lock_path(gc_board *b, char *out, size_t length)
    int gc_lock_acquire(gc_board *b, int wait_ms, gc_lock *lk)
    int gc_lock_holder(gc_board *b, pid_t *pid)
    void gc_lock_release(gc_lock *lk)


# The sampler (govcore/sampler.h). Units: power uW, energy nJ (twice-integral: nJ + fJ
# remainder), time CLOCK_MONOTONIC ns, GPU load permille.
cdef extern from "sampler.h" nogil:
    enum:
        GC_SAMPLE_MISSING          # ring entry whose reading failed
        GC_SAMPLER_MAX_RATE_HZ
        GC_SAMPLER_RING_MAX
    double GC_SAMPLER_MAX_INTERPOLATED_PCT

    ctypedef struct gc_sampler:
        pass

    ctypedef struct gc_sampler_config:
        double rate_hz             # Hz; 0 follows the sensor; < 0 flat out
        uint32_t rail_mask         # bit i samples board rail i; 0 = all
        uint32_t ring_capacity     # samples kept for traces; 0 = default (65536)

    ctypedef struct gc_snapshot:
        int64_t t_ns               # CLOCK_MONOTONIC
        int n_rails
        int64_t e2_nj[GC_MAX_RAILS]          # twice the energy integral, whole nJ
        int64_t e2_fj[GC_MAX_RAILS]          # + remainder, fJ
        int64_t load2_pm_ns        # twice the GPU load integral, permille x ns
        int64_t load_ns            # time the load integral covers, ns
        uint64_t samples
        uint64_t read_errors
        uint64_t failed_reads[16]  # per rail: rounds whose reading failed
        int64_t gap_ns[16]         # per rail: time interpolated or held over failed reads
        uint64_t negative_readings[16]  # per rail: negative power, integrated as 0

    ctypedef struct gc_window:
        int64_t duration_ns
        int n_rails
        int64_t energy_nj[GC_MAX_RAILS]      # per rail, nJ
        double energy_j[GC_MAX_RAILS]        # per rail, J
        double avg_power_w[GC_MAX_RAILS]     # per rail, W
        double gpu_util_pct        # %, -1 if no load file
        uint64_t samples
        uint64_t read_errors
        double rate_hz             # samples / duration
        uint64_t failed_reads[16]  # per rail
        uint64_t negative_readings[16]
        double interpolated_pct[16]  # per rail: gap time / duration, %
        int readings_ok            # no rail above GC_SAMPLER_MAX_INTERPOLATED_PCT, no negative

    ctypedef struct gc_sampler_stats:
        int running
        double rate_hz             # configured; 0 = flat out
        int64_t period_ns          # 0 = flat out
        uint64_t samples
        uint64_t read_errors
        uint64_t overruns          # deadlines missed
        uint64_t reopens           # vanished files reopened
        int64_t first_t_ns
        int64_t last_t_ns
        int64_t thread_cpu_ns      # CPU time of the sampler thread, ns
        uint32_t ring_count
        uint32_t ring_capacity
        int abandoned              # stop gave up on a blocked read

    int gc_sampler_create(gc_sampler **out, gc_board *b, const gc_sampler_config *cfg)
    int gc_sampler_start(gc_sampler *s)
    int gc_sampler_stop(gc_sampler *s)
    void gc_sampler_free(gc_sampler *s)
    int gc_sampler_n_rails(const gc_sampler *s)
    const char *gc_sampler_rail_name(const gc_sampler *s, int i)
    int gc_sampler_has_load(const gc_sampler *s)
    const char *gc_sampler_board_id(const gc_sampler *s)
    int gc_sampler_snapshot(gc_sampler *s, gc_snapshot *snap)
    int gc_window_diff(const gc_snapshot *a, const gc_snapshot *b, gc_window *w)
    int gc_sampler_get_stats(gc_sampler *s, gc_sampler_stats *st)
    int gc_sampler_trace(gc_sampler *s, int64_t *t_ns, int32_t *power_uw, int16_t *load_pm,
                         size_t max_samples, size_t *n_out)


# Where a clock is chosen (govcore/policy.h): policies propose a clock in MHz, gc_decide clamps it
# to the board's table. Units in the names; functions return 0 or -errno.
cdef extern from "policy.h" nogil:
    enum:
        GC_MAX_FEATURES
        GC_MAX_CLASSES
        GC_ROOFLINE_MAX_VF
        GC_POLICY_NEEDS_MODEL_DIR  # a policy entry's flags (policy.h)
        GC_POLICY_TAKES_OBJECTIVE
        GC_POLICY_PINS_NOTHING
        GC_POLICY_NO_WORKLOAD
        GC_OBJECTIVE_ENERGY        # objectives: the power of the step time in the cost (E t^k)
        GC_OBJECTIVE_COUNT         # numbered 0 .. GC_OBJECTIVE_COUNT-1 (gc_objective_name)

    # the policies' one table (policy_table.c's gc_policies): a policy is an index of it
    ctypedef struct gc_policy_entry:
        const char *name
        const char *help
        unsigned flags
    const gc_policy_entry gc_policies[]
    const int gc_n_policies

    ctypedef struct gc_workload:
        int is_decoder             # 0 encoder, 1 decoder
        double gpu_util_pct        # 0..100, negative if unknown
        double layers
        double hidden
        double seq_len             # average tokens per sample
        int peft                   # enum gc_peft
        double rank                # 0: not given
        double trainable_params    # 0: not given
        double weight_bits         # 0: not given
        int precision              # enum gc_precision
        double batch_size          # 0: not given
        double tokens_per_step     # 0: not given

    enum:
        GC_PEFT_COUNT
        GC_PRECISION_COUNT
        GC_N_METHOD_KEYS
    const char *const gc_peft_names[]
    const char *const gc_precision_names[]
    const char *const gc_method_keys[]
    # the one grammar of a workload (policy.h): keys, bounds, the spec parser, the checks
    enum:
        GC_N_WORKLOAD_FIELDS
        GC_WORKLOAD_SPEC_MAX
        GC_MODEL_NAME_MAX
        GC_WK_LABEL
        GC_WK_NAME
        GC_WK_WHOLE
        GC_WK_DECIMAL
    ctypedef struct gc_workload_field:
        const char *key
        int kind
        double min
        double max
    const gc_workload_field gc_workload_fields[]
    int gc_workload_parse(const char *spec, gc_workload *w, char *model, size_t model_len, unsigned *have,
                          char *err, size_t len)
    int gc_workload_check(const gc_workload *w, char *err, size_t len)

    ctypedef struct gc_tree_model:
        const char *name           # where it came from
        void (*score)(double *input, double *output)   # m2cgen: class probabilities
        int n_features
        const char *const *feature_names               # in the order score() expects them
        int n_classes
        const double *classes_mhz  # class i means classes_mhz[i]; 0 means MAXN
        double default_util_pct[2] # used when util is unknown: encoder, decoder
        double ffg_mhz             # the best fixed clock of the same training data
        const char *data_file      # provenance: the training data file, its sha256, when trained
        const char *data_sha256
        const char *trained_utc
        char board_id[32]          # the board it was trained on ("" unknown)
        int n_levels               # its training table (0: unknown)
        double levels_mhz[64]
        char origin[24]            # built-in, user folder, ... ("" unknown)
        char measure[16]           # module, cpu-gpu ("" unknown)
        int calibrated             # 1 calibrated profile, 0 estimate, -1 unknown
        int has_savings            # the expected savings below are known
        double class_saving_pct[32]
        double class_spread_pct[32]
        double ffg_saving_pct
        double ffg_spread_pct

    ctypedef struct gc_builtin_policy:
        const char *board_id
        const char *measure
        const gc_tree_model *tree
    const gc_builtin_policy gc_builtin_policies[]
    const int gc_n_builtin_policies
    const char *const gc_energy_measures[]
    const char gc_builtin_fallback_board[]

    ctypedef struct gc_goal:
        int objective              # energy, edp, ed2p (gc_objective_name)
        double max_slowdown_pct    # < 0: no bound

    ctypedef struct gc_decision:
        int policy
        double proposed_mhz        # 0 for maxn
        uint64_t level_hz          # 0 for maxn
        gc_goal goal
        uint64_t policy_level_hz   # the level before the slowdown bound (0: MAXN)
        uint64_t trade_vs_hz       # the top level the trade is against; 0: none predicted
        double trade_s_pct         # predicted step time against it, %
        double trade_j_pct         # predicted energy per step against it, %
        uint64_t clamped_from_hz   # apply: the level the power mode's cap lowered (0: none)
        uint64_t cap_hz            # apply: the cap the pin obeyed (0: none known, or lifted)
        double mapped_from_mhz     # the tree's clock on its training table where it was mapped (0: not)
        int has_expectation        # the tree's expected saving vs MAXN of its choice is known ...
        double expected_saving_pct # ... this, %
        double saving_spread_pct   # ... with this spread, %
        int kept_maxn              # not clearly positive: the board left to its own governor
        uint64_t kept_from_hz      # the level it would have pinned

    const gc_tree_model *gc_builtin_for(const char *board_id, const char *measure)
    void gc_kept_reason(const gc_decision *d, char *out, size_t len)
    int gc_saving_range(const gc_tree_model *m, const gc_decision *d, double out[2])
    void gc_outside_reason(const gc_tree_model *m, int policy, const gc_workload *w, char *out, size_t len)
    const char *gc_tree_origin_kind(const gc_tree_model *m)
    double GC_SAVING_MARGIN_SD

    ctypedef struct gc_roofline:
        double k_gauge             # proxy-FLOPs per Gcycle (the time scale's gauge)
        double q_gcyc              # fill/drain Gcycles per layer and sequence
        double m_s                 # s per proxy byte of traffic (1 / bandwidth)
        double h0_s                # host s per sequence
        double h1_s                # host s per layer and sequence
        double p_idle_w            # static power, W
        double c_w                 # switched capacitance while computing, W per GHz V^2
        double c_idle_w            # ... while waiting, W per GHz V^2
        double e_mem_j             # J per proxy byte of traffic
        int n_vf
        double vf_mhz[GC_ROOFLINE_MAX_VF]  # ascending
        double vf_v[GC_ROOFLINE_MAX_VF]

    const gc_tree_model gc_builtin_tree
    const char gc_builtin_tree_sha256[]  # sha256 of the built-in tree's policy_tree.c
    const char gc_version[]
    const char gc_git_describe[]       # "" unless built from a clone
    const int gc_can_load_policies     # 0 in the static release (no dlopen)
    enum:
        GC_VERSION_TEXT_MAX
    int gc_version_text(char *out, size_t len)  # --version's lines after the first
    int GC_MODEL_FORMAT                # the model folder manifest's format version
    int gc_model_family(const char *model, int *is_decoder)
    int gc_policy_parse(const char *name, int *policy)
    const char *gc_policy_name(int policy)
    int gc_objective_parse(const char *name, int *objective)
    const char *gc_objective_name(int objective)
    int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t n)
    int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t n)
    double gc_propose_rules(const gc_workload *w)
    int gc_roofline_load(const char *path, gc_roofline *out, char *err, size_t n)
    int gc_model_file_open(const char *model_dir, const char *name, int *fd, char *err, size_t n)
    double gc_roofline_energy_j(const gc_roofline *r, const gc_workload *w, double mhz)
    double gc_roofline_time_s(const gc_roofline *r, const gc_workload *w, double mhz)
    int gc_propose_roofline(const gc_roofline *r, const gc_workload *w, const uint64_t *levels_hz, int n,
                            double *mhz)
    int gc_decide(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                  const gc_workload *w, gc_decision *d)
    int gc_apply(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                 const gc_workload *w, const char *state_dir, gc_decision *d)
    int gc_decide_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                       const gc_workload *w, const gc_goal *goal, gc_decision *d)
    int gc_apply_goal(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                      const gc_workload *w, const gc_goal *goal, const char *state_dir, gc_decision *d)
    int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t n)
    void gc_tree_close(void *handle)
    # a decision in words (decision_text.c): the one text of both front ends
    void gc_decision_head(char *out, size_t len, const gc_decision *d)
    void gc_decision_goal_lines(char *out, size_t len, const gc_decision *d, const char *measure)
    void gc_goal_text(char *out, size_t len, const gc_goal *g, const char *measure)
    const char *gc_measure_label(const char *measure)


# The daemon's requests (govcore/protocol.h): the apply line, spelt by its one formatter.
cdef extern from "protocol.h" nogil:
    enum:
        GC_REQ_MAX
        GC_TREE_NAME_MAX
    ctypedef struct gc_request:
        int policy
        gc_workload workload
        char model[32]             # GC_MODEL_NAME_MAX
        char tree[64]              # GC_TREE_NAME_MAX
        int dry_run
        gc_goal goal
        const char *measure
    int gc_request_format_apply(const gc_request *req, char *out, size_t len, char *err, size_t err_len)

cdef class Board:
    cdef gc_board b                # the discovered board; read-only after __cinit__

cdef int check(int rc, const char *detail) except -1


cdef class Lock:
    cdef gc_lock lk                # held from __cinit__ until release() or deallocation


cdef class Snapshot:
    cdef gc_snapshot snap          # cumulative counters at one instant

cdef class Tree:
    cdef gc_tree_model m           # the tree's C description
    cdef void *handle              # dlopen handle of a trained model folder's policy.so; NULL built in

cdef class Sampler:
    cdef gc_board b                # the board the rails were discovered on
    cdef gc_sampler *s             # owned; freed (after a bounded stop) in __dealloc__
    cdef readonly tuple rail_names # sampled rails, in the C order
    cdef readonly bint has_load    # a GPU load file is sampled
    cdef readonly str board_id     # the board table's id, "" if the board is unknown
    cdef readonly str warning      # what discovery could not settle, "" if nothing

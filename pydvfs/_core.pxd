# The contract between Python and govcore (govcore/govcore.h). Units are in the names:
# _hz devfreq clocks, _ms sensor interval. Every function returns 0 or -errno.
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t

cdef extern from "govcore.h" nogil:
    enum:
        GC_PATH_MAX
        GC_NAME_MAX
        GC_MAX_FREQS
        GC_MAX_RAILS
        GC_RAIL_HWMON
        GC_RAIL_INA3221X

    ctypedef struct gc_rail:
        char name[64]              # the rail's label, e.g. "VDD_GPU_SOC"
        int kind                   # GC_RAIL_HWMON (mV x mA files) or GC_RAIL_INA3221X (mW file)
        char voltage_path[512]     # bus voltage file, mV
        char current_path[512]     # current file, mA
        char power_path[512]       # power file, mW (ina3221x)

    ctypedef struct gc_board:
        char sysfs_root[512]       # every board path resolves under it
        char model[128]            # device-tree model
        char gpu_name[64]          # of_node name of the GPU
        char devfreq_dir[512]      # the GPU's devfreq folder
        char load_path[512]        # GPU load file (0..1000), "" if none
        int n_freqs
        uint64_t freqs_hz[64]      # available levels, ascending, Hz
        int n_rails
        gc_rail rails[16]
        int sensor_interval_ms     # INA3221 update_interval, 0 if unknown
        char err[512]              # detail of the last failure

    ctypedef struct gc_clock_state:
        uint64_t cur_hz
        uint64_t min_hz
        uint64_t max_hz
        char governor[64]

    uint64_t gc_mhz_to_hz(double mhz)
    double gc_hz_to_mhz(uint64_t hz)
    int gc_board_open(gc_board *b, const char *sysfs_root)
    int gc_clock_read(gc_board *b, gc_clock_state *st)
    int gc_gpu_load_permille(gc_board *b, int *load_permille)
    int gc_snap_hz(const gc_board *b, uint64_t want_hz, uint64_t *level_hz)
    int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz)
    int gc_default_state_dir(char *out, size_t length)
    int gc_state_path(gc_board *b, const char *state_dir, char *out, size_t length)
    int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
    int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
    int gc_restore(gc_board *b, const char *state_dir, int *restored)


# One owner per GPU (govcore/lock.h): flock on a file next to the state file.
cdef extern from "lock.h" nogil:
    ctypedef int pid_t
    ctypedef struct gc_lock:
        int fd                     # the locked file; -1 when not held
        char path[512]             # the lock file

    void gc_lock_init(gc_lock *lk)
    int gc_lock_path(const gc_board *b, const char *state_dir, char *out, size_t length)
    int gc_lock_acquire(gc_board *b, const char *state_dir, int wait_ms, gc_lock *lk)
    int gc_lock_holder(gc_board *b, const char *state_dir, pid_t *pid)
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
        int64_t e2_nj[16]          # twice the energy integral, whole nJ
        int64_t e2_fj[16]          # + remainder, fJ
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
        int64_t energy_nj[16]      # per rail, nJ
        double energy_j[16]        # per rail, J
        double avg_power_w[16]     # per rail, W
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
    int gc_sampler_snapshot(gc_sampler *s, gc_snapshot *snap)
    int gc_window_diff(const gc_snapshot *a, const gc_snapshot *b, gc_window *w)
    int gc_sampler_get_stats(gc_sampler *s, gc_sampler_stats *st)
    int gc_sampler_trace(gc_sampler *s, int64_t *t_ns, int32_t *power_uw, int16_t *load_pm,
                         size_t max_samples, size_t *n_out)


cdef class Board:
    cdef gc_board b                # the discovered board; read-only after __cinit__

cdef int check(int rc, const char *detail) except -1


cdef class Lock:
    cdef gc_lock lk                # held from __cinit__ until release() or deallocation


cdef class Snapshot:
    cdef gc_snapshot snap          # cumulative counters at one instant

cdef class Sampler:
    cdef gc_board b                # the board the rails were discovered on
    cdef gc_sampler *s             # owned; freed (after a bounded stop) in __dealloc__
    cdef readonly tuple rail_names # sampled rails, in the C order
    cdef readonly bint has_load    # a GPU load file is sampled

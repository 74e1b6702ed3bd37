# The contract between Python and govcore (govcore/govcore.h). Units are in the names:
# _hz devfreq clocks, _ms sensor interval. Every function returns 0 or -errno.
from libc.stdint cimport uint64_t

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
    int gc_state_path(const gc_board *b, const char *state_dir, char *out, size_t length)
    int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st)
    int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz)
    int gc_restore(gc_board *b, const char *state_dir, int *restored)


cdef class Board:
    cdef gc_board b                # the discovered board; read-only after __cinit__

cdef int check(int rc, const char *detail) except -1

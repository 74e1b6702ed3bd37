/* govcore.h - the board mechanism: discovery, clock pinning/restoring, saved state.
 *
 * Plain C99 + POSIX, no Python: the same sources build the pydvfs._core extension and the
 * standalone `govcore` binary. Every function returns 0 or -errno; where a failure has a useful
 * detail (which file, which value) it is written to board->err.
 *
 * Units live in names: _hz for devfreq values (what sysfs holds), _mhz only at the user
 * boundary (gc_mhz_to_hz / gc_hz_to_mhz are the one conversion point), _mv / _ma / _mw for
 * INA3221 readings, _ms / _ns for time.
 */
#ifndef GOVCORE_H
#define GOVCORE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define GC_PATH_MAX 512
#define GC_NAME_MAX 64
#define GC_MODEL_MAX 128
#define GC_ERR_MAX 512
#define GC_MAX_FREQS 64
#define GC_MAX_RAILS 16
#define GC_MAX_LEVEL_HZ 100000000000ULL /* 100 GHz: a larger "level" is garbage, not a clock */

/* Errors by cause. Functions return 0 or -errno; besides the usual codes (-EINVAL: a bad
 * argument, -EACCES/-EPERM: not allowed, -ENODEV: no board, -EIO and others: a file could not
 * be read or written) three name what went wrong with the board's own data:
 *   GC_EVERIFY  the clock was written but the board reports other values (a power-mode cap);
 *   GC_ESTATE   the saved state file is damaged;
 *   GC_EBOARD   a board file holds something it should not (available_frequencies garbled).
 * The Python binding maps each to its own exception (pydvfs/_core.pyx, check). */
#define GC_EVERIFY EPROTO
#define GC_ESTATE EUCLEAN
#define GC_EBOARD EBADMSG

/* How a rail's power is read. */
enum gc_rail_kind {
    GC_RAIL_HWMON = 0,     /* ina3221 hwmon driver: inN_input (mV) x currN_input (mA) */
    GC_RAIL_INA3221X = 1,  /* JetPack 4 ina3221x iio driver: in_powerN_input (mW) */
};

typedef struct gc_rail {
    char name[GC_NAME_MAX];         /* the rail's label, e.g. "VDD_GPU_SOC" */
    int kind;                       /* enum gc_rail_kind */
    char voltage_path[GC_PATH_MAX]; /* bus voltage file, mV ("" if none) */
    char current_path[GC_PATH_MAX]; /* current file, mA ("" if none) */
    char power_path[GC_PATH_MAX];   /* power file, mW (GC_RAIL_INA3221X only) */
} gc_rail;

typedef struct gc_board {
    char sysfs_root[GC_PATH_MAX];   /* every board path is resolved under it; "/" = real board */
    char model[GC_MODEL_MAX];       /* device-tree model, "" if unknown */
    char gpu_name[GC_NAME_MAX];     /* of_node name of the GPU: ga10b, gpu, gv11b, ... */
    char devfreq_dir[GC_PATH_MAX];  /* the GPU's devfreq folder (under the root) */
    char load_path[GC_PATH_MAX];    /* GPU load file, 0..1000 (tenths of %); "" if none */
    int n_freqs;
    uint64_t freqs_hz[GC_MAX_FREQS];/* available_frequencies, ascending */
    int n_rails;
    gc_rail rails[GC_MAX_RAILS];    /* power rails found, NC and shunt-sum channels skipped */
    int sensor_interval_ms;         /* INA3221 update_interval, 0 if not exposed */
    char err[GC_ERR_MAX];           /* detail of the last failure, for the user */
    /* The power mode's ceiling (powermode.h): gc_pin_hz clamps to the cap in force. */
    int above_power_mode;           /* set by the caller: 1 lets a pin go above the cap */
    uint64_t cap_hz;                /* set by gc_pin_hz: the cap it obeyed (0: none, or lifted) */
    uint64_t clamped_from_hz;       /* set by gc_pin_hz: the level asked for where the cap lowered
                                     * it, else 0 */
} gc_board;

typedef struct gc_clock_state {
    uint64_t cur_hz;                /* cur_freq */
    uint64_t min_hz;                /* min_freq (user floor) */
    uint64_t max_hz;                /* max_freq (user ceiling) */
    char governor[GC_NAME_MAX];     /* devfreq governor, e.g. nvhost_podgov */
} gc_clock_state;

/* The one MHz <-> Hz conversion point. gc_mhz_to_hz returns 0 for a value that is not a
 * positive, finite clock. */
uint64_t gc_mhz_to_hz(double mhz);
double gc_hz_to_mhz(uint64_t hz);

/* Discover the GPU devfreq node, GPU load file, INA3221 rails and board model under root.
 * -ENODEV (with b->err) if no Jetson GPU devfreq node is found. */
int gc_board_open(gc_board *b, const char *sysfs_root);

/* Read the GPU clock state. */
int gc_clock_read(gc_board *b, gc_clock_state *st);

/* GPU load in tenths of a percent (0..1000). -ENOENT if the board has no load file. */
int gc_gpu_load_permille(gc_board *b, int *load_permille);

/* The available level nearest to want_hz (ties go to the lower level). -EINVAL if want_hz is 0
 * or the table is empty. */
int gc_snap_hz(const gc_board *b, uint64_t want_hz, uint64_t *level_hz);

/* Set the devfreq floor and ceiling, writing them in the order that never makes min > max,
 * then read both back. -EIO (with b->err) if the board reports other values. */
int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz);

/* --- saved state: one per board (i.e. per sysfs root), written before the first change --- */

/* The state folder used when none is given: $PYDVFS_STATE_DIR, else /run/pydvfs for root
 * (cleared at reboot, as are pinned clocks), else $XDG_RUNTIME_DIR/pydvfs; else -EDESTADDRREQ
 * (never a guessable /tmp name: pass a folder). Whatever folder is used must be owned by the
 * caller and writable by no one else, or the state functions refuse it with -EBADMSG. */
int gc_default_state_dir(char *out, size_t len);

/* Path of this board's state file in state_dir (NULL: the default folder). */
/* Create dir and its missing parents, mode 0700 (the state folder's). 0 or -errno. */
int gc_mkdir_p(const char *dir);
int gc_state_path(gc_board *b, const char *state_dir, char *out, size_t len);

/* Save governor/min/max unless a state is already saved (the first saved state is the
 * original). Written atomically (O_EXCL temp file, mode 0600, linkat). *saved_now = 1 if this
 * call wrote it. -EBADMSG (with b->err) for a state folder or file that is not safe. */
int gc_state_save(gc_board *b, const char *state_dir, int *saved_now);

/* Read this board's saved state, checked against the board's levels and governors. -ENOENT if
 * none; -EBADMSG (with b->err) if damaged, not a regular file of ours, or not of this board. */
int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st);

/* Pin the GPU clock: snap want_hz to the table, lower it to the power mode's cap in force
 * unless b->above_power_mode (powermode.h; b->cap_hz and b->clamped_from_hz say what was done),
 * save the original state if not yet saved, set min = max = level, verify. On failure the original state is put back.
 * *level_hz receives the level set. */
int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz);

/* Put the saved state back and remove the state file. Idempotent: with nothing saved it does
 * nothing and sets *restored = 0. Best effort: what can be written is written (governor, then
 * the range in an order that never makes min > max, retried once), even where the current
 * state cannot be read; if anything is left, b->err names it, the state file is kept for a
 * retry and the first error is returned. */
int gc_restore(gc_board *b, const char *state_dir, int *restored);

#endif

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

#include "gen_boards.h" /* the board table, generated from pydvfs/data/boards.json */

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
    GC_RAIL_POWER = 2,     /* an hwmon power channel: powerN_input (uW), e.g. the INA238 on Thor */
};
/* The kind's name in reports: "hwmon", "ina3221x", "power". */
const char *gc_rail_kind_name(int kind);

typedef struct gc_rail {
    char name[GC_NAME_MAX];         /* the rail's label, e.g. "VDD_GPU_SOC" */
    int kind;                       /* enum gc_rail_kind */
    char voltage_path[GC_PATH_MAX]; /* bus voltage file, mV ("" if none) */
    char current_path[GC_PATH_MAX]; /* current file, mA ("" if none) */
    char power_path[GC_PATH_MAX];   /* power file: mW (GC_RAIL_INA3221X), uW (GC_RAIL_POWER) */
} gc_rail;

/* A power channel discovery found and did not take as a rail: the sensor does not measure it
 * (an INA3221 channel disabled, inN_enable 0) or its reading failed at discovery (EIO). */
#define GC_MAX_SKIPPED 16
typedef struct gc_skipped_channel {
    char name[GC_NAME_MAX];         /* the channel's label, made printable */
    char why[GC_PATH_MAX + 96];     /* "disabled: <path>/in2_enable is 0", "<path> cannot be read: ..." */
} gc_skipped_channel;

typedef struct gc_board {
    char sysfs_root[GC_PATH_MAX];   /* every board path is resolved under it; "/" = real board */
    char model[GC_MODEL_MAX];       /* device-tree model (non-printable bytes as \\xNN), "" if none */
    char board_id[GC_NAME_MAX];     /* the board table's id (gen_boards.h), "" if the board is unknown */
    int jetpack;                    /* from /etc/nv_tegra_release (R36 -> 6); 0 if unknown */
    char l4t[GC_NAME_MAX];          /* the L4T release, e.g. "R36.4.0"; "" if unknown */
    char gpu_name[GC_NAME_MAX];     /* of_node name of the GPU: ga10b, gpu, gv11b, ... */
    char devfreq_dir[GC_PATH_MAX];  /* the GPU's devfreq folder (under the root) */
    char load_path[GC_PATH_MAX];    /* GPU load file, 0..1000 (tenths of %); "" if none */
    int n_freqs;
    uint64_t freqs_hz[GC_MAX_FREQS];/* available_frequencies, ascending */
    int n_rails;
    gc_rail rails[GC_MAX_RAILS];    /* power rails found, NC and shunt-sum channels skipped;
                                       labels made printable; a repeated label gets "#2", "#3" */
    /* Rail roles (GC_ROLE_MODULE, _CPU_GPU, _GPU; gc_role_names): role_n[r] rails, by index into
     * rails[], each once. role_n[r] = 0: the board has no such role (a GPU-only rail); -1: not
     * known (a board outside the table, a rail of the role not found, or its label repeated).
     * Roles come from the table only: never guessed from labels. */
    int role_n[GC_N_ROLES];
    int role_rail[GC_N_ROLES][GC_MAX_RAILS];
    /* role_partial[r] = 1: the role is summed over the rails present, one or more of its
     * optional rails (the table's optional_rails: the AGX Orin's VDDQ_VDD2_1V8AO) missing; the
     * warning names them. role_optional[r]: bit k set where rails[k] is an optional rail of r. */
    int role_partial[GC_N_ROLES];
    uint32_t role_optional[GC_N_ROLES];
    int n_skipped;                  /* channels found and not taken as rails (more: not listed) */
    gc_skipped_channel skipped[GC_MAX_SKIPPED];
    char warning[GC_ERR_MAX];       /* what discovery could not settle, one line; "" if nothing */
    int sensor_interval_ms;         /* INA3221 update_interval, 0 if not exposed */
    char err[GC_ERR_MAX];           /* detail of the last failure, for the user */
    char warn[GC_ERR_MAX];          /* set by a gc_pin_hz that succeeded with something to say
                                       (the original it saved is itself a pin); "" if none */
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
    uint64_t pinned_hz;             /* in a saved record: the GPU level the last pin set (its
                                     * max_freq then); 0 unknown. A live max_freq that differs
                                     * is a power-mode change during the pin (clock.c) */
} gc_clock_state;

/* The one MHz <-> Hz conversion point. gc_mhz_to_hz returns 0 for a value that is not a
 * positive, finite clock. */
uint64_t gc_mhz_to_hz(double mhz);
double gc_hz_to_mhz(uint64_t hz);

/* The one grammar of a clock a person types (`govcore pin`, the daemon's `pin MHZ`, and through
 * the extension every clock pydvfs reads from text): ASCII digits with an optional '.' and
 * fraction, at most GC_MHZ_DIGITS digits in all and 6 after the point (a whole Hz), more than 0
 * and at most 1e6 MHz. No sign, exponent, hex, '_', blank or other script's digits. The text is
 * len bytes (need not be NUL-terminated). 0 with *hz set (exactly: no binary fraction in
 * between), or -EINVAL. GC_MHZ_GRAMMAR says it in words for error messages. */
#define GC_MHZ_DIGITS 12
#define GC_MHZ_GRAMMAR "a positive number of MHz in plain decimal: ASCII digits, an optional " \
                       "fraction of at most 6 digits, e.g. 714 or 1300.5"
int gc_parse_mhz(const char *text, size_t len, uint64_t *hz);
/* For a clock gc_parse_mhz refused: "; 714000000 looks like Hz: that is 714 MHz, so give 714"
 * where the text is a whole number read from a board file (Hz from devfreq or the EMC, kHz from
 * cpufreq), else "". Appended to "not a clock" by both front ends. */
void gc_mhz_hint(const char *text, size_t len, char *out, size_t out_len);

/* Discover the GPU devfreq node, GPU load file, power rails, the board (from the device-tree
 * model and the table) and JetPack under root, and give each rail role its rails. -ENODEV (with
 * b->err) if no Jetson GPU devfreq node is found. What could not be settled (an unknown board,
 * a role's rail missing, a repeated label) is in b->warning: the front ends show it once. */
int gc_board_open(gc_board *b, const char *sysfs_root);

/* The sum of per-rail values (J or W; values[i] for b->rails[i]) over a role's rails, each once.
 * 0 with *known = 0 where the role is unknown or absent. */
double gc_role_sum(const gc_board *b, int role, const double *values, int *known);

/* Read the GPU clock state. */
int gc_clock_read(gc_board *b, gc_clock_state *st);

/* Read the floor, ceiling and governor (governor "" if unreadable), not cur_freq: what a
 * restore reports back. cur_hz is 0. */
int gc_range_read(gc_board *b, gc_clock_state *st);

/* GPU load in tenths of a percent (0..1000). -ENOENT if the board has no load file. */
int gc_gpu_load_permille(gc_board *b, int *load_permille);

/* The available level nearest to want_hz (ties go to the lower level). -EINVAL if want_hz is 0
 * or the table is empty. */
int gc_snap_hz(const gc_board *b, uint64_t want_hz, uint64_t *level_hz);

/* 0 if want_hz is near the board's table, or -EINVAL with b->err saying "X MHz is outside the
 * board's table (LO..HI MHz) by more than one level": more than one level step below the lowest
 * level or above the highest (a typo such as 99999, a policy made for another board). The one
 * copy of the rule (pydvfs asks it through _core's pin_hz(nearest=False) or the daemon); `pin`
 * refuses such a clock unless --nearest, the daemon unless nearest=1, the policies always. */
int gc_check_near_table(gc_board *b, uint64_t want_hz);

/* Set the devfreq floor and ceiling, writing them in the order that never makes min > max,
 * then read both back. -EIO (with b->err) if the board reports other values. */
int gc_set_range_hz(gc_board *b, uint64_t min_hz, uint64_t max_hz);

/* --- saved state: one per board (i.e. per sysfs root), written before the first change. The file
 * and its safety rules are state.c's (state.h); what is written back is clock.c's. --- */

/* The state folder used when none is given: $PYDVFS_STATE_DIR, else /run/pydvfs for root
 * (cleared at reboot, as are pinned clocks), else $XDG_RUNTIME_DIR/pydvfs; else -EDESTADDRREQ
 * (never a guessable /tmp name: pass a folder). Whatever folder is used must be absolute
 * (-EINVAL otherwise), owned by the caller and writable by no one else, or the state functions
 * refuse it with -GC_ESTATE. */
int gc_default_state_dir(char *out, size_t len);

/* Create dir and its missing parents, mode 0700 (the state folder's). 0 or -errno. */
int gc_mkdir_p(const char *dir);

/* Path of this board's state file in state_dir (NULL: the default folder). */
int gc_state_path(gc_board *b, const char *state_dir, char *out, size_t len);

/* Save governor/min/max unless a state is already saved (the first saved state is the
 * original). Written atomically (O_EXCL temp file, mode 0600, linkat). *saved_now = 1 if this
 * call wrote it; if what it saved is itself a pin (min == max, as jetson_clocks leaves it),
 * b->warn says so. -GC_ESTATE (with b->err) for a state folder or file that is not safe. */
int gc_state_save(gc_board *b, const char *state_dir, int *saved_now);

/* Read this board's saved state as it was saved (not checked against the board: `status`
 * shows it as it is; gc_restore writes only what the board offers). -ENOENT if none;
 * -GC_ESTATE (with b->err) if damaged or not a regular file of ours. */
int gc_state_load(gc_board *b, const char *state_dir, gc_clock_state *st);

/* Remove this board's saved state whatever it holds (`restore --force`: a damaged state, or one
 * a failed restore kept); a symlink or other planted entry is removed, never followed.
 * *dropped = 1 if there was one. */
int gc_state_drop(gc_board *b, const char *state_dir, int *dropped);

/* Pin the GPU clock: snap want_hz to the table, lower it to the power mode's cap in force
 * unless b->above_power_mode (powermode.h; b->cap_hz and b->clamped_from_hz say what was done),
 * save the original state if not yet saved, set min = max = level, verify. On failure the
 * original state is put back.
 * *level_hz receives the level set. */
int gc_pin_hz(gc_board *b, uint64_t want_hz, const char *state_dir, uint64_t *level_hz);

/* Put the saved state back and remove the state file. Idempotent: with nothing saved it does
 * nothing and sets *restored = 0. Best effort: what can be written is written (governor, then
 * the range in an order that never makes min > max, retried once), even where the current
 * state cannot be read. What is left, b->err names:
 * - a write the board refused: the state file is kept for a retry, the first error returned;
 * - a saved value the board no longer offers (a governor or level gone): never written; once
 *   everything else is back the state is removed (*restored = 1) and -GC_ESTATE returned.
 * A damaged state file: -GC_ESTATE, nothing written (gc_state_drop removes it). */
int gc_restore(gc_board *b, const char *state_dir, int *restored);

#endif

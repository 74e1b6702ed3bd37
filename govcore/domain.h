/* domain.h - the clocks beside the GPU's: the memory controller (EMC, BPMP debugfs) and the
 * CPU (one domain per cpufreq policy). Discovery, read, pin and restore per domain, a check of
 * every domain before anything is written, and the domains' part of the saved-state record.
 *
 * Every path is under the sysfs root; every board file is opened O_NONBLOCK and used only if it
 * is a regular file (fstat). Units in names: _hz inside govcore (the EMC's files hold Hz, the
 * CPU's kHz: converted where they are read and written, *_khz), _mhz only at the user boundary.
 *
 * A domain that is absent, or whose files cannot be written, is discovered as unavailable (with
 * the reason in why): the others are governed.
 *
 * Board facts: the EMC's supported rates come from /sys/kernel/debug/emc/available_rates where
 * the kernel has it, else from the rates the caller passes (the board table's emc_mhz,
 * pydvfs/data/boards.json): govcore holds no list of its own.
 */
#ifndef GOVCORE_DOMAIN_H
#define GOVCORE_DOMAIN_H

#include "govcore.h"
#include "state.h"

#define GC_MAX_CPU_POLICIES 16
#define GC_MAX_DOMAINS (1 + GC_MAX_CPU_POLICIES)
#define GC_DOMAINS_RECORD_MAX GC_STATE_DOMAINS_MAX /* the domains' lines of a saved record */

#define GC_EMC_DIR "/sys/kernel/debug/bpmp/debug/clk/emc"
#define GC_EMC_RATES "/sys/kernel/debug/emc/available_rates"
#define GC_EMC_CAP "/sys/kernel/nvpmodel_clk_cap/emc"
#define GC_CPUFREQ_DIR "/sys/devices/system/cpu/cpufreq"

enum gc_domain_kind {
    GC_DOMAIN_EMC = 0,          /* the memory clock through BPMP debugfs (Orin) */
    GC_DOMAIN_CPU = 1,
    GC_DOMAIN_EMC_DEVFREQ = 2,  /* the memory clock as a devfreq device (Thor's bwmgr):
                                   devfreq_emc.c; named "emc", saved as a CPU policy's lines */
};

typedef struct gc_domain {
    int kind;                       /* enum gc_domain_kind */
    char name[GC_NAME_MAX];         /* "emc", "cpu0" (cpufreq policy0), "cpu4", ... */
    char dir[GC_PATH_MAX];          /* its folder on the board (under the root) */
    int policy;                     /* CPU: the policy's number; EMC: -1 */
    char related_cpus[GC_NAME_MAX]; /* CPU: related_cpus, e.g. "0 1 2 3"; EMC: "" */
    char devfreq[GC_NAME_MAX];      /* EMC_DEVFREQ: its devfreq name ("bwmgr"); else "" */
    int readable;                   /* 1: its files are there, regular and readable (shown) */
    int writable;                   /* 1: and writable (restorable) */
    int available;                  /* 1: writable and with a table (pinnable) */
    char why[GC_ERR_MAX / 2];       /* why not available */
    int n_levels;
    uint64_t levels_hz[GC_MAX_FREQS]; /* ascending */
    uint64_t cap_hz;                /* EMC: max_rate and nvpmodel_clk_cap/emc (the lower); 0 none */
} gc_domain;

typedef struct gc_domains {
    char sysfs_root[GC_PATH_MAX];
    int n;                          /* d[0] is the EMC, then the CPU policies by number */
    gc_domain d[GC_MAX_DOMAINS];
    char err[GC_ERR_MAX];           /* detail of the last failure, for the user */
} gc_domains;

/* What a domain holds now, or held before the first pin (the saved originals). */
typedef struct gc_domain_state {
    int saved;                      /* in a record: 1 if this domain's originals are in it */
    char governor[GC_NAME_MAX];     /* CPU: scaling_governor */
    uint64_t min_hz, max_hz;        /* CPU: scaling_min_freq, scaling_max_freq; EMC_DEVFREQ:
                                       min_freq, max_freq (Hz) */
    uint64_t rate_hz;               /* EMC: rate; CPU: scaling_cur_freq where readable, else 0;
                                       EMC_DEVFREQ: cur_freq */
    int locked;                     /* EMC: mrq_rate_locked (0 = the board's memory scaling);
                                       EMC_DEVFREQ: min = max, read, never saved */
    unsigned keys;                  /* gc_domains_parse's bookkeeping: the keys read */
} gc_domain_state;

/* Discover the EMC and every cpufreq policy under root. emc_table_hz (n_emc_table rates, any
 * order; NULL/0 for none) is used where the kernel lists no available_rates. Never fails for a
 * missing domain (it is then unavailable); -EINVAL for a bad argument. */
int gc_domains_open(gc_domains *ds, const char *sysfs_root, const uint64_t *emc_table_hz,
                    int n_emc_table);

/* The board table's EMC rates for board b (gen_boards.h, generated from pydvfs/data/boards.json):
 * up to max into out; how many (0: the board is unknown or the table has none). In board.c. */
int gc_board_emc_table_hz(const gc_board *b, uint64_t *out, int max);

/* gc_domains_open under b's root, with the board table's EMC rates for b. */
int gc_domains_open_board(gc_domains *ds, const gc_board *b);

/* Index of the domain named name, or -1. */
int gc_domain_find(const gc_domains *ds, const char *name);

/* Read domain i's current state (a domain whose files cannot be read: -ENODEV; an unprivileged
 * reader sees the CPU's, world-readable, not the EMC's debugfs). */
int gc_domain_read(gc_domains *ds, int i, gc_domain_state *st);

/* The levels to pin for a request, checked for every domain before any is written.
 * emc_hz / cpu_hz: 0 = leave that clock alone; cpu_hz applies to every CPU policy, snapped to
 * the nearest level of each one's table. level_hz[i] receives each domain's level (0 = not
 * touched). originals: the saved record where one exists (its CPU max is the ceiling the power
 * mode set before the first pin), else NULL (the current max is). A rate outside a domain's
 * table (EMC: not one of its rates; CPU: outside a policy's lowest..highest level, 0.5 MHz
 * slack for the user's rounding), above its cap, or on an unavailable domain: -EINVAL with
 * ds->err, and nothing may be written. */
int gc_domains_check(gc_domains *ds, uint64_t emc_hz, uint64_t cpu_hz,
                     const gc_domain_state *originals, uint64_t *level_hz);

/* Pin domain i at level_hz and read it back. EMC: 1 to mrq_rate_locked, then the rate (BPMP
 * rounds a rate up to a supported one: the level is one, and the read-back must equal it).
 * CPU: scaling_min = scaling_max = level, in the order that never makes min > max.
 * -GC_EVERIFY (with ds->err) where the board reports another value. */
int gc_domain_pin(gc_domains *ds, int i, uint64_t level_hz);

/* Put domain i back as st holds it, best effort (everything that can be written is). EMC: the
 * rate, then the lock flag (0 hands the EMC back to the board's memory scaling). CPU: the
 * governor, then min/max in the safe order. */
int gc_domain_restore(gc_domains *ds, int i, const gc_domain_state *st);

/* Pin every domain with level_hz[i] != 0, in order; on a failure put back (from originals)
 * every domain this call touched, keep the first error in ds->err. */
int gc_domains_pin(gc_domains *ds, const uint64_t *level_hz, const gc_domain_state *originals);

/* Restore every domain whose originals are saved (st[i].saved), best effort; the first error is
 * returned, ds->err names every domain left. */
int gc_domains_restore(gc_domains *ds, const gc_domain_state *st);

/* --- the domains' part of the saved-state record (key=value lines) --- */

/* Read the originals of every writable domain into st (st[i].saved = 1); one that cannot be
 * read is left out (saved = 0). */
int gc_domains_snapshot(gc_domains *ds, gc_domain_state *st);

/* Append the lines of every saved domain to out ("emc.rate_hz=...", "emc.locked=...",
 * "cpu0.governor=...", "cpu0.min_hz=...", "cpu0.max_hz=..."). -ENOSPC if out is too small. */
int gc_domains_format(const gc_domains *ds, const gc_domain_state *st, char *out, size_t len);

/* One key=value line of a record: 1 if the key is a domain's (stored in st), 0 if it is not
 * (the caller's own key), -GC_ESTATE (with ds->err) for a domain key that is malformed,
 * repeated or names a domain this board does not have. Clear st (memset 0) before the first. */
int gc_domains_parse(gc_domains *ds, const char *key, const char *value, gc_domain_state *st);

/* After the last line: every domain named in the record complete, and its values this board's
 * (levels, governors). -GC_ESTATE with ds->err otherwise. */
int gc_domains_parse_done(gc_domains *ds, gc_domain_state *st);

/* Open the domains under root (no EMC table: enough to restore) and read the domain lines of a
 * record ("key=value" lines, as gc_domains_format writes them) into st. -GC_ESTATE (with
 * ds->err) for lines that are not a record of this board's domains. */
int gc_domains_load_record(gc_domains *ds, const char *sysfs_root, const char *lines,
                           gc_domain_state *st);

/* gc_domains_load_record, domain by domain: every domain of the record that this board can
 * take back is in st (saved = 1); one it cannot (no longer on the board or not writable, a
 * governor or level it no longer offers, damaged lines) is left out, named in left
 * ("cpu4 (the board has no such clock domain now); ...", "" if none) and its lines are copied
 * to kept (as the record holds them), to stay saved. -GC_ESTATE only for lines that are no
 * clock domain's; -ENOSPC if kept is too small. */
int gc_domains_load_each(gc_domains *ds, const char *sysfs_root, const char *lines,
                         gc_domain_state *st, char *kept, size_t kept_len, char *left, size_t left_len);

/* The domain lines of this board's saved record (the saved-state module, clock.c): "" where the
 * record has none; -ENOENT where nothing is saved. */
int gc_state_load_domains(gc_board *b, const char *state_dir, char *lines, size_t len);

/* The names of the domains a record's lines hold, once each in the record's order, separated by
 * spaces ("emc cpu0 cpu4"; "" for none) into out. How many; -ENOSPC if out is too small. */
int gc_domains_record_names(const char *lines, char *out, size_t len);

/* 1 if key names a clock domain's value of a record ("emc.*", "cpuN.*"). */
int gc_domains_is_key(const char *key);

/* --- the joint pin: GPU, EMC and CPU as one --- */

/* Pin the GPU at the level nearest gpu_hz (0: leave it), the EMC at emc_hz and every CPU policy
 * at the level of its table nearest cpu_hz (0: leave them), as one: every domain is checked
 * before anything is written (gc_domains_check: nothing is written on a refusal); the original
 * state of the GPU and of every domain is saved first (one record, gc_state_save); on any
 * failure the whole record is put back (gc_restore). ds: opened by the caller (with the board
 * table's EMC rates). *gpu_level_hz and level_hz[GC_MAX_DOMAINS] receive the levels set (0:
 * untouched). Errors in b->err. Defined in clock.c, which writes the GPU and the record. */
int gc_pin_mode(gc_board *b, gc_domains *ds, uint64_t gpu_hz, uint64_t emc_hz, uint64_t cpu_hz,
                const char *state_dir, uint64_t *gpu_level_hz, uint64_t *level_hz);

/* --- the memory clock as a devfreq device (devfreq_emc.c), and what it shares with domain.c --- */

/* The first devfreq device of the board table's memory-clock names under ds's root, as d
 * (kind GC_DOMAIN_EMC_DEVFREQ, named "emc"): 1 if one is there (d filled, perhaps unavailable
 * with why), 0 if none (d untouched). */
int gc_devfreq_emc_open(gc_domains *ds, gc_domain *d);
/* governor, min_freq, max_freq, cur_freq into st. */
int gc_devfreq_emc_read(gc_domains *ds, const gc_domain *d, gc_domain_state *st);
/* min_freq and max_freq to the range, in the order that never makes min > max. */
int gc_devfreq_emc_set_range(gc_domains *ds, const gc_domain *d, uint64_t min_hz, uint64_t max_hz);
/* The governor, then the range, as st holds them, best effort, read back. */
int gc_devfreq_emc_restore(gc_domains *ds, const gc_domain *d, const gc_domain_state *st);

/* domain.c's: a domain's files writable (1), readable only (0, why says so) or neither (-1). */
int gc_domain_check_files(const char *root, gc_domain *d, const char *const *files, size_t n,
                          const char *hint);
/* Whitespace-separated decimal values times scale into out, sorted, once each. */
int gc_domain_parse_levels(char *text, uint64_t scale, uint64_t *out, int *n);
/* DIR/NAME of a domain's file; a domain marked unavailable, saying why (printf-style). */
void gc_domain_file(const gc_domain *d, const char *name, char *out, size_t len);
void gc_domain_unavailable(gc_domain *d, const char *fmt, ...);

#endif

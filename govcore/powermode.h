/* powermode.h - the power mode (nvpmodel) in force and the GPU clock cap it sets.
 *
 * The user's power mode is their ceiling: nvpmodel caps the GPU by writing the devfreq
 * max_freq (and, where the kernel has it, /sys/kernel/nvpmodel_clk_cap/gpu). A pin stays at or
 * under the cap in force unless the caller lifts it (gc_board.above_power_mode); gc_pin_hz
 * calls gc_power_cap_clamp, so every pin (govcore pin/apply, the daemon, pydvfs) obeys one rule.
 *
 * The cap in force is the highest level of the table at or under both
 *   - the devfreq max_freq found before the first pin: the saved original's max where a state
 *     is saved, else the live max_freq;
 *   - nvpmodel_clk_cap/gpu (Hz), where present.
 * Restore puts the saved max back: the cap returns with it.
 *
 * The mode's name comes from /var/lib/nvpmodel/status (`pmode:0002 ...`) and its table
 * /etc/nvpmodel.conf (`< POWER_MODEL ID=2 NAME=30W >`, `GPU MAX_FREQ 612000000`), both under
 * the sysfs root; where they are missing or garbled the mode is unknown and `why` says why.
 */
#ifndef GOVCORE_POWERMODE_H
#define GOVCORE_POWERMODE_H

#include "govcore.h"

#define GC_NVPMODEL_STATUS "/var/lib/nvpmodel/status"
#define GC_NVPMODEL_CONF "/etc/nvpmodel.conf"
#define GC_NVPMODEL_CLK_CAP_GPU "/sys/kernel/nvpmodel_clk_cap/gpu"
#define GC_NVPMODEL_CONF_MAX (256 * 1024) /* a larger nvpmodel.conf is not one */

typedef struct gc_power_mode {
    int id;                         /* the mode in force; -1 unknown (and so where name is) */
    char name[GC_NAME_MAX];         /* its NAME= in nvpmodel.conf; "" unknown (and id -1) */
    uint64_t gpu_max_hz;            /* its `GPU MAX_FREQ` in nvpmodel.conf; 0: none or unknown */
    char why[GC_ERR_MAX];           /* one line where id or name is unknown */
} gc_power_mode;

typedef struct gc_gpu_cap {
    uint64_t devfreq_max_hz;        /* max_freq before the first pin */
    int from_saved;                 /* 1: devfreq_max_hz is the saved original's */
    uint64_t clk_cap_hz;            /* nvpmodel_clk_cap/gpu; 0 where absent or unreadable */
    uint64_t cap_hz;                /* the highest level at or under both (the lowest level if
                                     * none is); 0: the board lists no levels */
} gc_gpu_cap;

/* The mode in force. Never fails on the board's files: what cannot be read or parsed leaves
 * the fields unknown and says why in pm->why. */
void gc_power_mode_read(gc_board *b, gc_power_mode *pm);

/* Parsers (exposed for the tests). 0, or -EINVAL if the text is not what nvpmodel writes.
 * gc_nvpmodel_parse_conf: -ENOENT if the conf has no POWER_MODEL block with that id. */
int gc_nvpmodel_parse_status(const char *text, int *id);
int gc_nvpmodel_parse_conf(const char *text, int id, char *name, size_t name_len, uint64_t *gpu_max_hz);

/* The GPU cap in force (see above); from max_freq now where nothing is saved, or no state folder
 * can be looked in (none, or one this user may not open). -errno with b->err (a damaged saved
 * state, an unreadable max_freq). */
int gc_gpu_cap_read(gc_board *b, const char *state_dir, gc_gpu_cap *cap);

/* Clamp a level to the cap in force, unless b->above_power_mode. Sets b->cap_hz and
 * b->clamped_from_hz (the level asked for when it was lowered, else 0). */
int gc_power_cap_clamp(gc_board *b, const char *state_dir, uint64_t *level_hz);

#endif

/* test_clock.c - pin/restore against a devfreq that refuses min > max, and failure paths. */
#include "check.h"
#include "fake_tree.h"
#include "domain.h"
#include "govcore.h"
#include "mock_sysfs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char state_dir[600];

static const char *setup(gc_board *b)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    mock_reset();
    CHECK(gc_board_open(b, root) == 0);
    return root;
}

static void test_every_transition_keeps_min_le_max(void)
{
    gc_board b;
    const char *root = setup(&b);
    uint64_t level;
    int i, j, restored;

    /* every pair of levels, both directions: the mock refuses any write making min > max */
    for (i = 0; i < b.n_freqs; i++) {
        for (j = 0; j < b.n_freqs; j++) {
            gc_clock_state st;

            CHECK(gc_pin_hz(&b, b.freqs_hz[i], state_dir, &level) == 0);
            CHECK(gc_pin_hz(&b, b.freqs_hz[j], state_dir, &level) == 0);
            CHECK(gc_clock_read(&b, &st) == 0);
            CHECK(st.min_hz == b.freqs_hz[j] && st.max_hz == b.freqs_hz[j]);
        }
    }
    CHECK(mock.rejected == 0);
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    CHECK(mock.rejected == 0);
    fake_tree_remove(root);
}

static void test_write_order(void)
{
    gc_board b;
    const char *root = setup(&b);
    uint64_t level;

    /* from the full range down to 510: lower min first (max would otherwise go below min) */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    CHECK(mock.n_writes == 2);
    CHECK(strcmp(mock.log[0], "min_freq=510000000") == 0);
    CHECK(strcmp(mock.log[1], "max_freq=510000000") == 0);
    /* up to 1020: raise max first */
    mock_reset();
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(1020), state_dir, &level) == 0);
    CHECK(strcmp(mock.log[0], "max_freq=1020000000") == 0);
    CHECK(strcmp(mock.log[1], "min_freq=1020000000") == 0);
    /* the same clock again: nothing to write */
    mock_reset();
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(1020), state_dir, &level) == 0);
    CHECK(mock.n_writes == 0);
    fake_tree_remove(root);
}

static void test_verify_failure_restores(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_clock_state st;
    uint64_t level;

    /* the board silently keeps its ceiling (like a power-mode cap) */
    mock.ignore_writes_to = "max_freq";
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(408), state_dir, &level) == -GC_EVERIFY);
    CHECK(strstr(b.err, "did not take") != NULL);
    CHECK(strstr(b.err, "original clock state restored") != NULL);
    mock.ignore_writes_to = NULL;
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    CHECK(mock.rejected == 0);
    fake_tree_remove(root);
}

static void test_permission_failure_restores(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_clock_state st;
    uint64_t level;

    /* going up from a pinned 510: max is raised, then min fails */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    mock.fail_writes_to = "min_freq";
    mock.fail_errno = EACCES;
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(918), state_dir, &level) == -EACCES);
    CHECK(strstr(b.err, "run as root") != NULL);
    /* min could not be written, so the restore cannot finish either, and says so */
    CHECK(strstr(b.err, "restoring the original state also failed") != NULL);
    mock.fail_writes_to = NULL;
    {
        int restored;
        CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    }
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    fake_tree_remove(root);
}

static void test_state_dir_unwritable(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_clock_state st;
    uint64_t level;

    /* a state folder that cannot be created: nothing on the board may change */
    snprintf(state_dir, sizeof state_dir, "%s/proc/device-tree/model/state", root);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), state_dir, &level) < 0);
    CHECK(strstr(b.err, "state") != NULL);
    CHECK(mock.n_writes == 0);
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    fake_tree_remove(root);
}

static void test_restore_governor(void)
{
    gc_board b;
    const char *root = setup(&b);
    char buf[64];
    uint64_t level;
    int restored;

    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(714), state_dir, &level) == 0);
    /* someone switched the governor while we ran: restore puts ours back */
    fake_write(root, "sys/devices/17000000.ga10b/devfreq/17000000.ga10b/governor", "userspace\n");
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    fake_read(root, "sys/devices/17000000.ga10b/devfreq/17000000.ga10b/governor", buf, sizeof buf);
    CHECK(strcmp(buf, "nvhost_podgov") == 0);
    fake_tree_remove(root);
}

static void test_restore_writes_what_it_can(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_clock_state st;
    char path[GC_PATH_MAX];
    uint64_t level;
    int restored = 7;

    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    /* max_freq is busy: min is still lowered, the message names what is left, the state stays */
    mock_reset();
    mock.fail_writes_to = "max_freq";
    mock.fail_errno = EBUSY;
    CHECK(gc_restore(&b, state_dir, &restored) == -EBUSY && restored == 0);
    CHECK(strstr(b.err, "still not as saved: max_freq") != NULL);
    CHECK(strstr(b.err, "min_freq (") == NULL);
    CHECK(mock.rejected == 0);
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 510000000);
    CHECK(gc_state_path(&b, state_dir, path, sizeof path) == 0 && access(path, F_OK) == 0);
    /* cur_freq cannot be read (garbage): restore does not need it */
    mock.fail_writes_to = NULL;
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    fake_write(root, "sys/devices/17000000.ga10b/devfreq/17000000.ga10b/cur_freq", "busy\n");
    mock_reset();
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    CHECK(mock.rejected == 0);
    CHECK(access(path, F_OK) != 0);
    fake_tree_remove(root);
}

/* The joint pin: the EMC and CPU are pinned (real files), then the GPU's verify fails (the
 * mock ignores max_freq writes, as a power-mode cap does): every domain goes back. */
static void test_joint_pin_rolls_back_every_domain(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_domains ds;
    uint64_t gpu_level, levels[GC_MAX_DOMAINS];
    char buf[64];

    fake_write(root, "sys/kernel/debug/bpmp/debug/clk/emc/rate", "3199000000\n");
    fake_write(root, "sys/kernel/debug/bpmp/debug/clk/emc/max_rate", "3199000000\n");
    fake_write(root, "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked", "0\n");
    fake_write(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_available_frequencies",
               "729600 1036800 1728000\n");
    fake_write(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "schedutil\n");
    fake_write(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq", "729600\n");
    fake_write(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1728000\n");
    {
        const uint64_t emc_hz[] = {665600000ULL, 3199000000ULL}; /* the board table's */
        CHECK(gc_domains_open(&ds, root, emc_hz, 2) == 0);
    }
    CHECK(ds.d[0].available && ds.n == 2 && ds.d[1].available);
    mock.ignore_writes_to = "max_freq";
    CHECK(gc_pin_mode(&b, &ds, 510000000ULL, 665600000ULL, 1036800000ULL, state_dir, &gpu_level,
                      levels) == -GC_EVERIFY);
    CHECK(strstr(b.err, "clock did not take") != NULL && strstr(b.err, "restored") != NULL);
    fake_read(root, "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked", buf, sizeof buf);
    CHECK(strcmp(buf, "0") == 0);
    fake_read(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq", buf, sizeof buf);
    CHECK(strcmp(buf, "729600") == 0);
    fake_read(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq", buf, sizeof buf);
    CHECK(strcmp(buf, "1728000") == 0);
    {
        gc_clock_state st;
        CHECK(gc_state_load(&b, state_dir, &st) == -ENOENT); /* the record is gone with the pin */
    }
    fake_tree_remove(root);
}

int main(void)
{
    RUN(test_every_transition_keeps_min_le_max);
    RUN(test_write_order);
    RUN(test_verify_failure_restores);
    RUN(test_permission_failure_restores);
    RUN(test_state_dir_unwritable);
    RUN(test_restore_governor);
    RUN(test_restore_writes_what_it_can);
    RUN(test_joint_pin_rolls_back_every_domain);
    return DONE("test_clock");
}

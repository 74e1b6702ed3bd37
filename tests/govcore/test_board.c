/* test_board.c - discovery, snapping, pin/restore and the state file on fake trees, through
 * the real sysfs layer. */
#include "check.h"
#include "fake_tree.h"
#include "govcore.h"
#include "lock.h"
#include "powermode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_discovers_jp5_hwmon(void)
{
    /* levels written out of order: the table must come back sorted */
    const char *root = fake_tree_make(FAKE_JP5, "1300500000 306000000 714000000 510000000\n");
    gc_board b;

    CHECK(gc_board_open(&b, root) == 0);
    CHECK(strcmp(b.gpu_name, "ga10b") == 0);
    CHECK(strstr(b.devfreq_dir, "sys/class/devfreq/17000000.ga10b") != NULL);
    CHECK(b.n_freqs == 4);
    CHECK_EQ_U64(b.freqs_hz[0], 306000000);
    CHECK_EQ_U64(b.freqs_hz[3], 1300500000);
    CHECK(b.load_path[0] != '\0');
    /* 3 rails on 0x40, 1 on 0x41; NC channels and the shunt sum skipped; decoy thermal ignored */
    CHECK(b.n_rails == 4);
    CHECK(strcmp(b.rails[0].name, "VDD_GPU_SOC") == 0);
    CHECK(strcmp(b.rails[3].name, "VDDQ_VDD2_1V8AO") == 0);
    CHECK(b.rails[0].kind == GC_RAIL_HWMON);
    CHECK(strstr(b.rails[1].current_path, "curr2_input") != NULL);
    CHECK(b.sensor_interval_ms == 7);
    CHECK(strcmp(b.model, "NVIDIA Jetson AGX Orin Developer Kit") == 0);
    CHECK(strcmp(b.board_id, "agx-orin") == 0 && b.warning[0] == '\0');
    CHECK(b.role_n[GC_ROLE_MODULE] == 4 && b.role_n[GC_ROLE_CPU_GPU] == 2 && b.role_n[GC_ROLE_GPU] == 0);
    {
        int load = -1;
        CHECK(gc_gpu_load_permille(&b, &load) == 0 && load == 437);
    }
    fake_tree_remove(root);
}

/* The tests leave nothing outside their temp folders: a fake tree is gone once removed (as root
 * it lies in /run), and the locks go to the private folder, never the host's /run/pydvfs/locks. */
static void test_leaves_nothing_behind(void)
{
    char root[256], dir[GC_PATH_MAX];
    struct stat st;

    snprintf(root, sizeof root, "%s", fake_tree_make(FAKE_JP5, ORIN_11_LEVELS));
    CHECK(stat(root, &st) == 0);
    fake_tree_remove(root);
    CHECK(stat(root, &st) != 0 && errno == ENOENT);
    CHECK(gc_lock_dir(dir, sizeof dir) == 0 && strcmp(dir, fake_lock_dir()) == 0);
    CHECK(strcmp(dir, GC_LOCK_DIR_ROOT) != 0);
}

static void test_discovers_jp6_13_levels(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_13_LEVELS);
    gc_board b;
    int load;

    CHECK(gc_board_open(&b, root) == 0);
    CHECK(strcmp(b.gpu_name, "gpu") == 0);
    CHECK(b.n_freqs == 13);
    CHECK_EQ_U64(b.freqs_hz[0], 114750000);
    CHECK_EQ_U64(b.freqs_hz[12], 1300500000);
    CHECK(b.load_path[0] == '\0'); /* this tree has no load file: a missing key, not a crash */
    CHECK(gc_gpu_load_permille(&b, &load) == -ENOENT);
    fake_tree_remove(root);
}

static void test_discovers_jp4_ina3221x(void)
{
    const char *root = fake_tree_make(FAKE_JP4, ORIN_11_LEVELS);
    gc_board b;

    CHECK(gc_board_open(&b, root) == 0);
    CHECK(strcmp(b.gpu_name, "gv11b") == 0);
    CHECK(b.n_rails == 3);
    CHECK(strcmp(b.rails[0].name, "GPU") == 0);
    CHECK(b.rails[0].kind == GC_RAIL_INA3221X);
    CHECK(strstr(b.rails[2].power_path, "in_power2_input") != NULL);
    fake_tree_remove(root);
}

/* A fresh empty root for trees written file by file. */
static const char *empty_root(void)
{
    static char root[64];

    snprintf(root, sizeof root, "/tmp/gc_board_XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    return root;
}

#define THOR_LEVELS "315000000 735000000 1575000000"

/* Thor: the GPU is the virtual devfreq device gpu-gpc-0 (no of_node, no load file, podgov's
 * tunables beside it); the INA238 shows power1_input in uW and no label: the rail is named by
 * the hwmon device. The board and JetPack come from the model and nv_tegra_release. */
static void test_discovers_thor(void)
{
    const char *root = empty_root();
    gc_board b;
    int load = -1;

    fake_write(root, "sys/devices/virtual/devfreq/gpu-gpc-0/available_frequencies", THOR_LEVELS);
    fake_write(root, "sys/devices/virtual/devfreq/nvhost_podgov/load_target", "700");
    fake_write(root, "sys/class/hwmon/hwmon0/name", "ina3221");
    fake_write(root, "sys/class/hwmon/hwmon0/in1_label", "VDD_GPU");
    fake_write(root, "sys/class/hwmon/hwmon0/in1_input", "5000");
    fake_write(root, "sys/class/hwmon/hwmon0/curr1_input", "1000");
    fake_write(root, "sys/class/hwmon/hwmon0/in2_label", "VDD_CPU_SOC_MSS");
    fake_write(root, "sys/class/hwmon/hwmon0/in2_input", "5000");
    fake_write(root, "sys/class/hwmon/hwmon0/curr2_input", "500");
    fake_write(root, "sys/class/hwmon/hwmon1/name", "ina238");
    fake_write(root, "sys/class/hwmon/hwmon1/power1_input", "42000000");
    fake_write(root, "proc/device-tree/model", "NVIDIA Jetson AGX Thor Developer Kit");
    fake_write(root, "etc/nv_tegra_release", "# R38 (release), REVISION: 2.0, GCID: 1, BOARD: generic");

    CHECK(gc_board_open(&b, root) == 0);
    CHECK(strcmp(b.gpu_name, "gpu-gpc-0") == 0);
    CHECK(strstr(b.devfreq_dir, "sys/devices/virtual/devfreq/gpu-gpc-0") != NULL);
    CHECK(b.n_freqs == 3);
    CHECK(b.load_path[0] == '\0');
    CHECK(gc_gpu_load_permille(&b, &load) == -ENOENT); /* unknown, never made up */
    CHECK(strcmp(b.board_id, "thor") == 0);
    CHECK(b.jetpack == 7 && strcmp(b.l4t, "R38.2.0") == 0);
    CHECK(b.n_rails == 3);
    CHECK(strcmp(b.rails[2].name, "ina238") == 0 && b.rails[2].kind == GC_RAIL_POWER);
    CHECK(strstr(b.rails[2].power_path, "power1_input") != NULL);
    /* module = the INA238 alone; cpu_gpu = VDD_GPU + VDD_CPU_SOC_MSS; gpu = VDD_GPU */
    CHECK(b.role_n[GC_ROLE_MODULE] == 1 && b.role_rail[GC_ROLE_MODULE][0] == 2);
    CHECK(b.role_n[GC_ROLE_CPU_GPU] == 2);
    CHECK(b.role_n[GC_ROLE_GPU] == 1 && b.role_rail[GC_ROLE_GPU][0] == 0);
    CHECK(b.warning[0] == '\0');
    {
        double w[3] = {5.0, 2.5, 42.0};
        int known;

        CHECK(gc_role_sum(&b, GC_ROLE_MODULE, w, &known) == 42.0 && known);
        CHECK(gc_role_sum(&b, GC_ROLE_CPU_GPU, w, &known) == 7.5 && known);
    }
    fake_tree_remove(root);
}

/* A channel the sensor does not measure is no rail (issue 52): an INA3221 channel whose
 * inN_enable reads 0, or one whose input cannot be read at discovery (a folder in place of
 * in3_input reads EISDIR, as a disabled channel's reads EIO on a JetPack 6 AGX Orin: alumet
 * issue 212). The skipped channel is listed with why; the AGX Orin's module, whose
 * VDDQ_VDD2_1V8AO is optional in the table, is then summed over the rails present and flagged
 * partial, while a missing rail that is not optional leaves its role unknown. */
static void test_disabled_and_unreadable_channels_are_not_rails(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    const char *vddq = "sys/bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon11";
    char path[GC_PATH_MAX];
    gc_board b;

    snprintf(path, sizeof path, "%s/in2_enable", vddq);
    fake_write(root, path, "0\n");
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(b.n_rails == 3 && strcmp(b.rails[2].name, "VIN_SYS_5V0") == 0);
    CHECK(b.n_skipped == 1 && strcmp(b.skipped[0].name, "VDDQ_VDD2_1V8AO") == 0);
    CHECK(strstr(b.skipped[0].why, "disabled: ") == b.skipped[0].why);
    CHECK(strstr(b.skipped[0].why, "hwmon/hwmon11/in2_enable is 0") != NULL);
    CHECK(b.role_n[GC_ROLE_MODULE] == 3 && b.role_partial[GC_ROLE_MODULE] == 1);
    CHECK(b.role_n[GC_ROLE_CPU_GPU] == 2 && b.role_partial[GC_ROLE_CPU_GPU] == 0);
    CHECK(strstr(b.warning, "module energy is partial (module_partial): summed over the rails "
                            "present, without VDDQ_VDD2_1V8AO, which was skipped (disabled: ") != NULL);
    {
        double w[GC_MAX_RAILS] = {1, 2, 4};
        int known;
        CHECK(gc_role_sum(&b, GC_ROLE_MODULE, w, &known) == 7 && known);
    }

    /* enabled again, its input a folder: read fails, skipped with the reason */
    fake_write(root, path, "1\n");
    snprintf(path, sizeof path, "%s/%s/in2_input", root, vddq);
    CHECK(unlink(path) == 0 && mkdir(path, 0755) == 0);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(b.n_rails == 3 && b.n_skipped == 1 && strcmp(b.skipped[0].name, "VDDQ_VDD2_1V8AO") == 0);
    CHECK(strstr(b.skipped[0].why, "in2_input cannot be read: ") != NULL);
    CHECK(b.role_n[GC_ROLE_MODULE] == 3 && b.role_partial[GC_ROLE_MODULE] == 1);

    /* a rail that is not optional (VIN_SYS_5V0 on 1-0040) unreadable: the module is not known */
    snprintf(path, sizeof path, "%s/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/in3_input", root);
    CHECK(unlink(path) == 0 && mkdir(path, 0755) == 0);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(b.n_rails == 2 && b.n_skipped == 2);
    CHECK(b.role_n[GC_ROLE_MODULE] == -1 && b.role_partial[GC_ROLE_MODULE] == 0);
    CHECK(b.role_n[GC_ROLE_CPU_GPU] == 2);
    CHECK(strstr(b.warning, "module energy is not known: rail VIN_SYS_5V0 was skipped (") != NULL);
    fake_tree_remove(root);
}

/* A board outside the table still works from discovery alone, with one warning; no role is
 * guessed. The JetPack 6 Orin tree under another model name. */
static void test_unknown_board_warns_once(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_11_LEVELS);
    gc_board b;
    int role;

    fake_write(root, "proc/device-tree/model", "Some Carrier Board");
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(b.board_id[0] == '\0' && b.n_rails == 4);
    for (role = 0; role < GC_N_ROLES; role++)
        CHECK(b.role_n[role] == -1);
    CHECK(strstr(b.warning, "unknown board (model \"Some Carrier Board\")") == b.warning);
    CHECK(strstr(b.warning, "rail roles are unknown") != NULL);
    CHECK(b.jetpack == 0 && b.l4t[0] == '\0'); /* no nv_tegra_release in this tree */
    fake_tree_remove(root);
}

/* Two channels labelled alike: both kept, the second as LABEL#2, a warning, and a role naming
 * the label is not known (its sum would be wrong). A label with control characters or bytes that
 * are not UTF-8 is made printable before anyone shows it. */
static void test_repeated_and_unprintable_labels(void)
{
    const char *root = empty_root();
    gc_board b;

    fake_write(root, "sys/class/devfreq/17000000.gpu/of_node/name", "gpu");
    fake_write(root, "sys/class/devfreq/17000000.gpu/available_frequencies", ORIN_11_LEVELS);
    fake_write(root, "sys/class/hwmon/hwmon0/name", "ina3221");
    fake_write(root, "sys/class/hwmon/hwmon0/in1_label", "VDD_IN");
    fake_write(root, "sys/class/hwmon/hwmon0/in2_label", "VDD_IN");
    fake_write(root, "sys/class/hwmon/hwmon0/in3_label", "VDD_\x1b[31mRED\xff");
    fake_write(root, "sys/class/hwmon/hwmon0/in1_input", "5000");
    fake_write(root, "sys/class/hwmon/hwmon0/in2_input", "5000");
    fake_write(root, "sys/class/hwmon/hwmon0/in3_input", "5000");
    fake_write(root, "sys/class/hwmon/hwmon0/curr1_input", "100");
    fake_write(root, "sys/class/hwmon/hwmon0/curr2_input", "100");
    fake_write(root, "sys/class/hwmon/hwmon0/curr3_input", "100");
    fake_write(root, "proc/device-tree/model", "NVIDIA Jetson Orin Nano Developer Kit");
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(strcmp(b.board_id, "orin-nano-super") == 0);
    CHECK(b.n_rails == 3);
    CHECK(strcmp(b.rails[0].name, "VDD_IN") == 0);
    CHECK(strcmp(b.rails[1].name, "VDD_IN#2") == 0);
    CHECK(strcmp(b.rails[2].name, "VDD_\\x1b[31mRED\\xff") == 0);
    CHECK(strstr(b.warning, "two power channels are labelled VDD_IN: the second is read as VDD_IN#2") != NULL);
    CHECK(b.role_n[GC_ROLE_MODULE] == -1);  /* VDD_IN is which channel? not known */
    CHECK(b.role_n[GC_ROLE_CPU_GPU] == -1); /* VDD_CPU_GPU_CV was not found */
    CHECK(b.role_n[GC_ROLE_GPU] == 0);      /* this board has no GPU rail of its own */
    fake_tree_remove(root);
}

static void test_no_board(void)
{
    gc_board b;
    char root[] = "/tmp/govcore-test-XXXXXX";

    CHECK(gc_board_open(&b, "/nonexistent/root") == -ENODEV);
    CHECK(strstr(b.err, "does not exist") != NULL);
    CHECK(mkdtemp(root) != NULL);
    CHECK(gc_board_open(&b, root) == -ENODEV);
    CHECK(strstr(b.err, "no Jetson GPU devfreq node") != NULL);
    fake_tree_remove(root);
}

static void test_garbage_table(void)
{
    const char *root = fake_tree_make(FAKE_JP5, "306000000 fast 714000000");
    gc_board b;

    CHECK(gc_board_open(&b, root) == -GC_EBOARD);
    CHECK(strstr(b.err, "available_frequencies") != NULL);
    fake_tree_remove(root);
}

static void test_snap(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    gc_board b;
    uint64_t f;

    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_snap_hz(&b, gc_mhz_to_hz(700), &f) == 0);
    CHECK_EQ_U64(f, 714000000);
    CHECK(gc_snap_hz(&b, gc_mhz_to_hz(663), &f) == 0); /* 612 and 714 equally far: lower */
    CHECK_EQ_U64(f, 612000000);
    CHECK(gc_snap_hz(&b, gc_mhz_to_hz(5000), &f) == 0);
    CHECK_EQ_U64(f, 1300500000);
    CHECK(gc_snap_hz(&b, gc_mhz_to_hz(1), &f) == 0);
    CHECK_EQ_U64(f, 306000000);
    CHECK(gc_snap_hz(&b, 0, &f) == -EINVAL);
    CHECK(gc_mhz_to_hz(-5) == 0);
    CHECK(gc_mhz_to_hz(1300.5) == 1300500000ULL);
    fake_tree_remove(root);
}

/* gc_parse_mhz: the one grammar of a clock (the whole table of cases is
 * tests/data/clock_grammar.json, run against both front ends by test_clock_grammar.py); here
 * the edges of the exact integer arithmetic. */
static uint64_t parsed(const char *text)
{
    uint64_t hz = 7;

    return gc_parse_mhz(text, strlen(text), &hz) == 0 ? hz : 0;
}

static void test_parse_mhz(void)
{
    uint64_t hz = 7;

    CHECK_EQ_U64(parsed("714"), 714000000);
    CHECK_EQ_U64(parsed("1300.5"), 1300500000);
    CHECK_EQ_U64(parsed("0.000001"), 1);
    CHECK_EQ_U64(parsed("714.000001"), 714000001);
    CHECK_EQ_U64(parsed("1000000"), 1000000000000ull);
    CHECK_EQ_U64(parsed("999999.999999"), 999999999999ull);
    CHECK_EQ_U64(parsed("1000000.000001"), 0); /* 13 digits, and above 1e6 MHz */
    CHECK_EQ_U64(parsed("1000001"), 0);
    CHECK_EQ_U64(parsed("714.0000005"), 0);  /* finer than a Hz */
    CHECK_EQ_U64(parsed("714.0000000"), 0);
    CHECK_EQ_U64(parsed("999999999999"), 0); /* 12 digits, far above 1e6 MHz: no overflow */
    CHECK_EQ_U64(parsed("0"), 0);
    CHECK_EQ_U64(parsed("0.0"), 0);
    CHECK_EQ_U64(parsed(""), 0);
    CHECK_EQ_U64(parsed("."), 0);
    /* len bounds the text: a token inside a longer line */
    CHECK(gc_parse_mhz("714 MHz", 3, &hz) == 0 && hz == 714000000);
    CHECK(gc_parse_mhz("714 MHz", 4, &hz) == -EINVAL && hz == 714000000);
}

static void test_near_table(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    gc_board b;

    CHECK(gc_board_open(&b, root) == 0); /* 306..1300.5, steps 102 and 76.5 at the ends */
    CHECK(gc_check_near_table(&b, 204000000) == 0);
    CHECK(gc_check_near_table(&b, 1377000000) == 0);
    CHECK(gc_check_near_table(&b, 203999999) == -EINVAL);
    CHECK(strstr(b.err, "203.999999 MHz is outside the board's table (306..1300.5 MHz)") != NULL);
    CHECK(gc_check_near_table(&b, 1377000001) == -EINVAL);
    fake_tree_remove(root);
}

static void test_pin_and_restore_through_files(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char state_dir[600], buf[128], path[GC_PATH_MAX];
    gc_board b, b2;
    gc_clock_state st;
    uint64_t level;
    int restored;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(500), state_dir, &level) == 0);
    CHECK_EQ_U64(level, 510000000);
    fake_read(root, "sys/devices/17000000.ga10b/devfreq/17000000.ga10b/min_freq", buf, sizeof buf);
    CHECK(strcmp(buf, "510000000") == 0);
    fake_read(root, "sys/devices/17000000.ga10b/devfreq/17000000.ga10b/max_freq", buf, sizeof buf);
    CHECK(strcmp(buf, "510000000") == 0);
    /* the state file holds the original, not the pinned values, even after a second pin */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(1224), state_dir, &level) == 0);
    CHECK(gc_state_load(&b, state_dir, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    CHECK(strcmp(st.governor, "nvhost_podgov") == 0);
    /* "a new process after a crash": a fresh board handle restores from the file */
    CHECK(gc_board_open(&b2, root) == 0);
    CHECK(gc_restore(&b2, state_dir, &restored) == 0 && restored == 1);
    CHECK(gc_clock_read(&b2, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    CHECK(gc_state_path(&b2, state_dir, path, sizeof path) == 0);
    CHECK(access(path, F_OK) != 0); /* removed after a successful restore */
    /* idempotent */
    CHECK(gc_restore(&b2, state_dir, &restored) == 0 && restored == 0);
    fake_tree_remove(root);
}

static void test_state_per_root_and_damaged(void)
{
    const char *r1 = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    const char *r2 = fake_tree_make(FAKE_JP6, ORIN_11_LEVELS);
    char state_dir[600], p1[GC_PATH_MAX], p2[GC_PATH_MAX];
    gc_board b1, b2;
    gc_clock_state st;
    FILE *f;
    int restored;

    snprintf(state_dir, sizeof state_dir, "%s/state", r1);
    CHECK(gc_board_open(&b1, r1) == 0 && gc_board_open(&b2, r2) == 0);
    CHECK(gc_state_path(&b1, state_dir, p1, sizeof p1) == 0);
    CHECK(gc_state_path(&b2, state_dir, p2, sizeof p2) == 0);
    CHECK(strcmp(p1, p2) != 0);
    CHECK(gc_state_load(&b1, state_dir, &st) == -ENOENT);
    /* a damaged state file is reported, not trusted */
    {
        uint64_t level;
        CHECK(gc_pin_hz(&b1, gc_mhz_to_hz(612), state_dir, &level) == 0);
    }
    f = fopen(p1, "w");
    fputs("governor=\nmin_hz=abc\n", f);
    fclose(f);
    CHECK(gc_restore(&b1, state_dir, &restored) == -GC_ESTATE);
    CHECK(strstr(b1.err, "damaged") != NULL);
    fake_tree_remove(r1);
    fake_tree_remove(r2);
}

static void test_default_state_dir(void)
{
    char out[GC_PATH_MAX];

    setenv("PYDVFS_STATE_DIR", "/somewhere/else", 1);
    CHECK(gc_default_state_dir(out, sizeof out) == 0 && strcmp(out, "/somewhere/else") == 0);
    unsetenv("PYDVFS_STATE_DIR");
    /* root: /run/pydvfs; others: $XDG_RUNTIME_DIR/pydvfs, never a guessable /tmp name */
    if (geteuid() == 0) {
        CHECK(gc_default_state_dir(out, sizeof out) == 0 && strcmp(out, "/run/pydvfs") == 0);
    } else {
        setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
        CHECK(gc_default_state_dir(out, sizeof out) == 0 && strcmp(out, "/run/user/1000/pydvfs") == 0);
        unsetenv("XDG_RUNTIME_DIR");
        CHECK(gc_default_state_dir(out, sizeof out) == -EDESTADDRREQ);
    }
}

/* The power mode is the ceiling (powermode.h): the cap is the max_freq before the first pin
 * (then the saved original's) and nvpmodel_clk_cap; above_power_mode lifts it; restore returns
 * it. nvpmodel's status and conf: parsed, or unknown with why - garbled, a FIFO, too large. */
static void test_power_mode_cap(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    const char *df = "sys/devices/17000000.ga10b/devfreq/17000000.ga10b";
    char state_dir[600], rel[256], buf[128], name[64], *big;
    gc_board b;
    gc_power_mode pm;
    gc_gpu_cap cap;
    uint64_t level, hz;
    int restored, id;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    snprintf(rel, sizeof rel, "%s/max_freq", df);
    fake_write(root, rel, "612000000\n");
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_gpu_cap_read(&b, state_dir, &cap) == 0);
    CHECK_EQ_U64(cap.cap_hz, 612000000);
    CHECK(cap.from_saved == 0 && cap.clk_cap_hz == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(918), state_dir, &level) == 0);
    CHECK_EQ_U64(level, 612000000);
    CHECK_EQ_U64(b.clamped_from_hz, 918000000);
    CHECK_EQ_U64(b.cap_hz, 612000000);
    /* the saved original's max, not the pinned one */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0 && level == 510000000);
    CHECK(b.clamped_from_hz == 0);
    CHECK(gc_gpu_cap_read(&b, state_dir, &cap) == 0 && cap.from_saved == 1);
    CHECK_EQ_U64(cap.cap_hz, 612000000);
    b.above_power_mode = 1;
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(1224), state_dir, &level) == 0 && level == 1224000000);
    CHECK(b.clamped_from_hz == 0 && b.cap_hz == 0);
    b.above_power_mode = 0;
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    fake_read(root, rel, buf, sizeof buf);
    CHECK(strcmp(buf, "612000000") == 0); /* restore returns the cap */
    /* nvpmodel_clk_cap below max_freq wins */
    fake_write(root, "sys/kernel/nvpmodel_clk_cap/gpu", "510000000\n");
    CHECK(gc_gpu_cap_read(&b, state_dir, &cap) == 0);
    CHECK_EQ_U64(cap.cap_hz, 510000000);
    CHECK_EQ_U64(cap.clk_cap_hz, 510000000);
    /* the mode: unknown, then known, then garbled */
    gc_power_mode_read(&b, &pm);
    CHECK(pm.id == -1 && strstr(pm.why, "not found") != NULL);
    fake_write(root, "var/lib/nvpmodel/status", "pmode:0002 fmode:quiet\n");
    fake_write(root, "etc/nvpmodel.conf", "< PARAM TYPE=CLOCK NAME=GPU >\nMAX_FREQ /sys/x\n"
                                          "< POWER_MODEL ID=2 NAME=30W >\nGPU MIN_FREQ 0\n"
                                          "GPU MAX_FREQ 612000000\n< PM_CONFIG DEFAULT=2 >\n");
    gc_power_mode_read(&b, &pm);
    CHECK(pm.id == 2 && strcmp(pm.name, "30W") == 0 && pm.why[0] == '\0');
    CHECK_EQ_U64(pm.gpu_max_hz, 612000000);
    fake_write(root, "etc/nvpmodel.conf", "< POWER_MODEL ID=2 NAME=30W\nGPU MAX_FREQ 1\n");
    gc_power_mode_read(&b, &pm);
    CHECK(pm.id == -1 && pm.name[0] == '\0' && strstr(pm.why, "garbled (status: mode 2)") != NULL);
    big = malloc(GC_NVPMODEL_CONF_MAX + 2);
    CHECK(big != NULL);
    memset(big, '#', GC_NVPMODEL_CONF_MAX + 1);
    big[GC_NVPMODEL_CONF_MAX + 1] = '\0';
    fake_write(root, "etc/nvpmodel.conf", big);
    free(big);
    gc_power_mode_read(&b, &pm);
    CHECK(strstr(pm.why, "too large") != NULL);
    snprintf(rel, sizeof rel, "%s/var/lib/nvpmodel/status", root);
    CHECK(unlink(rel) == 0 && mkfifo(rel, 0600) == 0); /* must not block */
    gc_power_mode_read(&b, &pm);
    CHECK(pm.id == -1 && strstr(pm.why, "not a text file") != NULL);
    /* the parsers on their own */
    CHECK(gc_nvpmodel_parse_status("pmode:0000", &id) == 0 && id == 0);
    CHECK(gc_nvpmodel_parse_status("pmode:", &id) < 0);
    CHECK(gc_nvpmodel_parse_status("pmode:12x", &id) < 0);
    CHECK(gc_nvpmodel_parse_status("", &id) < 0);
    CHECK(gc_nvpmodel_parse_conf("< POWER_MODEL ID=0 NAME=MAXN >\nGPU MAX_FREQ -1\n", 0, name, sizeof name, &hz) == 0);
    CHECK(strcmp(name, "MAXN") == 0 && hz == 0);
    CHECK(gc_nvpmodel_parse_conf("< POWER_MODEL ID=0 NAME=MAXN >\n", 1, name, sizeof name, &hz) == -ENOENT);
    CHECK(gc_nvpmodel_parse_conf("< POWER_MODEL ID=1 NAME=0123456789012345678901234567890123456789"
                                 "0123456789012345678901234567890123456789 >\n", 1, name, sizeof name, &hz) < 0);
    CHECK(gc_nvpmodel_parse_conf("< POWER_MODEL ID=1 NAME=A >\nGPU MAX_FREQ 99999999999999999999\n", 1,
                                 name, sizeof name, &hz) < 0);
    fake_tree_remove(root);
}

int main(void)
{
    RUN(test_discovers_jp5_hwmon);
    RUN(test_leaves_nothing_behind);
    RUN(test_discovers_jp6_13_levels);
    RUN(test_discovers_jp4_ina3221x);
    RUN(test_discovers_thor);
    RUN(test_unknown_board_warns_once);
    RUN(test_disabled_and_unreadable_channels_are_not_rails);
    RUN(test_repeated_and_unprintable_labels);
    RUN(test_no_board);
    RUN(test_garbage_table);
    RUN(test_snap);
    RUN(test_parse_mhz);
    RUN(test_near_table);
    RUN(test_pin_and_restore_through_files);
    RUN(test_state_per_root_and_damaged);
    RUN(test_default_state_dir);
    RUN(test_power_mode_cap);
    return DONE("test_board");
}

/* test_domain.c - the EMC and CPU clock domains on fake trees, through the real sysfs layer:
 * discovery (available, unavailable), the check before any write (not in the table, above the
 * cap: nothing written), pin/restore, the joint pin's rollback, and the saved record's lines. */
#include "check.h"
#include "domain.h"
#include "govcore.h"
#include "fake_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMC "sys/kernel/debug/bpmp/debug/clk/emc/"
#define P0 "sys/devices/system/cpu/cpufreq/policy0/"
#define P4 "sys/devices/system/cpu/cpufreq/policy4/"
#define NANO_CPU "115200 192000 268800 345600 422400 499200 576000 652800 729600 806400 883200 " \
                 "960000 1036800 1113600 1190400 1267200 1344000 1420800 1497600 1574400 " \
                 "1651200 1728000"

/* An Orin Nano's EMC and CPU policies as the kernel shows them: EMC under its own scaling
 * (unlocked) at 2133 MHz, the CPUs under schedutil over their whole table. */
static const char *domain_tree(int with_rates)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_11_LEVELS);

    fake_write(root, EMC "rate", "2133000000\n");
    fake_write(root, EMC "min_rate", "204000000\n");
    fake_write(root, EMC "max_rate", "3199000000\n");
    fake_write(root, EMC "mrq_rate_locked", "0\n");
    if (with_rates)
        fake_write(root, "sys/kernel/debug/emc/available_rates",
                   "204000000 665600000 2133000000 3199000000\n");
    fake_write(root, P0 "related_cpus", "0 1 2 3\n");
    fake_write(root, P4 "related_cpus", "4 5\n");
    fake_write(root, P0 "scaling_available_frequencies", NANO_CPU "\n");
    fake_write(root, P4 "scaling_available_frequencies", NANO_CPU "\n");
    fake_write(root, P0 "scaling_available_governors", "performance schedutil\n");
    fake_write(root, P4 "scaling_available_governors", "performance schedutil\n");
    fake_write(root, P0 "scaling_governor", "schedutil\n");
    fake_write(root, P4 "scaling_governor", "schedutil\n");
    fake_write(root, P0 "scaling_min_freq", "115200\n");
    fake_write(root, P4 "scaling_min_freq", "115200\n");
    fake_write(root, P0 "scaling_max_freq", "1728000\n");
    fake_write(root, P4 "scaling_max_freq", "1728000\n");
    return root;
}

static int file_is(const char *root, const char *rel, const char *want)
{
    char buf[256];

    fake_read(root, rel, buf, sizeof buf);
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "  %s holds \"%s\", expected \"%s\"\n", rel, buf, want);
        return 0;
    }
    return 1;
}

/* The tree as domain_tree left it (an unlocked EMC's rate is its own scaling's: not compared). */
static int untouched(const char *root)
{
    return file_is(root, EMC "mrq_rate_locked", "0") &&
           file_is(root, P0 "scaling_min_freq", "115200") &&
           file_is(root, P0 "scaling_max_freq", "1728000") &&
           file_is(root, P4 "scaling_min_freq", "115200") &&
           file_is(root, P4 "scaling_max_freq", "1728000") &&
           file_is(root, P0 "scaling_governor", "schedutil");
}

static void test_discovers_emc_and_policies(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(ds.n == 3);
    CHECK(strcmp(ds.d[0].name, "emc") == 0 && ds.d[0].available);
    CHECK(ds.d[0].n_levels == 4);
    CHECK_EQ_U64(ds.d[0].levels_hz[1], 665600000);
    CHECK_EQ_U64(ds.d[0].cap_hz, 3199000000ULL);
    CHECK(strcmp(ds.d[1].name, "cpu0") == 0 && ds.d[1].available && ds.d[1].policy == 0);
    CHECK(strcmp(ds.d[2].name, "cpu4") == 0 && strcmp(ds.d[2].related_cpus, "4 5") == 0);
    CHECK(ds.d[1].n_levels == 22);
    CHECK_EQ_U64(ds.d[1].levels_hz[0], 115200000);  /* kHz read as Hz */
    CHECK(gc_domain_find(&ds, "cpu4") == 2 && gc_domain_find(&ds, "gpu") == -1);
    fake_tree_remove(root);
}

static void test_emc_table_from_the_board_table(void)
{
    const char *root = domain_tree(0);
    const uint64_t table[] = {3199000000ULL, 204000000, 2133000000ULL, 665600000};
    gc_domains ds;

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(!ds.d[0].available && strstr(ds.d[0].why, "no table of rates") != NULL);
    CHECK(ds.d[1].available); /* the rest is governed */
    CHECK(gc_domains_open(&ds, root, table, 4) == 0);
    CHECK(ds.d[0].available && ds.d[0].n_levels == 4);
    CHECK_EQ_U64(ds.d[0].levels_hz[0], 204000000); /* sorted */
    fake_tree_remove(root);
}

static void test_emc_table_from_boards_h(void)
{
    const char *root = domain_tree(0);
    gc_board b;
    gc_domains ds;

    /* the fake tree's model is an AGX Orin: gen_boards.h (from the board table) has its EMC rates */
    CHECK(gc_board_open(&b, root) == 0 && strcmp(b.board_id, "agx-orin") == 0);
    CHECK(gc_domains_open_board(&ds, &b) == 0);
    CHECK(ds.d[0].available && ds.d[0].n_levels == 4);
    CHECK_EQ_U64(ds.d[0].levels_hz[1], 665600000ULL);
    CHECK_EQ_U64(ds.d[0].levels_hz[3], 3199000000ULL);
    /* a board the table does not know: none */
    b.board_id[0] = '\0';
    CHECK(gc_domains_open_board(&ds, &b) == 0 && !ds.d[0].available);
    fake_tree_remove(root);
}

static void test_unavailable_domains(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_11_LEVELS);
    gc_domains ds;
    uint64_t levels[GC_MAX_DOMAINS];

    /* no debugfs, no cpufreq: an EMC that is unavailable, no CPU domain */
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(ds.n == 1 && !ds.d[0].available && strstr(ds.d[0].why, "BPMP") != NULL);
    CHECK(gc_domains_check(&ds, 2133000000ULL, 0, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "emc is unavailable") != NULL);
    CHECK(gc_domains_check(&ds, 0, 1036800000ULL, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "no cpufreq policy") != NULL);
    fake_tree_remove(root);

    /* a policy whose scaling_max_freq is a folder: that policy alone is unavailable */
    root = domain_tree(1);
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/" P4 "scaling_max_freq", root);
        CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0);
    }
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(ds.d[0].available && ds.d[1].available && !ds.d[2].available);
    CHECK(strstr(ds.d[2].why, "scaling_max_freq") != NULL);
    CHECK(gc_domains_check(&ds, 0, 1036800000ULL, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "cpu4 is unavailable") != NULL);
    fake_tree_remove(root);
}

static void test_check_refuses_and_writes_nothing(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    uint64_t levels[GC_MAX_DOMAINS];

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    /* 1000 MHz is no EMC rate */
    CHECK(gc_domains_check(&ds, 1000000000ULL, 1036800000ULL, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "emc: 1000 MHz is not in its table (204 665.6 2133 3199 MHz)") != NULL);
    /* a CPU clock above every policy's table */
    CHECK(gc_domains_check(&ds, 0, 3000000000ULL, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "cpu0: 3000 MHz is not in its table") != NULL);
    /* the power mode's caps: nvpmodel's EMC cap, the CPU's max before the first pin */
    fake_write(root, "sys/kernel/nvpmodel_clk_cap/emc", "2133000000\n");
    fake_write(root, P4 "scaling_max_freq", "1190400\n");
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK_EQ_U64(ds.d[0].cap_hz, 2133000000ULL);
    CHECK(gc_domains_check(&ds, 3199000000ULL, 0, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "above the power mode's cap of 2133 MHz") != NULL);
    CHECK(gc_domains_check(&ds, 2133000000ULL, 1728000000ULL, NULL, levels) == -EINVAL);
    CHECK(strstr(ds.err, "cpu4: 1728 MHz is above the power mode's cap of 1190.4 MHz") != NULL);
    fake_write(root, P4 "scaling_max_freq", "1728000\n");
    CHECK(untouched(root));
    /* the user's rounding: 1036.8 and 665.6 are levels; 1040 snaps to 1036.8 on every policy */
    CHECK(gc_domains_check(&ds, 665600000ULL, 1040000000ULL, NULL, levels) == 0);
    CHECK_EQ_U64(levels[0], 665600000ULL);
    CHECK_EQ_U64(levels[1], 1036800000ULL);
    CHECK_EQ_U64(levels[2], 1036800000ULL);
    CHECK(gc_domains_check(&ds, 0, 1036800000ULL, NULL, levels) == 0 && levels[0] == 0);
    fake_tree_remove(root);
}

static void test_pin_and_restore(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state orig[GC_MAX_DOMAINS], now;
    uint64_t levels[GC_MAX_DOMAINS];

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(gc_domains_snapshot(&ds, orig) == 0);
    CHECK(orig[0].saved && orig[0].locked == 0 && orig[0].rate_hz == 2133000000ULL);
    CHECK(orig[1].saved && strcmp(orig[1].governor, "schedutil") == 0);
    CHECK(gc_domains_check(&ds, 665600000ULL, 1036800000ULL, orig, levels) == 0);
    CHECK(gc_domains_pin(&ds, levels, orig) == 0);
    CHECK(file_is(root, EMC "mrq_rate_locked", "1") && file_is(root, EMC "rate", "665600000"));
    CHECK(file_is(root, P0 "scaling_min_freq", "1036800") && file_is(root, P0 "scaling_max_freq", "1036800"));
    CHECK(file_is(root, P4 "scaling_min_freq", "1036800") && file_is(root, P4 "scaling_max_freq", "1036800"));
    CHECK(gc_domain_read(&ds, 1, &now) == 0 && now.min_hz == 1036800000ULL);
    /* up again: raising min above the current max writes max first (never min > max) */
    CHECK(gc_domains_check(&ds, 0, 1728000000ULL, orig, levels) == 0);
    CHECK(gc_domains_pin(&ds, levels, orig) == 0);
    CHECK(file_is(root, P0 "scaling_min_freq", "1728000"));
    fake_write(root, P0 "scaling_governor", "performance\n");
    CHECK(gc_domains_restore(&ds, orig) == 0);
    CHECK(untouched(root));
    fake_tree_remove(root);
}

static void test_locked_emc_gets_its_rate_back(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state orig[GC_MAX_DOMAINS];
    uint64_t levels[GC_MAX_DOMAINS];

    /* pinned by jetson_clocks before us: locked at 3199 MHz */
    fake_write(root, EMC "mrq_rate_locked", "1\n");
    fake_write(root, EMC "rate", "3199000000\n");
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(gc_domains_snapshot(&ds, orig) == 0 && orig[0].locked == 1);
    CHECK(gc_domains_check(&ds, 204000000ULL, 0, orig, levels) == 0);
    CHECK(gc_domains_pin(&ds, levels, orig) == 0);
    CHECK(file_is(root, EMC "rate", "204000000"));
    CHECK(gc_domains_restore(&ds, orig) == 0);
    CHECK(file_is(root, EMC "rate", "3199000000") && file_is(root, EMC "mrq_rate_locked", "1"));
    fake_tree_remove(root);
}

static void test_failed_pin_puts_back_what_it_pinned(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state orig[GC_MAX_DOMAINS];
    uint64_t levels[GC_MAX_DOMAINS];
    char path[1024];

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(gc_domains_snapshot(&ds, orig) == 0);
    CHECK(gc_domains_check(&ds, 665600000ULL, 1036800000ULL, orig, levels) == 0);
    /* policy4's floor turns into a folder after discovery: its write fails */
    snprintf(path, sizeof path, "%s/" P4 "scaling_min_freq", root);
    CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0);
    CHECK(gc_domains_pin(&ds, levels, orig) == -GC_EBOARD);
    CHECK(strstr(ds.err, "cpu4: cannot read") != NULL);
    CHECK(strstr(ds.err, "put back") != NULL);
    CHECK(file_is(root, EMC "mrq_rate_locked", "0"));
    CHECK(file_is(root, P0 "scaling_min_freq", "115200") && file_is(root, P0 "scaling_max_freq", "1728000"));
    rmdir(path);
    fake_tree_remove(root);
}

static void test_record_lines(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state orig[GC_MAX_DOMAINS], back[GC_MAX_DOMAINS];
    char text[2048] = "", *line, *save = NULL;
    int i, rc = 0;

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(gc_domains_snapshot(&ds, orig) == 0);
    CHECK(gc_domains_format(&ds, orig, text, sizeof text) == 0);
    CHECK(strstr(text, "emc.rate_hz=2133000000\nemc.locked=0\n") != NULL);
    CHECK(strstr(text, "cpu4.governor=schedutil\ncpu4.min_hz=115200000\ncpu4.max_hz=1728000000\n") != NULL);
    {
        char small[40] = "";
        CHECK(gc_domains_format(&ds, orig, small, sizeof small) == -ENOSPC);
    }
    memset(back, 0, sizeof back);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        *eq = '\0';
        rc = gc_domains_parse(&ds, line, eq + 1, back);
        CHECK(rc == 1);
    }
    CHECK(gc_domain_find(&ds, "cpu0") == 1);
    CHECK(gc_domains_parse(&ds, "min_hz", "1", back) == 0); /* the caller's own key */
    CHECK(gc_domains_parse_done(&ds, back) == 0);
    for (i = 0; i < ds.n; i++) {
        CHECK(back[i].saved);
        if (ds.d[i].kind == GC_DOMAIN_CPU) /* the EMC's min/max rates are shown, not saved */
            CHECK(back[i].min_hz == orig[i].min_hz && back[i].max_hz == orig[i].max_hz);
        else
            CHECK(back[i].rate_hz == orig[i].rate_hz);
        CHECK(back[i].locked == orig[i].locked && !strcmp(back[i].governor, orig[i].governor));
    }
    /* damaged records */
    CHECK(gc_domains_parse(&ds, "cpu0.min_hz", "1", back) == -GC_ESTATE); /* repeated */
    memset(back, 0, sizeof back);
    CHECK(gc_domains_parse(&ds, "cpu9.min_hz", "1", back) == -GC_ESTATE); /* no such policy */
    CHECK(strstr(ds.err, "cpu9") != NULL);
    CHECK(gc_domains_parse(&ds, "emc.locked", "2", back) == -GC_ESTATE);
    CHECK(gc_domains_parse(&ds, "cpu0.governor", "a b", back) == -GC_ESTATE);
    memset(back, 0, sizeof back);
    CHECK(gc_domains_parse(&ds, "cpu0.min_hz", "115200000", back) == 1);
    CHECK(gc_domains_parse_done(&ds, back) == -GC_ESTATE); /* incomplete */
    CHECK(gc_domains_parse(&ds, "cpu0.max_hz", "1000", back) == 1);
    CHECK(gc_domains_parse(&ds, "cpu0.governor", "schedutil", back) == 1);
    CHECK(gc_domains_parse_done(&ds, back) == -GC_ESTATE); /* not a level */
    memset(back, 0, sizeof back);
    CHECK(gc_domains_parse(&ds, "cpu0.min_hz", "115200000", back) == 1);
    CHECK(gc_domains_parse(&ds, "cpu0.max_hz", "1728000000", back) == 1);
    CHECK(gc_domains_parse(&ds, "cpu0.governor", "ondemand", back) == 1);
    CHECK(gc_domains_parse_done(&ds, back) == -GC_ESTATE); /* a governor not offered */
    CHECK(strstr(ds.err, "ondemand") != NULL);
    fake_tree_remove(root);
}

/* Issue 27 item 4: a record read domain by domain; one that no longer matches the board is left
 * out, named, and its lines kept (as saved) for a later restore; the others are loaded. */
static void test_record_loaded_domain_by_domain(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state st[GC_MAX_DOMAINS];
    char kept[GC_DOMAINS_RECORD_MAX], left[GC_ERR_MAX], names[128];
    const char *rec = "emc.rate_hz=2133000000\nemc.locked=0\n"
                      "cpu0.governor=ondemand\ncpu0.min_hz=115200000\ncpu0.max_hz=1728000000\n"
                      "cpu4.governor=schedutil\ncpu4.min_hz=115200000\ncpu4.max_hz=1728000000\n"
                      "cpu9.governor=schedutil\ncpu9.min_hz=1\ncpu9.max_hz=1\n";

    CHECK(gc_domains_load_each(&ds, root, rec, st, kept, sizeof kept, left, sizeof left) == 0);
    CHECK(st[0].saved && !st[1].saved && st[2].saved); /* emc, cpu4 loaded; cpu0 left */
    CHECK(strstr(left, "cpu0 (saved governor ondemand is not one it offers now)") != NULL);
    CHECK(strstr(left, "cpu9 (the board has no such clock domain now)") != NULL);
    CHECK(strstr(left, "cpu4") == NULL && strstr(left, "emc") == NULL);
    CHECK(strstr(kept, "cpu0.governor=ondemand\ncpu0.min_hz=115200000\ncpu0.max_hz=1728000000\n") != NULL);
    CHECK(strstr(kept, "cpu9.governor=schedutil\ncpu9.min_hz=1\ncpu9.max_hz=1\n") != NULL);
    CHECK(strstr(kept, "cpu4") == NULL && strstr(kept, "emc") == NULL);
    /* a damaged line of one domain leaves that domain, not the record */
    CHECK(gc_domains_load_each(&ds, root, "cpu0.min_hz=x\ncpu4.governor=schedutil\ncpu4.min_hz=115200000\n"
                               "cpu4.max_hz=1728000000\n", st, kept, sizeof kept, left, sizeof left) == 0);
    CHECK(st[2].saved && !st[1].saved && strstr(left, "cpu0 (its saved line") != NULL);
    /* lines that are no domain's: the record is damaged */
    CHECK(gc_domains_load_each(&ds, root, "governor=x\n", st, kept, sizeof kept, left, sizeof left) ==
          -GC_ESTATE);
    {
        char tiny[8];
        CHECK(gc_domains_load_each(&ds, root, rec, st, tiny, sizeof tiny, left, sizeof left) == -ENOSPC);
    }
    /* the names a restore reports */
    CHECK(gc_domains_record_names(rec, names, sizeof names) == 4 && !strcmp(names, "emc cpu0 cpu4 cpu9"));
    CHECK(gc_domains_record_names("", names, sizeof names) == 0 && names[0] == '\0');
    CHECK(gc_domains_record_names(rec, names, 6) == -ENOSPC);
    fake_tree_remove(root);
}

static void test_fifo_never_blocks(void)
{
    const char *root = domain_tree(1);
    gc_domains ds;
    gc_domain_state st;
    char path[1024];

    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    snprintf(path, sizeof path, "%s/" EMC "rate", root);
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    CHECK(gc_domain_read(&ds, 0, &st) == -GC_EBOARD); /* refused, not hung */
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0 && !ds.d[0].available);
    unlink(path);
    fake_tree_remove(root);
}

static void test_joint_pin_and_restore(void)
{
    const char *root = domain_tree(1);
    char state_dir[600], path[GC_PATH_MAX], gpu_min[64];
    gc_board b, b2;
    gc_domains ds;
    uint64_t gpu_level, levels[GC_MAX_DOMAINS];
    int restored;
    FILE *f;
    char text[4096];
    size_t n;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    snprintf(path, sizeof path, "%s/min_freq", b.devfreq_dir + strlen(root) + 1);
    fake_read(root, path, gpu_min, sizeof gpu_min);
    /* refused before anything is written: no state file either */
    CHECK(gc_pin_mode(&b, &ds, 612000000ULL, 1000000000ULL, 0, state_dir, &gpu_level, levels) == -EINVAL);
    CHECK(strstr(b.err, "emc: 1000 MHz is not in its table") != NULL);
    CHECK(gc_state_path(&b, state_dir, text, sizeof text) == 0 && access(text, F_OK) != 0);
    CHECK(file_is(root, path, gpu_min) && untouched(root));
    /* the mode as one */
    CHECK(gc_pin_mode(&b, &ds, 612000000ULL, 2133000000ULL, 1036800000ULL, state_dir, &gpu_level,
                      levels) == 0);
    CHECK_EQ_U64(gpu_level, 612000000ULL);
    CHECK(file_is(root, path, "612000000"));
    CHECK(file_is(root, EMC "mrq_rate_locked", "1") && file_is(root, EMC "rate", "2133000000"));
    CHECK(file_is(root, P4 "scaling_max_freq", "1036800"));
    /* one record with every domain's originals */
    CHECK(gc_state_path(&b, state_dir, text, sizeof text) == 0 && (f = fopen(text, "r")) != NULL);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    CHECK(strstr(text, "min_hz=") && strstr(text, "emc.locked=0\n") && strstr(text, "cpu0.governor=schedutil\n"));
    CHECK(strstr(text, "cpu4.max_hz=1728000000\n") != NULL);
    /* a second pin keeps the first originals; the CPU ceiling is the saved one */
    CHECK(gc_pin_mode(&b, &ds, 0, 0, 1728000000ULL, state_dir, &gpu_level, levels) == 0);
    CHECK(gpu_level == 0 && levels[0] == 0 && file_is(root, P0 "scaling_min_freq", "1728000"));
    /* another process (after a kill -9, say) restores every domain from the record */
    CHECK(gc_board_open(&b2, root) == 0);
    CHECK(gc_restore(&b2, state_dir, &restored) == 0 && restored == 1);
    CHECK(file_is(root, path, gpu_min) && untouched(root));
    fake_tree_remove(root);
}

/* A domain whose original cannot be saved is never written: the pin is undone, the GPU too. */
static void test_joint_pin_refuses_a_domain_it_could_not_save(void)
{
    const char *root = domain_tree(1);
    char state_dir[600], path[GC_PATH_MAX], gpu_min[64], rate[1024];
    gc_board b;
    gc_domains ds;
    uint64_t gpu_level, levels[GC_MAX_DOMAINS];

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0 && ds.d[0].available);
    snprintf(path, sizeof path, "%s/min_freq", b.devfreq_dir + strlen(root) + 1);
    fake_read(root, path, gpu_min, sizeof gpu_min);
    /* after discovery, the EMC's rate becomes a FIFO: its original cannot be read */
    snprintf(rate, sizeof rate, "%s/" EMC "rate", root);
    CHECK(unlink(rate) == 0 && mkfifo(rate, 0600) == 0);
    CHECK(gc_pin_mode(&b, &ds, 612000000ULL, 2133000000ULL, 1036800000ULL, state_dir, &gpu_level,
                      levels) == -EIO);
    CHECK(strstr(b.err, "emc: its original could not be saved") != NULL);
    CHECK(file_is(root, path, gpu_min) && file_is(root, EMC "mrq_rate_locked", "0"));
    CHECK(file_is(root, P0 "scaling_min_freq", "115200"));
    /* a GPU-only pin is not held back by it */
    CHECK(gc_pin_hz(&b, 612000000ULL, state_dir, &gpu_level) == 0);
    {
        int restored;
        CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    }
    unlink(rate);
    fake_tree_remove(root);
}

/* Issue 52: Thor's memory clock is the devfreq device bwmgr (jtop memory.py; 4266 MHz its top
 * rate): where the BPMP debugfs EMC is absent, it is the EMC domain ("emc"), pinned as min =
 * max, saved as governor/min/max lines, and put back as it was. (The lower rates are this test's:
 * the public record gives only the top one.) */
#define BWMGR "sys/class/devfreq/bwmgr/"
static void test_devfreq_emc(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_11_LEVELS);
    char state_dir[600], path[GC_PATH_MAX], gpu_min[64], text[4096];
    gc_board b, b2;
    gc_domains ds, rec;
    gc_domain_state st[GC_MAX_DOMAINS];
    uint64_t gpu_level, levels[GC_MAX_DOMAINS];
    int restored;
    FILE *f;
    size_t n;

    fake_write(root, BWMGR "available_frequencies", "2133000000 3200000000 4266000000\n");
    fake_write(root, BWMGR "available_governors", "nvhost_podgov userspace\n");
    fake_write(root, BWMGR "governor", "nvhost_podgov\n");
    fake_write(root, BWMGR "min_freq", "2133000000\n");
    fake_write(root, BWMGR "max_freq", "4266000000\n");
    fake_write(root, BWMGR "cur_freq", "3200000000\n");
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(ds.d[0].kind == GC_DOMAIN_EMC_DEVFREQ && !strcmp(ds.d[0].name, "emc"));
    CHECK(!strcmp(ds.d[0].devfreq, "bwmgr") && ds.d[0].available && ds.d[0].n_levels == 3);
    CHECK_EQ_U64(ds.d[0].levels_hz[2], 4266000000ULL);
    CHECK(gc_domain_read(&ds, 0, &st[0]) == 0 && st[0].rate_hz == 3200000000ULL && !st[0].locked);
    CHECK(!strcmp(st[0].governor, "nvhost_podgov"));

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    snprintf(path, sizeof path, "%s/min_freq", b.devfreq_dir + strlen(root) + 1);
    fake_read(root, path, gpu_min, sizeof gpu_min);
    /* not one of its rates: refused, nothing written */
    CHECK(gc_pin_mode(&b, &ds, 612000000ULL, 3000000000ULL, 0, state_dir, &gpu_level, levels) == -EINVAL);
    CHECK(strstr(b.err, "emc: 3000 MHz is not in its table") != NULL);
    CHECK(file_is(root, BWMGR "min_freq", "2133000000") && file_is(root, path, gpu_min));
    /* the joint pin: min = max = the rate, the originals in the record as a CPU policy's lines */
    CHECK(gc_pin_mode(&b, &ds, 612000000ULL, 3200000000ULL, 0, state_dir, &gpu_level, levels) == 0);
    CHECK_EQ_U64(levels[0], 3200000000ULL);
    CHECK(file_is(root, BWMGR "min_freq", "3200000000") && file_is(root, BWMGR "max_freq", "3200000000"));
    CHECK(gc_domain_read(&ds, 0, &st[0]) == 0 && st[0].locked);
    CHECK(gc_state_path(&b, state_dir, text, sizeof text) == 0 && (f = fopen(text, "r")) != NULL);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    CHECK(strstr(text, "format=2\n") != NULL);
    CHECK(strstr(text, "emc.governor=nvhost_podgov\nemc.min_hz=2133000000\nemc.max_hz=4266000000\n") != NULL);
    CHECK(strstr(text, "emc.rate_hz") == NULL && strstr(text, "emc.locked") == NULL);
    /* up to the top rate: its ceiling is the saved max_freq */
    CHECK(gc_pin_mode(&b, &ds, 0, 4266000000ULL, 0, state_dir, &gpu_level, levels) == 0);
    CHECK(file_is(root, BWMGR "min_freq", "4266000000") && file_is(root, BWMGR "max_freq", "4266000000"));
    /* a governor changed meanwhile is put back too; another process restores it all */
    fake_write(root, BWMGR "governor", "userspace\n");
    CHECK(gc_board_open(&b2, root) == 0);
    CHECK(gc_restore(&b2, state_dir, &restored) == 0 && restored == 1);
    CHECK(file_is(root, BWMGR "min_freq", "2133000000") && file_is(root, BWMGR "max_freq", "4266000000"));
    CHECK(file_is(root, BWMGR "governor", "nvhost_podgov") && file_is(root, path, gpu_min));
    /* a BPMP EMC's lines are not this one's: damaged, never written */
    CHECK(gc_domains_load_record(&rec, root, "emc.rate_hz=2133000000\nemc.locked=0\n", st) == -GC_ESTATE);
    /* a power mode's lower ceiling (max_freq before the first pin) caps a pin */
    fake_write(root, BWMGR "max_freq", "3200000000\n");
    CHECK(gc_domains_open(&ds, root, NULL, 0) == 0);
    CHECK(gc_pin_mode(&b, &ds, 0, 4266000000ULL, 0, state_dir, &gpu_level, levels) == -EINVAL);
    CHECK(strstr(b.err, "above the power mode's cap of 3200 MHz") != NULL);
    CHECK(file_is(root, BWMGR "min_freq", "2133000000"));
    fake_tree_remove(root);
}

int main(void)
{
    RUN(test_discovers_emc_and_policies);
    RUN(test_emc_table_from_the_board_table);
    RUN(test_emc_table_from_boards_h);
    RUN(test_unavailable_domains);
    RUN(test_check_refuses_and_writes_nothing);
    RUN(test_pin_and_restore);
    RUN(test_locked_emc_gets_its_rate_back);
    RUN(test_failed_pin_puts_back_what_it_pinned);
    RUN(test_record_lines);
    RUN(test_record_loaded_domain_by_domain);
    RUN(test_fifo_never_blocks);
    RUN(test_joint_pin_and_restore);
    RUN(test_joint_pin_refuses_a_domain_it_could_not_save);
    RUN(test_devfreq_emc);
    return DONE("test_domain");
}

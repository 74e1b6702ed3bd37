/* fake_tree.c - fake Jetson sysfs trees in temp folders (the C twin of pydvfs.device.fake). */
#include "fake_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every test binary that makes fake trees takes its board locks (and the .original pointers
 * beside them) in a private temp folder, removed at exit: as root the default lock folder is the
 * host's /run/pydvfs/locks, which a test must not touch. A test that points PYDVFS_LOCK_DIR
 * elsewhere puts this value back (fake_lock_dir()). */
static char lock_dir[64];
static pid_t lock_dir_owner;

static void remove_lock_dir(void)
{
    char cmd[128];

    if (getpid() != lock_dir_owner) /* a forked child exiting: the folder is the parent's */
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", lock_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", lock_dir);
}

__attribute__((constructor)) static void private_lock_dir(void)
{
    snprintf(lock_dir, sizeof lock_dir, "/tmp/govcore-test-locks-XXXXXX");
    if (!mkdtemp(lock_dir)) {
        perror("mkdtemp");
        exit(99);
    }
    lock_dir_owner = getpid();
    atexit(remove_lock_dir);
    setenv("PYDVFS_LOCK_DIR", lock_dir, 1);
}

const char *fake_lock_dir(void)
{
    return lock_dir;
}

static void mkdir_p(const char *path)
{
    char tmp[1024], *p;

    snprintf(tmp, sizeof tmp, "%s", path);
    for (p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

void fake_write(const char *root, const char *rel, const char *text)
{
    char path[1024], dir[1024], *slash;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    *slash = '\0';
    mkdir_p(dir);
    f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(99);
    }
    fputs(text, f);
    fclose(f);
}

/* A device-tree string as the kernel shows it (of_node/name, the model): NUL-terminated, no
 * newline ("gpu\0"). */
void fake_write_dt(const char *root, const char *rel, const char *text)
{
    char path[1024];
    FILE *f;

    fake_write(root, rel, "");
    snprintf(path, sizeof path, "%s/%s", root, rel);
    f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(99);
    }
    fwrite(text, 1, strlen(text) + 1, f); /* the NUL too */
    fclose(f);
}

void fake_read(const char *root, const char *rel, char *buf, int len)
{
    char path[1024];
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    buf[0] = '\0';
    f = fopen(path, "r");
    if (!f)
        return;
    n = fread(buf, 1, (size_t)len - 1, f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    fclose(f);
}

/* A relative symlink root/link -> root/target, as sysfs uses. */
static void fake_link(const char *root, const char *link, const char *target)
{
    char lpath[1024], ldir[1024], rel[1024] = "", *slash;
    const char *p;

    snprintf(lpath, sizeof lpath, "%s/%s", root, link);
    snprintf(ldir, sizeof ldir, "%s", lpath);
    slash = strrchr(ldir, '/');
    *slash = '\0';
    mkdir_p(ldir);
    /* one "../" per folder of the link's own path below root */
    for (p = link; *p; p++)
        if (*p == '/')
            strcat(rel, "../");
    strcat(rel, target);
    if (symlink(rel, lpath) < 0) {
        perror(lpath);
        exit(99);
    }
}

static void devfreq_files(const char *root, const char *df, const char *levels)
{
    char rel[512], buf[64];

    snprintf(rel, sizeof rel, "%s/available_frequencies", df);
    fake_write(root, rel, levels);
    snprintf(rel, sizeof rel, "%s/governor", df);
    fake_write(root, rel, "nvhost_podgov\n");
    snprintf(rel, sizeof rel, "%s/available_governors", df);
    fake_write(root, rel, "nvhost_podgov userspace performance simple_ondemand\n");
    /* min = lowest and max = highest level in the list, whatever its order */
    {
        unsigned long long lo = ~0ULL, hi = 0, v;
        const char *p = levels;
        char *end;
        while (*p) {
            v = strtoull(p, &end, 10);
            if (end == p)
                break;
            if (v < lo)
                lo = v;
            if (v > hi)
                hi = v;
            p = end;
        }
        snprintf(rel, sizeof rel, "%s/min_freq", df);
        snprintf(buf, sizeof buf, "%llu\n", lo);
        fake_write(root, rel, buf);
        snprintf(rel, sizeof rel, "%s/max_freq", df);
        snprintf(buf, sizeof buf, "%llu\n", hi);
        fake_write(root, rel, buf);
        snprintf(rel, sizeof rel, "%s/cur_freq", df);
        fake_write(root, rel, buf);
    }
}

const char *fake_tree_make(enum fake_layout layout, const char *levels)
{
    static char roots[16][256];
    static int next;
    char *root = roots[next++ % 16];

    struct stat run;

    /* As root, a model folder's files (roofline.txt) are read only from a path no one else can
     * write (govcore/policy_load.c): /tmp is world-writable, /run is root's */
    if (geteuid() == 0 && stat("/run", &run) == 0 && S_ISDIR(run.st_mode) && run.st_uid == 0 &&
        !(run.st_mode & (S_IWGRP | S_IWOTH)) && access("/run", W_OK) == 0)
        snprintf(root, 256, "/run/govcore-test-XXXXXX");
    else
        snprintf(root, 256, "/tmp/govcore-test-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(99);
    }
    /* a decoy devfreq device first */
    fake_write_dt(root, "sys/devices/15880000.nvdla0/of_node/name", "nvdla0");
    fake_write(root, "sys/devices/15880000.nvdla0/devfreq/15880000.nvdla0/available_frequencies",
               "1369600000\n");
    fake_link(root, "sys/devices/15880000.nvdla0/devfreq/15880000.nvdla0/device",
              "sys/devices/15880000.nvdla0");
    fake_link(root, "sys/class/devfreq/15880000.nvdla0",
              "sys/devices/15880000.nvdla0/devfreq/15880000.nvdla0");

    if (layout == FAKE_JP4 || layout == FAKE_JP5) {
        const char *gpu = layout == FAKE_JP4 ? "17000000.gv11b" : "17000000.ga10b";
        char rel[512], target[512];

        snprintf(rel, sizeof rel, "sys/devices/%s/of_node/name", gpu);
        fake_write_dt(root, rel, layout == FAKE_JP4 ? "gv11b" : "ga10b");
        snprintf(rel, sizeof rel, "sys/devices/%s/load", gpu);
        fake_write(root, rel, "437\n");
        snprintf(rel, sizeof rel, "sys/devices/%s/devfreq/%s", gpu, gpu);
        devfreq_files(root, rel, levels);
        snprintf(rel, sizeof rel, "sys/devices/%s/devfreq/%s/device", gpu, gpu);
        snprintf(target, sizeof target, "sys/devices/%s", gpu);
        fake_link(root, rel, target);
        snprintf(rel, sizeof rel, "sys/class/devfreq/%s", gpu);
        snprintf(target, sizeof target, "sys/devices/%s/devfreq/%s", gpu, gpu);
        fake_link(root, rel, target);
    } else {
        /* JetPack 6 style: of_node visible in the devfreq folder itself, no `device` link */
        const char *dev = "sys/devices/platform/bus@0/17000000.gpu";
        char rel[512];

        snprintf(rel, sizeof rel, "%s/devfreq/17000000.gpu", dev);
        devfreq_files(root, rel, levels);
        snprintf(rel, sizeof rel, "%s/devfreq/17000000.gpu/of_node/name", dev);
        fake_write_dt(root, rel, "gpu");
        fake_link(root, "sys/class/devfreq/17000000.gpu",
                  "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu");
    }
    fake_write_dt(root, "proc/device-tree/model", "NVIDIA Jetson AGX Orin Developer Kit");

    if (layout == FAKE_JP4) {
        const char *d = "sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0";
        char rel[512];
        static const char *const names[] = {"GPU", "CPU", "SOC"};
        int ch;

        for (ch = 0; ch < 3; ch++) {
            snprintf(rel, sizeof rel, "%s/rail_name_%d", d, ch);
            fake_write(root, rel, names[ch]);
            snprintf(rel, sizeof rel, "%s/in_power%d_input", d, ch);
            fake_write(root, rel, "1000\n");
        }
    } else {
        /* decoy thermal hwmon gets the lowest number; the INA3221 is hwmon10 (sorted after 9) */
        fake_write(root, "sys/devices/virtual/thermal/hwmon/hwmon9/name", "cpu_thermal\n");
        fake_link(root, "sys/class/hwmon/hwmon9", "sys/devices/virtual/thermal/hwmon/hwmon9");
        {
            const char *d = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10";
            static const char *const labels[] = {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"};
            char rel[512];
            int ch;

            fake_write(root, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/name", "ina3221\n");
            fake_write(root, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/update_interval",
                       "7\n");
            for (ch = 1; ch <= 3; ch++) {
                snprintf(rel, sizeof rel, "%s/in%d_label", d, ch);
                fake_write(root, rel, labels[ch - 1]);
                snprintf(rel, sizeof rel, "%s/in%d_input", d, ch);
                fake_write(root, rel, "5000\n");
                snprintf(rel, sizeof rel, "%s/curr%d_input", d, ch);
                fake_write(root, rel, "1000\n");
            }
            fake_write(root, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/in7_label",
                       "sum of shunt voltages");
            fake_write(root, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/in7_input", "0\n");
            fake_write(root, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10/curr4_input", "0\n");
            fake_link(root, "sys/class/hwmon/hwmon10",
                      "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon10");
        }
        {
            const char *d = "sys/bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon11";
            char rel[512];
            int ch;

            snprintf(rel, sizeof rel, "%s/name", d);
            fake_write(root, rel, "ina3221\n");
            for (ch = 1; ch <= 3; ch++) {
                snprintf(rel, sizeof rel, "%s/in%d_label", d, ch);
                fake_write(root, rel, ch == 2 ? "VDDQ_VDD2_1V8AO" : "NC");
                snprintf(rel, sizeof rel, "%s/in%d_input", d, ch);
                fake_write(root, rel, "1800\n");
                snprintf(rel, sizeof rel, "%s/curr%d_input", d, ch);
                fake_write(root, rel, "500\n");
            }
            fake_link(root, "sys/class/hwmon/hwmon11",
                      "sys/bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon11");
        }
    }
    return root;
}

void fake_tree_remove(const char *root)
{
    char cmd[512];

    /* only what fake_tree_make made (either of its two places) */
    if (strncmp(root, "/tmp/govcore-test-", 18) != 0 && strncmp(root, "/run/govcore-test-", 18) != 0)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
}

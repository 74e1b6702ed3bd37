/* board.c - discovery, in one place: the Jetson GPU's devfreq node and load file, the power
 * rails (INA3221 hwmon, JetPack 4 ina3221x, hwmon power channels such as Thor's INA238), the
 * board (the device-tree model against the table in gen_boards.h), the JetPack, and which rails make
 * each rail role. Board facts come from gen_boards.h only (generated from pydvfs/data/boards.json). */
#include "govcore.h"
#include "domain.h"
#include "err.h"
#include "sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 1024 /* entries of one sysfs folder read (more: the rest ignored) */

const char *gc_rail_kind_name(int kind)
{
    return kind == GC_RAIL_HWMON ? "hwmon" : kind == GC_RAIL_INA3221X ? "ina3221x" : "power";
}

uint64_t gc_mhz_to_hz(double mhz)
{
    if (!(mhz > 0.0) || mhz > 1e6 || isnan(mhz))
        return 0;
    return (uint64_t)llround(mhz * 1e6);
}

double gc_hz_to_mhz(uint64_t hz)
{
    return (double)hz / 1e6;
}

int gc_parse_mhz(const char *text, size_t len, uint64_t *hz)
{
    uint64_t whole = 0, frac = 0;
    size_t i = 0, digits = 0, decimals = 0;

    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++)
        whole = whole * 10 + (uint64_t)(text[i] - '0');
    if (digits == 0 || digits > GC_MHZ_DIGITS)
        return -EINVAL;
    if (i < len && text[i] == '.') {
        for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++, decimals++)
            if (decimals < 6)
                frac = frac * 10 + (uint64_t)(text[i] - '0');
        if (decimals == 0)
            return -EINVAL; /* "714." */
    }
    if (i != len || decimals > 6 || digits + decimals > GC_MHZ_DIGITS)
        return -EINVAL;
    for (; decimals < 6; decimals++)
        frac *= 10;
    /* whole < 10^12, so whole * 10^6 + frac < 2^64 */
    whole = whole * 1000000u + frac;
    if (whole == 0 || whole > 1000000000000ull) /* 0 < MHz <= 1e6, as gc_mhz_to_hz */
        return -EINVAL;
    *hz = whole;
    return 0;
}

void gc_mhz_hint(const char *text, size_t len, char *out, size_t out_len)
{
    uint64_t v = 0;
    size_t i;

    if (out_len)
        out[0] = '\0';
    /* whole digits only, above the grammar's 1e6 MHz: a value read from a sysfs file */
    for (i = 0; i < len && i < 19 && text[i] >= '0' && text[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(text[i] - '0');
    if (i != len || len == 0 || v <= 1000000u)
        return;
    if (v >= 10000000u && v <= GC_MAX_LEVEL_HZ) /* devfreq's and the EMC's files hold Hz */
        snprintf(out, out_len, "; %llu looks like Hz: that is %g MHz, so give %g",
                 (unsigned long long)v, gc_hz_to_mhz(v), gc_hz_to_mhz(v));
    else if (v < 10000000u) /* cpufreq's files hold kHz */
        snprintf(out, out_len, "; %llu looks like kHz: that is %g MHz, so give %g",
                 (unsigned long long)v, (double)v / 1e3, (double)v / 1e3);
}

/* Add a clause to b->warning ("; " between clauses): the front ends show it as one line. */
static void add_warning(gc_board *b, const char *fmt, ...)
{
    size_t used = strlen(b->warning);
    va_list ap;

    if (used && used + 2 < sizeof b->warning) {
        memcpy(b->warning + used, "; ", 3);
        used += 2;
    }
    va_start(ap, fmt);
    vsnprintf(b->warning + used, sizeof b->warning - used, fmt, ap);
    va_end(ap);
}

/* root + path, where path is absolute on the board. */
static int under_root(const gc_board *b, char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    int n;
    size_t used;
    const char *root = b->sysfs_root;

    if (root[0] == '/' && root[1] == '\0')
        root = "";
    n = snprintf(out, len, "%s", root);
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    used = (size_t)n;
    va_start(ap, fmt);
    n = vsnprintf(out + used, len - used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - used)
        return -ENAMETOOLONG;
    return 0;
}

static int join(char *out, size_t len, const char *dir, const char *name)
{
    int n = snprintf(out, len, "%s/%s", dir, name);

    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Compare names so that hwmon2 < hwmon10 (digit runs compare as numbers). */
static int natural_cmp(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;

    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            unsigned long x = strtoul(a, (char **)&a, 10);
            unsigned long y = strtoul(b, (char **)&b, 10);
            if (x != y)
                return x < y ? -1 : 1;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

/* Entries of dir (not . or ..), naturally sorted, as malloc'd strings. Returns the count
 * (0 if dir does not exist) or -errno. Free with free_names. */
static int list_dir(const char *root, const char *dir, char **names, int max)
{
    int fd = gc_sysfs_open(root, dir, O_RDONLY | O_DIRECTORY);
    struct dirent *e;
    DIR *d;
    int n = 0;

    if (fd < 0)
        return (fd == -ENOENT || fd == -ENOTDIR) ? 0 : fd;
    d = fdopendir(fd);
    if (!d) {
        n = -errno;
        close(fd);
        return n;
    }
    while ((e = readdir(d)) != NULL && n < max) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            closedir(d);
            while (n > 0)
                free(names[--n]);
            return -ENOMEM;
        }
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], natural_cmp);
    return n;
}

static void free_names(char **names, int n)
{
    while (n > 0)
        free(names[--n]);
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

    return a < b ? -1 : a > b;
}

static int parse_freq_table(gc_board *b, const char *path)
{
    char buf[2048], shown[80], *p, *end;
    int n = 0, rc;

    rc = gc_sysfs_read(b->sysfs_root, path, buf, sizeof buf);
    if (rc < 0) {
        set_err(b, "cannot read %s: %s", path, gc_sysfs_strerror(rc));
        return rc;
    }
    for (p = buf; *p;) {
        unsigned long long v;

        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        errno = 0;
        /* digits only: strtoull alone would take "-306000000" as 2^64 - 306000000 */
        v = (*p >= '0' && *p <= '9') ? strtoull(p, &end, 10) : 0;
        if (v == 0 || errno != 0 || (*end && *end != ' ' && *end != '\t' && *end != '\n') ||
            v > GC_MAX_LEVEL_HZ) {
            gc_printable(buf, shown, sizeof shown);
            set_err(b, "%s: not a list of frequencies in Hz: \"%s\"", path, shown);
            return -GC_EBOARD;
        }
        if (n == GC_MAX_FREQS) {
            set_err(b, "%s: more than %d frequencies", path, GC_MAX_FREQS);
            return -E2BIG;
        }
        b->freqs_hz[n++] = (uint64_t)v;
        p = end;
    }
    if (n == 0) {
        set_err(b, "%s is empty", path);
        return -GC_EBOARD;
    }
    qsort(b->freqs_hz, (size_t)n, sizeof b->freqs_hz[0], cmp_u64);
    b->n_freqs = n;
    return 0;
}

/* 1 if name is in one of the table's lists (field: offset of the list in gc_board_profile). */
static int in_table(const char *name, int devfreq_list)
{
    int p, i;

    for (p = 0; p < GC_N_BOARD_PROFILES; p++) {
        const char *const *list = devfreq_list ? gc_board_profiles[p].devfreq_names
                                                : gc_board_profiles[p].of_node_names;
        for (i = 0; list[i]; i++)
            if (strcmp(name, list[i]) == 0)
                return 1;
    }
    return 0;
}

static void take_gpu(gc_board *b, const char *dir, const char *name)
{
    char path[GC_PATH_MAX];

    snprintf(b->devfreq_dir, sizeof b->devfreq_dir, "%s", dir);
    snprintf(b->gpu_name, sizeof b->gpu_name, "%s", name);
    /* GPU load lives in the GPU device folder; a GPU without one (Thor's gpu-gpc-0) reports
     * its load as unknown, never as a made-up number. */
    if (join(path, sizeof path, dir, "device/load") == 0 && gc_sysfs_exists(b->sysfs_root, path))
        snprintf(b->load_path, sizeof b->load_path, "%s", path);
}

/* The GPU's devfreq folder: under <root>/sys/class/devfreq/, the entry whose of_node/name is a
 * GPU of the table (ga10b, gpu, gv11b), else the entry whose own name is a GPU devfreq name of
 * the table with no of_node (Thor's virtual gpu-gpc-0, also looked for under
 * /sys/devices/virtual/devfreq/). */
static int find_gpu(gc_board *b)
{
    static const char *const classes[] = {"/sys/class/devfreq", "/sys/devices/virtual/devfreq"};
    char class_dir[GC_PATH_MAX], dir[GC_PATH_MAX], path[GC_PATH_MAX], name[GC_NAME_MAX];
    char *names[MAX_ENTRIES];
    int n, i, rc, pass;
    size_t c;

    for (pass = 0; pass < 2; pass++) {
        for (c = 0; c < (pass == 0 ? 1 : 2); c++) {
            rc = under_root(b, class_dir, sizeof class_dir, "%s", classes[c]);
            if (rc < 0)
                return rc;
            n = list_dir(b->sysfs_root, class_dir, names, MAX_ENTRIES);
            if (n < 0) {
                set_err(b, "cannot list %s: %s", class_dir, strerror(-n));
                return n;
            }
            for (i = 0; i < n; i++) {
                /* of_node is on the device; some trees also show it in the devfreq folder. */
                static const char *const where[] = {"device/of_node/name", "of_node/name"};
                size_t w;
                int has_of_node = 0;

                if (join(dir, sizeof dir, class_dir, names[i]) < 0)
                    continue;
                for (w = 0; w < sizeof where / sizeof where[0]; w++) {
                    if (join(path, sizeof path, dir, where[w]) < 0 ||
                        gc_sysfs_read(b->sysfs_root, path, name, sizeof name) < 0)
                        continue;
                    has_of_node = 1;
                    if (pass == 0 && in_table(name, 0)) {
                        take_gpu(b, dir, name);
                        free_names(names, n);
                        return 0;
                    }
                }
                if (pass == 1 && !has_of_node && in_table(names[i], 1) &&
                    join(path, sizeof path, dir, "available_frequencies") == 0 &&
                    gc_sysfs_exists(b->sysfs_root, path)) {
                    take_gpu(b, dir, names[i]);
                    free_names(names, n);
                    return 0;
                }
            }
            free_names(names, n);
        }
    }
    rc = under_root(b, class_dir, sizeof class_dir, "%s", classes[0]);
    set_err(b, "no Jetson GPU devfreq node under %s (looked for the of_node names and devfreq "
               "names of docs/boards.md's boards); is this a Jetson, and is --sysfs-root right?",
            class_dir);
    return -ENODEV;
}

/* Which channels a scan takes. Normally all (pass 0). Where a tree holds more channels than
 * GC_MAX_RAILS (devices planted to crowd the real sensors out), the scan runs again in two
 * passes: first the channels whose label the board table names for a role (pass 1), then the
 * rest while room is left (pass 2), so that the rails the energies come from are kept. */
struct rail_filter {
    const gc_board_profile *profile; /* the board identified from its model; NULL unknown */
    int pass;                        /* 0 every channel, 1 the table's rails, 2 the others */
    int overflow;                    /* set when a channel found no room */
};

static int table_rail(const gc_board_profile *p, const char *label)
{
    int r, i;

    for (r = 0; p && r < GC_N_ROLES; r++)
        for (i = 0; p->roles[r][i]; i++)
            if (strcmp(p->roles[r][i], label) == 0)
                return 1;
    return 0;
}

static int take_channel(const struct rail_filter *f, const char *label)
{
    return f->pass == 0 || (f->pass == 1) == table_rail(f->profile, label);
}

/* Add a rail. A label seen before (two channels labelled alike) is kept, named "LABEL#2"
 * (#3, ...), with a warning: dropping it would lose a channel, and a role naming that label is
 * then not known (resolve_roles). */
static int add_rail(gc_board *b, const char *raw_label, int kind, const char *v_path,
                    const char *i_path, const char *p_path)
{
    char label[GC_NAME_MAX], named[GC_NAME_MAX];
    gc_rail *r;
    int i, copy = 1, clash;

    if (b->n_rails == GC_MAX_RAILS)
        return -E2BIG; /* said once, by find_rails */
    gc_printable(raw_label, label, sizeof label - 4); /* room for "#NN" */
    snprintf(named, sizeof named, "%s", label);
    do {
        clash = 0;
        for (i = 0; i < b->n_rails; i++)
            if (strcmp(b->rails[i].name, named) == 0)
                clash = 1;
        if (clash)
            snprintf(named, sizeof named, "%s#%d", label, ++copy);
    } while (clash && copy < 99);
    if (copy > 1)
        add_warning(b, "two power channels are labelled %s: the second is read as %s", label, named);
    r = &b->rails[b->n_rails++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", named);
    r->kind = kind;
    snprintf(r->voltage_path, sizeof r->voltage_path, "%s", v_path ? v_path : "");
    snprintf(r->current_path, sizeof r->current_path, "%s", i_path ? i_path : "");
    snprintf(r->power_path, sizeof r->power_path, "%s", p_path ? p_path : "");
    return 0;
}

static int skip_label(const char *label)
{
    return label[0] == '\0' || strcasecmp(label, "NC") == 0 || strncasecmp(label, "sum", 3) == 0;
}

static void add_skipped(gc_board *b, const char *raw_label, const char *fmt, ...)
{
    gc_skipped_channel *s;
    va_list ap;

    if (b->n_skipped == GC_MAX_SKIPPED)
        return;
    s = &b->skipped[b->n_skipped++];
    gc_printable(raw_label, s->name, sizeof s->name);
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
}

/* 1 if a channel the sensor does not measure, recorded in b->skipped with why: an INA3221
 * channel whose enable file (inN_enable, kernel Documentation/hwmon/ina3221.rst) reads 0, or a
 * channel one of whose input files cannot be read now (a disabled channel's in3_input on a
 * JetPack 6 AGX Orin fails with EIO: alumet issue 212). Such a channel is no rail: its power
 * is not in any sum, and a role that needs it says so (resolve_roles). */
static int unusable_channel(gc_board *b, const char *label, const char *enable_path,
                            const char *const *inputs, int n_inputs)
{
    char buf[64];
    uint64_t on;
    int i, rc;

    if (enable_path && gc_sysfs_read_u64(b->sysfs_root, enable_path, &on) == 0 && on == 0) {
        add_skipped(b, label, "disabled: %s is 0", enable_path);
        return 1;
    }
    for (i = 0; i < n_inputs; i++) {
        if (!inputs[i] || !inputs[i][0])
            continue;
        rc = gc_sysfs_read(b->sysfs_root, inputs[i], buf, sizeof buf);
        if (rc < 0) {
            add_skipped(b, label, "%s cannot be read: %s", inputs[i], gc_sysfs_strerror(rc));
            return 1;
        }
    }
    return 0;
}

/* One hwmon folder. An ina3221: channels with a label, a bus voltage (mV) and a current (mA).
 * Any hwmon with power channels (powerN_input, uW; the INA238 on Thor): each channel, named by
 * its powerN_label, else by the device's name (with "_powerN" past the first channel). */
static void scan_hwmon_dir(gc_board *b, const char *dir, struct rail_filter *f)
{
    char path[GC_PATH_MAX], v_path[GC_PATH_MAX], i_path[GC_PATH_MAX], label[GC_NAME_MAX];
    char dev_name[GC_NAME_MAX];
    const char *inputs[2];
    uint64_t interval_ms;
    int ch, is_ina3221;

    if (join(path, sizeof path, dir, "name") < 0 ||
        gc_sysfs_read(b->sysfs_root, path, dev_name, sizeof dev_name) < 0)
        return;
    is_ina3221 = strcmp(dev_name, "ina3221") == 0;
    for (ch = 1; is_ina3221 && ch <= 8; ch++) {
        snprintf(path, sizeof path, "%s/in%d_label", dir, ch);
        if (gc_sysfs_read(b->sysfs_root, path, label, sizeof label) < 0 || skip_label(label))
            continue;
        snprintf(v_path, sizeof v_path, "%s/in%d_input", dir, ch);
        snprintf(i_path, sizeof i_path, "%s/curr%d_input", dir, ch);
        if (!gc_sysfs_exists(b->sysfs_root, v_path) || !gc_sysfs_exists(b->sysfs_root, i_path) ||
            !take_channel(f, label))
            continue;
        snprintf(path, sizeof path, "%s/in%d_enable", dir, ch);
        inputs[0] = v_path;
        inputs[1] = i_path;
        if (unusable_channel(b, label, path, inputs, 2))
            continue;
        if (add_rail(b, label, GC_RAIL_HWMON, v_path, i_path, NULL) == -E2BIG)
            f->overflow = 1;
    }
    for (ch = 1; !is_ina3221 && ch <= 8; ch++) {
        char p_path[GC_PATH_MAX];

        snprintf(p_path, sizeof p_path, "%s/power%d_input", dir, ch);
        if (!gc_sysfs_exists(b->sysfs_root, p_path))
            continue;
        snprintf(path, sizeof path, "%s/power%d_label", dir, ch);
        if (gc_sysfs_read(b->sysfs_root, path, label, sizeof label) < 0 || !label[0]) {
            if (ch == 1)
                snprintf(label, sizeof label, "%s", dev_name);
            else
                snprintf(label, sizeof label, "%.40s_power%d", dev_name, ch);
        }
        if (skip_label(label) || !take_channel(f, label))
            continue;
        inputs[0] = p_path;
        if (unusable_channel(b, label, NULL, inputs, 1))
            continue;
        if (add_rail(b, label, GC_RAIL_POWER, NULL, NULL, p_path) == -E2BIG)
            f->overflow = 1;
    }
    if (is_ina3221 && join(path, sizeof path, dir, "update_interval") == 0 &&
        gc_sysfs_read_u64(b->sysfs_root, path, &interval_ms) == 0 && b->sensor_interval_ms == 0)
        b->sensor_interval_ms = (int)interval_ms;
}

static void scan_hwmon_class(gc_board *b, const char *class_dir, struct rail_filter *f)
{
    char dir[GC_PATH_MAX];
    char *names[MAX_ENTRIES];
    int n = list_dir(b->sysfs_root, class_dir, names, MAX_ENTRIES), i;

    for (i = 0; i < n; i++)
        if (join(dir, sizeof dir, class_dir, names[i]) == 0)
            scan_hwmon_dir(b, dir, f);
    if (n > 0)
        free_names(names, n);
}

/* JetPack 4: /sys/bus/i2c/drivers/ina3221x/<addr>/iio:device<N>/rail_name_<ch>. */
static void scan_ina3221x(gc_board *b, struct rail_filter *f)
{
    char drv[GC_PATH_MAX], dev[GC_PATH_MAX], iio[GC_PATH_MAX], path[GC_PATH_MAX];
    char p_path[GC_PATH_MAX], v_path[GC_PATH_MAX], i_path[GC_PATH_MAX], label[GC_NAME_MAX];
    char *addrs[MAX_ENTRIES], *subs[MAX_ENTRIES];
    const char *inputs[1];
    int na, ns, i, j, ch;

    if (under_root(b, drv, sizeof drv, "/sys/bus/i2c/drivers/ina3221x") < 0)
        return;
    na = list_dir(b->sysfs_root, drv, addrs, MAX_ENTRIES);
    for (i = 0; i < na; i++) {
        if (join(dev, sizeof dev, drv, addrs[i]) < 0)
            continue;
        ns = list_dir(b->sysfs_root, dev, subs, MAX_ENTRIES);
        for (j = 0; j < ns; j++) {
            if (strncmp(subs[j], "iio:device", 10) != 0 || join(iio, sizeof iio, dev, subs[j]) < 0)
                continue;
            for (ch = 0; ch < 8; ch++) {
                snprintf(path, sizeof path, "%s/rail_name_%d", iio, ch);
                if (gc_sysfs_read(b->sysfs_root, path, label, sizeof label) < 0 || skip_label(label))
                    continue;
                snprintf(p_path, sizeof p_path, "%s/in_power%d_input", iio, ch);
                snprintf(v_path, sizeof v_path, "%s/in_voltage%d_input", iio, ch);
                snprintf(i_path, sizeof i_path, "%s/in_current%d_input", iio, ch);
                if (!gc_sysfs_exists(b->sysfs_root, p_path) || !take_channel(f, label))
                    continue;
                inputs[0] = p_path;
                if (unusable_channel(b, label, NULL, inputs, 1))
                    continue;
                if (add_rail(b, label, GC_RAIL_INA3221X,
                             gc_sysfs_exists(b->sysfs_root, v_path) ? v_path : NULL,
                             gc_sysfs_exists(b->sysfs_root, i_path) ? i_path : NULL, p_path) == -E2BIG)
                    f->overflow = 1;
            }
        }
        if (ns > 0)
            free_names(subs, ns);
    }
    if (na > 0)
        free_names(addrs, na);
}

/* The I2C drivers of the power monitors whose devices hold a hwmon folder (Orin's INA3221,
 * Thor's INA238): where /sys/class/hwmon has none, their devices are looked at directly. */
static const char *const hwmon_drivers[] = {"/sys/bus/i2c/drivers/ina3221",
                                            "/sys/bus/i2c/drivers/ina238"};

/* Scan one source: 1 /sys/class/hwmon, 2 the drivers' devices, 3 JetPack 4's ina3221x. */
static void scan_source(gc_board *b, struct rail_filter *f, int source)
{
    char dir[GC_PATH_MAX], sub[GC_PATH_MAX];
    char *addrs[MAX_ENTRIES];
    size_t d;
    int n, i;

    if (source == 1 && under_root(b, dir, sizeof dir, "/sys/class/hwmon") == 0)
        scan_hwmon_class(b, dir, f);
    for (d = 0; source == 2 && d < sizeof hwmon_drivers / sizeof *hwmon_drivers; d++) {
        if (under_root(b, dir, sizeof dir, "%s", hwmon_drivers[d]) < 0)
            continue;
        n = list_dir(b->sysfs_root, dir, addrs, MAX_ENTRIES);
        for (i = 0; i < n; i++) {
            snprintf(sub, sizeof sub, "%s/%s/hwmon", dir, addrs[i]);
            scan_hwmon_class(b, sub, f);
        }
        if (n > 0)
            free_names(addrs, n);
    }
    if (source == 3)
        scan_ina3221x(b, f);
}

static void find_rails(gc_board *b, const gc_board_profile *profile)
{
    struct rail_filter f = {profile, 0, 0};
    int source;

    /* the first source that has channels: /sys/class/hwmon; trees without it, the power
     * monitor drivers' devices (every driver's: INA3221 and INA238); JetPack 4's ina3221x */
    for (source = 1; source <= 3 && b->n_rails == 0 && b->n_skipped == 0; source++)
        scan_source(b, &f, source);
    source--;
    if (f.overflow && profile) {
        /* crowded: the table's rails first, then the others while there is room */
        b->n_rails = 0;
        b->n_skipped = 0;
        f.pass = 1;
        scan_source(b, &f, source);
        f.pass = 2;
        scan_source(b, &f, source);
    }
    if (f.overflow)
        add_warning(b, "more than %d power channels: the rest are not read%s", GC_MAX_RAILS,
                    profile ? " (the board table's rails were taken first)" : "");
}

static void read_model(gc_board *b)
{
    char path[GC_PATH_MAX], raw[GC_MODEL_MAX];
    static const char *const where[] = {"/proc/device-tree/model",
                                        "/sys/firmware/devicetree/base/model"};
    size_t i;

    b->model[0] = '\0';
    for (i = 0; i < sizeof where / sizeof where[0]; i++)
        if (under_root(b, path, sizeof path, "%s", where[i]) == 0 &&
            gc_sysfs_read(b->sysfs_root, path, raw, sizeof raw) == 0) {
            gc_printable(raw, b->model, sizeof b->model);
            return;
        }
}

/* The JetPack from /etc/nv_tegra_release ("# R36 (release), REVISION: 4.0, ..."). */
static void read_release(gc_board *b)
{
    char path[GC_PATH_MAX], text[256];
    const char *r;
    char *end;
    long major;
    int i;

    if (under_root(b, path, sizeof path, "/etc/nv_tegra_release") < 0 ||
        gc_sysfs_read(b->sysfs_root, path, text, sizeof text) < 0)
        return;
    for (r = text; *r && !(r[0] == 'R' && r[1] >= '0' && r[1] <= '9'); r++)
        ; /* the first "R<digits>": "# R36 (release), REVISION: 4.0, ..." */
    if (!*r)
        return;
    major = strtol(r + 1, &end, 10);
    if (end == r + 1 || major <= 0 || major > 999)
        return;
    snprintf(b->l4t, sizeof b->l4t, "R%ld", major);
    if ((r = strstr(end, "REVISION:")) != NULL) {
        char rev[16];
        size_t k = 0;

        for (r += 9; *r == ' '; r++)
            ;
        while (k + 1 < sizeof rev && ((*r >= '0' && *r <= '9') || *r == '.'))
            rev[k++] = *r++;
        rev[k] = '\0';
        if (k)
            snprintf(b->l4t, sizeof b->l4t, "R%ld.%s", major, rev);
    }
    for (i = 0; i < GC_N_L4T_RELEASES; i++)
        if (gc_l4t_jetpack[i][0] == major)
            b->jetpack = gc_l4t_jetpack[i][1];
    if (b->jetpack == 0) {
        char known[96] = "";
        size_t used = 0;

        for (i = 0; i < GC_N_L4T_RELEASES && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%sR%d", i ? ", " : "",
                                     gc_l4t_jetpack[i][0]);
        add_warning(b, "L4T %s is not in the board table (%s): its JetPack is not known; "
                       "discovery goes on without it", b->l4t, known);
    }
}

/* One notice where the GPU lists levels the table knows for none of the board's releases (its
 * row's and its variants'): the policies were made for the table's levels; a pin still snaps
 * to the board's own. Levels within 1 MHz of the table's count as the same (1300 for 1300.5). */
static void check_levels(gc_board *b, const gc_board_profile *p)
{
    char odd[160] = "";
    size_t used = 0;
    int i, k, n_odd = 0;

    for (i = 0; i < b->n_freqs; i++) {
        double mhz = gc_hz_to_mhz(b->freqs_hz[i]);
        int known = 0;

        for (k = 0; k < GC_PROFILE_LEVELS_MAX && p->levels_mhz[k] > 0; k++)
            if (fabs(p->levels_mhz[k] - mhz) < 1.0)
                known = 1;
        if (known)
            continue;
        if (n_odd++ < 6 && used < sizeof odd)
            used += (size_t)snprintf(odd + used, sizeof odd - used, "%s%g", used ? " " : "", mhz);
    }
    if (n_odd)
        add_warning(b, "%d GPU level%s not in the board table's %s clock tables (%s%s MHz): the "
                       "policies were made for the table's levels; a pin snaps to the board's own",
                    n_odd, n_odd == 1 ? " is" : "s are", p->id, odd, n_odd > 6 ? " ..." : "");
}

/* The table's row whose model strings are in the device-tree model, or NULL. */
static const gc_board_profile *identify(const gc_board *b)
{
    int p, i;

    for (p = 0; b->model[0] && p < GC_N_BOARD_PROFILES; p++)
        for (i = 0; gc_board_profiles[p].model_match[i]; i++)
            if (strcasestr(b->model, gc_board_profiles[p].model_match[i]))
                return &gc_board_profiles[p];
    return NULL;
}

int gc_board_emc_table_hz(const gc_board *b, uint64_t *out, int max)
{
    int p, i, n = 0;

    for (p = 0; b->board_id[0] && p < GC_N_BOARD_PROFILES; p++) {
        if (strcmp(gc_board_profiles[p].id, b->board_id) != 0)
            continue;
        for (i = 0; i < GC_PROFILE_EMC_MAX && gc_board_profiles[p].emc_mhz[i] > 0 && n < max; i++)
            out[n++] = gc_mhz_to_hz(gc_board_profiles[p].emc_mhz[i]);
    }
    return n;
}

static int rail_index(const gc_board *b, const char *name)
{
    int i;

    for (i = 0; i < b->n_rails; i++)
        if (strcmp(b->rails[i].name, name) == 0)
            return i;
    return -1;
}

static int optional_rail(const gc_board_profile *p, int role, const char *name)
{
    int j;

    for (j = 0; p->optional[role][j]; j++)
        if (strcmp(p->optional[role][j], name) == 0)
            return 1;
    return 0;
}

/* Why a rail of the table is not among the rails: a skipped channel's reason, else not found. */
static void missing_why(const gc_board *b, const char *name, char *out, size_t len)
{
    int i;

    for (i = 0; i < b->n_skipped; i++)
        if (strcmp(b->skipped[i].name, name) == 0) {
            snprintf(out, len, "was skipped (%s)", b->skipped[i].why);
            return;
        }
    snprintf(out, len, "was not found");
}

/* Give each role its rails, from the table only. A missing rail leaves the role unknown, except
 * one of the table's optional rails of the role: the role is then summed over the rails present
 * and flagged partial (role_partial), with a warning naming the rail. */
static void resolve_roles(gc_board *b, const gc_board_profile *p)
{
    char why[sizeof b->skipped[0].why + 32], absent[GC_ERR_MAX];
    int role, j, k, idx;

    for (role = 0; role < GC_N_ROLES; role++) {
        b->role_n[role] = -1;
        b->role_partial[role] = 0;
        b->role_optional[role] = 0;
        if (!p)
            continue;
        b->role_n[role] = 0;
        absent[0] = '\0';
        for (j = 0; p->roles[role][j]; j++) {
            char dup[GC_NAME_MAX];
            int twice;

            idx = rail_index(b, p->roles[role][j]);
            snprintf(dup, sizeof dup, "%s#2", p->roles[role][j]);
            twice = rail_index(b, dup) >= 0;
            if (idx < 0 && !twice && optional_rail(p, role, p->roles[role][j])) {
                size_t used = strlen(absent);

                missing_why(b, p->roles[role][j], why, sizeof why);
                snprintf(absent + used, sizeof absent - used, "%s%s, which %s", used ? "; " : "",
                         p->roles[role][j], why);
                b->role_partial[role] = 1;
                continue;
            }
            if (idx < 0 || twice) {
                if (idx < 0)
                    missing_why(b, p->roles[role][j], why, sizeof why);
                else
                    snprintf(why, sizeof why, "is labelled twice");
                add_warning(b, "%s energy is not known: rail %s %s", gc_role_names[role],
                            p->roles[role][j], why);
                b->role_n[role] = -1;
                break;
            }
            for (k = 0; k < b->role_n[role]; k++)
                if (b->role_rail[role][k] == idx)
                    break;
            if (k == b->role_n[role])
                b->role_rail[role][b->role_n[role]++] = idx;
            if (optional_rail(p, role, p->roles[role][j]))
                b->role_optional[role] |= 1u << idx;
        }
        if (b->role_n[role] > 0 && b->role_partial[role])
            add_warning(b, "%s energy is partial (%s_partial): summed over the rails present, "
                           "without %s", gc_role_names[role], gc_role_names[role], absent);
        else if (b->role_n[role] == 0 && b->role_partial[role]) {
            add_warning(b, "%s energy is not known: no rail of it was found (%s)", gc_role_names[role],
                        absent);
            b->role_n[role] = -1;
        }
        if (b->role_n[role] < 0) {
            b->role_partial[role] = 0;
            b->role_optional[role] = 0;
        }
    }
}

double gc_role_sum(const gc_board *b, int role, const double *values, int *known)
{
    double sum = 0;
    int k;

    *known = role >= 0 && role < GC_N_ROLES && b->role_n[role] > 0;
    if (!*known)
        return 0;
    for (k = 0; k < b->role_n[role]; k++)
        sum += values[b->role_rail[role][k]];
    return sum;
}

int gc_board_open(gc_board *b, const char *sysfs_root)
{
    const gc_board_profile *p;
    struct stat st;
    char path[GC_PATH_MAX];
    size_t len;
    int rc, fd = -1;

    memset(b, 0, sizeof *b);
    if (!sysfs_root || !*sysfs_root)
        sysfs_root = "/";
    len = strlen(sysfs_root);
    if (len >= sizeof b->sysfs_root) {
        set_err(b, "sysfs root path is too long");
        return -ENAMETOOLONG;
    }
    memcpy(b->sysfs_root, sysfs_root, len + 1);
    while (len > 1 && b->sysfs_root[len - 1] == '/')
        b->sysfs_root[--len] = '\0';
    if (stat(b->sysfs_root, &st) == 0 && !S_ISDIR(st.st_mode)) {
        set_err(b, "sysfs root %s is not a directory (give the folder that holds sys/ and proc/)",
                b->sysfs_root);
        return -ENODEV;
    }
    if (!gc_sysfs_exists(b->sysfs_root, b->sysfs_root) ||
        (fd = open(b->sysfs_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        int e = errno;

        /* a root the user may not read is not a missing one: say which it is */
        if (stat(b->sysfs_root, &st) < 0 && errno == ENOENT) {
            set_err(b, "sysfs root %s does not exist", b->sysfs_root);
            return -ENODEV;
        }
        if (e == EACCES || e == EPERM || access(b->sysfs_root, R_OK | X_OK) < 0) {
            set_err(b, "sysfs root %s: permission denied (you may not read it, or a folder above "
                       "it: run as a user who may)", b->sysfs_root);
            return -EACCES;
        }
        set_err(b, "sysfs root %s cannot be opened: %s", b->sysfs_root, strerror(e));
        return -ENODEV;
    }
    close(fd);
    rc = find_gpu(b);
    if (rc < 0)
        return rc;
    rc = join(path, sizeof path, b->devfreq_dir, "available_frequencies");
    if (rc == 0)
        rc = parse_freq_table(b, path);
    if (rc < 0)
        return rc;
    read_model(b);
    read_release(b);
    p = identify(b);
    find_rails(b, p); /* the board's table names the rails to keep when there are too many */
    if (p) {
        snprintf(b->board_id, sizeof b->board_id, "%s", p->id);
        check_levels(b, p);
    } else {
        /* One warning says what is unknown; discovery alone still pins and measures. */
        char warn[GC_ERR_MAX];

        snprintf(warn, sizeof warn, "%s", b->warning);
        snprintf(b->warning, sizeof b->warning,
                 "unknown board (model \"%s\"): the GPU and rails were found by discovery alone; "
                 "rail roles are unknown, so module and CPU+GPU energy are not reported "
                 "(docs/boards.md)%s%s", b->model[0] ? b->model : "none", warn[0] ? "; " : "", warn);
    }
    resolve_roles(b, p);
    return 0;
}

int gc_clock_read(gc_board *b, gc_clock_state *st)
{
    char path[GC_PATH_MAX];
    static const char *const files[] = {"cur_freq", "min_freq", "max_freq"};
    uint64_t *dst[3];
    int i, rc;

    dst[0] = &st->cur_hz;
    dst[1] = &st->min_hz;
    dst[2] = &st->max_hz;
    memset(st, 0, sizeof *st);
    for (i = 0; i < 3; i++) {
        join(path, sizeof path, b->devfreq_dir, files[i]);
        rc = gc_sysfs_read_u64(b->sysfs_root, path, dst[i]);
        if (rc < 0) {
            set_err(b, "cannot read %s: %s", path, gc_sysfs_strerror(rc));
            return rc;
        }
    }
    join(path, sizeof path, b->devfreq_dir, "governor");
    rc = gc_sysfs_read(b->sysfs_root, path, st->governor, sizeof st->governor);
    if (rc < 0) {
        set_err(b, "cannot read %s: %s", path, gc_sysfs_strerror(rc));
        return rc;
    }
    return 0;
}

int gc_gpu_load_permille(gc_board *b, int *load_permille)
{
    uint64_t v;
    int rc;

    if (!b->load_path[0])
        return -ENOENT;
    rc = gc_sysfs_read_u64(b->sysfs_root, b->load_path, &v);
    if (rc < 0) {
        set_err(b, "cannot read %s: %s", b->load_path, strerror(-rc));
        return rc;
    }
    *load_permille = v > 1000 ? 1000 : (int)v;
    return 0;
}

int gc_snap_hz(const gc_board *b, uint64_t want_hz, uint64_t *level_hz)
{
    uint64_t best;
    int i;

    if (want_hz == 0 || b->n_freqs == 0)
        return -EINVAL;
    best = b->freqs_hz[0];
    for (i = 1; i < b->n_freqs; i++) {
        uint64_t f = b->freqs_hz[i];
        uint64_t d_new = f > want_hz ? f - want_hz : want_hz - f;
        uint64_t d_best = best > want_hz ? best - want_hz : want_hz - best;
        if (d_new < d_best)
            best = f;
    }
    *level_hz = best;
    return 0;
}

int gc_check_near_table(gc_board *b, uint64_t want_hz)
{
    int64_t lo, hi, n = b->n_freqs, want = (int64_t)want_hz;

    if (n < 2)
        return 0;
    lo = (int64_t)b->freqs_hz[0];
    hi = (int64_t)b->freqs_hz[n - 1];
    if (want >= lo - ((int64_t)b->freqs_hz[1] - lo) && want <= hi + (hi - (int64_t)b->freqs_hz[n - 2]))
        return 0;
    set_err(b, "%.12g MHz is outside the board's table (%g..%g MHz) by more than one level",
            gc_hz_to_mhz(want_hz), gc_hz_to_mhz((uint64_t)lo), gc_hz_to_mhz((uint64_t)hi));
    return -EINVAL;
}

/* board.c - discover the Jetson GPU devfreq node, GPU load and INA3221 rails under a root. */
#include "govcore.h"
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

#define MAX_ENTRIES 128

/* of_node names of Jetson iGPUs: Orin on JetPack 5 / JetPack 6, Xavier, TX2. */
static const char *const gpu_of_names[] = {"ga10b", "gpu", "gv11b", "gp10b", NULL};

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

static void set_err(gc_board *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
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

static int is_gpu_name(const char *name)
{
    const char *const *g;

    for (g = gpu_of_names; *g; g++)
        if (strcmp(name, *g) == 0)
            return 1;
    return 0;
}

/* Scan <root>/sys/class/devfreq/ for the entry whose of_node/name is a Jetson GPU. */
static int find_gpu(gc_board *b)
{
    char class_dir[GC_PATH_MAX], dir[GC_PATH_MAX], path[GC_PATH_MAX], name[GC_NAME_MAX];
    char *names[MAX_ENTRIES];
    int n, i, rc;

    rc = under_root(b, class_dir, sizeof class_dir, "/sys/class/devfreq");
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

        if (join(dir, sizeof dir, class_dir, names[i]) < 0)
            continue;
        for (w = 0; w < sizeof where / sizeof where[0]; w++) {
            if (join(path, sizeof path, dir, where[w]) < 0 ||
                gc_sysfs_read(b->sysfs_root, path, name, sizeof name) < 0 || !is_gpu_name(name))
                continue;
            snprintf(b->devfreq_dir, sizeof b->devfreq_dir, "%s", dir);
            snprintf(b->gpu_name, sizeof b->gpu_name, "%s", name);
            /* GPU load lives in the GPU device folder. */
            if (join(path, sizeof path, dir, "device/load") == 0 && gc_sysfs_exists(b->sysfs_root, path))
                snprintf(b->load_path, sizeof b->load_path, "%s", path);
            free_names(names, n);
            return 0;
        }
    }
    free_names(names, n);
    set_err(b, "no Jetson GPU devfreq node under %s (looked for of_node/name ga10b, gpu, gv11b "
               "or gp10b); is this a Jetson, and is --sysfs-root right?", class_dir);
    return -ENODEV;
}

static int add_rail(gc_board *b, const char *label, int kind, const char *v_path,
                    const char *i_path, const char *p_path)
{
    gc_rail *r;
    int i;

    if (b->n_rails == GC_MAX_RAILS)
        return -E2BIG;
    for (i = 0; i < b->n_rails; i++)
        if (strcmp(b->rails[i].name, label) == 0)
            return 0; /* the same sensor seen through a second path */
    r = &b->rails[b->n_rails++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", label);
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

/* One ina3221 hwmon folder: channels with a label, a bus voltage and a current file. */
static void scan_hwmon_dir(gc_board *b, const char *dir)
{
    char path[GC_PATH_MAX], v_path[GC_PATH_MAX], i_path[GC_PATH_MAX], label[GC_NAME_MAX];
    uint64_t interval_ms;
    int ch;

    if (join(path, sizeof path, dir, "name") < 0 || gc_sysfs_read(b->sysfs_root, path, label, sizeof label) < 0 ||
        strcmp(label, "ina3221") != 0)
        return;
    for (ch = 1; ch <= 8; ch++) {
        snprintf(path, sizeof path, "%s/in%d_label", dir, ch);
        if (gc_sysfs_read(b->sysfs_root, path, label, sizeof label) < 0 || skip_label(label))
            continue;
        snprintf(v_path, sizeof v_path, "%s/in%d_input", dir, ch);
        snprintf(i_path, sizeof i_path, "%s/curr%d_input", dir, ch);
        if (!gc_sysfs_exists(b->sysfs_root, v_path) || !gc_sysfs_exists(b->sysfs_root, i_path))
            continue;
        add_rail(b, label, GC_RAIL_HWMON, v_path, i_path, NULL);
    }
    if (join(path, sizeof path, dir, "update_interval") == 0 &&
        gc_sysfs_read_u64(b->sysfs_root, path, &interval_ms) == 0 && b->sensor_interval_ms == 0)
        b->sensor_interval_ms = (int)interval_ms;
}

static void scan_hwmon_class(gc_board *b, const char *class_dir)
{
    char dir[GC_PATH_MAX];
    char *names[MAX_ENTRIES];
    int n = list_dir(b->sysfs_root, class_dir, names, MAX_ENTRIES), i;

    for (i = 0; i < n; i++)
        if (join(dir, sizeof dir, class_dir, names[i]) == 0)
            scan_hwmon_dir(b, dir);
    if (n > 0)
        free_names(names, n);
}

/* JetPack 4: /sys/bus/i2c/drivers/ina3221x/<addr>/iio:device<N>/rail_name_<ch>. */
static void scan_ina3221x(gc_board *b)
{
    char drv[GC_PATH_MAX], dev[GC_PATH_MAX], iio[GC_PATH_MAX], path[GC_PATH_MAX];
    char p_path[GC_PATH_MAX], v_path[GC_PATH_MAX], i_path[GC_PATH_MAX], label[GC_NAME_MAX];
    char *addrs[MAX_ENTRIES], *subs[MAX_ENTRIES];
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
                if (!gc_sysfs_exists(b->sysfs_root, p_path))
                    continue;
                add_rail(b, label, GC_RAIL_INA3221X, gc_sysfs_exists(b->sysfs_root, v_path) ? v_path : NULL,
                         gc_sysfs_exists(b->sysfs_root, i_path) ? i_path : NULL, p_path);
            }
        }
        if (ns > 0)
            free_names(subs, ns);
    }
    if (na > 0)
        free_names(addrs, na);
}

static void find_rails(gc_board *b)
{
    char dir[GC_PATH_MAX];
    char *addrs[MAX_ENTRIES];
    int n, i;

    if (under_root(b, dir, sizeof dir, "/sys/class/hwmon") == 0)
        scan_hwmon_class(b, dir);
    if (b->n_rails == 0 && under_root(b, dir, sizeof dir, "/sys/bus/i2c/drivers/ina3221") == 0) {
        /* Trees without /sys/class/hwmon: look under the driver's devices directly. */
        char sub[GC_PATH_MAX];

        n = list_dir(b->sysfs_root, dir, addrs, MAX_ENTRIES);
        for (i = 0; i < n; i++) {
            snprintf(sub, sizeof sub, "%s/%s/hwmon", dir, addrs[i]);
            scan_hwmon_class(b, sub);
        }
        if (n > 0)
            free_names(addrs, n);
    }
    if (b->n_rails == 0)
        scan_ina3221x(b);
}

static void read_model(gc_board *b)
{
    char path[GC_PATH_MAX];
    static const char *const where[] = {"/proc/device-tree/model",
                                        "/sys/firmware/devicetree/base/model"};
    size_t i;

    for (i = 0; i < sizeof where / sizeof where[0]; i++)
        if (under_root(b, path, sizeof path, "%s", where[i]) == 0 &&
            gc_sysfs_read(b->sysfs_root, path, b->model, sizeof b->model) == 0)
            return;
    b->model[0] = '\0';
}

int gc_board_open(gc_board *b, const char *sysfs_root)
{
    struct stat st;
    char path[GC_PATH_MAX];
    size_t len;
    int rc;

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
    if (!gc_sysfs_exists(b->sysfs_root, b->sysfs_root)) {
        set_err(b, "sysfs root %s does not exist", b->sysfs_root);
        return -ENODEV;
    }
    rc = find_gpu(b);
    if (rc < 0)
        return rc;
    rc = join(path, sizeof path, b->devfreq_dir, "available_frequencies");
    if (rc == 0)
        rc = parse_freq_table(b, path);
    if (rc < 0)
        return rc;
    find_rails(b);
    read_model(b);
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

/* test_sampler.c - the sampler's arithmetic (integrator, parser, window diff), its ring buffer,
 * and its thread against rail files this test writes itself (constant power, a step, garbage,
 * an empty file, a file removed and put back, the JetPack 4 mW layout, concurrent readers).
 *
 * Build and run: make -C govcore test-sampler (test-sampler-tsan: under ThreadSanitizer).
 * The board is built by hand (gc_board fields) so this test needs no devfreq tree.
 */
#include "check.h"
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static char tmp_root[256];

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Rewrite a rail file in place with a fixed-width field, as the kernel (and fake.py) do. */
static void put(const char *path, long long value)
{
    char text[32];
    int fd = open(path, O_WRONLY | O_CREAT, 0644);

    snprintf(text, sizeof text, "%11lld\n", value);
    if (fd < 0 || pwrite(fd, text, 12, 0) != 12)
        perror(path);
    if (fd >= 0)
        close(fd);
}

static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (!f) {
        perror(path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* A hand-made board: n hwmon rails (mV, mA files) or JetPack 4 rails (mW file) + a load file. */
static void make_board(gc_board *b, const char *tag, int n, int kind)
{
    char dir[300];
    int k;

    memset(b, 0, sizeof *b);
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, tag);
    mkdir(dir, 0755);
    snprintf(b->sysfs_root, sizeof b->sysfs_root, "%s", dir);
    for (k = 0; k < n; k++) {
        gc_rail *r = &b->rails[k];

        snprintf(r->name, sizeof r->name, "RAIL%d", k);
        r->kind = kind;
        if (kind == GC_RAIL_INA3221X) {
            snprintf(r->power_path, sizeof r->power_path, "%s/in_power%d_input", dir, k);
            put(r->power_path, 0);
        } else {
            snprintf(r->voltage_path, sizeof r->voltage_path, "%s/in%d_input", dir, k + 1);
            snprintf(r->current_path, sizeof r->current_path, "%s/curr%d_input", dir, k + 1);
            put(r->voltage_path, 0);
            put(r->current_path, 0);
        }
    }
    b->n_rails = n;
    snprintf(b->load_path, sizeof b->load_path, "%s/load", dir);
    put(b->load_path, 0);
    b->sensor_interval_ms = 7;
}

static gc_sampler *started(gc_board *b, double rate_hz, uint32_t ring)
{
    gc_sampler_config cfg = {0};
    gc_sampler *s = NULL;

    cfg.rate_hz = rate_hz;
    cfg.ring_capacity = ring;
    CHECK(gc_sampler_create(&s, b, &cfg) == 0);
    if (s)
        CHECK(gc_sampler_start(s) == 0);
    return s;
}

/* ------------------------------------------------------------ arithmetic --- */

static void test_energy_exact_over_uneven_segments(void)
{
    gc_energy_acc acc = {0, 0};
    int64_t left = 1000000000LL, dt = 333331;

    /* 1 W constant (sum of two ends = 2 000 000 uW) for 1 s, cut into odd pieces: exactly
     * 2 x 1e9 nJ of twice-energy, no remainder, whatever the cuts. */
    while (left > 0) {
        int64_t step = left < dt ? left : dt;
        gc_energy_add(&acc, 2000000, step);
        left -= step;
        dt = dt * 7 % 999983 + 1;
    }
    CHECK_I64(acc.e2_nj, 2000000000LL);
    CHECK_I64(acc.e2_fj, 0);
}

static void test_energy_sub_nanojoule_remainders_carry(void)
{
    gc_energy_acc acc = {0, 0};
    int i;

    /* 1 uW + 2 uW over 1 ns = 3 fJ twice-energy; a million of them = 3 nJ exactly. */
    for (i = 0; i < 1000000; i++)
        gc_energy_add(&acc, 3, 1);
    CHECK_I64(acc.e2_nj, 3);
    CHECK_I64(acc.e2_fj, 0);
}

static void test_energy_negative_and_large(void)
{
    gc_energy_acc acc = {0, 0};

    gc_energy_add(&acc, -5, 1); /* -5 fJ: borrows a nJ, remainder stays in 0..999999 */
    CHECK_I64(acc.e2_nj, -1);
    CHECK_I64(acc.e2_fj, 999995);
    gc_energy_add(&acc, 5, 1);
    CHECK_I64(acc.e2_nj, 0);
    CHECK_I64(acc.e2_fj, 0);
    /* 2 x 10 kW for 500 s: 1e10 J... twice = 2e19 would overflow a naive uW x ns product;
     * here 2e10 uW x 500 000 ms = 1e16 nJ fits. */
    gc_energy_add(&acc, 20000000000LL, 500000000000LL);
    CHECK_I64(acc.e2_nj, 10000000000000000LL);
    gc_energy_add(&acc, 1, 0);  /* zero or negative dt adds nothing */
    gc_energy_add(&acc, 1, -9);
    CHECK_I64(acc.e2_nj, 10000000000000000LL);
}

static void test_parse_int(void)
{
    int64_t v = 42;

    CHECK(gc_parse_int("  1234\n", 7, &v) == 0 && v == 1234);
    CHECK(gc_parse_int("-17", 3, &v) == 0 && v == -17);
    CHECK(gc_parse_int("5000\n\0\0", 7, &v) == 0 && v == 5000);
    CHECK(gc_parse_int("", 0, &v) == -EINVAL);
    CHECK(gc_parse_int("\n", 1, &v) == -EINVAL);
    CHECK(gc_parse_int("abc", 3, &v) == -EINVAL);
    CHECK(gc_parse_int("12abc", 5, &v) == -EINVAL);
    CHECK(gc_parse_int("1 2", 3, &v) == -EINVAL);
    CHECK(gc_parse_int("-", 1, &v) == -EINVAL);
    CHECK(gc_parse_int("99999999999999999999", 20, &v) == -EINVAL);
}

static void test_window_diff(void)
{
    gc_snapshot a, b;
    gc_window w;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.n_rails = b.n_rails = 2;
    a.t_ns = 1000000000;
    b.t_ns = 3000000000;          /* 2 s */
    a.e2_nj[0] = 10;
    a.e2_fj[0] = 500000;
    b.e2_nj[0] = 10 + 20000000000LL; /* + 2 x 10 J */
    b.e2_fj[0] = 500000;
    b.e2_nj[1] = 7;                /* 3.5 nJ: rounds half up to 4 */
    a.load2_pm_ns = 0;
    b.load2_pm_ns = 2LL * 500 * 2000000000LL; /* load 500 permille over 2 s */
    a.load_ns = 0;
    b.load_ns = 2000000000LL;
    a.samples = 5;
    b.samples = 2005;
    a.read_errors = 1;
    b.read_errors = 4;
    CHECK(gc_window_diff(&a, &b, &w) == 0);
    CHECK_I64(w.duration_ns, 2000000000LL);
    CHECK_I64(w.energy_nj[0], 10000000000LL);
    CHECK(w.energy_j[0] > 9.999999 && w.energy_j[0] < 10.000001);
    CHECK(w.avg_power_w[0] > 4.999999 && w.avg_power_w[0] < 5.000001);
    CHECK_I64(w.energy_nj[1], 4);
    CHECK(w.gpu_util_pct > 49.9999 && w.gpu_util_pct < 50.0001);
    CHECK_I64(w.samples, 2000);
    CHECK_I64(w.read_errors, 3);
    CHECK(w.rate_hz > 999.99 && w.rate_hz < 1000.01);
    CHECK(gc_window_diff(&b, &a, &w) == -EINVAL); /* backwards */
    b.n_rails = 3;
    CHECK(gc_window_diff(&a, &b, &w) == -EINVAL);
}

/* ------------------------------------------------------------ the thread --- */

static void test_no_rails_is_a_clear_error(void)
{
    gc_board b;
    gc_sampler *s = (gc_sampler *)&b;

    make_board(&b, "norails", 0, GC_RAIL_HWMON);
    CHECK(gc_sampler_create(&s, &b, NULL) == -ENODEV);
    CHECK(s == NULL);
    CHECK(strstr(b.err, "no power rail") != NULL);
}

static void test_bad_config_rejected(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_config cfg = {0};

    make_board(&b, "badcfg", 2, GC_RAIL_HWMON);
    cfg.rate_hz = 1e7;
    CHECK(gc_sampler_create(&s, &b, &cfg) == -EINVAL);
    cfg.rate_hz = 100;
    cfg.rail_mask = 1u << 5; /* rail 5 does not exist */
    CHECK(gc_sampler_create(&s, &b, &cfg) == -EINVAL);
    cfg.rail_mask = 0;
    unlink(b.rails[1].current_path);
    CHECK(gc_sampler_create(&s, &b, &cfg) == -ENOENT);
    CHECK(strstr(b.err, "RAIL1") != NULL);
}

static void test_default_rate_follows_sensor(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_stats st;

    make_board(&b, "rate", 1, GC_RAIL_HWMON);
    CHECK(gc_sampler_create(&s, &b, NULL) == 0);
    gc_sampler_get_stats(s, &st);
    CHECK_I64(st.period_ns, 7000000);          /* update_interval 7 ms */
    gc_sampler_free(s);
    b.sensor_interval_ms = 0;
    CHECK(gc_sampler_create(&s, &b, NULL) == 0);
    gc_sampler_get_stats(s, &st);
    CHECK(st.rate_hz > 149.99 && st.rate_hz < 150.01); /* the fallback */
    gc_sampler_free(s);
}

static void test_constant_power_is_exact(void)
{
    gc_board b;
    gc_sampler *s;
    gc_snapshot a, z;
    gc_window w;

    make_board(&b, "const", 2, GC_RAIL_HWMON);
    put(b.rails[0].voltage_path, 5000);
    put(b.rails[0].current_path, 2000);  /* 10 W */
    put(b.rails[1].voltage_path, 1000);
    put(b.rails[1].current_path, 1500);  /* 1.5 W */
    put(b.load_path, 250);
    s = started(&b, 1000, 0);
    gc_sampler_snapshot(s, &a);
    sleep_ms(200);
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    CHECK(gc_window_diff(&a, &z, &w) == 0);
    /* the trapezoid of a constant is exact, edges included: E_nJ = P_W x t_ns (+-1 rounding) */
    CHECK(llabs(w.energy_nj[0] - 10 * w.duration_ns) <= 1);
    CHECK(llabs(w.energy_nj[1] - 3 * w.duration_ns / 2) <= 1);
    CHECK(w.gpu_util_pct > 24.999 && w.gpu_util_pct < 25.001);
    CHECK(w.samples > 50); /* 200 expected; a loaded 2-core box may lose some */
    CHECK_I64(w.read_errors, 0);
    CHECK(strcmp(gc_sampler_rail_name(s, 1), "RAIL1") == 0);
    CHECK(gc_sampler_rail_name(s, 2) == NULL);
    gc_sampler_free(s);
}

static void test_step_and_ina3221x(void)
{
    gc_board b;
    gc_sampler *s;
    gc_snapshot a, m, z;
    gc_window w1, w2;
    gc_sampler_stats st;

    make_board(&b, "jp4", 1, GC_RAIL_INA3221X);
    put(b.rails[0].power_path, 4000);    /* 4 W, in mW */
    s = started(&b, 1000, 0);
    gc_sampler_snapshot(s, &a);
    sleep_ms(100);
    put(b.rails[0].power_path, 12000);   /* step to 12 W */
    gc_sampler_snapshot(s, &m);
    sleep_ms(100);
    gc_sampler_snapshot(s, &z);
    gc_sampler_get_stats(s, &st);
    gc_sampler_free(s);
    gc_window_diff(&a, &z, &w1);
    /* expected: 4 W before the step, 12 W after; the step is smeared over at most one
     * sample interval (8 W x 1 ms / 2 = 4 mJ), plus scheduling slack on a busy machine */
    {
        double before_s = (double)(m.t_ns - a.t_ns) / 1e9, after_s = (double)(z.t_ns - m.t_ns) / 1e9;
        double expect_j = 4 * before_s + 12 * after_s;
        double slack_j = 8.0 * (2.0 / st.rate_hz + 0.002);
        CHECK(w1.energy_j[0] > expect_j - slack_j && w1.energy_j[0] < expect_j + slack_j);
    }
    /* two windows that share an edge add up to the window over both */
    gc_window_diff(&a, &m, &w1);
    gc_window_diff(&m, &z, &w2);
    {
        gc_window all;
        gc_window_diff(&a, &z, &all);
        CHECK(llabs(w1.energy_nj[0] + w2.energy_nj[0] - all.energy_nj[0]) <= 1);
        CHECK_I64(w1.samples + w2.samples, all.samples);
    }
}

/* An hwmon power channel (powerN_input in uW, as the INA238 on Thor) beside an INA3221 rail; the
 * module's role is the power channel alone, CPU+GPU the INA3221 rail. A mask that leaves a role's
 * rail out makes that role unknown, not smaller. */
static void test_hwmon_power_channel_and_roles(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_config cfg = {0};
    gc_snapshot a, z;
    gc_window w;
    double dur_s, j;
    int known;

    make_board(&b, "thor", 2, GC_RAIL_HWMON);
    b.rails[1].kind = GC_RAIL_POWER;
    snprintf(b.rails[1].name, sizeof b.rails[1].name, "ina238");
    snprintf(b.rails[1].power_path, sizeof b.rails[1].power_path, "%s/thor/power1_input", tmp_root);
    put(b.rails[0].voltage_path, 5000);   /* 5 V x 1 A = 5 W */
    put(b.rails[0].current_path, 1000);
    put(b.rails[1].power_path, 42000000); /* 42 W, in uW */
    b.role_n[GC_ROLE_MODULE] = 1;
    b.role_rail[GC_ROLE_MODULE][0] = 1;
    b.role_n[GC_ROLE_CPU_GPU] = 1;
    b.role_rail[GC_ROLE_CPU_GPU][0] = 0;
    b.role_n[GC_ROLE_GPU] = -1;
    snprintf(b.board_id, sizeof b.board_id, "thor");
    s = started(&b, 500, 0);
    gc_sampler_snapshot(s, &a);
    sleep_ms(200);
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    CHECK(gc_window_diff(&a, &z, &w) == 0);
    dur_s = (double)w.duration_ns / 1e9;
    CHECK(fabs(w.energy_j[1] - 42.0 * dur_s) < 1e-6);
    CHECK(fabs(w.energy_j[0] - 5.0 * dur_s) < 1e-6);
    j = gc_window_role_j(s, &w, GC_ROLE_MODULE, &known);
    CHECK(known && fabs(j - 42.0 * dur_s) < 1e-6);
    j = gc_window_role_j(s, &w, GC_ROLE_CPU_GPU, &known);
    CHECK(known && fabs(j - 5.0 * dur_s) < 1e-6);
    gc_window_role_j(s, &w, GC_ROLE_GPU, &known);
    CHECK(!known);
    CHECK(strcmp(gc_sampler_board_id(s), "thor") == 0);
    gc_sampler_free(s);

    cfg.rail_mask = 1u << 0; /* the INA3221 rail only: the module's rail is not sampled */
    CHECK(gc_sampler_create(&s, &b, &cfg) == 0);
    CHECK(gc_sampler_role(s, GC_ROLE_MODULE, NULL) == -1);
    CHECK(gc_sampler_role(s, GC_ROLE_CPU_GPU, NULL) == 1);
    gc_sampler_free(s);
}

static void test_bad_readings_counted_and_skipped(void)
{
    gc_board b;
    gc_sampler *s;
    gc_snapshot a, z;
    gc_window w;
    gc_sampler_stats st;
    uint64_t errs_before;

    make_board(&b, "bad", 2, GC_RAIL_HWMON);
    put(b.rails[0].voltage_path, 1000);
    put(b.rails[0].current_path, 1000);  /* 1 W */
    put(b.rails[1].voltage_path, 1000);
    put(b.rails[1].current_path, 2000);  /* 2 W */
    s = started(&b, 2000, 0);
    gc_sampler_snapshot(s, &a);
    sleep_ms(30);
    put_text(b.rails[0].current_path, "garbage\n");
    sleep_ms(30);
    put_text(b.rails[0].current_path, "");          /* empty */
    sleep_ms(30);
    put(b.rails[0].current_path, 1000);
    sleep_ms(30);
    unlink(b.rails[1].voltage_path);               /* vanishes; noticed within 64 rounds */
    sleep_ms(150);
    gc_sampler_get_stats(s, &st);
    errs_before = st.read_errors;
    put(b.rails[1].voltage_path, 1000);            /* comes back: reopened by path */
    sleep_ms(150);
    gc_sampler_snapshot(s, &z);
    gc_sampler_get_stats(s, &st);
    gc_sampler_free(s);
    gc_window_diff(&a, &z, &w);
    CHECK(errs_before > 3);
    CHECK(w.read_errors >= errs_before);
    CHECK(st.reopens >= 1);
    /* after the file came back, errors stopped: fewer than one recheck period's worth */
    CHECK(st.read_errors - errs_before <= 64 + 2);
    /* a skipped reading is bridged by the trapezoid: power was constant, so the energy is
     * still exact; the removed rail integrates across its gap at the value it held */
    CHECK(llabs(w.energy_nj[0] - w.duration_ns) <= 1);
    CHECK(llabs(w.energy_nj[1] - 2 * w.duration_ns) <= 1);
}

static void test_reading_quality_reported(void)
{
    gc_board b;
    gc_sampler *s;
    gc_snapshot a, m, z;
    gc_window w, w2;

    make_board(&b, "quality", 3, GC_RAIL_HWMON);
    put(b.rails[0].voltage_path, 1000);
    put(b.rails[0].current_path, 1000);            /* 1 W, always readable */
    put(b.rails[1].voltage_path, 1000);
    put(b.rails[1].current_path, 2000);            /* 2 W, then garbage for half the window */
    put_text(b.rails[2].current_path, "garbage\n"); /* never readable */
    put(b.rails[2].voltage_path, 1000);
    s = started(&b, 1000, 0);
    gc_sampler_snapshot(s, &a);
    sleep_ms(100);
    put_text(b.rails[1].current_path, "x\n");
    sleep_ms(100);
    gc_sampler_snapshot(s, &m);                    /* inside rail 1's gap: held so far */
    CHECK(gc_window_diff(&a, &m, &w) == 0);
    CHECK(w.interpolated_pct[1] > 20.0 && w.interpolated_pct[1] < 80.0);
    put(b.rails[1].current_path, 2000);
    sleep_ms(100);
    gc_sampler_snapshot(s, &z);
    CHECK(gc_window_diff(&a, &z, &w) == 0);
    CHECK_I64(w.failed_reads[0], 0);
    CHECK(w.interpolated_pct[0] == 0.0);
    CHECK(w.failed_reads[1] > 10);
    CHECK(w.interpolated_pct[1] > 15.0 && w.interpolated_pct[1] < 70.0);
    CHECK(w.failed_reads[2] > 100);
    CHECK(w.interpolated_pct[2] > 95.0 && w.interpolated_pct[2] <= 100.0);
    CHECK(w.energy_nj[2] == 0);                    /* nothing measured: no energy made up */
    CHECK(w.readings_ok == 0);
    /* windows that split the gap add up to the whole gap */
    CHECK(gc_window_diff(&m, &z, &w2) == 0);
    {
        gc_window w1;
        double gap1, gap2, all;

        CHECK(gc_window_diff(&a, &m, &w1) == 0);
        gap1 = w1.interpolated_pct[1] * (double)w1.duration_ns / 100.0;
        gap2 = w2.interpolated_pct[1] * (double)w2.duration_ns / 100.0;
        all = w.interpolated_pct[1] * (double)w.duration_ns / 100.0;
        CHECK(gap2 > 0 && fabs(gap1 + gap2 - all) < 1000.0);
    }
    /* a negative current is flagged and not integrated as negative energy */
    put_text(b.rails[2].current_path, "100\n");
    put_text(b.rails[0].current_path, "-1500\n");
    sleep_ms(60);
    gc_sampler_snapshot(s, &a);
    sleep_ms(60);
    gc_sampler_snapshot(s, &z);
    gc_sampler_free(s);
    CHECK(gc_window_diff(&a, &z, &w) == 0);
    CHECK(w.negative_readings[0] > 5);
    CHECK(w.energy_nj[0] == 0);
    CHECK(w.interpolated_pct[2] == 0.0 && w.negative_readings[2] == 0);
    CHECK(w.readings_ok == 0);
}

static void test_start_stop_twice_and_single_use(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_stats st;

    make_board(&b, "twice", 1, GC_RAIL_HWMON);
    CHECK(gc_sampler_create(&s, &b, NULL) == 0);
    CHECK(gc_sampler_stop(s) == 0); /* before start */
    CHECK(gc_sampler_start(s) == -EINVAL);
    gc_sampler_free(s);

    CHECK(gc_sampler_create(&s, &b, NULL) == 0);
    gc_sampler_free(s); /* never started */

    s = started(&b, 500, 0);
    CHECK(gc_sampler_start(s) == 0); /* already running: nothing happens */
    gc_sampler_get_stats(s, &st);
    CHECK(st.running == 1 && st.samples >= 1); /* start waited for the first sample */
    CHECK(gc_sampler_stop(s) == 0);
    CHECK(gc_sampler_stop(s) == 0);
    gc_sampler_get_stats(s, &st);
    CHECK(st.running == 0 && st.abandoned == 0);
    CHECK(st.thread_cpu_ns > 0);
    CHECK(gc_sampler_start(s) == -EINVAL); /* a sampler runs once */
    gc_sampler_free(s);
}

static void test_ring_wraps_oldest_first(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_stats st;
    int64_t t[16];
    int32_t p[16 * 2];
    int16_t load[16];
    size_t n = 0, j;

    make_board(&b, "ring", 2, GC_RAIL_HWMON);
    put(b.rails[0].voltage_path, 2000);
    put(b.rails[0].current_path, 3);     /* 6000 uW */
    put(b.rails[1].voltage_path, 7);
    put(b.rails[1].current_path, 11);    /* 77 uW */
    put(b.load_path, 123);
    s = started(&b, 2000, 8);
    sleep_ms(40);
    gc_sampler_stop(s);
    gc_sampler_get_stats(s, &st);
    CHECK(st.samples > 8);
    CHECK_I64(st.ring_count, 8);
    CHECK(gc_sampler_trace(s, t, p, load, 16, &n) == 0);
    CHECK_I64(n, 8);
    CHECK_I64(t[7], st.last_t_ns);        /* newest last */
    for (j = 1; j < n; j++)
        CHECK(t[j] > t[j - 1]);
    for (j = 0; j < n; j++) {
        CHECK_I64(p[2 * j], 6000);
        CHECK_I64(p[2 * j + 1], 77);
        CHECK_I64(load[j], 123);
    }
    CHECK(gc_sampler_trace(s, t, NULL, NULL, 3, &n) == 0); /* the newest 3 only */
    CHECK_I64(n, 3);
    CHECK_I64(t[2], st.last_t_ns);
    gc_sampler_free(s);
}

struct reader_arg {
    gc_sampler *s;
    int rounds;
};

static void *reader(void *arg)
{
    struct reader_arg *ra = arg;
    gc_snapshot snap;
    gc_sampler_stats st;
    int64_t t[4];
    size_t n;
    int i;

    for (i = 0; i < ra->rounds; i++) {
        gc_sampler_snapshot(ra->s, &snap);
        gc_sampler_get_stats(ra->s, &st);
        gc_sampler_trace(ra->s, t, NULL, NULL, 4, &n);
        if (i == ra->rounds / 2)
            gc_sampler_stop(ra->s); /* stop from another thread, racing the others */
    }
    return NULL;
}

static void test_concurrent_readers_and_stoppers(void)
{
    gc_board b;
    gc_sampler *s;
    pthread_t th[3];
    struct reader_arg ra;
    int i;

    make_board(&b, "conc", 3, GC_RAIL_HWMON);
    s = started(&b, 5000, 64);
    ra.s = s;
    ra.rounds = 2000;
    for (i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, reader, &ra);
    for (i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    {
        gc_sampler_stats st;
        gc_sampler_get_stats(s, &st);
        CHECK(st.running == 0);
    }
    gc_sampler_free(s);
}

static void test_flat_out(void)
{
    gc_board b;
    gc_sampler *s;
    gc_sampler_stats st;

    make_board(&b, "flat", 3, GC_RAIL_HWMON);
    s = started(&b, -1, 0);
    sleep_ms(50);
    gc_sampler_stop(s);
    gc_sampler_get_stats(s, &st);
    CHECK_I64(st.period_ns, 0);
    CHECK(st.samples > 100);
    CHECK_I64(st.overruns, 0);
    gc_sampler_free(s);
}

static void cleanup(void)
{
    char cmd[300];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_root);
}

int main(void)
{
    const char *base = getenv("TMPDIR");

    snprintf(tmp_root, sizeof tmp_root, "%s/test_sampler.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_energy_exact_over_uneven_segments);
    RUN(test_energy_sub_nanojoule_remainders_carry);
    RUN(test_energy_negative_and_large);
    RUN(test_parse_int);
    RUN(test_window_diff);
    RUN(test_no_rails_is_a_clear_error);
    RUN(test_bad_config_rejected);
    RUN(test_default_rate_follows_sensor);
    RUN(test_constant_power_is_exact);
    RUN(test_step_and_ina3221x);
    RUN(test_hwmon_power_channel_and_roles);
    RUN(test_bad_readings_counted_and_skipped);
    RUN(test_reading_quality_reported);
    RUN(test_start_stop_twice_and_single_use);
    RUN(test_ring_wraps_oldest_first);
    RUN(test_concurrent_readers_and_stoppers);
    RUN(test_flat_out);
    cleanup();
    return DONE("test_sampler");
}

/* wakeup_loop.c - the baseline any periodic sampler pays: a thread that wakes at RATE_HZ and
 * does nothing, paced exactly as the govcore sampler thread is (govcore/sampler.c
 * sampler_main/sleep_until: timer slack 1 ns, absolute CLOCK_MONOTONIC deadlines slept in
 * chunks of at most 20 ms with clock_nanosleep TIMER_ABSTIME, missed slots skipped, the shared
 * mutex taken once per round to check the stop flag). Built and run by bench/bench_sampler.py;
 * kept out of the extension.
 *
 *   wakeup_loop RATE_HZ DURATION_S   -> "wakeups thread_cpu_ns overruns"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#define NS_PER_S 1000000000LL
#define SLEEP_CHUNK_NS (20LL * 1000000LL) /* as govcore/sampler.c */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int stop_flag;
static int64_t period_ns;
static uint64_t wakeups, overruns;
static int64_t thread_cpu_ns;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec to_ts(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};
    return ts;
}

static int stop_requested(void)
{
    int s;
    pthread_mutex_lock(&mu);
    s = stop_flag;
    pthread_mutex_unlock(&mu);
    return s;
}

static int sleep_until(int64_t deadline_ns)
{
    for (;;) {
        int64_t now = now_ns(), wake = deadline_ns;
        struct timespec ts;

        if (now >= deadline_ns)
            return 0;
        if (wake - now > SLEEP_CHUNK_NS)
            wake = now + SLEEP_CHUNK_NS;
        ts = to_ts(wake);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        if (wake != deadline_ns && stop_requested())
            return 1;
    }
}

static void *loop(void *arg)
{
    int64_t deadline = now_ns();
    struct timespec cpu;
    (void)arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    for (;;) {
        int stop;
        pthread_mutex_lock(&mu); /* the sampler folds each round under its mutex */
        wakeups++;
        stop = stop_flag;
        pthread_mutex_unlock(&mu);
        if (stop)
            break;
        deadline += period_ns;
        {
            int64_t now = now_ns();
            if (deadline <= now) {
                int64_t missed = (now - deadline) / period_ns + 1;
                deadline += missed * period_ns;
                overruns += (uint64_t)missed;
            }
        }
        if (sleep_until(deadline))
            break;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    thread_cpu_ns = (int64_t)cpu.tv_sec * NS_PER_S + cpu.tv_nsec;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th;
    double rate, duration;
    struct timespec d;

    if (argc != 3 || (rate = atof(argv[1])) <= 0 || (duration = atof(argv[2])) <= 0) {
        fprintf(stderr, "usage: wakeup_loop RATE_HZ DURATION_S\n");
        return 2;
    }
    period_ns = (int64_t)(1e9 / rate + 0.5);
    if (pthread_create(&th, NULL, loop, NULL) != 0)
        return 1;
    d = to_ts((int64_t)(duration * 1e9));
    while (nanosleep(&d, &d) == -1 && errno == EINTR)
        ;
    pthread_mutex_lock(&mu);
    stop_flag = 1;
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    printf("%llu %lld %llu\n", (unsigned long long)wakeups, (long long)thread_cpu_ns,
           (unsigned long long)overruns);
    return 0;
}

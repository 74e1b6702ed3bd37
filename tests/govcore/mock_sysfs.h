/* mock_sysfs.h - a sysfs layer that behaves like the devfreq driver where it matters:
 * it rejects a write that would make min_freq > max_freq (-EINVAL), logs the write order,
 * and can inject failures. Linked instead of govcore/sysfs.c (the raw I/O) by test_clock. */
#ifndef GOVCORE_TEST_MOCK_SYSFS_H
#define GOVCORE_TEST_MOCK_SYSFS_H

#define MOCK_LOG_MAX 64

struct mock_sysfs {
    int rejected;                    /* writes refused because they made min > max */
    int n_writes;
    char log[MOCK_LOG_MAX][64];      /* "min_freq=510000000", in write order */
    const char *ignore_writes_to;    /* basename whose writes "succeed" but change nothing */
    const char *fail_writes_to;      /* basename whose writes fail with -fail_errno */
    int fail_errno;
};

extern struct mock_sysfs mock;

void mock_reset(void);

#endif

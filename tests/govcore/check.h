/* check.h - a tiny test harness: CHECK counts, RUN names a test, DONE prints the tally. */
#ifndef GOVCORE_TEST_CHECK_H
#define GOVCORE_TEST_CHECK_H

#include <stdio.h>

static int checks_passed, checks_failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            checks_passed++;                                                          \
        } else {                                                                      \
            checks_failed++;                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                            \
    do {                                                                              \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);\
        if (a_ == b_) {                                                               \
            checks_passed++;                                                          \
        } else {                                                                      \
            checks_failed++;                                                          \
            fprintf(stderr, "%s:%d: %s == %llu, expected %llu\n", __FILE__, __LINE__, \
                    #a, a_, b_);                                                      \
        }                                                                             \
    } while (0)

#define CHECK_I64(a, b)                                                               \
    do {                                                                              \
        long long a_ = (long long)(a), b_ = (long long)(b);                           \
        if (a_ == b_) {                                                               \
            checks_passed++;                                                          \
        } else {                                                                      \
            checks_failed++;                                                          \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, \
                    #a, a_, b_);                                                      \
        }                                                                             \
    } while (0)

#define RUN(test)                                                                     \
    do {                                                                              \
        int before_ = checks_failed;                                                  \
        test();                                                                       \
        printf("%-48s %s\n", #test, checks_failed == before_ ? "ok" : "FAILED");      \
    } while (0)

/* The closing line test runners look for. */
#define DONE(name)                                                                    \
    (printf("%s: %d passed, %d failed\n", name, checks_passed, checks_failed),        \
     checks_failed ? 1 : 0)

#endif

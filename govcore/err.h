/* err.h - the one way govcore writes a failure's detail for the user: one line into an object's
 * err buffer (gc_board's, gc_domains'), which the front ends print. Internal to govcore's C. */
#ifndef GOVCORE_ERR_H
#define GOVCORE_ERR_H

#include <stddef.h>

#if defined(__GNUC__)
#define GC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define GC_PRINTF(f, a)
#endif

/* err[0..len) = the formatted line (cut to fit). */
void gc_errf(char *err, size_t len, const char *fmt, ...) GC_PRINTF(3, 4);

/* set_err(obj, fmt, ...): into obj->err, for any object with a char err[] (gc_board, gc_domains). */
#define set_err(obj, ...) gc_errf((obj)->err, sizeof (obj)->err, __VA_ARGS__)

#endif

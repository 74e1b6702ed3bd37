/* err.c - gc_errf (err.h): the one writer of a failure's detail. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

void gc_errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

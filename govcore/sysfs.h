/* sysfs.h - the only place govcore reads or writes a whole board file.
 *
 * Every function returns 0 or -errno. Text is trimmed of trailing whitespace. The raw reads and
 * writes live in sysfs.c, the rest in sysfs_values.c; tests link another implementation of the
 * raw pair (tests/govcore/mock_sysfs.c) to inject the failures a real kernel produces.
 * Production code has no test switches.
 */
#ifndef GOVCORE_SYSFS_H
#define GOVCORE_SYSFS_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole (small) file into buf (NUL-terminated, trailing whitespace removed). */
int gc_sysfs_read(const char *path, char *buf, size_t buf_len);

/* Write text to an existing file, as `echo text > path` does (one write(2)). */
int gc_sysfs_write(const char *path, const char *text);

/* Read an unsigned decimal integer. -EINVAL if the file does not hold one. */
int gc_sysfs_read_u64(const char *path, uint64_t *out);

/* Write an unsigned decimal integer. */
int gc_sysfs_write_u64(const char *path, uint64_t value);

/* 1 if path exists (any type), else 0. */
int gc_sysfs_exists(const char *path);

#endif

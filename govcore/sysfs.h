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

/* Every path is a board path under root (root + an absolute path on the board). With a root
 * other than "/" (or NULL), the file is opened only if it resolves beneath root: a symlink or
 * ".." leading out of the tree gives -EXDEV (see sysfs_path.c). */

/* Open path beneath root (flags as for open(2); O_CLOEXEC is added). Returns the descriptor or
 * -errno. A file (flags without O_PATH or O_DIRECTORY) must be a regular file, and is opened
 * without blocking and without following a symlink as its last component: anything else gives
 * -EBADMSG (GC_EBOARD) and never hangs. */
int gc_sysfs_open(const char *root, const char *path, int flags);

/* Read a whole (small) file into buf (NUL-terminated, trailing whitespace removed). */
int gc_sysfs_read(const char *root, const char *path, char *buf, size_t buf_len);

/* Write text to an existing file, as `echo text > path` does (one write(2)). */
int gc_sysfs_write(const char *root, const char *path, const char *text);

/* A decimal number and nothing else (no sign, blank or overflow): the state file's and the
 * tables' values. 0 or -EINVAL. */
int gc_parse_u64(const char *text, uint64_t *out);

/* Read an unsigned decimal integer. -EINVAL if the file does not hold one. */
int gc_sysfs_read_u64(const char *root, const char *path, uint64_t *out);

/* Write an unsigned decimal integer. */
int gc_sysfs_write_u64(const char *root, const char *path, uint64_t value);

/* 1 if path exists beneath root (any type), else 0. */
int gc_sysfs_exists(const char *root, const char *path);

/* strerror(-rc), with a sentence for -EXDEV (a path that leads out of the root). */
const char *gc_sysfs_strerror(int rc);

/* Board text made safe to show: printable ASCII kept, other bytes as \xNN, cut at len - 1
 * with "..." when truncated. */
void gc_printable(const char *text, char *out, size_t len);
/* Append "; text" (or text first) to a list of what was left or refused, within len (cut short
 * rather than overflow). */
void gc_list_append(char *list, size_t len, const char *fmt, ...);

#endif

/* fake_tree.h - lay out small fake Jetson sysfs trees for the C tests. */
#ifndef GOVCORE_TEST_FAKE_TREE_H
#define GOVCORE_TEST_FAKE_TREE_H

enum fake_layout { FAKE_JP4, FAKE_JP5, FAKE_JP6 };

/* Create a fresh temp root (returned, static storage per call slot) with the given layout.
 * levels: the available_frequencies text to write (any order). */
const char *fake_tree_make(enum fake_layout layout, const char *levels);

/* Write text to root + rel (creating folders). */
void fake_write(const char *root, const char *rel, const char *text);
void fake_write_dt(const char *root, const char *rel, const char *text); /* NUL-terminated, as the kernel */

/* Read root + rel into buf (trailing newline removed). */
void fake_read(const char *root, const char *rel, char *buf, int len);

/* The private lock folder every test binary linking this file uses ($PYDVFS_LOCK_DIR, set before
 * main; removed at exit). */
const char *fake_lock_dir(void);

/* rm -rf root. */
void fake_tree_remove(const char *root);

#define ORIN_11_LEVELS "306000000 408000000 510000000 612000000 714000000 816000000 " \
                       "918000000 1020000000 1122000000 1224000000 1300500000"
#define ORIN_13_LEVELS "114750000 216750000 318750000 420750000 522750000 624750000 726750000 " \
                       "828750000 930750000 1032750000 1134750000 1236750000 1300500000"

#endif

/* test_hardening.c - the saved state no one else can steer, board paths that may not leave the
 * root, state values checked before they are written, restore that does what it can, and board
 * text that is never echoed raw. Uses the real sysfs layer on fake trees (issue 15). */
#include "check.h"
#include "fake_tree.h"
#include "govcore.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DF "sys/devices/17000000.ga10b/devfreq/17000000.ga10b"

static char state_dir[700], state_path[GC_PATH_MAX];

static const char *setup(gc_board *b)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    mkdir(state_dir, 0700);
    CHECK(gc_board_open(b, root) == 0);
    CHECK(gc_state_path(b, state_dir, state_path, sizeof state_path) == 0);
    return root;
}

static uint64_t read_hz(const char *root, const char *name)
{
    char rel[256], buf[64];

    snprintf(rel, sizeof rel, DF "/%s", name);
    fake_read(root, rel, buf, sizeof buf);
    return strtoull(buf, NULL, 10);
}

/* The board as fake_tree_make left it: nothing written. */
static int untouched(const char *root)
{
    return read_hz(root, "min_freq") == 306000000 && read_hz(root, "max_freq") == 1300500000;
}

static void write_private(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
    }
}

/* ------------------------------------------------------------ state file (item 2) --- */

static void test_dangling_symlink_at_state_path(void)
{
    gc_board b;
    const char *root = setup(&b);
    gc_clock_state st;
    uint64_t level;
    int restored = 7;

    /* the old bug: pin took a dangling link for "already saved", restore then found nothing */
    CHECK(symlink("/nonexistent/pydvfs-planted", state_path) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == -GC_ESTATE);
    CHECK(strstr(b.err, "symbolic link") != NULL);
    CHECK(untouched(root));
    CHECK(gc_state_load(&b, state_dir, &st) == -GC_ESTATE);
    CHECK(gc_restore(&b, state_dir, &restored) == -GC_ESTATE && restored == 0);
    fake_tree_remove(root);
}

static void test_symlink_to_victim_not_followed(void)
{
    gc_board b;
    const char *root = setup(&b);
    char victim[800], buf[64];
    uint64_t level;

    snprintf(victim, sizeof victim, "%s/victim", root);
    write_private(victim, "precious\n");
    CHECK(symlink(victim, state_path) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(714), state_dir, &level) == -GC_ESTATE);
    fake_read(root, "victim", buf, sizeof buf);
    CHECK(strcmp(buf, "precious") == 0);
    CHECK(untouched(root));
    fake_tree_remove(root);
}

static void test_fifo_and_folder_at_state_path(void)
{
    gc_board b;
    const char *root = setup(&b);
    uint64_t level;

    CHECK(mkfifo(state_path, 0600) == 0); /* must not hang, must not count as saved */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), state_dir, &level) == -GC_ESTATE);
    CHECK(strstr(b.err, "regular file") != NULL);
    unlink(state_path);
    CHECK(mkdir(state_path, 0700) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), state_dir, &level) == -GC_ESTATE);
    CHECK(untouched(root));
    rmdir(state_path);
    fake_tree_remove(root);
}

static void test_state_folder_must_be_private(void)
{
    gc_board b;
    const char *root = setup(&b);
    char open_dir[800], inner[900];
    uint64_t level;
    int restored;

    CHECK(chmod(state_dir, 0770) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), state_dir, &level) == -GC_ESTATE);
    CHECK(strstr(b.err, "writable by no one else") != NULL);
    CHECK(untouched(root));
    CHECK(chmod(state_dir, 0700) == 0);
    /* a folder above that others may write (no sticky bit): they could swap ours */
    snprintf(open_dir, sizeof open_dir, "%s/open", root);
    snprintf(inner, sizeof inner, "%s/state", open_dir);
    CHECK(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0 && mkdir(inner, 0700) == 0);
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), inner, &level) == -GC_ESTATE);
    CHECK(strstr(b.err, "another user") != NULL);
    CHECK(chmod(open_dir, 01777) == 0); /* sticky, like /tmp: fine */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), inner, &level) == 0);
    CHECK(gc_restore(&b, inner, &restored) == 0 && restored == 1);
    /* a symlinked state folder is refused too */
    {
        char link[900];
        snprintf(link, sizeof link, "%s/state-link", root);
        CHECK(symlink(state_dir, link) == 0);
        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), link, &level) == -GC_ESTATE);
    }
    if (geteuid() == 0) { /* a folder owned by someone else */
        CHECK(chown(state_dir, 65534, 65534) == 0);
        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(612), state_dir, &level) == -GC_ESTATE);
        CHECK(strstr(b.err, "owned by you") != NULL);
        CHECK(chown(state_dir, 0, 0) == 0);
    }
    CHECK(untouched(root));
    fake_tree_remove(root);
}

static void test_created_0600_whatever_the_umask(void)
{
    gc_board b;
    const char *root = setup(&b);
    char fresh[800];
    struct stat st;
    uint64_t level;
    int restored;
    mode_t old = umask(0);

    snprintf(fresh, sizeof fresh, "%s/new/sub/state", root); /* created, 0700 each */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), fresh, &level) == 0);
    umask(old);
    CHECK(gc_state_path(&b, fresh, state_path, sizeof state_path) == 0);
    CHECK(stat(state_path, &st) == 0 && (st.st_mode & 07777) == 0600);
    CHECK(stat(fresh, &st) == 0 && (st.st_mode & 07777) == 0700);
    CHECK(gc_restore(&b, fresh, &restored) == 0 && restored == 1);
    CHECK(access(state_path, F_OK) != 0);
    fake_tree_remove(root);
}

static void test_stray_tmp_of_dead_process_cleaned(void)
{
    gc_board b;
    const char *root = setup(&b);
    char dead[GC_PATH_MAX + 32], live[GC_PATH_MAX + 32];
    uint64_t level;
    int restored, status;
    pid_t pid = fork();

    if (pid == 0)
        _exit(0);
    waitpid(pid, &status, 0); /* pid is now dead */
    snprintf(dead, sizeof dead, "%s.tmp.%ld", state_path, (long)pid);
    snprintf(live, sizeof live, "%s.tmp.%ld", state_path, (long)getppid());
    write_private(dead, "half a state");
    write_private(live, "another process is saving right now");
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    CHECK(access(dead, F_OK) != 0);
    CHECK(access(live, F_OK) == 0);
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    unlink(live);
    fake_tree_remove(root);
}

/* ------------------------------------------------------- state values checked (item 5) --- */

static void test_state_values_checked(void)
{
    static const char *const bad[] = {
        "max_hz=-1\nmin_hz=306000000\ngovernor=nvhost_podgov\n",
        "max_hz=1300500000\nmin_hz=12abc\ngovernor=nvhost_podgov\n",
        "max_hz=18446744073709551616\nmin_hz=306000000\ngovernor=nvhost_podgov\n",
        "max_hz=1300500000\nmin_hz=306000000\nmin_hz=408000000\ngovernor=nvhost_podgov\n",
        "max_hz=1300500000\nmin_hz=+306000000\ngovernor=nvhost_podgov\n",
        "max_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost podgov\n",
        "max_hz=1300500000\nmin_hz=306000000\n",
        "format=0\nmax_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost_podgov\n",
        "format=3\nmax_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost_podgov\nemc_hz=1\n",
        /* format 2 carries the clock domains' lines (emc.*, cpuN.*), nothing else */
        "format=2\nmax_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost_podgov\nemc_hz=1\n",
        /* and format 1 none */
        "format=1\nmax_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost_podgov\nemc.locked=0\n",
    };
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gc_board b;
        const char *root = setup(&b);
        char text[512], gov[64];
        uint64_t level;
        int restored = 7, dropped = 0;

        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(714), state_dir, &level) == 0);
        snprintf(text, sizeof text, "# govcore saved GPU clock state\n%s", bad[i]);
        write_private(state_path, text);
        CHECK(gc_restore(&b, state_dir, &restored) == -GC_ESTATE && restored == 0);
        /* the message says what to do: --force drops it */
        CHECK(strstr(b.err, "restore --force") != NULL);
        if (i == 8)
            CHECK(strstr(b.err, "format 3") != NULL);
        /* nothing written from it: still pinned at 714, governor as it was */
        CHECK_EQ_U64(read_hz(root, "min_freq"), 714000000);
        CHECK_EQ_U64(read_hz(root, "max_freq"), 714000000);
        fake_read(root, DF "/governor", gov, sizeof gov);
        CHECK(strcmp(gov, "nvhost_podgov") == 0);
        CHECK(access(state_path, F_OK) == 0); /* kept, for a human to look at */
        CHECK(gc_state_drop(&b, state_dir, &dropped) == 0 && dropped == 1);
        CHECK(access(state_path, F_OK) != 0);
        fake_tree_remove(root);
    }
}

/* A state that no longer matches the board (a governor or level gone from its tables): what the
 * board still offers is written, the rest named, and the state removed (nothing more can be
 * done from it), so it never blocks the board. */
static void test_state_no_longer_matching(void)
{
    static const struct {
        const char *text, *left;
        uint64_t min_hz, max_hz;
    } cases[] = {
        {"max_hz=1300500000\nmin_hz=306000000\ngovernor=gone_governor\n", "governor (saved \"gone_governor\"",
         306000000, 1300500000},
        {"max_hz=1300500000\nmin_hz=500000000\ngovernor=nvhost_podgov\n", "min_freq (saved 500 MHz is not a level",
         714000000, 1300500000},
        {"max_hz=306000000\nmin_hz=1300500000\ngovernor=nvhost_podgov\n", "max_freq (saved 306 MHz is not at least",
         714000000, 714000000},
        {"format=1\nmax_hz=1300500000\nmin_hz=306000000\ngovernor=nvhost_podgov\n", NULL,
         306000000, 1300500000},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gc_board b;
        const char *root = setup(&b);
        char text[512];
        uint64_t level;
        int restored = 7;

        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(714), state_dir, &level) == 0);
        snprintf(text, sizeof text, "# govcore saved GPU clock state\n%s", cases[i].text);
        write_private(state_path, text);
        if (cases[i].left) {
            CHECK(gc_restore(&b, state_dir, &restored) == -GC_ESTATE && restored == 1);
            CHECK(strstr(b.err, cases[i].left) != NULL);
            CHECK(strstr(b.err, "removed") != NULL);
        } else {
            CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
        }
        CHECK_EQ_U64(read_hz(root, "min_freq"), cases[i].min_hz);
        CHECK_EQ_U64(read_hz(root, "max_freq"), cases[i].max_hz);
        CHECK(access(state_path, F_OK) != 0); /* not left to block the board */
        CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 0);
        fake_tree_remove(root);
    }
}

/* A saved original that is itself a pin (as jetson_clocks leaves the board) is said at once. */
static void test_original_that_is_a_pin_warned(void)
{
    gc_board b;
    const char *root = setup(&b);
    uint64_t level;
    int restored;

    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    CHECK(b.warn[0] == '\0');
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    fake_write(root, DF "/min_freq", "1300500000");
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(714), state_dir, &level) == 0);
    CHECK(strstr(b.warn, "itself a pin") != NULL && strstr(b.warn, "1300.5 MHz") != NULL);
    /* a second pin saves nothing new: nothing to say */
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0 && b.warn[0] == '\0');
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    fake_tree_remove(root);
}

/* Board files are regular files: a FIFO (or socket) in the tree is refused, never waited on. */
static void test_fifo_board_files_refused(void)
{
    static const char *const names[] = {"cur_freq", "governor", "max_freq"};
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        gc_board b;
        const char *root = setup(&b);
        char path[900];
        gc_clock_state st;
        uint64_t level;

        snprintf(path, sizeof path, "%s/" DF "/%s", root, names[i]);
        CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
        alarm(20); /* a regression hangs: fail instead */
        CHECK(gc_clock_read(&b, &st) == -EBADMSG);
        CHECK(gc_sysfs_write(root, path, "510000000") == -EBADMSG);
        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) < 0);
        alarm(0);
        CHECK(strstr(gc_sysfs_strerror(-EBADMSG), "not a regular file") != NULL);
        fake_tree_remove(root);
    }
}

/* ------------------------------------------------ restore does what it can (item 4) --- */

static void test_restore_without_cur_freq(void)
{
    gc_board b;
    const char *root = setup(&b);
    char path[900];
    uint64_t level;
    int restored;

    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    snprintf(path, sizeof path, "%s/" DF "/cur_freq", root);
    CHECK(unlink(path) == 0); /* cur_freq vanished (or busy): restore does not need it */
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    CHECK(untouched(root));
    fake_tree_remove(root);
}

static void test_restore_with_broken_governor_file(void)
{
    gc_board b;
    const char *root = setup(&b);
    char gov[900], saved[900];
    uint64_t level;
    int restored = 7;

    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
    /* the governor file can be neither read nor written */
    snprintf(gov, sizeof gov, "%s/" DF "/governor", root);
    snprintf(saved, sizeof saved, "%s/governor.saved", root);
    CHECK(rename(gov, saved) == 0 && mkdir(gov, 0700) == 0);
    CHECK(gc_restore(&b, state_dir, &restored) < 0 && restored == 0);
    /* the range is back all the same, and the message says exactly what is left */
    CHECK(untouched(root));
    CHECK(strstr(b.err, "still not as saved: governor") != NULL);
    CHECK(strstr(b.err, "min_freq") == NULL && strstr(b.err, "max_freq (") == NULL);
    CHECK(strstr(b.err, "kept") != NULL);
    CHECK(access(state_path, F_OK) == 0);
    /* the fault goes away: the retry finishes */
    CHECK(rmdir(gov) == 0 && rename(saved, gov) == 0);
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    CHECK(access(state_path, F_OK) != 0);
    fake_tree_remove(root);
}

static void test_empty_governor_file(void)
{
    gc_board b;
    const char *root = setup(&b);
    uint64_t level;
    int restored;

    fake_write(root, DF "/governor", "");
    CHECK(gc_pin_hz(&b, gc_mhz_to_hz(918), state_dir, &level) == 0);
    /* saved as "unknown", not later refused as damaged */
    CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
    CHECK(untouched(root));
    fake_tree_remove(root);
}

/* ---------------------------------------------------- paths stay in the root (item 6) --- */

static void test_board_file_leading_out_of_root(void)
{
    gc_board b;
    const char *root = setup(&b);
    const char *outside = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char target[800], link[900], buf[64];
    uint64_t level;
    int relative;

    for (relative = 0; relative < 2; relative++) {
        snprintf(target, sizeof target, "%s/victim_max", outside);
        write_private(target, "1300500000\n");
        snprintf(link, sizeof link, "%s/" DF "/max_freq", root);
        unlink(link);
        if (relative) /* ../ enough times to climb out of the tree */
            snprintf(target, sizeof target, "../../../../../../../../../../../..%s/victim_max",
                     outside);
        CHECK(symlink(target, link) == 0);
        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) < 0);
        /* a symlink as the last component is refused before it is followed (board files are
         * regular files); one that leads out would be refused as leading out */
        CHECK(strstr(b.err, "not a regular file") != NULL ||
              strstr(b.err, "outside the sysfs root") != NULL);
        fake_read(outside, "victim_max", buf, sizeof buf);
        CHECK(strcmp(buf, "1300500000") == 0);
    }
    /* a devfreq entry that points out of the tree is not the board's GPU */
    {
        const char *r2 = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
        char cls[900], dst[900];

        snprintf(cls, sizeof cls, "%s/sys/class/devfreq/17000000.ga10b", r2);
        snprintf(dst, sizeof dst, "%s/" DF, outside);
        CHECK(unlink(cls) == 0 && symlink(dst, cls) == 0);
        CHECK(gc_board_open(&b, r2) == -ENODEV);
        fake_tree_remove(r2);
    }
    CHECK(gc_sysfs_open(root, "/etc/passwd", O_RDONLY) == -EXDEV);
    fake_tree_remove(outside);
    fake_tree_remove(root);
}

/* Without openat2 (old kernel, or seccomp says no): the descriptor check must hold, and must
 * not truncate a file outside before it refuses. A child denies itself openat2 with seccomp. */
static void test_fallback_without_openat2(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 437 /* openat2 */, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
    int status = -1;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        gc_board b;
        const char *root, *outside;
        char target[800], link[900], buf[64];
        uint64_t level;
        int restored, before = checks_failed;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
            _exit(77);
        root = setup(&b);
        /* inside the root: everything works as before */
        CHECK(gc_pin_hz(&b, gc_mhz_to_hz(510), state_dir, &level) == 0);
        CHECK(gc_restore(&b, state_dir, &restored) == 0 && restored == 1);
        outside = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
        snprintf(target, sizeof target, "%s/victim", outside);
        write_private(target, "1300500000\n");
        snprintf(link, sizeof link, "%s/" DF "/max_freq", root);
        CHECK(unlink(link) == 0 && symlink(target, link) == 0);
        CHECK(gc_sysfs_write(root, link, "510000000") == -EBADMSG); /* a symlink: refused */
        fake_read(outside, "victim", buf, sizeof buf);
        CHECK(strcmp(buf, "1300500000") == 0); /* not even truncated */
        fake_tree_remove(outside);
        fake_tree_remove(root);
        _exit(checks_failed != before);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        printf("  (seccomp unavailable: fallback not exercised)\n");
}

/* ---------------------------------------------- bad board text refused, not echoed raw --- */

static void test_negative_level_and_binary_text(void)
{
    const char *root = fake_tree_make(FAKE_JP5, "306000000 -510000000 714000000");
    gc_board b;
    size_t i;

    CHECK(gc_board_open(&b, root) == -GC_EBOARD);
    fake_tree_remove(root);
    root = fake_tree_make(FAKE_JP5, "306000000 99999999999999999");
    CHECK(gc_board_open(&b, root) == -GC_EBOARD);
    fake_tree_remove(root);
    root = fake_tree_make(FAKE_JP5, "\x01\x02\xff\xfe\x1b[31mred\x7f 306000000");
    CHECK(gc_board_open(&b, root) == -GC_EBOARD);
    for (i = 0; b.err[i]; i++)
        CHECK(b.err[i] >= 0x20 && b.err[i] < 0x7f);
    CHECK(strstr(b.err, "\\x1b") != NULL);
    fake_tree_remove(root);
}

static void test_printable(void)
{
    char out[16];

    gc_printable("abc", out, sizeof out);
    CHECK(strcmp(out, "abc") == 0);
    gc_printable("a\nb", out, sizeof out);
    CHECK(strcmp(out, "a\\x0ab") == 0);
    gc_printable("0123456789abcdefghij", out, sizeof out);
    CHECK(strlen(out) == sizeof out - 1 && strcmp(out + strlen(out) - 3, "...") == 0);
    gc_printable("\xff\xff\xff\xff\xff", out, sizeof out);
    CHECK(strlen(out) < sizeof out);
}

int main(void)
{
    RUN(test_dangling_symlink_at_state_path);
    RUN(test_symlink_to_victim_not_followed);
    RUN(test_fifo_and_folder_at_state_path);
    RUN(test_state_folder_must_be_private);
    RUN(test_created_0600_whatever_the_umask);
    RUN(test_stray_tmp_of_dead_process_cleaned);
    RUN(test_state_values_checked);
    RUN(test_state_no_longer_matching);
    RUN(test_original_that_is_a_pin_warned);
    RUN(test_fifo_board_files_refused);
    RUN(test_restore_without_cur_freq);
    RUN(test_restore_with_broken_governor_file);
    RUN(test_empty_governor_file);
    RUN(test_board_file_leading_out_of_root);
    RUN(test_fallback_without_openat2);
    RUN(test_negative_level_and_binary_text);
    RUN(test_printable);
    return DONE("test_hardening");
}

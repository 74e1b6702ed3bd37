/* test_protocol.c - govcore serve's request parser (protocol.c) on chosen inputs, and the board
 * lock (lock.c) with real processes. Built with AddressSanitizer + UBSan by `make test`. */
#include "check.h"
#include "fake_tree.h"
#include "lock.h"
#include "protocol.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *s, gc_request *rq)
{
    char err[GC_ERR_MAX];

    return gc_request_parse(s, strlen(s), rq, err, sizeof err);
}

static void test_accepted(void)
{
    gc_request rq;

    CHECK(parse("version", &rq) == 0 && rq.kind == GC_REQ_VERSION);
    CHECK(parse("status", &rq) == 0 && rq.kind == GC_REQ_STATUS);
    CHECK(parse("restore", &rq) == 0 && rq.kind == GC_REQ_RESTORE);
    CHECK(parse("pin 1300.5", &rq) == 0 && rq.kind == GC_REQ_PIN && rq.mhz == 1300.5);
    CHECK(parse("begin epoch-1.a:b_c", &rq) == 0 && rq.kind == GC_REQ_BEGIN &&
          strcmp(rq.name, "epoch-1.a:b_c") == 0);
    CHECK(parse("end x", &rq) == 0 && rq.kind == GC_REQ_END);
    CHECK(parse("apply model=bert layers=12 hidden=768 seq_len=13.3", &rq) == 0 &&
          rq.kind == GC_REQ_APPLY && rq.policy == GC_POLICY_MLG && rq.workload.is_decoder == 0 &&
          rq.workload.seq_len == 13.3 && rq.workload.gpu_util_pct < 0 && !rq.tree[0] && !rq.dry_run);
    CHECK(parse("apply policy=maxn seq_len=1 hidden=2 layers=3 model=pythia util_pct=40 tree=t1 "
                "dry_run=1", &rq) == 0 && rq.policy == GC_POLICY_MAXN && rq.workload.is_decoder == 1 &&
          rq.workload.gpu_util_pct == 40 && strcmp(rq.tree, "t1") == 0 && rq.dry_run == 1);
}

static void test_refused(void)
{
    static const char *const bad[] = {
        "", " status", "status ", "status  ", "STATUS", "status x", "pin", "pin 714 1",
        "pin  714", "pin -714", "pin +714", "pin 7e2", "pin 0x2ca", "pin 714.", "pin .5", "pin 1.2.3",
        "pin 0", "pin 0.0", "pin 1234567890123", "pin nan", "pin inf", "begin", "begin ..",
        "begin .hidden", "begin a/b", "begin a b", "end", "restore now", "apply",
        "apply model=bert", "apply model=bert layers=12 hidden=768", "apply model=bogus layers=1 "
        "hidden=1 seq_len=1", "apply model=bert layers=1 layers=2 hidden=1 seq_len=1",
        "apply model=bert layers=1 hidden=1 seq_len=1 policy=best", "apply model=bert layers=1 "
        "hidden=1 seq_len=1 tree=../etc", "apply model=bert layers=1 hidden=1 seq_len=1 dry_run=2",
        "apply model=bert layers=1 hidden=1 seq_len=1 x=1", "apply model=bert layers= hidden=1 seq_len=1",
        "apply model=bert layers hidden=1 seq_len=1", "pin 714\r", "pin 714\t", "status\n",
        "unknown", NULL};
    gc_request rq;
    char err[GC_ERR_MAX], big[GC_REQ_MAX + 2];
    int i;

    for (i = 0; bad[i]; i++) {
        int rc = gc_request_parse(bad[i], strlen(bad[i]), &rq, err, sizeof err);
        CHECK(rc == -EINVAL && err[0]);
        if (rc != -EINVAL)
            fprintf(stderr, "  accepted: '%s'\n", bad[i]);
    }
    /* bytes after a NUL, and lengths the caller gives */
    CHECK(gc_request_parse("status\0x", 8, &rq, err, sizeof err) == -EINVAL);
    memset(big, 'a', sizeof big);
    memcpy(big, "begin ", 6);
    CHECK(gc_request_parse(big, GC_REQ_MAX + 1, &rq, err, sizeof err) == -EINVAL);
    CHECK(strstr(err, "longer than") != NULL);
    /* the reason never echoes the input */
    CHECK(gc_request_parse("pin \x01\x02", 6, &rq, err, sizeof err) == -EINVAL && !strchr(err, 1));
}

static void test_lock_one_owner(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char state_dir[GC_PATH_MAX], target[GC_PATH_MAX];
    gc_board b;
    gc_lock a, c;
    pid_t holder, child;
    int status, pipefd[2];
    char ok;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    gc_lock_init(&a);
    gc_lock_init(&c);
    CHECK(gc_lock_holder(&b, state_dir, &holder) == 0 && holder == 0);
    CHECK(gc_lock_acquire(&b, state_dir, 0, &a) == 0);
    CHECK(gc_lock_acquire(&b, state_dir, 0, &a) == -EEXIST);
    CHECK(gc_lock_holder(&b, state_dir, &holder) == 0 && holder == getpid());
    /* a second open file is a second owner, even in this process: refused, naming the pid */
    CHECK(gc_lock_acquire(&b, state_dir, 30, &c) == -EBUSY);
    CHECK(strstr(b.err, "governed by another process (pid ") != NULL);
    gc_lock_release(&a);
    gc_lock_release(&a);
    CHECK(gc_lock_holder(&b, state_dir, &holder) == 0 && holder == 0);

    /* a holder killed with SIGKILL: its lock is taken over */
    CHECK(pipe(pipefd) == 0);
    child = fork();
    if (child == 0) {
        gc_lock l;
        gc_lock_init(&l);
        if (gc_lock_acquire(&b, state_dir, 0, &l) == 0 && write(pipefd[1], "y", 1) == 1)
            pause();
        _exit(1);
    }
    CHECK(read(pipefd[0], &ok, 1) == 1);
    CHECK(gc_lock_holder(&b, state_dir, &holder) == 0 && holder == child);
    CHECK(gc_lock_acquire(&b, state_dir, 0, &a) == -EBUSY);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    CHECK(gc_lock_acquire(&b, state_dir, 0, &a) == 0);
    gc_lock_release(&a);
    close(pipefd[0]);
    close(pipefd[1]);

    /* never followed through a symlink */
    CHECK(gc_lock_path(&b, state_dir, target, sizeof target) == 0);
    CHECK(unlink(target) == 0);
    CHECK(symlink("/etc/passwd", target) == 0);
    CHECK(gc_lock_acquire(&b, state_dir, 0, &a) < 0 && a.fd < 0);
    fake_tree_remove(root);
}

int main(void)
{
    RUN(test_accepted);
    RUN(test_refused);
    RUN(test_lock_one_owner);
    return DONE("test_protocol");
}

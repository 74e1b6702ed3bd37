/* test_protocol.c - govcore serve's request parser (protocol.c) on chosen inputs, and the board
 * lock (lock.c) with real processes. Built with AddressSanitizer + UBSan by `make test`. */
#include "check.h"
#include "fake_tree.h"
#include "lock.h"
#include "peer.h"
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
    CHECK(parse("pin 714.000001", &rq) == 0 && rq.hz == 714000001); /* exact: gc_parse_mhz */
    CHECK(parse("pin 714.0000005", &rq) == -EINVAL); /* finer than a Hz, as in `govcore pin` */
    CHECK(rq.emc_hz == 0 && rq.cpu_hz == 0);
    CHECK(parse("pin 612 emc_mhz=2133 cpu_mhz=1036.8", &rq) == 0 && rq.kind == GC_REQ_PIN &&
          rq.hz == 612000000ULL && rq.emc_hz == 2133000000ULL && rq.cpu_hz == 1036800000ULL);
    CHECK(parse("pin 612 cpu_mhz=729.6", &rq) == 0 && rq.emc_hz == 0 && rq.cpu_hz == 729600000ULL);
    CHECK(parse("pin 1300.5", &rq) == 0 && !rq.nearest);
    CHECK(parse("pin 99999 nearest=1", &rq) == 0 && rq.nearest && rq.hz == 99999000000ULL);
    CHECK(parse("pin 714 nearest=0", &rq) == -EINVAL && parse("pin 714 nearest", &rq) == -EINVAL);
    CHECK(parse("pin nearest=1 714", &rq) == -EINVAL && parse("pin 714 nearest=1 x", &rq) == -EINVAL);
    CHECK(parse("begin epoch-1.a:b_c", &rq) == 0 && rq.kind == GC_REQ_BEGIN &&
          strcmp(rq.name, "epoch-1.a:b_c") == 0);
    CHECK(parse("end x", &rq) == 0 && rq.kind == GC_REQ_END);
    CHECK(parse("apply model=bert layers=12 hidden=768 seq_len=13.3", &rq) == 0 &&
          rq.kind == GC_REQ_APPLY && rq.policy == GC_POLICY_MLG && rq.workload.is_decoder == 0 &&
          rq.workload.seq_len == 13.3 && rq.workload.gpu_util_pct < 0 && !rq.tree[0] && !rq.dry_run);
    CHECK(parse("apply policy=maxn seq_len=1 hidden=2 layers=3 model=pythia util_pct=40 tree=t1 "
                "dry_run=1", &rq) == 0 && rq.policy == GC_POLICY_MAXN && rq.workload.is_decoder == 1 &&
          rq.workload.gpu_util_pct == 40 && strcmp(rq.tree, "t1") == 0 && rq.dry_run == 1);
    /* without a goal: minimum energy, no bound; with one: the objective and the bound (issue 22) */
    CHECK(parse("apply model=bert layers=12 hidden=768 seq_len=64", &rq) == 0 &&
          rq.goal.objective == GC_OBJECTIVE_ENERGY && rq.goal.max_slowdown_pct < 0);
    CHECK(parse("apply model=bert layers=12 hidden=768 seq_len=64 policy=roofline tree=t "
                "objective=ed2p max_slowdown_pct=7.5", &rq) == 0 && rq.policy == GC_POLICY_ROOFLINE &&
          rq.goal.objective == GC_OBJECTIVE_ED2P && rq.goal.max_slowdown_pct == 7.5);
    CHECK(parse("apply model=bert layers=1 hidden=1 seq_len=1 max_slowdown_pct=0", &rq) == 0 &&
          rq.goal.max_slowdown_pct == 0);
    /* how it trains: every key at once still fits a request */
    CHECK(parse("apply model=qwen2.5-0.5b layers=24 hidden=896 seq_len=200 util_pct=90 peft=qlora rank=16 "
                "trainable_params=1081344 weight_bits=4 precision=bf16 batch_size=8 tokens_per_step=1600.5 "
                "policy=mlg tree=t dry_run=1 objective=energy max_slowdown_pct=5", &rq) == 0 &&
          rq.workload.is_decoder == 1 && rq.workload.peft == GC_PEFT_QLORA && rq.workload.rank == 16 &&
          rq.workload.trainable_params == 1081344 && rq.workload.weight_bits == 4 &&
          rq.workload.precision == GC_PRECISION_BF16 && rq.workload.batch_size == 8 &&
          rq.workload.tokens_per_step == 1600.5 && strcmp(rq.model, "qwen2.5-0.5b") == 0);
    CHECK(parse("apply model=bert layers=1 hidden=1 seq_len=1", &rq) == 0 && rq.workload.peft == GC_PEFT_NONE &&
          rq.workload.precision == GC_PRECISION_FP32 && rq.workload.rank == 0 && rq.workload.weight_bits == 0);
    /* the measure whose built-in policy decides: the default (module) unless energy= says */
    CHECK(parse("apply model=bert layers=1 hidden=1 seq_len=1", &rq) == 0 &&
          strcmp(rq.measure, gc_energy_measures[0]) == 0);
    CHECK(parse("apply model=bert layers=1 hidden=1 seq_len=1 energy=cpu-gpu", &rq) == 0 &&
          strcmp(rq.measure, "cpu-gpu") == 0);
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
        "apply model=bert layers hidden=1 seq_len=1", "apply model=bert layers=1 hidden=1 "
        "seq_len=1 objective=time", "apply model=bert layers=1 hidden=1 seq_len=1 objective=edp "
        "objective=edp", "apply model=bert layers=1 hidden=1 seq_len=1 max_slowdown_pct=-5",
        "apply model=bert layers=1 hidden=1 seq_len=1 max_slowdown_pct=1e2",
        "apply model=bert layers=1 hidden=1 seq_len=1 max_slowdown_pct=1000.5", "pin 714\r", "pin 714\t", "status\n",
        "pin 612 emc_mhz=2133 emc_mhz=2133", "pin 612 gpu_mhz=1", "pin 612 emc_mhz=", "pin 612 emc_mhz=0",
        "pin 612 emc_mhz=1e3", "pin 612 cpu_mhz=-1", "pin 612 emc_mhz=1 cpu_mhz=1 x=1", "pin 612 emc_mhz",
        "pin emc_mhz=2133",
        "apply model=llama layers=2 hidden=64 seq_len=9 peft=lorx",
        "apply model=llama layers=2 hidden=64 seq_len=9 rank=16",
        "apply model=llama layers=2 hidden=64 seq_len=9 peft=lora rank=1.5",
        "apply model=llama layers=2 hidden=64 seq_len=9 peft=lora rank=1e2",
        "apply model=llama layers=2 hidden=64 seq_len=9 peft=lora peft=lora",
        "apply model=llama layers=2 hidden=64 seq_len=9 weight_bits=4",
        "apply model=llama layers=2 hidden=64 seq_len=9 precision=fp8",
        "apply model=llama layers=2 hidden=64 seq_len=9 tokens_per_step=0",
        "apply model=llama layers=2 hidden=64 seq_len=9 batch_size=",
        "apply model=bert layers=1 hidden=1 seq_len=1 energy=watts",
        "apply model=bert layers=1 hidden=1 seq_len=1 energy=module energy=module",
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

/* The apply line a client sends (gc_request_format_apply): the keys given, numbers as typed. */
static void test_format_apply(void)
{
    static const char *const lines[] = {
        "apply model=bert layers=12 hidden=768 seq_len=13.3 policy=mlg energy=module",
        "apply model=qwen2.5-0.5b layers=24 hidden=896 seq_len=200.125 util_pct=90 peft=qlora rank=16 "
        "weight_bits=4 precision=bf16 batch_size=8 tokens_per_step=1600 policy=roofline objective=edp "
        "max_slowdown_pct=2.5 energy=cpu-gpu tree=t1 dry_run=1",
    };
    char line[GC_REQ_MAX + 1], err[GC_ERR_MAX];
    gc_request rq;
    size_t i;

    for (i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        CHECK(parse(lines[i], &rq) == 0);
        CHECK(gc_request_format_apply(&rq, line, sizeof line, err, sizeof err) == 0);
        CHECK(strcmp(line, lines[i]) == 0);
    }
    rq.measure = NULL; /* not given: the daemon's default */
    CHECK(gc_request_format_apply(&rq, line, sizeof line, err, sizeof err) == 0 && !strstr(line, "energy="));
    rq.workload.seq_len = 10.0 / 3.0; /* no plain decimal of 15 digits is it: the nearest */
    CHECK(gc_request_format_apply(&rq, line, sizeof line, err, sizeof err) == 0 &&
          strstr(line, " seq_len=3.33333333333333 "));
    rq.workload.layers = 5000; /* out of bounds: what the daemon would refuse is not sent */
    CHECK(gc_request_format_apply(&rq, line, sizeof line, err, sizeof err) == -EINVAL &&
          strstr(err, "layers"));
}

static void test_lock_one_owner(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char lock_dir[GC_PATH_MAX], target[GC_PATH_MAX], other[GC_PATH_MAX], via_link[GC_PATH_MAX];
    gc_board b, b2;
    gc_lock a, c;
    pid_t holder, child;
    struct stat st;
    int status, pipefd[2];
    char ok;

    snprintf(lock_dir, sizeof lock_dir, "%s/locks", root);
    CHECK(setenv("PYDVFS_LOCK_DIR", lock_dir, 1) == 0);
    CHECK(gc_board_open(&b, root) == 0);
    gc_lock_init(&a);
    gc_lock_init(&c);
    CHECK(gc_lock_holder(&b, &holder) == 0 && holder == 0);
    CHECK(gc_lock_acquire(&b, 0, &a) == 0);
    CHECK(gc_lock_acquire(&b, 0, &a) == -EEXIST);
    CHECK(gc_lock_holder(&b, &holder) == 0 && holder == getpid());
    /* a second open file is a second owner, even in this process: refused, naming the pid */
    CHECK(gc_lock_acquire(&b, 30, &c) == -EBUSY);
    CHECK(strstr(b.err, "governed by another process (pid ") != NULL);
    /* the key is the GPU: the same board reached through a symlinked root meets the same lock */
    snprintf(via_link, sizeof via_link, "%s-link", root);
    CHECK(symlink(root, via_link) == 0);
    CHECK(gc_board_open(&b2, via_link) == 0);
    CHECK(gc_lock_path(&b, target, sizeof target) == 0);
    CHECK(gc_lock_path(&b2, other, sizeof other) == 0 && strcmp(target, other) == 0);
    CHECK(gc_lock_acquire(&b2, 0, &c) == -EBUSY);
    unlink(via_link);
    gc_lock_release(&a);
    gc_lock_release(&a);
    CHECK(gc_lock_holder(&b, &holder) == 0 && holder == 0);
    /* the file stays, its fixed-size record blanked: taking it again needs no new disk space */
    CHECK(stat(target, &st) == 0 && st.st_size == 16);

    /* a holder killed with SIGKILL: its lock is taken over */
    CHECK(pipe(pipefd) == 0);
    child = fork();
    if (child == 0) {
        gc_lock l;
        gc_lock_init(&l);
        if (gc_lock_acquire(&b, 0, &l) == 0 && write(pipefd[1], "y", 1) == 1)
            pause();
        _exit(1);
    }
    CHECK(read(pipefd[0], &ok, 1) == 1);
    CHECK(gc_lock_holder(&b, &holder) == 0 && holder == child);
    CHECK(gc_lock_acquire(&b, 0, &a) == -EBUSY);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    CHECK(gc_lock_acquire(&b, 0, &a) == 0);
    gc_lock_release(&a);
    close(pipefd[0]);
    close(pipefd[1]);

    /* a relative lock folder is refused */
    CHECK(setenv("PYDVFS_LOCK_DIR", "locks", 1) == 0);
    CHECK(gc_lock_acquire(&b, 0, &a) == -EINVAL && strstr(b.err, "absolute") != NULL);
    CHECK(setenv("PYDVFS_LOCK_DIR", lock_dir, 1) == 0);

    /* never followed through a symlink */
    CHECK(unlink(target) == 0);
    CHECK(symlink("/etc/passwd", target) == 0);
    CHECK(gc_lock_acquire(&b, 0, &a) < 0 && a.fd < 0);
    setenv("PYDVFS_LOCK_DIR", fake_lock_dir(), 1);
    fake_tree_remove(root);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_peer_files(void)
{
    char dir[] = "/tmp/gc-peer-XXXXXX", pw[64], gr[64];
    gid_t gid = 0;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(pw, sizeof pw, "%s/passwd", dir);
    snprintf(gr, sizeof gr, "%s/group", dir);
    write_file(pw, "root:x:0:0:root:/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/sh\n"
                   "bob:x:1001:1001::/home/bob:/bin/sh\ncid:x:1002:1500::/home/cid:/bin/sh\n"
                   "broken line\ndan:x:12x:1:::\n");
    write_file(gr, "root:x:0:\nann:x:1000:\nbob:x:1001:\npydvfs:x:1500:bob,eve\nother:x:1600:ann\n");
    CHECK(gc_group_gid_files(gr, "pydvfs", &gid) == 0 && gid == 1500);
    CHECK(gc_group_gid_files(gr, "nope", &gid) == -ENOENT);
    CHECK(gc_peer_allowed_files(pw, gr, 0, 0, 1500) == 1);         /* root */
    CHECK(gc_peer_allowed_files(pw, gr, 1001, 1001, 1500) == 1);   /* supplementary member */
    CHECK(gc_peer_allowed_files(pw, gr, 1002, 1002, 1500) == 1);   /* passwd (primary) group */
    CHECK(gc_peer_allowed_files(pw, gr, 1000, 1500, 1500) == 1);   /* running with the group */
    CHECK(gc_peer_allowed_files(pw, gr, 1000, 1000, 1500) == 0);   /* in another group only */
    CHECK(gc_peer_allowed_files(pw, gr, 4242, 4242, 1500) == 0);   /* no such user */
    CHECK(gc_peer_allowed_files(pw, "/nonexistent", 1000, 1000, 1500) == 0);
    unlink(pw);
    unlink(gr);
    rmdir(dir);
}

/* On this machine's own files, the NSS answer (the usual build) and the files answer (the
 * static release) agree for every user and every group. */
static void test_peer_nss_matches_files(void)
{
    FILE *pw = fopen(GC_PASSWD_FILE, "r"), *gr;
    char pl[1024], gl[1024];
    unsigned long uid, pgid, gid;
    int disagree = 0, pairs = 0;

    if (!pw)
        return;
    while (fgets(pl, sizeof pl, pw) && pairs < 20000) {
        if (sscanf(pl, "%*[^:]:%*[^:]:%lu:%lu", &uid, &pgid) != 2)
            continue;
        if (!(gr = fopen(GC_GROUP_FILE, "r")))
            break;
        while (fgets(gl, sizeof gl, gr)) {
            if (sscanf(gl, "%*[^:]:%*[^:]:%lu", &gid) != 1)
                continue;
            pairs++;
            disagree += gc_peer_allowed((uid_t)uid, (gid_t)pgid, (gid_t)gid) !=
                        gc_peer_allowed_files(GC_PASSWD_FILE, GC_GROUP_FILE, (uid_t)uid,
                                              (gid_t)pgid, (gid_t)gid);
        }
        fclose(gr);
    }
    fclose(pw);
    CHECK(pairs > 0);
    CHECK_I64(disagree, 0);
}

int main(void)
{
    RUN(test_accepted);
    RUN(test_refused);
    RUN(test_format_apply);
    RUN(test_lock_one_owner);
    RUN(test_peer_files);
    RUN(test_peer_nss_matches_files);
    return DONE("test_protocol");
}

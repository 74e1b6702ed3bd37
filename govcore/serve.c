/* serve.c - `govcore serve` (see serve.h; the requests are parsed in protocol.c). */
#include "serve.h"
#include "govcore.h"
#include "lock.h"
#include "peer.h"
#include "policy.h"
#include "protocol.h"
#include "report.h"
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LISTEN_BACKLOG 16

struct window {
    char name[GC_WINDOW_NAME_MAX];
    gc_snapshot begin;
};

struct client {
    int fd;                         /* -1: free slot */
    pid_t pid;                      /* the peer, from SO_PEERCRED */
    uid_t uid;
    gid_t gid;
    char in[GC_REQ_MAX + 1];        /* a request and its newline */
    size_t in_len;
    int64_t partial_since_ms;       /* when the unfinished line began (0: none) */
    int64_t active_ms;              /* when it last sent or received a byte (idle timeout) */
    char *out;                      /* unsent reply bytes (heap, at most GC_SERVE_OUT_MAX) */
    size_t out_len;
    int closing;                    /* close once out is sent */
    int n_windows;
    struct window windows[GC_SERVE_MAX_WINDOWS];
};

struct server {
    const gc_serve_config *cfg;
    const char *socket_path;
    gc_board board;
    gid_t group_gid;
    int listen_fd;
    int bound;                      /* the socket file is ours (unlinked at the end) */
    int instance_fd;                /* the one-instance lock on SOCKET.lock */
    char instance_path[GC_PATH_MAX];
    struct client clients[GC_SERVE_MAX_CLIENTS];
    int owner;                      /* client holding the pin, -1 if none */
    gc_lock lock;                   /* held while owner >= 0 */
    gc_sampler *sampler;            /* running while a window is open */
    int open_windows;
    int64_t idle_ms;                /* close a connection idle this long (0: never) */
};

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    unsigned char c = (unsigned char)sig;
    int saved = errno;

    if (write(signal_pipe[1], &c, 1) < 0) {
        /* the pipe is full: a stop is already pending */
    }
    errno = saved;
}

static void logmsg(const char *fmt, ...)
{
    va_list ap;

    fputs("govcore serve: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------- replies */

/* Queue text for c, growing its reply buffer up to GC_SERVE_OUT_MAX (a reply is never cut):
 * 0, or -E2BIG / -ENOMEM with nothing queued. */
static int queue(struct client *c, const char *text, size_t len)
{
    char *p;

    if (len > GC_SERVE_OUT_MAX || c->out_len + len > GC_SERVE_OUT_MAX)
        return -E2BIG;
    if (!(p = realloc(c->out, c->out_len + len)))
        return -ENOMEM;
    c->out = p;
    memcpy(c->out + c->out_len, text, len);
    c->out_len += len;
    return 0;
}

/* {"error": msg, "errno": N} queued for c, without a log line; the connection is closed only
 * if even that cannot be queued. */
static void queue_error(struct client *c, int rc, const char *msg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f) {
        fputs("{\"error\": ", f);
        gc_json_str(f, msg);
        fprintf(f, ", \"errno\": %d}\n", rc < 0 ? -rc : rc);
    }
    if (!f || fclose(f) != 0 || !buf || queue(c, buf, len) < 0) {
        logmsg("pid %ld uid %u: out of memory for an error reply: closing the connection",
               (long)c->pid, (unsigned)c->uid);
        c->closing = 1;
    }
    free(buf);
}

/* A reply that could not be queued (larger than GC_SERVE_OUT_MAX, or no memory): the client
 * gets an error reply instead and a log line says so; the connection (and a pin it holds) stays. */
static void reply_failed(struct client *c, int rc, size_t len)
{
    char msg[GC_ERR_MAX];

    if (rc == -E2BIG)
        snprintf(msg, sizeof msg, "the reply (%zu bytes) is larger than the daemon's limit of %d "
                                  "bytes: not sent", len, GC_SERVE_OUT_MAX);
    else
        snprintf(msg, sizeof msg, "the reply (%zu bytes) could not be built: %s", len,
                 strerror(-rc));
    logmsg("pid %ld uid %u: %s; an error reply was sent instead, the connection stays",
           (long)c->pid, (unsigned)c->uid, msg);
    queue_error(c, rc, msg);
}

/* A reply built by writer into memory, then queued as one line. */
static FILE *reply_begin(char **buf, size_t *len)
{
    return open_memstream(buf, len);
}

static void reply_end(struct client *c, FILE *f, char **buf, size_t *len)
{
    int rc;

    fputc('\n', f);
    rc = fclose(f) != 0 || !*buf ? -ENOMEM : queue(c, *buf, *len);
    free(*buf);
    *buf = NULL;
    if (rc < 0)
        reply_failed(c, rc, *len);
}

static void reply_error(struct client *c, int rc, const char *fmt, ...)
{
    char msg[GC_ERR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    logmsg("pid %ld uid %u: refused: %s", (long)c->pid, (unsigned)c->uid, msg);
    queue_error(c, rc, msg);
}

/* ------------------------------------------------------------------------- the board */

/* Make c the owner (taking the board's lock) unless another client or process governs. */
static int take_ownership(struct server *sv, int ci)
{
    int rc;

    if (sv->owner == ci)
        return 0;
    if (sv->owner >= 0) {
        snprintf(sv->board.err, sizeof sv->board.err,
                 "the GPU is pinned by another client (pid %ld); it is restored when that client "
                 "restores or disconnects", (long)sv->clients[sv->owner].pid);
        return -EBUSY;
    }
    /* a saved state no client of ours holds: a pin made outside the daemon (root's `govcore
     * pin`, `pydvfs pin` as root) left standing on purpose; a member may neither undo it
     * (restore) nor pin over it (its disconnect would restore it): root's to restore */
    if (sv->clients[ci].uid != 0) {
        gc_clock_state st;

        rc = gc_state_load(&sv->board, sv->cfg->state_dir, &st);
        if (rc == -GC_ESTATE) /* damaged: its message says how root clears it */
            return rc;
        if (rc == 0) {
            snprintf(sv->board.err, sizeof sv->board.err,
                     "the GPU was pinned outside the daemon (a saved state of the board that no "
                     "client of this daemon holds: root's `govcore pin` or `pydvfs pin`); only "
                     "root may undo it (`sudo govcore restore`); nothing was changed");
            return -EPERM;
        }
    }
    if ((rc = gc_lock_acquire(&sv->board, 0, &sv->lock)) < 0)
        return rc;
    sv->owner = ci;
    return 0;
}

static void drop_ownership(struct server *sv)
{
    gc_lock_release(&sv->lock);
    sv->owner = -1;
}

/* Put the saved state back (the owner's pin, or a state an earlier run left). */
static int restore_board(struct server *sv, int *restored)
{
    return gc_restore(&sv->board, sv->cfg->state_dir, restored);
}

static void handle_pin(struct server *sv, int ci, const gc_request *rq)
{
    struct client *c = &sv->clients[ci];
    uint64_t want_hz = rq->hz, level_hz, levels[GC_MAX_DOMAINS];
    char state_path[GC_PATH_MAX], *buf = NULL;
    static gc_domains ds; /* the daemon serves one request at a time */
    size_t len = 0;
    int rc, was_owner = sv->owner == ci, joint = rq->emc_hz || rq->cpu_hz;
    FILE *f;

    /* the rules of a direct pin: snapped to the nearest level (in gc_pin_hz, the one snap),
     * refused far outside the table unless the client asked for the nearest level */
    if (!rq->nearest && (rc = gc_check_near_table(&sv->board, want_hz)) < 0)
        return reply_error(c, rc, "%s", sv->board.err);
    /* the EMC's rates: the kernel's list (available_rates), else the board table's */
    if (joint && (rc = gc_domains_open_board(&ds, &sv->board)) < 0)
        return reply_error(c, rc, "cannot read the clock domains");
    if ((rc = take_ownership(sv, ci)) < 0)
        return reply_error(c, rc, "%s", sv->board.err);
    if (joint)
        rc = gc_pin_mode(&sv->board, &ds, want_hz, rq->emc_hz, rq->cpu_hz, sv->cfg->state_dir,
                         &level_hz, levels);
    else
        rc = gc_pin_hz(&sv->board, want_hz, sv->cfg->state_dir, &level_hz);
    if (rc < 0) {
        if (!was_owner)
            drop_ownership(sv); /* gc_pin_hz / gc_pin_mode put the original state back */
        return reply_error(c, rc, "%s", sv->board.err);
    }
    if (joint)
        logmsg("pid %ld uid %u: pinned %.6g MHz, emc %.6g MHz, cpu %.6g MHz", (long)c->pid,
               (unsigned)c->uid, gc_hz_to_mhz(level_hz), gc_hz_to_mhz(levels[0]),
               ds.n > 1 ? gc_hz_to_mhz(levels[1]) : 0.0);
    else
        logmsg("pid %ld uid %u: pinned %.6g MHz", (long)c->pid, (unsigned)c->uid, gc_hz_to_mhz(level_hz));
    gc_state_path(&sv->board, sv->cfg->state_dir, state_path, sizeof state_path);
    if (!(f = reply_begin(&buf, &len)))
        return reply_error(c, -ENOMEM, "out of memory");
    gc_json_pin(f, &sv->board, rq->mhz, level_hz, state_path, joint ? &ds : NULL, joint ? levels : NULL);
    reply_end(c, f, &buf, &len);
}

static void handle_restore(struct server *sv, int ci)
{
    struct client *c = &sv->clients[ci];
    static char lines[GC_DOMAINS_RECORD_MAX], names[GC_ERR_MAX / 2];
    gc_clock_state now;
    char *buf = NULL;
    size_t len = 0;
    int rc, restored = 0;
    FILE *f;

    if ((rc = take_ownership(sv, ci)) < 0)
        return reply_error(c, rc, "%s", sv->board.err);
    if (gc_state_load_domains(&sv->board, sv->cfg->state_dir, lines, sizeof lines) < 0 ||
        gc_domains_record_names(lines, names, sizeof names) < 0)
        names[0] = '\0';
    rc = restore_board(sv, &restored);
    if (rc < 0) { /* keep the lock while a state is kept: the board is still changed, and ours */
        if (restored)
            drop_ownership(sv); /* a state that no longer matched the board: done with */
        return reply_error(c, rc, "%s", sv->board.err);
    }
    drop_ownership(sv);
    if (restored)
        logmsg("pid %ld uid %u: restored the board", (long)c->pid, (unsigned)c->uid);
    if ((rc = gc_range_read(&sv->board, &now)) < 0) /* cur_freq is not reported: not needed */
        return reply_error(c, rc, "%s", sv->board.err);
    if (!(f = reply_begin(&buf, &len)))
        return reply_error(c, -ENOMEM, "out of memory");
    gc_json_restore(f, restored, &now, restored ? names : "");
    reply_end(c, f, &buf, &len);
}

static void handle_apply(struct server *sv, int ci, const gc_request *rq)
{
    struct client *c = &sv->clients[ci];
    gc_tree_model model = gc_builtin_tree;
    gc_roofline roofline;
    const gc_roofline *rl = NULL;
    gc_decision d;
    char dir[GC_PATH_MAX], err[GC_ERR_MAX] = "", *buf = NULL;
    const char *policy_dir = sv->cfg->policy_dir ? sv->cfg->policy_dir : GC_SERVE_POLICY_DIR;
    void *handle = NULL;
    size_t len = 0;
    int rc, was_owner = sv->owner == ci;
    FILE *f;

    if (rq->tree[0]) {
        /* only a tree root installed: a name under the policy folder, never a path */
        snprintf(dir, sizeof dir, "%s/%s", policy_dir, rq->tree);
        if ((rc = gc_tree_load(dir, &model, &handle, err, sizeof err)) < 0)
            return reply_error(c, rc, "%s", err);
    } else { /* the built-in policy of the board served and the measure asked for */
        model = *gc_builtin_for(sv->board.board_id, rq->measure);
    }
    /* the time curve of the roofline policy and of a slowdown bound: the installed folder's
     * roofline.txt (its folder passed gc_tree_load's checks); without one, gc_decide_goal says
     * what is missing */
    if ((gc_policy_of(rq->policy)->flags & GC_POLICY_NEEDS_MODEL_DIR) ||
        (rq->goal.max_slowdown_pct >= 0 && !(gc_policy_of(rq->policy)->flags & GC_POLICY_PINS_NOTHING) &&
         rq->tree[0])) {
        if (!rq->tree[0])
            return reply_error(c, -EINVAL, "the roofline policy needs tree=NAME: a folder from "
                                           "`pydvfs train` root installed in %s", policy_dir);
        snprintf(dir, sizeof dir, "%s/%s/roofline.txt", policy_dir, rq->tree);
        if ((rc = gc_roofline_load(dir, &roofline, err, sizeof err)) < 0) {
            gc_tree_close(handle);
            return reply_error(c, rc, "%s", err);
        }
        rl = &roofline;
    }
    if (rq->dry_run) {
        rc = gc_decide_goal(&sv->board, &model, rl, rq->policy, &rq->workload, &rq->goal, &d);
    } else if ((rc = take_ownership(sv, ci)) == 0) {
        rc = gc_apply_goal(&sv->board, &model, rl, rq->policy, &rq->workload, &rq->goal,
                           sv->cfg->state_dir, &d);
        /* a failed pin put the original state back; maxn restored it */
        if ((rc < 0 && !was_owner) || (rc == 0 && d.level_hz == 0))
            drop_ownership(sv);
    }
    if (rc < 0) {
        gc_tree_close(handle);
        return reply_error(c, rc, "%s", sv->board.err);
    }
    if (!rq->dry_run)
        logmsg("pid %ld uid %u: apply %s: %s%.6g MHz", (long)c->pid, (unsigned)c->uid,
               gc_policy_name(rq->policy), d.level_hz ? "" : "MAXN ",
               gc_hz_to_mhz(d.level_hz));
    if ((f = reply_begin(&buf, &len))) {
        /* the pin's warning (the original it saved is itself a pin); none for maxn or a dry run */
        gc_json_decision(f, &model, rq->model, NULL, &rq->workload, &d, rq->dry_run,
                         rq->dry_run || !d.level_hz ? NULL : sv->board.warn);
        reply_end(c, f, &buf, &len);
    } else {
        reply_error(c, -ENOMEM, "out of memory");
    }
    gc_tree_close(handle);
}

static void handle_status(struct server *sv, struct client *c)
{
    gc_status st;
    char *buf = NULL;
    size_t len = 0;
    int rc;
    FILE *f;

    if ((rc = gc_status_read(&sv->board, sv->cfg->state_dir, &st)) < 0)
        return reply_error(c, rc, "%s", sv->board.err);
    if (!(f = reply_begin(&buf, &len)))
        return reply_error(c, -ENOMEM, "out of memory");
    gc_json_status(f, &sv->board, &st, 1);
    reply_end(c, f, &buf, &len);
}

static void handle_version(struct server *sv, struct client *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    if (!(f = reply_begin(&buf, &len)))
        return reply_error(c, -ENOMEM, "out of memory");
    fprintf(f, "{\"version\": ");
    gc_json_str(f, gc_version);
    fprintf(f, ", \"protocol\": %d, \"sysfs_root\": ", GC_PROTOCOL_VERSION);
    gc_json_str(f, sv->board.sysfs_root);
    fprintf(f, ", \"policy_dir\": ");
    gc_json_str(f, sv->cfg->policy_dir ? sv->cfg->policy_dir : GC_SERVE_POLICY_DIR);
    fputc('}', f);
    reply_end(c, f, &buf, &len);
}

/* ------------------------------------------------------------------------- sampler windows */

static void sampler_release_if_idle(struct server *sv)
{
    if (sv->open_windows == 0 && sv->sampler) {
        gc_sampler_free(sv->sampler);
        sv->sampler = NULL;
    }
}

static void handle_begin(struct server *sv, struct client *c, const gc_request *rq)
{
    gc_sampler_config cfg = {0};
    gc_sampler_stats stats;
    char *buf = NULL;
    size_t len = 0;
    int rc, i;
    FILE *f;

    for (i = 0; i < c->n_windows; i++)
        if (strcmp(c->windows[i].name, rq->name) == 0)
            return reply_error(c, -EINVAL, "window %s is already open", rq->name);
    if (c->n_windows == GC_SERVE_MAX_WINDOWS)
        return reply_error(c, -EINVAL, "too many open windows (at most %d per connection)",
                           GC_SERVE_MAX_WINDOWS);
    if (!sv->sampler) {
        if ((rc = gc_sampler_create(&sv->sampler, &sv->board, &cfg)) < 0)
            return reply_error(c, rc, "%s", sv->board.err);
        if ((rc = gc_sampler_start(sv->sampler)) < 0) {
            gc_sampler_free(sv->sampler);
            sv->sampler = NULL;
            return reply_error(c, rc, "cannot start the sampler: %s", strerror(-rc));
        }
    }
    snprintf(c->windows[c->n_windows].name, GC_WINDOW_NAME_MAX, "%s", rq->name);
    gc_sampler_snapshot(sv->sampler, &c->windows[c->n_windows].begin);
    c->n_windows++;
    sv->open_windows++;
    gc_sampler_get_stats(sv->sampler, &stats);
    if (!(f = reply_begin(&buf, &len)))
        return reply_error(c, -ENOMEM, "out of memory");
    fprintf(f, "{\"window\": ");
    gc_json_str(f, rq->name);
    fprintf(f, ", \"rails\": [");
    for (i = 0; i < gc_sampler_n_rails(sv->sampler); i++) {
        fprintf(f, "%s", i ? ", " : "");
        gc_json_str(f, gc_sampler_rail_name(sv->sampler, i));
    }
    fprintf(f, "], \"rate_hz\": %.6g}", stats.rate_hz);
    reply_end(c, f, &buf, &len);
}

static void close_window(struct server *sv, struct client *c, int i)
{
    c->windows[i] = c->windows[c->n_windows - 1];
    c->n_windows--;
    sv->open_windows--;
}

static void handle_end(struct server *sv, struct client *c, const gc_request *rq)
{
    gc_snapshot z;
    gc_window w;
    char *buf = NULL;
    size_t len = 0;
    int i, rc;
    FILE *f;

    for (i = 0; i < c->n_windows && strcmp(c->windows[i].name, rq->name) != 0; i++)
        ;
    if (i == c->n_windows)
        return reply_error(c, -EINVAL, "no open window %s", rq->name);
    gc_sampler_snapshot(sv->sampler, &z);
    rc = gc_window_diff(&c->windows[i].begin, &z, &w);
    close_window(sv, c, i);
    if (rc < 0) {
        reply_error(c, rc, "window %s: snapshots out of order", rq->name);
    } else if ((f = reply_begin(&buf, &len))) {
        fprintf(f, "{\"window\": ");
        gc_json_str(f, rq->name);
        fprintf(f, ", ");
        gc_json_window_fields(f, sv->sampler, &w, " ");
        fputc('}', f);
        reply_end(c, f, &buf, &len);
    } else {
        reply_error(c, -ENOMEM, "out of memory");
    }
    sampler_release_if_idle(sv);
}

/* ------------------------------------------------------------------------- connections */

static void handle_line(struct server *sv, int ci, const char *line, size_t len)
{
    struct client *c = &sv->clients[ci];
    char err[GC_ERR_MAX];
    gc_request rq;

    if (gc_request_parse(line, len, &rq, err, sizeof err) < 0)
        return reply_error(c, -EINVAL, "%s", err);
    switch (rq.kind) {
    case GC_REQ_VERSION:
        return handle_version(sv, c);
    case GC_REQ_STATUS:
        return handle_status(sv, c);
    case GC_REQ_PIN:
        return handle_pin(sv, ci, &rq);
    case GC_REQ_RESTORE:
        return handle_restore(sv, ci);
    case GC_REQ_APPLY:
        return handle_apply(sv, ci, &rq);
    case GC_REQ_BEGIN:
        return handle_begin(sv, c, &rq);
    case GC_REQ_END:
        return handle_end(sv, c, &rq);
    }
}

/* Serve the complete lines buffered for client ci while its replies have room. */
static void serve_input(struct server *sv, int ci)
{
    struct client *c = &sv->clients[ci];
    char *nl;
    size_t used;

    /* one reply at a time: the next line is served once the last reply has been read */
    while (!c->closing && c->out_len == 0 && (nl = memchr(c->in, '\n', c->in_len))) {
        used = (size_t)(nl - c->in) + 1;
        handle_line(sv, ci, c->in, used - 1);
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
    }
    if (!c->closing && c->in_len == sizeof c->in && !memchr(c->in, '\n', c->in_len)) {
        reply_error(c, -E2BIG, "request longer than %d bytes: closing the connection",
                    GC_REQ_MAX);
        c->closing = 1;
    }
    c->partial_since_ms = c->in_len > 0 ? (c->partial_since_ms ? c->partial_since_ms : now_ms()) : 0;
}

static void drop_client(struct server *sv, int ci, const char *why)
{
    struct client *c = &sv->clients[ci];
    int64_t t0 = now_ms();
    int restored = 0, rc;

    sv->open_windows -= c->n_windows;
    c->n_windows = 0;
    sampler_release_if_idle(sv);
    if (sv->owner == ci) {
        /* the pin belonged to this connection */
        rc = restore_board(sv, &restored);
        if (rc < 0) {
            logmsg("pid %ld uid %u %s while pinned: RESTORE FAILED: %s; the board stays locked "
                   "(retry: `govcore restore`)", (long)c->pid, (unsigned)c->uid, why,
                   sv->board.err);
            gc_lock_release(&sv->lock); /* let a root `govcore restore` retry */
        } else {
            logmsg("pid %ld uid %u %s while pinned: board restored in %lld ms", (long)c->pid,
                   (unsigned)c->uid, why, (long long)(now_ms() - t0));
            gc_lock_release(&sv->lock);
        }
        sv->owner = -1;
    }
    close(c->fd);
    c->fd = -1;
    free(c->out);
    c->out = NULL;
    c->out_len = 0;
}

static void flush_client(struct client *c)
{
    ssize_t n;

    while (c->out_len > 0) {
        n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                c->closing = 1, c->out_len = 0; /* the peer is gone */
            return;
        }
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
        c->active_ms = now_ms();
    }
    free(c->out); /* all sent: a large reply's memory is not kept */
    c->out = NULL;
}

/* Say why a connection is not taken, and close it. */
static void refuse_connection(int fd, const char *msg)
{
    char line[GC_ERR_MAX + 64];
    int n = snprintf(line, sizeof line, "{\"error\": \"%s\", \"errno\": 11}\n", msg);

    if (n > 0 && send(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1,
                      MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* it may not read it: closing says enough */
    }
    close(fd);
}

/* A free slot for a peer with this uid, or -1 with why in msg. Slots are shared: a user other
 * than root takes at most GC_SERVE_PER_USER, and GC_SERVE_ROOT_SLOTS are kept for root (its
 * `status` is always served, however many connections members hold). */
static int free_slot(struct server *sv, uid_t uid, char *msg, size_t len)
{
    int i, slot = -1, used = 0, mine = 0;

    for (i = 0; i < GC_SERVE_MAX_CLIENTS; i++) {
        if (sv->clients[i].fd < 0) {
            if (slot < 0)
                slot = i;
            continue;
        }
        used++;
        mine += sv->clients[i].uid == uid;
    }
    if (uid != 0 && mine >= GC_SERVE_PER_USER) {
        snprintf(msg, len, "too many connections from uid %u (at most %d per user): close some%s",
                 (unsigned)uid, GC_SERVE_PER_USER,
                 sv->idle_ms ? "; idle ones are closed by the daemon" : "");
        return -1;
    }
    if (slot < 0 || (uid != 0 && used >= GC_SERVE_MAX_CLIENTS - GC_SERVE_ROOT_SLOTS)) {
        snprintf(msg, len, "too many clients (%d connections)", used);
        return -1;
    }
    return slot;
}

static void accept_clients(struct server *sv)
{
    struct ucred cr;
    socklen_t cr_len;
    char msg[GC_ERR_MAX];
    int fd, i;

    for (;;) {
        fd = accept4(sv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN: no more; other errors (EMFILE, ECONNABORTED): try at next poll */
        cr_len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cr_len) < 0) {
            logmsg("cannot read a peer's credentials: %s; closed", strerror(errno));
            close(fd);
            continue;
        }
        if (!gc_peer_allowed(cr.uid, cr.gid, sv->group_gid)) {
            static const char msg[] = "{\"error\": \"permission denied: not root and not a member "
                                      "of the daemon's group\", \"errno\": 13}\n";
            logmsg("pid %ld uid %u gid %u: refused: not root and not in group %s", (long)cr.pid,
                   (unsigned)cr.uid, (unsigned)cr.gid,
                   sv->cfg->group ? sv->cfg->group : GC_SERVE_GROUP);
            if (send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                /* it may not read it: closing says enough */
            }
            close(fd);
            continue;
        }
        if ((i = free_slot(sv, cr.uid, msg, sizeof msg)) < 0) {
            logmsg("pid %ld uid %u: refused: %s", (long)cr.pid, (unsigned)cr.uid, msg);
            refuse_connection(fd, msg);
            continue;
        }
        memset(&sv->clients[i], 0, sizeof sv->clients[i]);
        sv->clients[i].fd = fd;
        sv->clients[i].pid = cr.pid;
        sv->clients[i].uid = cr.uid;
        sv->clients[i].gid = cr.gid;
        sv->clients[i].active_ms = now_ms();
    }
}

static void read_client(struct server *sv, int ci)
{
    struct client *c = &sv->clients[ci];
    ssize_t n;

    n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop_client(sv, ci, n == 0 ? "disconnected" : "lost");
        return;
    }
    if (n > 0) {
        c->active_ms = now_ms();
        c->in_len += (size_t)n;
        serve_input(sv, ci);
    }
}

/* ------------------------------------------------------------------------- start and stop */

static int fail(const char *fmt, ...)
{
    va_list ap;

    fputs("govcore: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

/* Claim the socket path: one instance (a lock on SOCKET.lock, then a connect test), a stale
 * socket unlinked, never another kind of file. */
static int claim_socket(struct server *sv)
{
    struct sockaddr_un sa;
    struct stat st;
    char dir[GC_PATH_MAX], *slash;
    int fd, rc;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(sv->socket_path) >= sizeof sa.sun_path)
        return fail("socket path too long (at most %zu bytes): %s", sizeof sa.sun_path - 1,
                    sv->socket_path);
    memcpy(sa.sun_path, sv->socket_path, strlen(sv->socket_path) + 1);
    /* the default folder (/run/pydvfs) may be missing when not started by systemd */
    snprintf(dir, sizeof dir, "%s", sv->socket_path);
    if ((slash = strrchr(dir, '/')) && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return fail("cannot create %s: %s", dir, strerror(errno));
    }
    snprintf(sv->instance_path, sizeof sv->instance_path, "%s.lock", sv->socket_path);
    if ((rc = gc_flock_try(sv->instance_path, &sv->instance_fd)) < 0)
        return fail(rc == -EBUSY ? "another govcore serve is running on %s"
                                 : "cannot lock %s.lock: %s", sv->socket_path, strerror(-rc));
    if (lstat(sv->socket_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return fail("%s exists and is not a socket: refusing to replace it", sv->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            close(fd);
            return fail("another govcore serve is listening on %s", sv->socket_path);
        }
        if (fd >= 0)
            close(fd);
        if (unlink(sv->socket_path) < 0)
            return fail("cannot remove the stale socket %s: %s", sv->socket_path, strerror(errno));
        logmsg("removed a stale socket %s", sv->socket_path);
    }
    return 0;
}

/* Listen on the claimed path: mode 0660, owned by the group. */
static int bind_socket(struct server *sv)
{
    struct sockaddr_un sa;
    mode_t old_mask;
    int rc;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sv->socket_path, strlen(sv->socket_path) + 1);
    sv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sv->listen_fd < 0)
        return fail("socket: %s", strerror(errno));
    old_mask = umask(0177); /* no moment in which others could connect */
    rc = bind(sv->listen_fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old_mask);
    if (rc < 0)
        return fail("cannot bind %s: %s", sv->socket_path, strerror(errno));
    sv->bound = 1;
    if (chown(sv->socket_path, geteuid(), sv->group_gid) < 0 || chmod(sv->socket_path, 0660) < 0)
        return fail("cannot give %s to group %u: %s", sv->socket_path, (unsigned)sv->group_gid,
                    strerror(errno));
    if (listen(sv->listen_fd, LISTEN_BACKLOG) < 0)
        return fail("listen: %s", strerror(errno));
    return 0;
}

/* A state file left by a run that died pinned: put it back, unless its owner still governs. */
static void restore_left_state(struct server *sv)
{
    pid_t holder = 0;
    int rc, restored = 0;

    if ((rc = gc_lock_acquire(&sv->board, 0, &sv->lock)) < 0) {
        if (rc == -EBUSY && gc_lock_holder(&sv->board, &holder) == 0 && holder > 0)
            logmsg("the board is governed by pid %ld: its state is left to it", (long)holder);
        else
            logmsg("cannot take the board's lock to look for a state left by an earlier run: %s",
                   sv->board.err[0] ? sv->board.err : strerror(-rc));
        return;
    }
    rc = restore_board(sv, &restored);
    if (rc < 0)
        logmsg("a state left by an earlier run could not be restored: %s", sv->board.err);
    else if (restored)
        logmsg("restored the board from a state left by an earlier run");
    gc_lock_release(&sv->lock);
}

static int install_signals(void)
{
    struct sigaction sa;

    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    return 0;
}

static void shutdown_server(struct server *sv)
{
    int i;

    for (i = 0; i < GC_SERVE_MAX_CLIENTS; i++)
        if (sv->clients[i].fd >= 0)
            drop_client(sv, i, "stopped by the daemon's shutdown");
    if (sv->sampler)
        gc_sampler_free(sv->sampler);
    if (sv->listen_fd >= 0)
        close(sv->listen_fd);
    if (sv->bound)
        unlink(sv->socket_path);
    if (sv->instance_fd >= 0) {
        struct stat held, named;

        /* removed while still locked, and only if the path still names the file locked: a new
         * instance that opened it meanwhile sees it gone once it has the lock, and makes its own
         * (gc_flock_try) */
        if (fstat(sv->instance_fd, &held) == 0 && lstat(sv->instance_path, &named) == 0 &&
            held.st_dev == named.st_dev && held.st_ino == named.st_ino)
            unlink(sv->instance_path);
        close(sv->instance_fd);
    }
}

/* Idle: nothing sent or received for idle_ms, no reply pending, and nothing that lives with the
 * connection (a pin, a sampler window): those are never closed for idleness, since closing
 * would restore the board under a run or lose a measurement. */
static int idle_timed_out(const struct server *sv, int ci, int64_t t)
{
    const struct client *c = &sv->clients[ci];

    return sv->idle_ms > 0 && !c->closing && sv->owner != ci && c->n_windows == 0 &&
           c->out_len == 0 && c->in_len == 0 && t - c->active_ms > sv->idle_ms;
}

static int serve_loop(struct server *sv)
{
    struct pollfd pfd[GC_SERVE_MAX_CLIENTS + 2];
    int map[GC_SERVE_MAX_CLIENTS + 2];
    unsigned char sig = 0;
    int n, i, k;
    int64_t t;

    for (;;) {
        pfd[0].fd = signal_pipe[0];
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        pfd[1].fd = sv->listen_fd;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        n = 2;
        for (i = 0; i < GC_SERVE_MAX_CLIENTS; i++) {
            struct client *c = &sv->clients[i];

            if (c->fd < 0)
                continue;
            pfd[n].fd = c->fd;
            /* a client that does not read its replies is not read either: its memory is bounded */
            pfd[n].events = c->out_len ? POLLOUT : (c->closing ? 0 : POLLIN);
            pfd[n].revents = 0;
            map[n++] = i;
        }
        if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
            return fail("poll: %s", strerror(errno));
        if (pfd[0].revents & POLLIN) {
            if (read(signal_pipe[0], &sig, 1) == 1)
                logmsg("stopping on signal %d", sig);
            return 0;
        }
        if (pfd[1].revents & POLLIN)
            accept_clients(sv);
        t = now_ms();
        for (k = 2; k < n; k++) {
            struct client *c = &sv->clients[map[k]];

            if (c->fd < 0)
                continue;
            if (pfd[k].revents & POLLIN)
                read_client(sv, map[k]);
            else if (pfd[k].revents & (POLLHUP | POLLERR | POLLNVAL)) {
                drop_client(sv, map[k], "disconnected");
                continue;
            }
            if (c->fd < 0)
                continue;
            if (c->out_len)
                flush_client(c);
            if (c->out_len == 0 && !c->closing)
                serve_input(sv, map[k]); /* lines held back while replies were queued */
            if (c->out_len)
                flush_client(c);
            if (c->closing && c->out_len == 0)
                drop_client(sv, map[k], "closed by the daemon");
            else if (c->partial_since_ms && t - c->partial_since_ms > GC_SERVE_PARTIAL_MS) {
                logmsg("pid %ld uid %u: refused: an unfinished request for over %d ms",
                       (long)c->pid, (unsigned)c->uid, GC_SERVE_PARTIAL_MS);
                drop_client(sv, map[k], "timed out");
            } else if (idle_timed_out(sv, map[k], t)) {
                char why[128];

                snprintf(why, sizeof why, "idle for over %.6g s: closed by the daemon (connect "
                                          "again when needed)", (double)sv->idle_ms / 1000.0);
                logmsg("pid %ld uid %u: %s", (long)c->pid, (unsigned)c->uid, why);
                queue_error(c, -ETIMEDOUT, why);
                flush_client(c);
                c->closing = 1;
                if (c->out_len == 0)
                    drop_client(sv, map[k], "idle");
            }
        }
    }
}

int gc_serve(const gc_serve_config *cfg)
{
    static struct server sv; /* large (client buffers): not on the stack */
    const char *group = cfg->group ? cfg->group : GC_SERVE_GROUP;
    int rc, i;

    memset(&sv, 0, sizeof sv);
    sv.cfg = cfg;
    sv.socket_path = cfg->socket_path ? cfg->socket_path : GC_SERVE_SOCKET;
    sv.listen_fd = sv.instance_fd = -1;
    sv.owner = -1;
    gc_lock_init(&sv.lock);
    for (i = 0; i < GC_SERVE_MAX_CLIENTS; i++)
        sv.clients[i].fd = -1;
    sv.idle_ms = (int64_t)((cfg->idle_timeout_s < 0 ? GC_SERVE_IDLE_S : cfg->idle_timeout_s) * 1000.0);
    if (geteuid() != 0 && !cfg->allow_non_root)
        return fail("govcore serve must run as root: it writes the GPU's clock files for its "
                    "clients (`sudo govcore serve`, or `sudo systemctl start govcore`); "
                    "--allow-non-root serves a board this user may write, such as a fake one");
    if (gc_group_gid(group, &sv.group_gid) < 0)
        return fail("no group '%s': create it (`groupadd %s`) and add the users who may govern the "
                    "GPU, or name another with --group", group, group);
    if ((rc = gc_board_open(&sv.board, cfg->sysfs_root ? cfg->sysfs_root : "/")) < 0)
        return fail("%s", sv.board.err[0] ? sv.board.err : strerror(-rc));
    if (geteuid() != 0) {
        char path[GC_PATH_MAX];

        snprintf(path, sizeof path, "%s/max_freq", sv.board.devfreq_dir);
        if (access(path, W_OK) < 0)
            return fail("--allow-non-root: this user (uid %u) cannot write %s: %s; a real board "
                        "needs root", (unsigned)geteuid(), path, strerror(errno));
    }
    if (install_signals() < 0)
        return fail("cannot install signal handlers: %s", strerror(errno));
    if ((rc = claim_socket(&sv)) != 0) {
        shutdown_server(&sv);
        return rc;
    }
    restore_left_state(&sv); /* before any client can connect */
    if ((rc = bind_socket(&sv)) != 0) {
        shutdown_server(&sv);
        return rc;
    }
    if (sv.idle_ms > 0)
        logmsg("serving %s (group %s) on %s, pid %ld; idle connections closed after %.6g s",
               sv.board.sysfs_root, group, sv.socket_path, (long)getpid(), (double)sv.idle_ms / 1000.0);
    else
        logmsg("serving %s (group %s) on %s, pid %ld; idle connections never closed (--idle-timeout 0)",
               sv.board.sysfs_root, group, sv.socket_path, (long)getpid());
    rc = serve_loop(&sv);
    shutdown_server(&sv);
    logmsg("stopped; the board is as it was");
    return rc;
}

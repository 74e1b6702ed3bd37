/* serve.h - `govcore serve`: the small privileged daemon through which unprivileged members of a
 * group govern the GPU (requests: protocol.h; unit: govcore.service; README "Without root").
 *
 * One thread and a poll() loop over at most GC_SERVE_MAX_CLIENTS connections, each with fixed
 * buffers: a slow or hostile client only ever stalls itself. A pin belongs to the connection
 * that made it: when it closes for any reason, the board is restored at once. The daemon holds
 * the board's owner lock (lock.h) while a client holds a pin, so it and a process governing the
 * board directly never both hold it.
 */
#ifndef GOVCORE_SERVE_H
#define GOVCORE_SERVE_H

#define GC_SERVE_SOCKET "/run/pydvfs/govcore.sock" /* default socket, mode 0660 root:GROUP */
#define GC_SERVE_GROUP "pydvfs"                     /* default group served besides root */
#define GC_SERVE_POLICY_DIR "/usr/local/lib/pydvfs/policies" /* trees root installed */
#define GC_SERVE_MAX_CLIENTS 64
#define GC_SERVE_ROOT_SLOTS 4         /* of them, kept for root (its status is always served) */
#define GC_SERVE_PER_USER 16          /* connections one user other than root may hold */
#define GC_SERVE_MAX_WINDOWS 16       /* open sampler windows per connection */
#define GC_SERVE_OUT_MAX 262144       /* one reply's bytes; a longer one is an error reply */
#define GC_SERVE_PARTIAL_MS 5000      /* a request line must be complete within this */
#define GC_SERVE_IDLE_S 60.0          /* default idle timeout (a pin or window never idles) */

typedef struct gc_serve_config {
    const char *socket_path;          /* NULL: GC_SERVE_SOCKET */
    const char *group;                /* NULL: GC_SERVE_GROUP */
    const char *sysfs_root;           /* NULL: "/" */
    const char *state_dir;            /* NULL: the default state folder */
    const char *policy_dir;           /* NULL: GC_SERVE_POLICY_DIR */
    double idle_timeout_s;            /* < 0: GC_SERVE_IDLE_S; 0: never */
    int allow_non_root;               /* serve without root (a board this user may write) */
} gc_serve_config;

/* Run the daemon until SIGTERM/SIGINT. Returns the process exit status: 0 after a clean stop,
 * 2 (with one line on stderr) if it cannot start. */
int gc_serve(const gc_serve_config *cfg);

#endif

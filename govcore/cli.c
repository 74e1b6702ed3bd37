/* cli.c - the front end every verb of the `govcore` binary shares (cli.h): the one-line error,
 * opening the board, whether a verb goes through the daemon, and reading an option's value. */
#include "cli.h"
#include "client.h"
#include "serve.h"
#include "sysfs.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One line on stderr, whatever the message quotes (an argument, a board file's text): control
 * and non-ASCII bytes are shown escaped (gc_printable). */
int fail(const char *fmt, ...)
{
    char msg[GC_ERR_MAX * 2], shown[GC_ERR_MAX * 2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gc_printable(msg, shown, sizeof shown);
    fprintf(stderr, "govcore: error: %s\n", shown);
    return EXIT_USAGE;
}

int fail_board(const gc_board *b, int rc)
{
    return fail("%s", b->err[0] ? b->err : strerror(-rc));
}

int open_board(const struct options *o, gc_board *b)
{
    const char *root = o->sysfs_root;
    int rc;

    if (!root || !*root)
        root = getenv("PYDVFS_SYSFS_ROOT");
    rc = gc_board_open(b, (root && *root) ? root : "/");
    return rc < 0 ? fail_board(b, rc) : 0;
}

const char no_daemon[] =
    "cannot change the GPU clock without root: run as root, or start the daemon (`sudo "
    "systemctl enable --now govcore` or `sudo govcore serve`) and join its group (`sudo usermod "
    "-aG pydvfs $USER`, then log in again)";

/* The daemon's socket when a verb should go through `govcore serve`: $PYDVFS_SOCKET, else (not
 * root, and the clock files not writable here) the default socket if it exists. NULL: act on
 * the board directly (b NULL: the board is not open yet, only the variable counts). */
const char *daemon_socket(const gc_board *b)
{
    const char *env = getenv("PYDVFS_SOCKET");
    char path[GC_PATH_MAX];

    if (env && *env)
        return env;
    if (!b || geteuid() == 0)
        return NULL;
    snprintf(path, sizeof path, "%s/max_freq", b->devfreq_dir);
    if (access(path, W_OK) == 0)
        return NULL;
    return access(GC_SERVE_SOCKET, F_OK) == 0 ? GC_SERVE_SOCKET : NULL;
}

/* One request to the daemon; its reply (one line of JSON, the verb's --json record) is printed
 * as it is, an error reply as our one-line error. */
int via_daemon(const char *socket_path, const char *request, int pinning)
{
    static char reply[GC_CLIENT_REPLY_MAX];
    char err[GC_ERR_MAX];
    int rc;

    if ((rc = gc_client_request(socket_path, request, reply, sizeof reply, err, sizeof err)) < 0)
        return fail("%s", err);
    if (gc_client_reply_error(reply, err, sizeof err))
        return fail("%s", err);
    puts(reply);
    if (pinning)
        fprintf(stderr, "govcore: note: a pin through the daemon lasts while its connection "
                        "does: the board is restored now that this command ends (govern a run "
                        "with `pydvfs run` or the Python API)\n");
    return 0;
}

/* 1 if this process may write the GPU's clock files. */
int board_writable(const gc_board *b)
{
    char path[GC_PATH_MAX];

    snprintf(path, sizeof path, "%s/max_freq", b->devfreq_dir);
    return access(path, W_OK) == 0;
}

/* The value after option argv[*i], or NULL (with an error printed) if there is none. */
const char *opt_value(const struct options *o, int *i)
{
    if (*i + 1 >= o->argc || strncmp(o->argv[*i + 1], "--", 2) == 0) {
        fail("%s needs a value", o->argv[*i]);
        return NULL;
    }
    return o->argv[++*i];
}

int parse_number(const char *name, const char *text, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(*out))
        return fail("%s: not a number: '%s'", name, text);
    return 0;
}

const char *role_label(int role)
{
    return role == GC_ROLE_MODULE ? "module" : role == GC_ROLE_CPU_GPU ? "cpu+gpu" : "gpu";
}

/* Board text (a governor) as gc_printable shows it: no raw control byte reaches the terminal. */
const char *shown(const char *board_text, char *out, size_t len)
{
    gc_printable(board_text, out, len);
    return out;
}

/* The one-line notice of a pin the power mode's cap lowered (pydvfs says the same). */
void note_clamped(const gc_board *b, const char *verb)
{
    fprintf(stderr, "govcore %s: note: %g MHz is above the power mode's GPU cap: pinned %g MHz "
                    "(--above-power-mode lifts the cap)\n", verb, gc_hz_to_mhz(b->clamped_from_hz),
            gc_hz_to_mhz(b->cap_hz));
}

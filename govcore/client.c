/* client.c - one request to `govcore serve` (see client.h and protocol.h). */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int send_all(int fd, const char *p, size_t n)
{
    ssize_t w;

    while (n > 0) {
        w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int gc_client_request(const char *socket_path, const char *request, char *reply, size_t len,
                      char *err, size_t err_len)
{
    struct sockaddr_un sa;
    struct pollfd pfd;
    size_t used = 0;
    ssize_t n;
    char *nl = NULL;
    int fd, rc;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof sa.sun_path || len < 2) {
        snprintf(err, err_len, "socket path too long: %s", socket_path);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        rc = -errno;
        snprintf(err, err_len, "cannot reach the govcore daemon at %s: %s%s", socket_path,
                 strerror(-rc),
                 (rc == -EACCES || rc == -EPERM) ? " (join its group: `sudo usermod -aG pydvfs "
                                                   "$USER`, then log in again)"
                 : (rc == -ENOENT || rc == -ECONNREFUSED) ? " (start it: `sudo systemctl start "
                                                            "govcore` or `sudo govcore serve`)" : "");
        goto close_fd;
    }
    if ((rc = send_all(fd, request, strlen(request))) < 0 || (rc = send_all(fd, "\n", 1)) < 0) {
        snprintf(err, err_len, "cannot send to the govcore daemon: %s", strerror(-rc));
        goto close_fd;
    }
    while (!nl) {
        pfd.fd = fd;
        pfd.events = POLLIN;
        if ((rc = poll(&pfd, 1, GC_CLIENT_TIMEOUT_MS)) <= 0) {
            if (rc < 0 && errno == EINTR)
                continue;
            rc = rc == 0 ? -ETIMEDOUT : -errno;
            snprintf(err, err_len, "no reply from the govcore daemon: %s", strerror(-rc));
            goto close_fd;
        }
        n = recv(fd, reply + used, len - 1 - used, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            rc = n == 0 ? -ECONNRESET : -errno;
            snprintf(err, err_len, "the govcore daemon closed the connection without a reply");
            goto close_fd;
        }
        used += (size_t)n;
        reply[used] = '\0';
        nl = strchr(reply, '\n');
        if (!nl && used == len - 1) {
            rc = -E2BIG;
            snprintf(err, err_len, "the govcore daemon's reply is too long");
            goto close_fd;
        }
    }
    *nl = '\0';
    rc = 0;
close_fd:
    close(fd);
    return rc;
}

int gc_client_reply_error(const char *reply, char *msg, size_t len)
{
    static const char head[] = "{\"error\": \"";
    const char *p, *e;
    size_t o = 0;
    int code;

    if (strncmp(reply, head, sizeof head - 1) != 0)
        return 0;
    /* the daemon escapes '"', '\\' and control characters (report.c): undo the first two,
     * keep \uXXXX as it is */
    for (p = reply + sizeof head - 1; *p && *p != '"' && o + 1 < len; p++) {
        if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
            p++;
        msg[o++] = *p;
    }
    msg[o] = '\0';
    e = strstr(p, "\"errno\": ");
    code = e ? atoi(e + 9) : EIO;
    return code > 0 ? code : EIO;
}

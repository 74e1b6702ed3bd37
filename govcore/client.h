/* client.h - the govcore verbs' side of `govcore serve`: one request, one reply line. */
#ifndef GOVCORE_CLIENT_H
#define GOVCORE_CLIENT_H

#include <stddef.h>

#define GC_CLIENT_REPLY_MAX (262144 + 1) /* GC_SERVE_OUT_MAX (serve.h) and a NUL */
#define GC_CLIENT_TIMEOUT_MS 30000

/* Send request (no newline) to the daemon at socket_path and read its one-line reply into
 * reply (NUL-terminated, newline removed). -errno with err saying what to do. */
int gc_client_request(const char *socket_path, const char *request, char *reply, size_t len,
                      char *err, size_t err_len);

/* If reply is an error reply, copy its message into msg and return its errno (> 0); else 0. */
int gc_client_reply_error(const char *reply, char *msg, size_t len);

#endif

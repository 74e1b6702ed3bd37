/* sha256.h - SHA-256 (FIPS 180-4), for checking a model folder's files against its manifest. */
#ifndef GOVCORE_SHA256_H
#define GOVCORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define GC_SHA256_HEX_LEN 64

typedef struct gc_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    unsigned char block[64];
    size_t used;
} gc_sha256;

void gc_sha256_init(gc_sha256 *s);
void gc_sha256_update(gc_sha256 *s, const void *data, size_t len);
/* Finish and write the digest as 64 lowercase hex digits plus a NUL into hex. */
void gc_sha256_hex(gc_sha256 *s, char hex[GC_SHA256_HEX_LEN + 1]);

/* The digest of everything readable from fd, from offset 0 (pread: fd's offset is unchanged).
 * 0 or -errno. */
int gc_sha256_fd(int fd, char hex[GC_SHA256_HEX_LEN + 1]);

#endif

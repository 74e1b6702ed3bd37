/* test_sha256.c - the SHA-256 that checks model folders against their manifests, on the
 * FIPS 180-4 example messages (one block, two blocks, a million bytes in odd-sized pieces) and
 * on a file read through an fd. */
#include "check.h"
#include "sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void digest(const char *msg, char hex[GC_SHA256_HEX_LEN + 1])
{
    gc_sha256 s;

    gc_sha256_init(&s);
    gc_sha256_update(&s, msg, strlen(msg));
    gc_sha256_hex(&s, hex);
}

static void test_fips_examples(void)
{
    char hex[GC_SHA256_HEX_LEN + 1];

    digest("abc", hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    digest("", hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
}

static void test_million_a_in_pieces(void)
{
    char hex[GC_SHA256_HEX_LEN + 1], buf[997];
    gc_sha256 s;
    size_t done = 0, take;

    memset(buf, 'a', sizeof buf);
    gc_sha256_init(&s);
    while (done < 1000000) {
        take = 1000000 - done < sizeof buf ? 1000000 - done : sizeof buf;
        gc_sha256_update(&s, buf, take);
        done += take;
    }
    gc_sha256_hex(&s, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
}

static void test_fd(void)
{
    char path[] = "/tmp/gc-sha256-XXXXXX", hex[GC_SHA256_HEX_LEN + 1];
    int fd = mkstemp(path);

    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, "abc", 3) == 3);
    CHECK(gc_sha256_fd(fd, hex) == 0);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    close(fd);
    unlink(path);
}

int main(void)
{
    RUN(test_fips_examples);
    RUN(test_million_a_in_pieces);
    RUN(test_fd);
    return DONE("test_sha256");
}

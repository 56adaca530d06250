/* hash_xxh3_stream: pieces of any size give hash_xxh3 of their concatenation (the shared-state
 * range hashes are computed so on both ends, in different cuts). */
#include <string.h>

#include "hash/hash.h"
#include "tests/common/check.h"

int main(void) {
    enum { N = 1 << 20 };
    static unsigned char buf[N + 7];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char) (i * 131u + (i >> 9));
    hash_xxh3_stream_t *s = hash_xxh3_stream_new();
    REQUIRE(s != NULL);
    static const size_t lens[] = {0, 1, 15, 240, 241, 65536, N + 7};
    static const size_t cuts[] = {1, 7, 256, 4096, 262144};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            hash_xxh3_stream_reset(s);
            for (size_t at = 0; at < lens[l]; at += cuts[c])
                hash_xxh3_stream_update(s, buf + at, lens[l] - at < cuts[c] ? lens[l] - at : cuts[c]);
            CHECK_EQ_U64(hash_xxh3_stream_digest(s), hash_xxh3(buf, lens[l]));
        }
    }
    hash_xxh3_stream_free(s);
    return check_exit();
}

/* aead_bench: what encryption (PCCL_ENCRYPT) costs one core: sealing and opening 64 KiB records
 * (the data links' record size) with the AEAD the links pick, and libsodium's ChaCha20-Poly1305
 * for comparison, against memcpy of the same bytes measured in the same run. Timed in this
 * thread's CPU time (a shared machine's other load does not count), best of 3. CSV rows on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "ccoip/peer/ccoip_datalink.h"
#include "ccoip/wire/ccoip_auth.h"

#define TOTAL (1u << 30)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

int main(void) {
    if (!ccoip_auth_init()) return 1;
    const size_t rec = CCOIP_DATALINK_RECORD, n = TOTAL / rec;
    uint8_t *src = malloc(rec), *dst = malloc(rec + 16), key[32], tag[16], nonce[12] = {0};
    memset(src, 0x5a, rec);
    memset(key, 7, sizeof key);
    double best_copy = 1e9, best_seal = 1e9, best_open = 1e9, best_chacha = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s();
        for (size_t i = 0; i < n; i++) {
            memcpy(dst, src, rec);
            src[i % rec] ^= dst[(i * 7) % rec]; /* keep the copy */
        }
        double c = now_s() - t;
        if (c < best_copy) best_copy = c;
        ccoip_aead_t a, b;
        ccoip_aead_init(&a, key);
        t = now_s();
        for (size_t i = 0; i < n; i++) ccoip_aead_seal(&a, dst, dst + rec, src, rec, NULL, 0);
        double s = now_s() - t;
        if (s < best_seal) best_seal = s;
        /* Seal and open in turn (the opener's counter follows the sealer's): open = that - seal. */
        ccoip_aead_free(&a);
        ccoip_aead_init(&a, key);
        ccoip_aead_init(&b, key);
        uint8_t *back = malloc(rec);
        t = now_s();
        for (size_t i = 0; i < n; i++) {
            ccoip_aead_seal(&a, dst, dst + rec, src, rec, NULL, 0);
            if (!ccoip_aead_open(&b, back, dst, rec, dst + rec, NULL, 0)) return 1;
        }
        double o = (now_s() - t) - s;
        if (o < best_open) best_open = o;
        free(back);
        ccoip_aead_free(&a);
        ccoip_aead_free(&b);
        t = now_s();
        for (size_t i = 0; i < n; i++) {
            nonce[0] = (uint8_t) i;
            crypto_aead_chacha20poly1305_ietf_encrypt_detached(dst, tag, NULL, src, rec, NULL, 0, NULL, nonce, key);
        }
        double h = now_s() - t;
        if (h < best_chacha) best_chacha = h;
    }
    double gb = (double) TOTAL / 1e9, copy = gb / best_copy;
    fprintf(stderr, "aead_bench: %s on 64 KiB records, one core\n", ccoip_aead_name());
    printf("crypto/seal_%s_per_core,%.2f,GB/s,%.2f,%.3f\n", crypto_aead_aes256gcm_is_available() ? "aes256gcm" : "chacha20poly1305",
           gb / best_seal, copy, gb / best_seal / copy);
    printf("crypto/open_%s_per_core,%.2f,GB/s,%.2f,%.3f\n", crypto_aead_aes256gcm_is_available() ? "aes256gcm" : "chacha20poly1305",
           gb / best_open, copy, gb / best_open / copy);
    printf("crypto/seal_chacha20poly1305_libsodium_per_core,%.2f,GB/s,%.2f,%.3f\n", gb / best_chacha, copy,
           gb / best_chacha / copy);
    free(src);
    free(dst);
    return 0;
}

/* aead_bench: what encryption (PCCL_ENCRYPT) costs one core: sealing and opening 64 KiB records
 * (the data links' record size) with each AEAD a link may agree on (AES-256-OCB, AES-256-GCM,
 * ChaCha20-Poly1305; OpenSSL's EVP through ccoip_aead) and libsodium's ChaCha20-Poly1305 for
 * comparison, against memcpy of the same bytes, measured in the same run and interleaved with
 * them (one pass of each per round). Timed in this thread's CPU time (a shared machine's other
 * load does not count), best of 3 rounds. CSV rows on stdout. */
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

static const char *slug(int c) {
    return c == CCOIP_AEAD_AES256_OCB ? "aes256ocb" : c == CCOIP_AEAD_AES256_GCM ? "aes256gcm" : "chacha20poly1305";
}

int main(void) {
    if (!ccoip_auth_init()) return 1;
    const size_t rec = CCOIP_DATALINK_RECORD, n = TOTAL / rec;
    uint8_t *src = malloc(rec), *dst = malloc(rec + 16), *back = malloc(rec), key[32], tag[16], nonce[12] = {0};
    memset(src, 0x5a, rec);
    memset(key, 7, sizeof key);
    double best_copy = 1e9, best_seal[4] = {1e9, 1e9, 1e9, 1e9}, best_open[4] = {1e9, 1e9, 1e9, 1e9}, best_sodium = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s();
        for (size_t i = 0; i < n; i++) {
            memcpy(dst, src, rec);
            src[i % rec] ^= dst[(i * 7) % rec]; /* keep the copy */
        }
        double c = now_s() - t;
        if (c < best_copy) best_copy = c;
        for (int k = CCOIP_AEAD_CHACHA20_POLY1305; k <= CCOIP_AEAD_AES256_OCB; k++) {
            ccoip_aead_t a, b;
            if (!ccoip_aead_init(&a, key, (ccoip_aead_cipher_t) k)) continue;
            t = now_s();
            for (size_t i = 0; i < n; i++) ccoip_aead_seal(&a, dst, dst + rec, src, rec, NULL, 0);
            double s = now_s() - t;
            if (s < best_seal[k]) best_seal[k] = s;
            /* Seal and open in turn (the opener's counter follows the sealer's): open = that - seal. */
            ccoip_aead_free(&a);
            ccoip_aead_init(&a, key, (ccoip_aead_cipher_t) k);
            ccoip_aead_init(&b, key, (ccoip_aead_cipher_t) k);
            t = now_s();
            for (size_t i = 0; i < n; i++) {
                ccoip_aead_seal(&a, dst, dst + rec, src, rec, NULL, 0);
                if (!ccoip_aead_open(&b, back, dst, rec, dst + rec, NULL, 0)) return 1;
            }
            double o = (now_s() - t) - s;
            if (o < best_open[k]) best_open[k] = o;
            ccoip_aead_free(&a);
            ccoip_aead_free(&b);
        }
        t = now_s();
        for (size_t i = 0; i < n; i++) {
            nonce[0] = (uint8_t) i;
            crypto_aead_chacha20poly1305_ietf_encrypt_detached(dst, tag, NULL, src, rec, NULL, 0, NULL, nonce, key);
        }
        double h = now_s() - t;
        if (h < best_sodium) best_sodium = h;
    }
    double gb = (double) TOTAL / 1e9, copy = gb / best_copy;
    bool unknown;
    uint8_t all = ccoip_aead_offer(NULL, &unknown);
    fprintf(stderr, "aead_bench: 64 KiB records, one core; a link between two such CPUs agrees on %s\n",
            ccoip_aead_name(ccoip_aead_choose(all, all)));
    for (int k = CCOIP_AEAD_AES256_OCB; k >= CCOIP_AEAD_CHACHA20_POLY1305; k--) {
        if (best_seal[k] >= 1e9) continue;
        printf("crypto/seal_%s_per_core,%.2f,GB/s,%.2f,%.3f\n", slug(k), gb / best_seal[k], copy, gb / best_seal[k] / copy);
        printf("crypto/open_%s_per_core,%.2f,GB/s,%.2f,%.3f\n", slug(k), gb / best_open[k], copy, gb / best_open[k] / copy);
    }
    /* The chosen AEAD against AES-256-GCM (what version 6 used), per core, seal + open. */
    int best = ccoip_aead_choose(all, all);
    if (best != CCOIP_AEAD_AES256_GCM && best_seal[CCOIP_AEAD_AES256_GCM] < 1e9 && best_seal[best] < 1e9) {
        double cb = best_seal[best] + best_open[best], cg = best_seal[CCOIP_AEAD_AES256_GCM] + best_open[CCOIP_AEAD_AES256_GCM];
        printf("crypto/seal_open_%s_vs_aes256gcm,%.2f,GB/s,%.2f,%.3f\n", slug(best), 2 * gb / cb, 2 * gb / cg, cg / cb);
    }
    printf("crypto/seal_chacha20poly1305_libsodium_per_core,%.2f,GB/s,%.2f,%.3f\n", gb / best_sodium, copy,
           gb / best_sodium / copy);
    free(src);
    free(dst);
    free(back);
    return 0;
}

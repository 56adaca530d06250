/* ccoip_aead_win32.c: the AEADs of ccoip_auth.h for the Windows build, on libsodium (cross-built
 * from Debian's source package, tools/win_libsodium.sh; there is no OpenSSL for mingw here):
 * AES-256-GCM and ChaCha20-Poly1305 (RFC 8439, IETF: 96-bit nonce), with the nonces, tags and
 * records of ccoip_aead_posix.c, so a record sealed here opens on Linux and back. libsodium has
 * no OCB: this build never offers it, so a Linux peer and a Windows peer agree on AES-256-GCM
 * (or ChaCha20-Poly1305). libsodium's one-shot calls key the cipher on every record (64 KiB): a
 * small cost beside the record's own. */
#include "ccoip/wire/ccoip_auth.h"

#include <sodium.h>
#include <string.h>

static void nonce_of(uint64_t counter, uint8_t n[12]) {
    memset(n, 0, 12);
    for (int i = 0; i < 8; i++) n[i] = (uint8_t) (counter >> (8 * i));
}

/* libsodium's CPU check runs in sodium_init (idempotent; ccoip_auth_init calls it too). */
bool ccoip_aead_aes_fast(void) { return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() != 0; }

/* libsodium's AES-256-GCM runs only where the CPU has AES-NI. */
bool ccoip_aead_supported(ccoip_aead_cipher_t c) {
    return c == CCOIP_AEAD_CHACHA20_POLY1305 || (c == CCOIP_AEAD_AES256_GCM && ccoip_aead_aes_fast());
}

bool ccoip_aead_init(ccoip_aead_t *a, const uint8_t key[32], ccoip_aead_cipher_t cipher) {
    memset(a, 0, sizeof *a);
    if (!ccoip_aead_supported(cipher)) return false;
    memcpy(a->key, key, 32);
    a->cipher = cipher;
    return true;
}

void ccoip_aead_free(ccoip_aead_t *a) { sodium_memzero(a, sizeof *a); }

void ccoip_aead_seal(ccoip_aead_t *a, uint8_t *c, uint8_t tag[CCOIP_AEAD_TAG], const uint8_t *m, size_t n,
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    unsigned long long taglen = 0;
    int rc = a->cipher == CCOIP_AEAD_AES256_GCM
                 ? crypto_aead_aes256gcm_encrypt_detached(c, tag, &taglen, m, n, ad, adlen, NULL, nonce, a->key)
                 : crypto_aead_chacha20poly1305_ietf_encrypt_detached(c, tag, &taglen, m, n, ad, adlen, NULL, nonce,
                                                                     a->key);
    if (rc != 0) memset(tag, 0, CCOIP_AEAD_TAG); /* cannot happen with valid arguments; the peer refuses it */
}

bool ccoip_aead_open(ccoip_aead_t *a, uint8_t *m, const uint8_t *c, size_t n, const uint8_t tag[CCOIP_AEAD_TAG],
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    int rc = a->cipher == CCOIP_AEAD_AES256_GCM
                 ? crypto_aead_aes256gcm_decrypt_detached(m, NULL, c, n, tag, ad, adlen, nonce, a->key)
                 : crypto_aead_chacha20poly1305_ietf_decrypt_detached(m, NULL, c, n, tag, ad, adlen, nonce, a->key);
    return rc == 0;
}

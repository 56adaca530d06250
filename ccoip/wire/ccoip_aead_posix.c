/* ccoip_aead_posix.c: the AEADs of ccoip_auth.h on OpenSSL's EVP (libcrypto.a, static):
 * AES-256-OCB, AES-256-GCM and ChaCha20-Poly1305, each with a 96-bit nonce (the record counter,
 * little-endian, then zeros) and a 16-byte tag. Which one a connection uses is agreed in its
 * handshake (ccoip_aead_choose). The Windows build has no OpenSSL: ccoip_aead_win32.c does GCM
 * and ChaCha20-Poly1305 on libsodium, the same records byte for byte, and offers no OCB. */
#include "ccoip/wire/ccoip_auth.h"

#include <openssl/evp.h>
#include <sodium.h>
#include <string.h>

static void nonce_of(uint64_t counter, uint8_t n[12]) {
    memset(n, 0, 12);
    for (int i = 0; i < 8; i++) n[i] = (uint8_t) (counter >> (8 * i));
}

static const EVP_CIPHER *evp_of(int cipher) {
    switch (cipher) {
    case CCOIP_AEAD_CHACHA20_POLY1305: return EVP_chacha20_poly1305();
    case CCOIP_AEAD_AES256_GCM: return EVP_aes_256_gcm();
    case CCOIP_AEAD_AES256_OCB: return EVP_aes_256_ocb();
    default: return NULL;
    }
}

bool ccoip_aead_supported(ccoip_aead_cipher_t c) { return evp_of(c) != NULL; }

/* libsodium's CPU check runs in sodium_init (idempotent; ccoip_auth_init calls it too). */
bool ccoip_aead_aes_fast(void) { return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() != 0; }

bool ccoip_aead_init(ccoip_aead_t *a, const uint8_t key[32], ccoip_aead_cipher_t cipher) {
    memset(a, 0, sizeof *a);
    if (evp_of(cipher) == NULL) return false;
    memcpy(a->key, key, 32);
    a->cipher = cipher;
    a->ctx = EVP_CIPHER_CTX_new();
    return a->ctx != NULL;
}

void ccoip_aead_free(ccoip_aead_t *a) {
    if (a->ctx != NULL) EVP_CIPHER_CTX_free(a->ctx);
    sodium_memzero(a, sizeof *a);
}

/* Keys the context for one direction on first use: the key schedule (and OCB's table) once per
 * instance, only the nonce per record. Every cipher here defaults to a 12-byte nonce and (OCB) a
 * 16-byte tag. */
static bool keyed(ccoip_aead_t *a, int mode) {
    if (a->mode == mode) return true;
    int ok = mode == 1 ? EVP_EncryptInit_ex(a->ctx, evp_of(a->cipher), NULL, a->key, NULL)
                       : EVP_DecryptInit_ex(a->ctx, evp_of(a->cipher), NULL, a->key, NULL);
    a->mode = ok == 1 ? mode : 0;
    return ok == 1;
}

void ccoip_aead_seal(ccoip_aead_t *a, uint8_t *c, uint8_t tag[CCOIP_AEAD_TAG], const uint8_t *m, size_t n,
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    EVP_CIPHER_CTX *x = a->ctx;
    int len = 0, ok = keyed(a, 1);
    ok = ok && EVP_EncryptInit_ex(x, NULL, NULL, NULL, nonce) == 1;
    if (ok && adlen > 0) ok = EVP_EncryptUpdate(x, NULL, &len, ad, (int) adlen) == 1;
    /* OCB may hold back a partial block until Final: the output of both is contiguous. */
    int out = 0;
    if (ok && n > 0) ok = EVP_EncryptUpdate(x, c, &out, m, (int) n) == 1;
    ok = ok && EVP_EncryptFinal_ex(x, c + out, &len) == 1 && (size_t) (out + len) == n;
    ok = ok && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, CCOIP_AEAD_TAG, tag) == 1;
    if (!ok) memset(tag, 0, CCOIP_AEAD_TAG); /* cannot happen with valid arguments; the peer refuses it */
}

bool ccoip_aead_open(ccoip_aead_t *a, uint8_t *m, const uint8_t *c, size_t n, const uint8_t tag[CCOIP_AEAD_TAG],
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    EVP_CIPHER_CTX *x = a->ctx;
    int len = 0, out = 0, ok = keyed(a, 2);
    ok = ok && EVP_DecryptInit_ex(x, NULL, NULL, NULL, nonce) == 1;
    /* The expected tag before any data: OCB wants it then, GCM and ChaCha20-Poly1305 take it too. */
    ok = ok && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, CCOIP_AEAD_TAG, (void *) tag) == 1;
    if (ok && adlen > 0) ok = EVP_DecryptUpdate(x, NULL, &len, ad, (int) adlen) == 1;
    if (ok && n > 0) ok = EVP_DecryptUpdate(x, m, &out, c, (int) n) == 1;
    return ok && EVP_DecryptFinal_ex(x, m + out, &len) == 1 && (size_t) (out + len) == n;
}

/* ccoip_aead_posix.c: the AEAD of ccoip_auth.h on OpenSSL's EVP (libcrypto.a, static): AES-256-GCM
 * where libsodium sees AES-NI and carry-less multiply, else ChaCha20-Poly1305. The Windows build
 * has no OpenSSL: ccoip_aead_win32.c does the same on libsodium, the same ciphers by the same rule,
 * so the records are the same bytes on both. */
#include "ccoip/wire/ccoip_auth.h"

#include <openssl/evp.h>
#include <sodium.h>
#include <string.h>

static void nonce_of(uint64_t counter, uint8_t n[12]) {
    memset(n, 0, 12);
    for (int i = 0; i < 8; i++) n[i] = (uint8_t) (counter >> (8 * i));
}

static const EVP_CIPHER *aead_cipher(void) {
    return crypto_aead_aes256gcm_is_available() ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
}

bool ccoip_aead_init(ccoip_aead_t *a, const uint8_t key[32]) {
    memset(a, 0, sizeof *a);
    memcpy(a->key, key, 32);
    a->ctx = EVP_CIPHER_CTX_new();
    return a->ctx != NULL;
}

void ccoip_aead_free(ccoip_aead_t *a) {
    if (a->ctx != NULL) EVP_CIPHER_CTX_free(a->ctx);
    sodium_memzero(a, sizeof *a);
}

void ccoip_aead_seal(ccoip_aead_t *a, uint8_t *c, uint8_t tag[CCOIP_AEAD_TAG], const uint8_t *m, size_t n,
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    EVP_CIPHER_CTX *x = a->ctx;
    int len = 0, ok = 1;
    if (a->mode != 1) ok = EVP_EncryptInit_ex(x, aead_cipher(), NULL, a->key, NULL) == 1;
    a->mode = 1;
    ok = ok && EVP_EncryptInit_ex(x, NULL, NULL, NULL, nonce) == 1;
    if (ok && adlen > 0) ok = EVP_EncryptUpdate(x, NULL, &len, ad, (int) adlen) == 1;
    if (ok && n > 0) ok = EVP_EncryptUpdate(x, c, &len, m, (int) n) == 1;
    ok = ok && EVP_EncryptFinal_ex(x, c + n, &len) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, CCOIP_AEAD_TAG, tag) == 1;
    if (!ok) memset(tag, 0, CCOIP_AEAD_TAG); /* cannot happen with valid arguments; the peer refuses it */
}

bool ccoip_aead_open(ccoip_aead_t *a, uint8_t *m, const uint8_t *c, size_t n, const uint8_t tag[CCOIP_AEAD_TAG],
                     const uint8_t *ad, size_t adlen) {
    uint8_t nonce[12];
    nonce_of(a->counter++, nonce);
    EVP_CIPHER_CTX *x = a->ctx;
    int len = 0, ok = 1;
    if (a->mode != 2) ok = EVP_DecryptInit_ex(x, aead_cipher(), NULL, a->key, NULL) == 1;
    a->mode = 2;
    ok = ok && EVP_DecryptInit_ex(x, NULL, NULL, NULL, nonce) == 1;
    if (ok && adlen > 0) ok = EVP_DecryptUpdate(x, NULL, &len, ad, (int) adlen) == 1;
    if (ok && n > 0) ok = EVP_DecryptUpdate(x, m, &len, c, (int) n) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, CCOIP_AEAD_TAG, (void *) tag) == 1;
    return ok && EVP_DecryptFinal_ex(x, m + n, &len) == 1;
}

const char *ccoip_aead_name(void) {
    return crypto_aead_aes256gcm_is_available() ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

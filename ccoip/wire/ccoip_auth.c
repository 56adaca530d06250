/* ccoip_auth.c: the run secret's challenge-response (ccoip_auth.h), on libsodium's HMAC-SHA256. */
#include "ccoip/wire/ccoip_auth.h"

#include <openssl/evp.h>
#include <sodium.h>
#include <string.h>

static const char KEY_LABEL[] = "pccl run secret v2";
static const char TRANSCRIPT_LABEL[] = "pccl handshake v2";
static const char STATUS_LABEL[] = "pccl status token v1";
static const char C2A_LABEL[] = "pccl session c2a v1";
static const char A2C_LABEL[] = "pccl session a2c v1";

bool ccoip_auth_init(void) { return sodium_init() >= 0; }

void ccoip_auth_derive(const void *secret, size_t len, ccoip_auth_key_t *out) {
    crypto_auth_hmacsha256_state s;
    crypto_auth_hmacsha256_init(&s, secret, len);
    crypto_auth_hmacsha256_update(&s, (const uint8_t *) KEY_LABEL, sizeof KEY_LABEL - 1);
    crypto_auth_hmacsha256_final(&s, out->k);
    sodium_memzero(&s, sizeof s);
}

void ccoip_auth_nonce(uint8_t out[CCOIP_NONCE_LEN]) { randombytes_buf(out, CCOIP_NONCE_LEN); }

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t) (v >> 8);
    p[1] = (uint8_t) v;
}

/* HMAC(K, label || transcript), the MACs' and the session keys' one shape. */
static void keyed(const ccoip_auth_key_t *key, const char *label, size_t label_len, uint8_t side, const ccoip_hello_t *h,
                  const ccoip_hello_ack_t *a, uint8_t out[32]);

void ccoip_auth_mac(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                    const ccoip_hello_ack_t *a, uint8_t out[CCOIP_MAC_LEN]) {
    keyed(key, TRANSCRIPT_LABEL, sizeof TRANSCRIPT_LABEL - 1, (uint8_t) side, h, a, out);
}

void ccoip_auth_session(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                        const ccoip_hello_ack_t *a, ccoip_session_t *out) {
    uint8_t c2a[32], a2c[32];
    keyed(key, C2A_LABEL, sizeof C2A_LABEL - 1, 'K', h, a, c2a);
    keyed(key, A2C_LABEL, sizeof A2C_LABEL - 1, 'K', h, a, a2c);
    out->encrypt = true;
    memcpy(out->send, side == CCOIP_AUTH_CONNECTOR ? c2a : a2c, 32);
    memcpy(out->recv, side == CCOIP_AUTH_CONNECTOR ? a2c : c2a, 32);
    sodium_memzero(c2a, sizeof c2a);
    sodium_memzero(a2c, sizeof a2c);
}

static void keyed(const ccoip_auth_key_t *key, const char *label, size_t label_len, uint8_t side, const ccoip_hello_t *h,
                  const ccoip_hello_ack_t *a, uint8_t out[32]) {
    /* Fixed-size fields in a fixed order: no length ambiguity in the transcript. */
    uint8_t t[1 + 2 + 1 + 16 + 1 + CCOIP_NONCE_LEN + 2 + 1 + 16 + 1 + CCOIP_NONCE_LEN];
    uint8_t *p = t;
    *p++ = side;
    put16(p, h->version), p += 2;
    *p++ = h->role;
    memcpy(p, h->uuid.b, 16), p += 16;
    *p++ = h->flags;
    memcpy(p, h->nonce, CCOIP_NONCE_LEN), p += CCOIP_NONCE_LEN;
    put16(p, a->version), p += 2;
    *p++ = a->status;
    memcpy(p, a->uuid.b, 16), p += 16;
    *p++ = a->flags;
    memcpy(p, a->nonce, CCOIP_NONCE_LEN);
    crypto_auth_hmacsha256_state s;
    crypto_auth_hmacsha256_init(&s, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&s, (const uint8_t *) label, label_len);
    crypto_auth_hmacsha256_update(&s, t, sizeof t);
    crypto_auth_hmacsha256_final(&s, out);
}

bool ccoip_auth_verify(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                       const ccoip_hello_ack_t *a, const uint8_t mac[CCOIP_MAC_LEN]) {
    uint8_t want[CCOIP_MAC_LEN];
    ccoip_auth_mac(key, side, h, a, want);
    return ccoip_auth_mac_eq(want, mac);
}

bool ccoip_auth_mac_eq(const uint8_t a[CCOIP_MAC_LEN], const uint8_t b[CCOIP_MAC_LEN]) {
    return crypto_verify_32(a, b) == 0;
}

void ccoip_auth_status_token(const ccoip_auth_key_t *key, char out[65]) {
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state s;
    crypto_auth_hmacsha256_init(&s, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&s, (const uint8_t *) STATUS_LABEL, sizeof STATUS_LABEL - 1);
    crypto_auth_hmacsha256_final(&s, mac);
    sodium_bin2hex(out, 65, mac, sizeof mac);
}

bool ccoip_auth_token_eq(const char *a, const char *b, size_t len) {
    return strlen(a) == len && strlen(b) == len && sodium_memcmp(a, b, len) == 0;
}

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

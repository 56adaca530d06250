/* ccoip_auth.c: the run secret's challenge-response (ccoip_auth.h), on libsodium's HMAC-SHA256.
 * The AEAD of encrypted links is per platform: ccoip_aead_posix.c (OpenSSL's EVP), ccoip_aead_win32.c
 * (libsodium). */
#include "ccoip/wire/ccoip_auth.h"

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
    out->cipher = (uint8_t) ccoip_aead_of_flags(a->flags);
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

/* ---- the AEAD's negotiation (both platforms; the ciphers themselves are per platform) ----- */

uint8_t ccoip_aead_flag(ccoip_aead_cipher_t c) {
    switch (c) {
    case CCOIP_AEAD_CHACHA20_POLY1305: return CCOIP_HELLO_F_CHACHA20_POLY1305;
    case CCOIP_AEAD_AES256_GCM: return CCOIP_HELLO_F_AES256_GCM;
    case CCOIP_AEAD_AES256_OCB: return CCOIP_HELLO_F_AES256_OCB;
    default: return 0;
    }
}

ccoip_aead_cipher_t ccoip_aead_of_flags(uint8_t flags) {
    switch (flags & CCOIP_HELLO_F_AEADS) {
    case CCOIP_HELLO_F_CHACHA20_POLY1305: return CCOIP_AEAD_CHACHA20_POLY1305;
    case CCOIP_HELLO_F_AES256_GCM: return CCOIP_AEAD_AES256_GCM;
    case CCOIP_HELLO_F_AES256_OCB: return CCOIP_AEAD_AES256_OCB;
    default: return CCOIP_AEAD_NONE; /* none, or several: no choice */
    }
}

/* Most preferred first. */
static const ccoip_aead_cipher_t PREFERENCE[] = {CCOIP_AEAD_AES256_OCB, CCOIP_AEAD_AES256_GCM,
                                                 CCOIP_AEAD_CHACHA20_POLY1305};

const char *ccoip_aead_name(ccoip_aead_cipher_t c) {
    switch (c) {
    case CCOIP_AEAD_CHACHA20_POLY1305: return "ChaCha20-Poly1305";
    case CCOIP_AEAD_AES256_GCM: return "AES-256-GCM";
    case CCOIP_AEAD_AES256_OCB: return "AES-256-OCB";
    default: return "none";
    }
}

static bool same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char) (*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char) (*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

uint8_t ccoip_aead_offer(const char *want, bool *unknown) {
    *unknown = false;
    if (want != NULL && *want != '\0') {
        for (size_t i = 0; i < sizeof PREFERENCE / sizeof PREFERENCE[0]; i++)
            if (same_name(want, ccoip_aead_name(PREFERENCE[i])) && ccoip_aead_supported(PREFERENCE[i]))
                return ccoip_aead_flag(PREFERENCE[i]);
        *unknown = true;
    }
    uint8_t f = 0;
    for (size_t i = 0; i < sizeof PREFERENCE / sizeof PREFERENCE[0]; i++) {
        ccoip_aead_cipher_t c = PREFERENCE[i];
        bool aes = c != CCOIP_AEAD_CHACHA20_POLY1305;
        if (ccoip_aead_supported(c) && (!aes || ccoip_aead_aes_fast())) f |= ccoip_aead_flag(c);
    }
    return f;
}

ccoip_aead_cipher_t ccoip_aead_choose(uint8_t theirs, uint8_t ours) {
    uint8_t both = theirs & ours & CCOIP_HELLO_F_AEADS;
    for (size_t i = 0; i < sizeof PREFERENCE / sizeof PREFERENCE[0]; i++)
        if (both & ccoip_aead_flag(PREFERENCE[i])) return PREFERENCE[i];
    return CCOIP_AEAD_NONE;
}

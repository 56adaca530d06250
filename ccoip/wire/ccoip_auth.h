/* ccoip_auth.h: the run secret's challenge-response, pure (no I/O): the fuzz target drives it.
 *
 * Every connection proves the secret both ways over fresh nonces from both sides:
 *   connector -> HELLO{flags, nonce_c}; acceptor -> HELLO_ACK{flags, nonce_a, mac_a};
 *   connector -> AUTH{ok, mac_c};       acceptor -> AUTH_RESULT{status}
 * with mac_x = HMAC-SHA256(K, side x || transcript), K = HMAC-SHA256(secret, label) and the
 * transcript every field of HELLO and HELLO_ACK but the MAC. Both nonces enter both MACs, so a
 * recorded handshake proves nothing on a new connection; the sides' labels differ, so one side's
 * proof cannot be reflected as the other's. The secret never crosses the wire. libsodium does the
 * hashing and the constant-time comparison. */
#ifndef CCOIP_AUTH_H
#define CCOIP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_packets.h"

#define CCOIP_SECRET_MIN 16   /* bytes: shorter secrets are refused (guessable) */
#define CCOIP_SECRET_MAX 4096

typedef struct ccoip_auth_key_t {
    uint8_t k[32];
} ccoip_auth_key_t;

typedef enum ccoip_auth_side_t { CCOIP_AUTH_ACCEPTOR = 'A', CCOIP_AUTH_CONNECTOR = 'C' } ccoip_auth_side_t;

/* libsodium's one-time set-up; false when it cannot run (no randomness source). Idempotent. */
bool ccoip_auth_init(void);

/* The key both MACs use, from the secret's bytes (CCOIP_SECRET_MIN..MAX; the caller checks). */
void ccoip_auth_derive(const void *secret, size_t len, ccoip_auth_key_t *out);

/* A fresh random nonce. */
void ccoip_auth_nonce(uint8_t out[CCOIP_NONCE_LEN]);

/* side's MAC over the handshake h -> a (a->mac is not part of it). */
void ccoip_auth_mac(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                    const ccoip_hello_ack_t *a, uint8_t out[CCOIP_MAC_LEN]);

/* Whether mac is side's MAC over h -> a; compared in constant time. */
bool ccoip_auth_verify(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                       const ccoip_hello_ack_t *a, const uint8_t mac[CCOIP_MAC_LEN]);

/* Constant-time equality of two MACs. */
bool ccoip_auth_mac_eq(const uint8_t a[CCOIP_MAC_LEN], const uint8_t b[CCOIP_MAC_LEN]);

/* Encryption (PCCL_ENCRYPT): the AEADs, by the bit each has in HELLO's and HELLO_ACK's flags
 * (version 8). The connector offers the ones it runs fast (ccoip_aead_offer); the acceptor picks
 * one of those it offers too (ccoip_aead_choose, a fixed order of preference) and names it alone
 * in HELLO_ACK. Both flags enter the transcript, so the MACs and the session keys bind the
 * choice: an attacker without the secret cannot steer two members to a weaker one. */
typedef enum ccoip_aead_cipher_t {
    CCOIP_AEAD_NONE = 0,
    CCOIP_AEAD_CHACHA20_POLY1305 = 1, /* RFC 8439 */
    CCOIP_AEAD_AES256_GCM = 2,
    CCOIP_AEAD_AES256_OCB = 3 /* RFC 7253 (OCB3), 96-bit nonce, 128-bit tag; OpenSSL only */
} ccoip_aead_cipher_t;

/* The HELLO flag of a cipher (0 for NONE) and back (NONE unless exactly one AEAD bit is set). */
uint8_t ccoip_aead_flag(ccoip_aead_cipher_t c);
ccoip_aead_cipher_t ccoip_aead_of_flags(uint8_t flags);

/* The AEAD flags this build offers: every cipher it implements that runs fast on this CPU (the
 * AES ones only where libsodium sees AES-NI and carry-less multiply; ChaCha20-Poly1305 always).
 * want (PCCL_AEAD; NULL or "" for all): one cipher's name (ccoip_aead_name, any case), offered
 * alone if this build implements it; *unknown set when want names nothing here (then all). */
uint8_t ccoip_aead_offer(const char *want, bool *unknown);

/* The acceptor's pick among the AEAD bits both offer: AES-256-OCB, then AES-256-GCM, then
 * ChaCha20-Poly1305 (measured per core on x86-64 with AES-NI in that order, docs/security.md).
 * NONE when they share none. */
ccoip_aead_cipher_t ccoip_aead_choose(uint8_t theirs, uint8_t ours);

/* A connection's two directional keys, from the run key and the whole handshake (both nonces:
 * fresh per connection), and the AEAD agreed on. `send` / `recv` as seen from one side. */
typedef struct ccoip_session_t {
    bool encrypt;
    uint8_t cipher; /* ccoip_aead_cipher_t: HELLO_ACK's choice; NONE where none was made (the master) */
    uint8_t send[32], recv[32];
} ccoip_session_t;
void ccoip_auth_session(const ccoip_auth_key_t *key, ccoip_auth_side_t side, const ccoip_hello_t *h,
                        const ccoip_hello_ack_t *a, ccoip_session_t *out);

/* AEAD of one direction (OpenSSL's EVP, ccoip_aead_posix.c; libsodium on Windows, which has no
 * OCB, ccoip_aead_win32.c); the nonce is a 64-bit counter, so it never repeats under one key (one
 * key per direction per connection). One instance either seals or opens. Open decrypts in place
 * (c may equal m) and fails on any change. */
#define CCOIP_AEAD_TAG 16
typedef struct ccoip_aead_t {
    void *ctx;    /* EVP_CIPHER_CTX (posix); unused on Windows */
    int mode;     /* posix: 0 not keyed yet, 1 sealing, 2 opening */
    int cipher;   /* ccoip_aead_cipher_t */
    uint8_t key[32];
    uint64_t counter;
} ccoip_aead_t;
/* False when memory is short or this build does not implement cipher (NONE included). */
bool ccoip_aead_init(ccoip_aead_t *a, const uint8_t key[32], ccoip_aead_cipher_t cipher);
void ccoip_aead_free(ccoip_aead_t *a);
/* n at most INT_MAX (records are 64 KiB). */
void ccoip_aead_seal(ccoip_aead_t *a, uint8_t *c, uint8_t tag[CCOIP_AEAD_TAG], const uint8_t *m, size_t n,
                     const uint8_t *ad, size_t adlen);
bool ccoip_aead_open(ccoip_aead_t *a, uint8_t *m, const uint8_t *c, size_t n, const uint8_t tag[CCOIP_AEAD_TAG],
                     const uint8_t *ad, size_t adlen);
/* "AES-256-OCB", "AES-256-GCM", "ChaCha20-Poly1305", or "none". */
const char *ccoip_aead_name(ccoip_aead_cipher_t c);
/* Whether this build implements c (at any speed). */
bool ccoip_aead_supported(ccoip_aead_cipher_t c);
/* Whether the CPU has what the AES ciphers need to run fast (libsodium's AES-NI + PCLMUL check). */
bool ccoip_aead_aes_fast(void);

/* The status endpoint's bearer token: 64 hex digits and a NUL, derived from the key (so it proves
 * knowledge of the secret without being the secret). */
void ccoip_auth_status_token(const ccoip_auth_key_t *key, char out[65]);

/* Constant-time equality of two NUL-terminated strings of equal length (false when they differ
 * in length). */
bool ccoip_auth_token_eq(const char *a, const char *b, size_t len);

#endif /* CCOIP_AUTH_H */

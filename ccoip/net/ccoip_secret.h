/* ccoip_secret.h: reading the run secret from a file (PCCL_SECRET_FILE, pccl-master --secret-file),
 * refusing files that others may read, as ssh does with private keys. */
#ifndef CCOIP_SECRET_H
#define CCOIP_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"

/* The file's bytes without trailing whitespace (a newline from `echo`), CCOIP_SECRET_MIN..MAX of
 * them, into out (CCOIP_SECRET_MAX bytes). False with one log line naming the file and what is
 * wrong: missing, readable by group or others, too short or too long. */
bool ccoip_secret_read_file(const char *path, uint8_t *out, size_t *len);

/* The same, straight to the derived key (the bytes are wiped). */
bool ccoip_secret_load_key(const char *path, ccoip_auth_key_t *key);

#endif /* CCOIP_SECRET_H */

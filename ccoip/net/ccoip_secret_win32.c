/* ccoip_secret_win32.c: the run secret from a file (ccoip_secret.h) on Windows.
 *
 * What differs from ccoip_secret_posix.c: Windows files have ACLs, not a mode, and this body does
 * not inspect them yet, so a secret file that others may read is NOT refused here (one warning
 * line says so). Protect the file with its ACL (icacls FILE /inheritance:r /grant:r %USERNAME%:R). */
#include "ccoip/net/ccoip_secret.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log/log.h"

#define MOD "ccoip"

bool ccoip_secret_read_file(const char *path, uint8_t *out, size_t *len) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        LOG_ERROR(MOD, "run secret file %s: %s", path, strerror(errno));
        return false;
    }
    if (!S_ISREG(sb.st_mode)) {
        LOG_ERROR(MOD, "run secret file %s: not a regular file", path);
        return false;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        LOG_ERROR(MOD, "run secret file %s: %s", path, strerror(errno));
        return false;
    }
    uint8_t extra;
    size_t n = fread(out, 1, CCOIP_SECRET_MAX, f);
    bool longer = n == CCOIP_SECRET_MAX && fread(&extra, 1, 1, f) == 1;
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) {
        LOG_ERROR(MOD, "run secret file %s: read error", path);
        return false;
    }
    if (longer) {
        LOG_ERROR(MOD, "run secret file %s: longer than %d bytes", path, CCOIP_SECRET_MAX);
        return false;
    }
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' || out[n - 1] == '\t')) n--;
    if (n < CCOIP_SECRET_MIN) {
        LOG_ERROR(MOD, "run secret file %s: %zu bytes, at least %d needed", path, n, CCOIP_SECRET_MIN);
        return false;
    }
    LOG_WARN(MOD, "run secret file %s: its ACL is not checked in the Windows build (keep it readable by you only)",
             path);
    *len = n;
    return true;
}

bool ccoip_secret_load_key(const char *path, ccoip_auth_key_t *key) {
    uint8_t buf[CCOIP_SECRET_MAX];
    size_t n;
    bool ok = ccoip_secret_read_file(path, buf, &n);
    if (ok) ccoip_auth_derive(buf, n, key);
    memset(buf, 0, sizeof buf); /* best effort: the key stays, the secret's bytes go */
    return ok;
}

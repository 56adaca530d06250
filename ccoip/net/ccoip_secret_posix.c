/* ccoip_secret_posix.c: the run secret from a file (ccoip_secret.h): open, fstat the mode, read. */
#include "ccoip/net/ccoip_secret.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/log.h"

#define MOD "ccoip"

bool ccoip_secret_read_file(const char *path, uint8_t *out, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        LOG_ERROR(MOD, "run secret file %s: %s", path, strerror(errno));
        return false;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        LOG_ERROR(MOD, "run secret file %s: not a regular file", path);
        close(fd);
        return false;
    }
    if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
        LOG_ERROR(MOD, "run secret file %s is accessible by group or others (mode %03o): refused; chmod 600 %s",
                  path, (unsigned) (sb.st_mode & 0777), path);
        close(fd);
        return false;
    }
    size_t n = 0;
    uint8_t extra;
    for (;;) {
        ssize_t r = n < CCOIP_SECRET_MAX ? read(fd, out + n, CCOIP_SECRET_MAX - n) : read(fd, &extra, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            LOG_ERROR(MOD, "run secret file %s: %s", path, strerror(errno));
            close(fd);
            return false;
        }
        if (r == 0) break;
        if (n == CCOIP_SECRET_MAX) {
            LOG_ERROR(MOD, "run secret file %s: longer than %d bytes", path, CCOIP_SECRET_MAX);
            close(fd);
            return false;
        }
        n += (size_t) r;
    }
    close(fd);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' || out[n - 1] == '\t')) n--;
    if (n < CCOIP_SECRET_MIN) {
        LOG_ERROR(MOD, "run secret file %s: %zu bytes, at least %d needed (e.g. head -c 32 /dev/urandom | base64)",
                  path, n, CCOIP_SECRET_MIN);
        return false;
    }
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

/* ccoip_env.c: see ccoip_env.h. */
#include "ccoip/peer/ccoip_env.h"

#include <stdlib.h>

int64_t ccoip_env_num(const char *name, int64_t def) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end == '\0' && x > 0 ? (int64_t) x : def;
}

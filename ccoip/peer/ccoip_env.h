/* ccoip_env.h: the communicator's settings from the environment (docs/environment.md lists
 * every variable). A leaf: every file of the peer may read its settings here. */
#ifndef CCOIP_ENV_H
#define CCOIP_ENV_H

#include <stdint.h>

/* A positive integer from the environment variable `name`; `def` when it is unset, empty, not a
 * number or not positive. */
int64_t ccoip_env_num(const char *name, int64_t def);

#endif /* CCOIP_ENV_H */

/* hash_cpus_posix.c: the online CPU count, hash_many's default thread count. */
#include <unistd.h>

#include "hash/hash_many.h"

unsigned hash_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned) n : 1;
}

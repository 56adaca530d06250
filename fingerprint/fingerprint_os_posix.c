/* fingerprint_os_posix.c: the CPU count for the fingerprint's default thread count (fingerprint.h). */
#include <unistd.h>

#include "fingerprint/fingerprint.h"

int fp_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int) n : 1;
}

/* hash_cpus_win32.c: the online CPU count, hash_many's default thread count. */
#include <windows.h>

#include "hash/hash_many.h"

unsigned hash_online_cpus(void) {
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (unsigned) n : 1;
}

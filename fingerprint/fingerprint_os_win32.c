/* fingerprint_os_win32.c: the CPU count for the fingerprint's default thread count (fingerprint.h). */
#include <windows.h>

#include "fingerprint/fingerprint.h"

int fp_online_cpus(void) {
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int) n : 1;
}

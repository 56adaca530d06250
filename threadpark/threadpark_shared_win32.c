/* threadpark_shared_win32.c -- no wait/wake across processes (WaitOnAddress works within one
 * process only): waits are plain sleeps, wakes do nothing (threadpark_shared.h). */
#include "threadpark/threadpark_shared.h"

#include <windows.h>

bool tpark_shared_available(void) { return false; }

int tpark_wait_shared(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    if (tpark_load(word) != expected) return TPARK_OK;
    int64_t ms = timeout_ns < 0 || timeout_ns > 1000000000 ? 1000 : (timeout_ns + 999999) / 1000000;
    Sleep((DWORD) ms);
    return TPARK_TIMEOUT;
}

void tpark_wake_shared(const uint32_t *word) { (void) word; }

/* threadpark_win32.c -- threadpark on WaitOnAddress (Windows 8+, link synchronization.lib). */
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0602 /* WaitOnAddress is declared from Windows 8 on */
#endif
#include "threadpark/threadpark.h"

#include <windows.h>

int tpark_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    DWORD ms = INFINITE;
    int clamped = 0;
    if (timeout_ns >= 0) {
        /* Round up so that a wait never ends before the timeout; INFINITE is the largest DWORD, so
         * longer waits (49 days) end as a spurious return and the caller's loop goes on. */
        uint64_t m = ((uint64_t) timeout_ns + 999999) / 1000000;
        if (m >= INFINITE) {
            m = INFINITE - 1;
            clamped = 1;
        }
        ms = (DWORD) m;
    }
    /* Returns at once when the word differs from `expected`. */
    if (WaitOnAddress((volatile VOID *) word, &expected, sizeof expected, ms)) return TPARK_OK;
    /* Only ERROR_TIMEOUT is documented; anything else is treated as a spurious return. */
    return GetLastError() == ERROR_TIMEOUT && !clamped ? TPARK_TIMEOUT : TPARK_OK;
}

void tpark_wake_one(const uint32_t *word) { WakeByAddressSingle((PVOID) word); }

void tpark_wake_all(const uint32_t *word) { WakeByAddressAll((PVOID) word); }

/* ccoip_os_win32.c: ccoip_os.h on Windows. Ctrl-C, Ctrl-Break and the console closing arrive as
 * console control events on a thread of the system's; the handler sets an event that the
 * waiting thread sleeps on. */
#include "ccoip/net/ccoip_os.h"

#include <signal.h>
#include <windows.h>

static HANDLE stop_event;
static volatile LONG stop_sig;

static BOOL WINAPI on_console_event(DWORD type) {
    if (type != CTRL_C_EVENT && type != CTRL_BREAK_EVENT && type != CTRL_CLOSE_EVENT) return FALSE;
    InterlockedExchange(&stop_sig, type == CTRL_C_EVENT ? SIGINT : SIGTERM);
    SetEvent(stop_event);
    return TRUE;
}

void ccoip_os_block_termination_signals(void) {
    if (stop_event == NULL) stop_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    SetConsoleCtrlHandler(on_console_event, TRUE);
}

int ccoip_os_wait_termination_signal(void) {
    ccoip_os_block_termination_signals();
    WaitForSingleObject(stop_event, INFINITE);
    return (int) InterlockedCompareExchange(&stop_sig, 0, 0);
}

void ccoip_os_thread_block_sigpipe(void) {}

void ccoip_os_ignore_sigpipe(void) {}

void ccoip_os_run_without_sigpipe(void (*fn)(void *), void *arg) { fn(arg); }

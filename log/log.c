#include "log/log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* UNREAD until the environment has been read. Racing first calls all store the same value. */
#define UNREAD (-100)
static atomic_int log_threshold = UNREAD;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

static bool same_word(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char) *a) != *b) return false;
    return *a == *b;
}

/* Ours and PCCL's names (TRACE, DEBUG, INFO, WARN, ERR, FATAL, NONE), in any case. */
int log_parse_level(const char *name) {
    static const struct {
        const char *name;
        int level;
    } names[] = {{"error", LOG_LEVEL_ERROR}, {"err", LOG_LEVEL_ERROR}, {"fatal", LOG_LEVEL_ERROR},
                 {"warn", LOG_LEVEL_WARN},   {"warning", LOG_LEVEL_WARN}, {"info", LOG_LEVEL_INFO},
                 {"debug", LOG_LEVEL_DEBUG}, {"trace", LOG_LEVEL_DEBUG}, {"none", LOG_LEVEL_NONE},
                 {"off", LOG_LEVEL_NONE}};
    if (name == NULL) return LOG_PARSE_FAILED;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (same_word(name, names[i].name)) return names[i].level;
    return LOG_PARSE_FAILED;
}

static int threshold(void) {
    int t = atomic_load_explicit(&log_threshold, memory_order_relaxed);
    if (t != UNREAD) return t;
    const char *env = getenv("PCCL_LOG_LEVEL");
    t = log_parse_level(env);
    if (t == LOG_PARSE_FAILED) {
        if (env != NULL && *env != '\0')
            fprintf(stderr, "pccl: ignoring PCCL_LOG_LEVEL=%s (use error, warn, info, debug or none)\n", env);
        t = LOG_LEVEL_WARN;
    }
    atomic_store_explicit(&log_threshold, t, memory_order_relaxed);
    return t;
}

int log_enabled(log_level_t level) { return (int) level <= threshold(); }

void log_set_level(log_level_t level) { atomic_store_explicit(&log_threshold, (int) level, memory_order_relaxed); }

void log_write(log_level_t level, const char *module, const char *fmt, ...) {
    if (!log_enabled(level)) return;
    char line[1280];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* POSIX, and winpthreads' (msvcrt lacks timespec_get) */
    struct tm tm;
#if defined(_WIN32)
    gmtime_s(&tm, &ts.tv_sec);
#else
    gmtime_r(&ts.tv_sec, &tm);
#endif
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
                     level_names[level], module);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, 1024, fmt, ap);
    va_end(ap);
    size_t len = (size_t) n + (m < 0 ? 0 : (m > 1023 ? 1023 : (size_t) m));
    line[len++] = '\n';
    /* One fwrite per line keeps lines from different threads whole. The flush: Windows' CRT
     * buffers stderr when it is a file or a pipe, and a killed process would lose its last lines
     * (a no-op where stderr is unbuffered). */
    fwrite(line, 1, len, stderr);
    fflush(stderr);
}

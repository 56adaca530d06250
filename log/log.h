/* log: one line per event on stderr, "timestamp LEVEL module: message".
 * The threshold comes from PCCL_LOG_LEVEL=error|warn|info|debug|none (default warn), read once;
 * PCCL's names (TRACE, ERR, FATAL, any case) are taken too. */
#ifndef PCCL_LOG_H
#define PCCL_LOG_H

typedef enum log_level_t {
    LOG_LEVEL_NONE = -1, /* nothing is printed */
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3
} log_level_t;

/* True when messages of this level are printed (cheap: one atomic load after the first call). */
int log_enabled(log_level_t level);

/* Writes one line; the message is cut at 1 KiB. Safe from any thread. */
void log_write(log_level_t level, const char *module, const char *fmt, ...)
#if defined(__MINGW32__)
    /* mingw's own printf family, built with __USE_MINGW_ANSI_STDIO=1 (msvcrt's has no %zu) */
    __attribute__((format(gnu_printf, 3, 4)))
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Overrides PCCL_LOG_LEVEL (tests, embedders). */
void log_set_level(log_level_t level);

/* Parses a level name (see above; any case); LOG_PARSE_FAILED for anything else. */
#define LOG_PARSE_FAILED (-2)
int log_parse_level(const char *name);

#define LOG_ERROR(module, ...) log_write(LOG_LEVEL_ERROR, module, __VA_ARGS__)
#define LOG_WARN(module, ...) do { if (log_enabled(LOG_LEVEL_WARN)) log_write(LOG_LEVEL_WARN, module, __VA_ARGS__); } while (0)
#define LOG_INFO(module, ...) do { if (log_enabled(LOG_LEVEL_INFO)) log_write(LOG_LEVEL_INFO, module, __VA_ARGS__); } while (0)
#define LOG_DEBUG(module, ...) do { if (log_enabled(LOG_LEVEL_DEBUG)) log_write(LOG_LEVEL_DEBUG, module, __VA_ARGS__); } while (0)

#endif /* PCCL_LOG_H */

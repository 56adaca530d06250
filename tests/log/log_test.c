/* The log format and level parsing, checked on a captured stderr. */
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "tests/common/check.h"

int main(void) {
    CHECK(log_parse_level("error") == LOG_LEVEL_ERROR);
    CHECK(log_parse_level("warn") == LOG_LEVEL_WARN);
    CHECK(log_parse_level("info") == LOG_LEVEL_INFO);
    CHECK(log_parse_level("debug") == LOG_LEVEL_DEBUG);
    CHECK(log_parse_level("verbose") == LOG_PARSE_FAILED);
    CHECK(log_parse_level(NULL) == LOG_PARSE_FAILED);
    /* PCCL's names, any case (issue 28) */
    CHECK(log_parse_level("TRACE") == LOG_LEVEL_DEBUG);
    CHECK(log_parse_level("DEBUG") == LOG_LEVEL_DEBUG);
    CHECK(log_parse_level("Info") == LOG_LEVEL_INFO);
    CHECK(log_parse_level("WARN") == LOG_LEVEL_WARN);
    CHECK(log_parse_level("ERR") == LOG_LEVEL_ERROR);
    CHECK(log_parse_level("FATAL") == LOG_LEVEL_ERROR);
    CHECK(log_parse_level("NONE") == LOG_LEVEL_NONE);
    CHECK(log_parse_level("errors") == LOG_PARSE_FAILED);
    CHECK(log_parse_level("") == LOG_PARSE_FAILED);

    unsetenv("PCCL_LOG_LEVEL");
    CHECK(log_enabled(LOG_LEVEL_WARN));  /* default warn */
    CHECK(!log_enabled(LOG_LEVEL_INFO));

    char path[] = "/tmp/pccl_log_testXXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(freopen(path, "w", stderr) != NULL);
    log_set_level(LOG_LEVEL_INFO);
    LOG_INFO("test", "hello %d", 42);
    LOG_DEBUG("test", "not shown");
    LOG_ERROR("test", "%s", "bye");
    fflush(stderr);

    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    char l1[256] = {0}, l2[256] = {0}, l3[256] = {0};
    CHECK(fgets(l1, sizeof l1, f) != NULL);
    CHECK(fgets(l2, sizeof l2, f) != NULL);
    CHECK(fgets(l3, sizeof l3, f) == NULL);
    fclose(f);
    unlink(path);
    close(fd);
    REQUIRE(freopen("/dev/tty", "w", stderr) != NULL || freopen("/dev/null", "w", stderr) != NULL);
    /* 2026-11-22T18:50:01.123Z INFO test: hello 42 */
    CHECK(strlen(l1) > 25 && l1[4] == '-' && l1[10] == 'T' && l1[23] == 'Z');
    CHECK(strcmp(l1 + 24, " INFO test: hello 42\n") == 0 || strcmp(l1 + 25, "INFO test: hello 42\n") == 0);
    CHECK(strcmp(l2 + 25, "ERROR test: bye\n") == 0);
    log_set_level(LOG_LEVEL_NONE);
    CHECK(!log_enabled(LOG_LEVEL_ERROR));
    return check_exit();
}

/* tcp_pair.h: a connected loopback TCP pair for the data link tests (TCP_NODELAY on both ends,
 * as the library sets on its own links). */
#ifndef TESTS_DATALINK_TCP_PAIR_H
#define TESTS_DATALINK_TCP_PAIR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/common/check.h"

/* *a connects, *b is accepted. */
static inline void tcp_pair(int *a, int *b) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(l >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    REQUIRE(bind(l, (struct sockaddr *) &addr, sizeof addr) == 0);
    REQUIRE(listen(l, 1) == 0);
    REQUIRE(getsockname(l, (struct sockaddr *) &addr, &alen) == 0);
    *a = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(connect(*a, (struct sockaddr *) &addr, sizeof addr) == 0);
    *b = accept(l, NULL, NULL);
    REQUIRE(*b >= 0);
    int one = 1;
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
}

#endif /* TESTS_DATALINK_TCP_PAIR_H */

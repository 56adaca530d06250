/* ccoip_addr.c: socket addresses, parsing and printing, and the iov bookkeeping of gathered
 * sends: the same on every platform. */
#include "ccoip/net/ccoip_sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

socklen_t ccoip_to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (a->inet.protocol == inetIPv6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *) ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(a->port);
        memcpy(&s->sin6_addr, a->inet.ipv6.data, 16);
        return sizeof *s;
    }
    struct sockaddr_in *s = (struct sockaddr_in *) ss;
    s->sin_family = AF_INET;
    s->sin_port = htons(a->port);
    memcpy(&s->sin_addr, a->inet.ipv4.data, 4);
    return sizeof *s;
}

void ccoip_from_sockaddr(const struct sockaddr_storage *ss, ccoip_socket_address_t *a) {
    memset(a, 0, sizeof *a);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *) ss;
        a->inet.protocol = inetIPv6;
        memcpy(a->inet.ipv6.data, &s->sin6_addr, 16);
        a->port = ntohs(s->sin6_port);
    } else {
        const struct sockaddr_in *s = (const struct sockaddr_in *) ss;
        a->inet.protocol = inetIPv4;
        memcpy(a->inet.ipv4.data, &s->sin_addr, 4);
        a->port = ntohs(s->sin_port);
    }
}

bool ccoip_parse_address(const char *s, uint16_t default_port, ccoip_socket_address_t *out) {
    char host[64];
    const char *port = NULL;
    memset(out, 0, sizeof *out);
    if (s == NULL) return false;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || (size_t) (end - s - 1) >= sizeof host) return false;
        memcpy(host, s + 1, (size_t) (end - s - 1));
        host[end - s - 1] = '\0';
        if (end[1] == ':') port = end + 2;
        else if (end[1] != '\0') return false;
    } else {
        const char *colon = strrchr(s, ':');
        size_t n = colon != NULL && strchr(s, ':') == colon ? (size_t) (colon - s) : strlen(s);
        if (n >= sizeof host) return false;
        memcpy(host, s, n);
        host[n] = '\0';
        if (colon != NULL && strchr(s, ':') == colon) port = colon + 1;
    }
    out->port = default_port;
    if (port != NULL) {
        char *end;
        long v = strtol(port, &end, 10);
        if (*port == '\0' || *end != '\0' || v < 0 || v > 65535) return false;
        out->port = (uint16_t) v;
    }
    if (inet_pton(AF_INET, host, out->inet.ipv4.data) == 1) {
        out->inet.protocol = inetIPv4;
        return true;
    }
    if (inet_pton(AF_INET6, host, out->inet.ipv6.data) == 1) {
        out->inet.protocol = inetIPv6;
        return true;
    }
    return false;
}

void ccoip_format_address(const ccoip_socket_address_t *a, char *out, size_t n) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->inet.protocol == inetIPv6) {
        inet_ntop(AF_INET6, a->inet.ipv6.data, ip, sizeof ip);
        snprintf(out, n, "[%s]:%u", ip, a->port);
    } else {
        inet_ntop(AF_INET, a->inet.ipv4.data, ip, sizeof ip);
        snprintf(out, n, "%s:%u", ip, a->port);
    }
}

bool ccoip_address_is_loopback(const ccoip_inet_address_t *a) {
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (a->protocol == inetIPv6) return memcmp(a->ipv6.data, one, 16) == 0;
    return a->ipv4.data[0] == 127;
}

bool ccoip_sockaddr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (b->ss_family == AF_INET) {
        const struct in_addr *x = &((const struct sockaddr_in *) a)->sin_addr;
        const struct in_addr *y = &((const struct sockaddr_in *) b)->sin_addr;
        return (ntohl(y->s_addr) >> 24) == 127 || x->s_addr == y->s_addr;
    }
    if (b->ss_family == AF_INET6) {
        static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        const uint8_t *x = (const uint8_t *) &((const struct sockaddr_in6 *) a)->sin6_addr;
        const uint8_t *y = (const uint8_t *) &((const struct sockaddr_in6 *) b)->sin6_addr;
        return memcmp(y, one, 16) == 0 || memcmp(x, y, 16) == 0;
    }
    return false;
}

void ccoip_iov_consume(ccoip_iov_t **iov, int *n, size_t k) {
    while (*n > 0 && k >= (*iov)->len) {
        k -= (*iov)->len;
        (*iov)++;
        (*n)--;
    }
    if (*n > 0) {
        (*iov)->base = (uint8_t *) (*iov)->base + k;
        (*iov)->len -= k;
    }
}

/* ccoip_inet.h: network addresses of the public libpccl API (PCCL 1.0 compatible). */
#ifndef CCOIP_INET_H
#define CCOIP_INET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ccoip_inet_protocol_t {
    inetIPv4,
    inetIPv6
} ccoip_inet_protocol_t;

typedef struct ccoip_ipv4_address_t {
    uint8_t data[4];
} ccoip_ipv4_address_t;

typedef struct ccoip_ipv6_address_t {
    uint8_t data[16];
} ccoip_ipv6_address_t;

/* Only the member named by `protocol` is meaningful. */
typedef struct ccoip_inet_address_t {
    ccoip_inet_protocol_t protocol;
    ccoip_ipv4_address_t ipv4;
    ccoip_ipv6_address_t ipv6;
} ccoip_inet_address_t;

typedef struct ccoip_socket_address_t {
    ccoip_inet_address_t inet;
    uint16_t port; /* host byte order */
} ccoip_socket_address_t;

#ifdef __cplusplus
}
#endif

#endif /* CCOIP_INET_H */

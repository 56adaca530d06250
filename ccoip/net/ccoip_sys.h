/* ccoip_sys.h: the system's socket headers, private to ccoip/net. The one place that tells
 * Winsock from BSD sockets by #ifdef; everything above it sees ccoip_socket.h only. */
#ifndef CCOIP_SYS_H
#define CCOIP_SYS_H

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#include "ccoip/net/ccoip_socket.h"

/* Between ccoip_addr.c and the platform bodies. */
socklen_t ccoip_to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss);
void ccoip_from_sockaddr(const struct sockaddr_storage *ss, ccoip_socket_address_t *a);
/* Both addresses of a connection (ours, the peer's) on this host. */
bool ccoip_sockaddr_same_host(const struct sockaddr_storage *ours, const struct sockaddr_storage *theirs);

#endif /* CCOIP_SYS_H */

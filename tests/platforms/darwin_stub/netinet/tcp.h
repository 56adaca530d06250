/* netinet/tcp.h stand-in for the macOS compile check: glibc's, with TCP_CONGESTION (Linux's
 * per-socket congestion control, absent from XNU) poisoned. */
#ifndef PCCL_DARWIN_STUB_NETINET_TCP_H
#define PCCL_DARWIN_STUB_NETINET_TCP_H
#include_next <netinet/tcp.h>
#undef TCP_CONGESTION
#pragma GCC poison TCP_CONGESTION
#endif

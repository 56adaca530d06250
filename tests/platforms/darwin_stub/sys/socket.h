/* sys/socket.h stand-in for the macOS compile check: glibc's, less what XNU's lacks, plus
 * SO_NOSIGPIPE (XNU's value), so that the #ifdef SO_NOSIGPIPE branches are compiled.
 * SOCK_CLOEXEC and SOCK_NONBLOCK (Linux's socket() flags) are poisoned; MSG_MORE (Linux's) is
 * undefined as on macOS, where the code's own fallback applies (a use outside an #ifndef guard
 * still compiles through glibc's enum: not caught). MSG_NOSIGNAL stays: macOS 11 (darwin20,
 * the check's target) has it. */
#ifndef PCCL_DARWIN_STUB_SYS_SOCKET_H
#define PCCL_DARWIN_STUB_SYS_SOCKET_H
#include_next <sys/socket.h>
#undef SOCK_CLOEXEC
#undef SOCK_NONBLOCK
#pragma GCC poison SOCK_CLOEXEC SOCK_NONBLOCK accept4
#undef MSG_MORE
#ifndef SO_NOSIGPIPE
#define SO_NOSIGPIPE 0x1022
#endif
#endif

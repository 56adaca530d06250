/* relay_pair.h: two connections the relay paired, spliced until both sides closed: one thread
 * per direction, each copying what it reads to the other side and passing an end of stream on
 * as a half close (so a ring link's orderly close reaches the other end). */
#ifndef CCOIP_RELAY_PAIR_H
#define CCOIP_RELAY_PAIR_H

#include <stdbool.h>

/* Takes both fds (closed when the pair ends); false (both closed) when no thread can start. */
bool relay_pair_start(int a, int b, const char *name);

#endif /* CCOIP_RELAY_PAIR_H */

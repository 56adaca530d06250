/* mach/mach.h stand-in for the macOS compile check (darwin_compile_test.sh): the few Mach types
 * that libuv's uv/darwin.h names. Apple's SDK is not here; the real header is much larger. */
#include <stdint.h>
typedef uint32_t mach_port_t;
typedef mach_port_t semaphore_t;

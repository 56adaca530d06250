/* TargetConditionals.h stand-in for the macOS compile check: macOS, not iOS. */
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0

/* stand-in: see mach.h */
#include <mach/mach.h>

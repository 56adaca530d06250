/* stand-in: see mach.h */
#include "mach.h"

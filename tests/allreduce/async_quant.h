/* async_quant.h: the quantized end-to-end trials of async_peer (quant_e2e_test). */
#ifndef ASYNC_QUANT_H
#define ASYNC_QUANT_H

#include <stdint.h>

#include "pccl.h"

typedef struct aq_result {
    int nfail;  /* all-reduces that did not return pcclSuccess */
    int nbad;   /* finite elements outside reduce/README.md's bound of the exact reduction */
    int nclass; /* elements whose class (NaN, +Inf, -Inf, finite) differs from the exact one */
    int nwrong; /* invalid quantization options that did not give pcclInvalidArgument */
    uint64_t tx_quant, tx_plain; /* tx_bytes of one float32 all-reduce, uint8 MinMax and plain */
} aq_result_t;

/* Runs `trials` random quantized all-reduces (every peer of the ring runs the same trials: the
 * description comes from seed and trial, peer p's input from seed, trial and p), checks each
 * against the exact reduction over the npeers inputs, and appends every result byte to `file`. */
aq_result_t aq_run(pcclComm_t *comm, unsigned seed, int trials, int npeers, int me, const char *file);

#endif

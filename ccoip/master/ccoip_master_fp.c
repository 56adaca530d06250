/* ccoip_master_fp.c: the admission rule on determinism fingerprints (docs/fingerprint.md).
 * The run's fingerprint is the first one a registering peer shows; every later peer that shows
 * one is compared with it, function by function. A peer without one passes unless the mode is
 * REQUIRE. The fingerprint is self-reported: this catches honest differences (another GPU
 * architecture, driver or build computing a function differently), not a peer that lies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_fp.h"
#include "fingerprint/fingerprint.h"
#include "log/log.h"

#define MOD "master"

void ccoip_mfp_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_fingerprint_t *f) {
    (void) st;
    if (c->fp == NULL && (c->fp = malloc(sizeof *c->fp)) == NULL) return; /* then it shows none */
    pcclDeterminismFingerprint_t *fp = c->fp;
    memset(fp, 0, sizeof *fp);
    snprintf(fp->device, sizeof fp->device, "%.63s", f->device ? f->device : "");
    fp->compute_capability = f->compute_capability;
    fp->driver_version = f->driver_version;
    fp->runtime_version = f->runtime_version;
    fp->flags = f->flags;
    for (uint32_t i = 0; i < f->count && i < PCCL_FINGERPRINT_MAX_ENTRIES; i++) {
        snprintf(fp->entries[i].name, sizeof fp->entries[i].name, "%.23s", f->entries[i].name);
        fp->entries[i].hash = f->entries[i].hash;
        fp->count++;
    }
}

bool ccoip_mfp_admit(ccoip_master_state_t *st, ccoip_mclient_t *c, char *why, size_t n) {
    ccoip_fp_mode_t mode = (ccoip_fp_mode_t) st->opt.fingerprint_mode;
    if (mode == CCOIP_FP_OFF) return true;
    if (c->fp == NULL) {
        if (mode != CCOIP_FP_REQUIRE) return true;
        snprintf(why, n, "refused: no determinism fingerprint (this master requires one: PCCL_REQUIRE_FINGERPRINT=1)");
        return false;
    }
    if (st->run_fp == NULL) {
        if ((st->run_fp = malloc(sizeof *st->run_fp)) == NULL) return true;
        *st->run_fp = *c->fp;
        LOG_INFO(MOD, "the run's determinism fingerprint comes from %s: %s, compute capability %u, driver %u, "
                      "runtime %u, %u functions", c->name, c->fp->device, c->fp->compute_capability,
                 c->fp->driver_version, c->fp->runtime_version, c->fp->count);
        return true;
    }
    char diff[400];
    int d = fp_compare(st->run_fp, c->fp, diff, sizeof diff);
    if (d == 0) {
        LOG_INFO(MOD, "%s (%s, compute capability %u) has the run's determinism fingerprint", c->name, c->fp->device,
                 c->fp->compute_capability);
        return true;
    }
    snprintf(why, n, "determinism fingerprint of %s (%s, compute capability %u, driver %u) differs from the run's "
                     "(%s, compute capability %u, driver %u) in: %s", c->name, c->fp->device,
             c->fp->compute_capability, c->fp->driver_version, st->run_fp->device, st->run_fp->compute_capability,
             st->run_fp->driver_version, diff);
    if (mode == CCOIP_FP_LOG) {
        LOG_WARN(MOD, "admitting although the %s", why);
        return true;
    }
    char tmp[512];
    snprintf(tmp, sizeof tmp, "refused: %s", why);
    snprintf(why, n, "%s", tmp);
    return false;
}

void ccoip_mfp_on_leave(ccoip_mclient_t *c) {
    free(c->fp);
    c->fp = NULL;
}

void ccoip_mfp_free(ccoip_master_state_t *st) {
    free(st->run_fp);
    st->run_fp = NULL;
}

/* ccoip_peer_fp.c: the fingerprint a peer shows the master (PCCL_REQUIRE_FINGERPRINT=1;
 * docs/fingerprint.md): the file PCCL_FINGERPRINT_FILE names (as `pccl-fingerprint --out` wrote
 * it), else computed once per process on the GPU, else the CPU reference. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_fp.h"
#include "cuda/cuda_table.h"
#include "fingerprint/fingerprint.h"
#include "log/log.h"

#define MOD "pccl"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pcclDeterminismFingerprint_t cached;
static bool cached_ok;

static bool from_file(const char *path, pcclDeterminismFingerprint_t *fp) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        LOG_ERROR(MOD, "PCCL_FINGERPRINT_FILE: cannot open %s", path);
        return false;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return fp_parse(buf, fp);
}

static void compute(void) {
    const char *path = getenv("PCCL_FINGERPRINT_FILE");
    if (path != NULL && *path) {
        cached_ok = from_file(path, &cached);
        return;
    }
    const cuda_table_t *cu = cuda_table();
    int n = 0;
    if (cu != NULL && cu->device_count(&n) == CUDA_OK && n > 0) {
        cached_ok = cu->fingerprint(&cached, 0) == CUDA_OK;
        if (!cached_ok) LOG_ERROR(MOD, "computing the determinism fingerprint on the GPU failed");
        return;
    }
    LOG_INFO(MOD, "no GPU: showing the master the CPU reference fingerprint");
    cached_ok = fp_cpu_fingerprint(&cached, 0, 0) == pcclSuccess;
}

bool ccoip_peer_fingerprint_wanted(void) {
    const char *v = getenv("PCCL_REQUIRE_FINGERPRINT");
    return v != NULL && strcmp(v, "1") == 0;
}

bool ccoip_peer_fingerprint_packet(ccoip_packet_t *p, ccoip_fp_entry_t entries[CCOIP_MAX_FP_ENTRIES]) {
    pthread_once(&once, compute);
    if (!cached_ok) return false;
    memset(p, 0, sizeof *p);
    p->type = CCOIP_PKT_C2M_FINGERPRINT;
    ccoip_fingerprint_t *f = &p->u.fingerprint;
    f->compute_capability = cached.compute_capability;
    f->driver_version = cached.driver_version;
    f->runtime_version = cached.runtime_version;
    f->flags = cached.flags & (PCCL_FINGERPRINT_QUICK | PCCL_FINGERPRINT_CPU);
    f->device = cached.device;
    f->count = cached.count < CCOIP_MAX_FP_ENTRIES ? cached.count : CCOIP_MAX_FP_ENTRIES;
    for (uint32_t i = 0; i < f->count; i++) entries[i] = (ccoip_fp_entry_t){cached.entries[i].name, cached.entries[i].hash};
    f->entries = entries;
    return true;
}

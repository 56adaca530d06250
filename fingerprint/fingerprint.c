/* fingerprint.c: the function list, combining batch hashes, comparison, text form. */
#include "fingerprint/fingerprint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"
#include "log/log.h"

#define MOD "fingerprint"

const fp_func_t fp_funcs[] = {
    {"expf", FP_UNARY, FP_OP_EXPF, false},
    {"logf", FP_UNARY, FP_OP_LOGF, false},
    {"tanhf", FP_UNARY, FP_OP_TANHF, false},
    {"rsqrtf", FP_UNARY, FP_OP_RSQRTF, false},
    {"erff", FP_UNARY, FP_OP_ERFF, false},
    {"sinf", FP_UNARY, FP_OP_SINF, false},
    {"sqrtf", FP_UNARY, FP_OP_SQRTF, true},
    {"rcpf", FP_UNARY, FP_OP_RCP, true},
    {"f32_to_f16", FP_TO_F16, 0, true},
    {"f32_to_bf16", FP_TO_BF16, 0, true},
    {"f16_to_f32", FP_FROM_F16, 0, true},
    {"bf16_to_f32", FP_FROM_BF16, 0, true},
    {"fma_dot256", FP_DOT, 0, true},
    {"tree_sum1024", FP_TREE, 0, true},
};
const size_t fp_nfuncs = sizeof fp_funcs / sizeof fp_funcs[0];

size_t fp_out_size(const fp_func_t *f) { return f->kind == FP_TO_F16 || f->kind == FP_TO_BF16 ? 2 : 4; }

void fp_init(pcclDeterminismFingerprint_t *fp, uint32_t flags) {
    memset(fp, 0, sizeof *fp);
    fp->flags = flags;
    for (size_t i = 0; i < fp_nfuncs; i++) {
        if ((flags & PCCL_FINGERPRINT_CPU) && !fp_funcs[i].exact) continue;
        snprintf(fp->entries[fp->count].name, sizeof fp->entries[0].name, "%.23s", fp_funcs[i].name);
        fp->count++;
    }
}

uint64_t fp_combine(const uint64_t *batch_hashes, size_t n) {
    unsigned char buf[8 * 64];
    if (n > 64) n = 64;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) buf[8 * i + (size_t) b] = (unsigned char) (batch_hashes[i] >> (8 * b));
    return hash_simple(buf, 8 * n);
}

static const pcclFingerprintEntry_t *find(const pcclDeterminismFingerprint_t *fp, const char *name) {
    for (uint32_t i = 0; i < fp->count && i < PCCL_FINGERPRINT_MAX_ENTRIES; i++)
        if (strncmp(fp->entries[i].name, name, sizeof fp->entries[i].name) == 0) return &fp->entries[i];
    return NULL;
}

static void append(char *why, size_t n, const char *name, const char *note) {
    size_t len = strlen(why);
    if (len + 1 < n) snprintf(why + len, n - len, "%s%.24s%s", len ? ", " : "", name, note);
}

int fp_compare(const pcclDeterminismFingerprint_t *a, const pcclDeterminismFingerprint_t *b, char *why, size_t n) {
    if (n > 0) why[0] = 0;
    if ((a->flags & PCCL_FINGERPRINT_QUICK) != (b->flags & PCCL_FINGERPRINT_QUICK)) {
        if (n > 0) snprintf(why, n, "computed over different input sets (quick and full)");
        return -1;
    }
    int diff = 0;
    for (uint32_t i = 0; i < a->count && i < PCCL_FINGERPRINT_MAX_ENTRIES; i++) {
        const pcclFingerprintEntry_t *e = find(b, a->entries[i].name);
        if (e == NULL) {
            /* A CPU-only fingerprint lacks the transcendental functions: that is not a mismatch
             * of what both computed, but it proves nothing about them either. */
            if ((b->flags & PCCL_FINGERPRINT_CPU) && !(a->flags & PCCL_FINGERPRINT_CPU)) continue;
            append(why, n, a->entries[i].name, " (missing)");
            diff++;
        } else if (e->hash != a->entries[i].hash) {
            append(why, n, a->entries[i].name, "");
            diff++;
        }
    }
    for (uint32_t i = 0; i < b->count && i < PCCL_FINGERPRINT_MAX_ENTRIES; i++) {
        if (find(a, b->entries[i].name) != NULL) continue;
        if ((a->flags & PCCL_FINGERPRINT_CPU) && !(b->flags & PCCL_FINGERPRINT_CPU)) continue;
        append(why, n, b->entries[i].name, " (not in the run's)");
        diff++;
    }
    return diff;
}

int fp_format(const pcclDeterminismFingerprint_t *fp, char *out, size_t n) {
    size_t len = 0;
#define PUT(...)                                                                    \
    do {                                                                            \
        int w_ = snprintf(out + (len < n ? len : n), len < n ? n - len : 0, __VA_ARGS__); \
        if (w_ > 0) len += (size_t) w_;                                             \
    } while (0)
    PUT("device %.63s\n", fp->device);
    PUT("compute_capability %u\n", fp->compute_capability);
    PUT("driver_version %u\n", fp->driver_version);
    PUT("runtime_version %u\n", fp->runtime_version);
    PUT("flags %u\n", fp->flags);
    for (uint32_t i = 0; i < fp->count && i < PCCL_FINGERPRINT_MAX_ENTRIES; i++)
        PUT("hash %.24s %016" PRIx64 "\n", fp->entries[i].name, fp->entries[i].hash);
#undef PUT
    return (int) len;
}

bool fp_parse(const char *text, pcclDeterminismFingerprint_t *fp) {
    memset(fp, 0, sizeof *fp);
    const char *p = text;
    int line_no = 0;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t) (end - p) : strlen(p);
        char line[160];
        line_no++;
        if (len >= sizeof line) {
            LOG_ERROR(MOD, "fingerprint text: line %d is too long", line_no);
            return false;
        }
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (end ? 1 : 0);
        char name[64];
        unsigned v;
        uint64_t h;
        if (len == 0) continue;
        if (strncmp(line, "device ", 7) == 0) {
            snprintf(fp->device, sizeof fp->device, "%.63s", line + 7);
        } else if (sscanf(line, "compute_capability %u", &v) == 1) {
            fp->compute_capability = v;
        } else if (sscanf(line, "driver_version %u", &v) == 1) {
            fp->driver_version = v;
        } else if (sscanf(line, "runtime_version %u", &v) == 1) {
            fp->runtime_version = v;
        } else if (sscanf(line, "flags %u", &v) == 1) {
            fp->flags = v;
        } else if (sscanf(line, "hash %63s %" SCNx64, name, &h) == 2 && strlen(name) < sizeof fp->entries[0].name &&
                   fp->count < PCCL_FINGERPRINT_MAX_ENTRIES) {
            snprintf(fp->entries[fp->count].name, sizeof fp->entries[0].name, "%.23s", name);
            fp->entries[fp->count].hash = h;
            fp->count++;
        } else {
            LOG_ERROR(MOD, "fingerprint text: line %d is not understood: %s", line_no, line);
            return false;
        }
    }
    if (fp->count == 0) {
        LOG_ERROR(MOD, "fingerprint text: no hashes");
        return false;
    }
    return true;
}

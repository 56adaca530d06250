/* All-reduce of CUDA device buffers between peer processes on one GPU, through the real
 * pccl-master:
 *   device_allreduce_test MASTER_BIN [--bench]
 * The driver starts the master and NPEERS copies of itself ("peer" mode); each peer all-reduces
 * device buffers (float32 and bfloat16; Sum and Avg; 1 element to 64 MiB; separate and in-place
 * buffers), copies the result back and checks it: equal to the same all-reduce over host
 * buffers, bit for bit; for Sum, equal to the exact expected values (small integers, exact in
 * both types); and the driver compares every peer's result hash. Inputs of 1 MiB and more are
 * written by an asynchronous copy still in flight when pcclAllReduce starts. A host/device mix
 * is refused.
 * --bench: two peers time device- and host-buffer all-reduces of 64 and 256 MiB float32 and print
 * CSV rows (name,value,unit,baseline,ratio) with the host-buffer figure as the baseline.
 * Without CUDA built in, or without a GPU, it prints "skipped: no GPU" and passes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/cuda/gpu_peer.h"

/* GPUs on this machine (the driver's view, before any CUDA_VISIBLE_DEVICES of its peers). */
static int gpu_count(void) {
    static int n = -1;
    if (n < 0 && (cuda_table() == NULL || cuda_table()->device_count(&n) != CUDA_OK)) n = 0;
    return n;
}

#define NPEERS 3
#define MiB ((size_t) 1 << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint16_t float_to_bf16(float f) { /* exact for the small integers used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t) (u >> 16);
}

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t) h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Peer p's element i: a small integer, so every sum is exact in float32 and bfloat16. */
static float input_value(int p, size_t i) {
    return (float) ((i * 7 + (size_t) p * 13) % 61);
}

static void fill(void *buf, pcclDataType_t dt, int p, size_t count) {
    for (size_t i = 0; i < count; i++) {
        float v = input_value(p, i);
        if (dt == pcclFloat) ((float *) buf)[i] = v;
        else ((uint16_t *) buf)[i] = float_to_bf16(v);
    }
}

static float element(const void *buf, pcclDataType_t dt, size_t i) {
    return dt == pcclFloat ? ((const float *) buf)[i] : bf16_to_float(((const uint16_t *) buf)[i]);
}

typedef struct dcase {
    pcclDataType_t dt;
    pcclRedOp_t op;
    size_t count;
    int inplace;
} dcase_t;

/* One case on this peer: prints "case ID HASH" or "case ID FAIL why". */
static void run_case(const cuda_table_t *cu, pcclComm_t *comm, int id, const dcase_t *c, int p, int world) {
    size_t esz = c->dt == pcclFloat ? 4 : 2, bytes = c->count * esz;
    void *h_in = malloc(bytes), *h_host = malloc(bytes), *h_dev = malloc(bytes);
    void *d_in = NULL, *d_out = NULL, *pinned = NULL;
    const char *why = NULL;
    if (!h_in || !h_host || !h_dev || cu->device_alloc(&d_in, bytes) != CUDA_OK ||
        (!c->inplace && cu->device_alloc(&d_out, bytes) != CUDA_OK)) {
        why = "allocation";
        goto done;
    }
    if (c->inplace) d_out = d_in;
    fill(h_in, c->dt, p, c->count);
    /* Large inputs are written by an asynchronous copy on the legacy default stream that may
     * still run when pcclAllReduce starts (as a training step's last kernel would): the library
     * must wait for it. */
    if (bytes >= ((size_t) 1 << 20) && cu->host_alloc(&pinned, 2 * bytes) == CUDA_OK) {
        /* Ten copies of zeros first (tens of ms of queued work), the input last. */
        memset(pinned, 0, bytes);
        memcpy((char *) pinned + bytes, h_in, bytes);
        for (int k = 0; k <= 10 && !why; k++)
            if (cu->memcpy_h2d_async(d_in, (char *) pinned + (k == 10 ? bytes : 0), bytes, NULL) != CUDA_OK)
                why = "async copy in";
    } else if (cu->memcpy_h2d(d_in, h_in, bytes, NULL) != CUDA_OK) {
        why = "copy in";
    }
    if (why) goto done;
    pcclReduceDescriptor_t d = {c->count, c->op, (uint64_t) id, {c->dt, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
    pcclReduceInfo_t info;
    pcclResult_t ar = pcclAllReduce(d_in, d_out, &d, comm, &info);
    if (pinned != NULL) cu->host_free(pinned); /* after the all-reduce: the copy may still run */
    pinned = NULL;
    if (ar != pcclSuccess) {
        why = "device all-reduce";
        goto done;
    }
    if (cu->memcpy_d2h(h_dev, d_out, bytes, NULL) != CUDA_OK) {
        why = "copy out";
        goto done;
    }
    d.tag = (uint64_t) id + 1000;
    if (pcclAllReduce(h_in, h_host, &d, comm, NULL) != pcclSuccess) {
        why = "host all-reduce";
        goto done;
    }
    if (memcmp(h_dev, h_host, bytes) != 0) {
        why = "device result differs from the host-buffer result";
        goto done;
    }
    if (info.local_world_size != (uint32_t) world) {
        why = "reduce info world size";
        goto done;
    }
    for (size_t i = 0; i < c->count && c->op == pcclSum; i++) {
        float want = 0;
        for (int q = 0; q < world; q++) want += input_value(q, i);
        if (element(h_dev, c->dt, i) != want) {
            fprintf(stderr, "peer %d case %d: element %zu is %g, want %g\n", p, id, i, element(h_dev, c->dt, i),
                    want);
            why = "wrong sum";
            goto done;
        }
    }
done:
    if (why) printf("case %d FAIL %s\n", id, why);
    else printf("case %d %016" PRIx64 "\n", id, fnv(h_dev, bytes));
    fflush(stdout);
    if (pinned != NULL) cu->host_free(pinned);
    if (d_out != d_in) cu->device_free(d_out);
    cu->device_free(d_in);
    free(h_in);
    free(h_host);
    free(h_dev);
}

static const dcase_t cases[] = {
    {pcclFloat, pcclSum, 1, 0},
    {pcclFloat, pcclSum, 1000003, 0},
    {pcclFloat, pcclAvg, 1000003, 0},
    {pcclBFloat16, pcclSum, 777777, 0},
    {pcclBFloat16, pcclAvg, 777777, 1},
    {pcclFloat, pcclSum, 16 * MiB, 1}, /* 64 MiB */
    {pcclBFloat16, pcclSum, 5, 1},
};
#define NCASES ((int) (sizeof cases / sizeof cases[0]))

static double med(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* Seconds per all-reduce, `iters` back to back (every call waits for the result). */
static double op_time(pcclComm_t *comm, void *send, void *recv, size_t count, uint64_t tag, int iters) {
    pcclReduceDescriptor_t d = {count, pcclSum, tag, {pcclFloat, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        if (pcclAllReduce(send, recv, &d, comm, NULL) != pcclSuccess) return -1;
    return (now_s() - t0) / iters;
}

/* --bench, one size: ROUNDS interleaved rounds (the order flips every round) of host- and
 * device-buffer all-reduces, then the copies alone: every peer copies the whole buffer device to
 * host, then host to device, at the same time as the others (they leave the all-reduce before
 * together), through the same pinned memory the op uses. Medians; peer 0 prints the rows. */
#define ROUNDS 7
static int bench_size(const cuda_table_t *cu, pcclComm_t *comm, int p, int world, size_t bytes, uint64_t tag) {
    size_t count = bytes / 4;
    int iters = bytes <= 16 * MiB ? 8 : bytes <= 64 * MiB ? 4 : 2;
    void *hs = malloc(bytes), *hr = malloc(bytes), *ds = NULL, *dr = NULL, *pin = NULL;
    if (!hs || !hr || cu->device_alloc(&ds, bytes) != CUDA_OK || cu->device_alloc(&dr, bytes) != CUDA_OK ||
        cu->host_alloc(&pin, bytes) != CUDA_OK) {
        printf("FAIL bench allocation\n");
        return 1;
    }
    fill(hs, pcclFloat, p, count);
    cu->memcpy_h2d(ds, hs, bytes, NULL);
    double th[ROUNDS], td[ROUNDS], tin[ROUNDS], tout[ROUNDS], tv[3][ROUNDS];
    void *pin2 = NULL;
    if (getenv("PCCL_DEVICE_BENCH_HOSTVARIANTS") != NULL && cu->host_alloc(&pin2, bytes) != CUDA_OK) {
        printf("FAIL bench allocation\n");
        return 1;
    }
    if (op_time(comm, hs, hr, count, tag, 1) < 0 || op_time(comm, ds, dr, count, tag + 1, 1) < 0) { /* warm-up */
        printf("FAIL bench all-reduce\n");
        return 1;
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            int dev = (k + r) % 2;
            double t = dev ? op_time(comm, ds, dr, count, tag + 1, iters) : op_time(comm, hs, hr, count, tag, iters);
            if (t < 0) {
                printf("FAIL bench all-reduce\n");
                return 1;
            }
            (dev ? td : th)[r] = t;
        }
        if (getenv("PCCL_DEVICE_BENCH_HOSTVARIANTS") != NULL) { /* where the ring's own time goes */
            double a = op_time(comm, hs, hs, count, tag + 100, iters);        /* in place, malloc */
            double b = op_time(comm, pin, pin2, count, tag + 101, iters);     /* page-locked, two */
            double c = op_time(comm, pin, pin, count, tag + 102, iters);      /* page-locked, in place */
            tv[0][r] = a, tv[1][r] = b, tv[2][r] = c;
            fill(hs, pcclFloat, p, count);
        }
        double t0 = now_s();
        cu->memcpy_d2h(pin, ds, bytes, NULL);
        double t1 = now_s();
        cu->memcpy_h2d(dr, pin, bytes, NULL);
        tin[r] = t1 - t0;
        tout[r] = now_s() - t1;
    }
    /* The device result equals the host result. */
    void *hd = malloc(bytes);
    if (hd == NULL || cu->memcpy_d2h(hd, dr, bytes, NULL) != CUDA_OK ||
        op_time(comm, ds, dr, count, tag + 1, 1) < 0 || cu->memcpy_d2h(hd, dr, bytes, NULL) != CUDA_OK ||
        op_time(comm, hs, hr, count, tag, 1) < 0 || memcmp(hd, hr, bytes) != 0) {
        printf("FAIL bench: device result differs from the host result\n");
        return 1;
    }
    free(hd);
    double host = med(th, ROUNDS), dev = med(td, ROUNDS), in = med(tin, ROUNDS), out = med(tout, ROUNDS);
    double f = 2.0 * (world - 1) / world * (double) bytes / 1e9;
    if (p == 0) {
        size_t m = bytes / MiB;
        const char *mode = getenv("PCCL_DEVICE_COPIES");
        if (mode != NULL)
            printf("row device_allreduce_busbw_%zuMiB_%dp_%s,%.3f,GB/s,%.3f,%.3f\n", m, world, mode, f / dev, f / host,
                   host / dev);
    }
    if (p == 0 && pin2 != NULL) {
        static const char *vn[3] = {"host_inplace", "pinned_two_blocks", "pinned_inplace"};
        for (int v = 0; v < 3; v++)
            printf("row device_allreduce_ring_%s_%zuMiB_%dp,%.3f,ms,%.3f,%.3f\n", vn[v], bytes / MiB, world,
                   med(tv[v], ROUNDS) * 1e3, host * 1e3, med(tv[v], ROUNDS) / host);
    }
    if (pin2 != NULL) cu->host_free(pin2);
    if (p == 0 && getenv("PCCL_DEVICE_COPIES") == NULL) {
        size_t m = bytes / MiB;
        printf("row device_allreduce_busbw_%zuMiB_%dp,%.3f,GB/s,%.3f,%.3f\n", m, world, f / dev, f / host, host / dev);
        printf("row device_allreduce_d2h_all_peers_%zuMiB_%dp_vs_host_ring,%.3f,ms,%.3f,%.3f\n", m, world, in * 1e3,
               host * 1e3, in / host);
        printf("row device_allreduce_h2d_all_peers_%zuMiB_%dp_vs_host_ring,%.3f,ms,%.3f,%.3f\n", m, world, out * 1e3,
               host * 1e3, out / host);
    }
    cu->device_free(ds);
    cu->device_free(dr);
    cu->host_free(pin);
    free(hs);
    free(hr);
    return 0;
}

/* Whether the space-separated list holds the word. */
static bool has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *at = list; (at = strstr(at, word)) != NULL; at += n)
        if ((at == list || at[-1] == ' ') && (at[n] == '\0' || at[n] == ' ')) return true;
    return false;
}

static int peer_main(int port, int p, int world, int bench) {
    const cuda_table_t *cu = cuda_table();
    pcclComm_t *comm = gpu_peer_connect(port, world);
    if (comm == NULL) {
        printf("FAIL connect\n");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    if (!bench) {
        for (int i = 0; i < NCASES; i++) run_case(cu, comm, i, &cases[i], p, world);
        /* A host sendbuf with a device recvbuf is refused. */
        void *d = NULL;
        float h[16] = {0};
        pcclReduceDescriptor_t desc = {16, pcclSum, 99, {pcclFloat, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
        pcclResult_t r = cu->device_alloc(&d, sizeof h) == CUDA_OK ? pcclAllReduce(h, d, &desc, comm, NULL)
                                                                   : pcclInternalError;
        printf("mixed %d\n", (int) r);
        cu->device_free(d);
    } else {
        /* PCCL_DEVICE_BENCH_SIZES="16 64" (MiB) times those sizes alone (a traced run, say). */
        const size_t sizes[] = {16 * MiB, 64 * MiB, 256 * MiB};
        const char *only = getenv("PCCL_DEVICE_BENCH_SIZES");
        for (int k = 0; k < 3; k++) {
            char mib[16];
            snprintf(mib, sizeof mib, "%zu", sizes[k] / MiB);
            if (only != NULL && !has_word(only, mib)) continue;
            if (bench_size(cu, comm, p, world, sizes[k], 10 + 2 * (uint64_t) k) != 0) return 1;
        }
    }
    printf("done\n");
    fflush(stdout);
    pcclDestroyCommunicator(comm);
    return 0;
}

/* One master and `world` peers; returns the failures. */
static int session(char *self, char *master_bin, int world, int bench) {
    h_proc_t master, peers[NPEERS];
    int port = h_start_master(&master, master_bin, NULL);
    if (port <= 0) {
        fprintf(stderr, "cannot start the master\n");
        return 1;
    }
    char port_s[16], world_s[16], idx_s[NPEERS][16];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(world_s, sizeof world_s, "%d", world);
    for (int i = 0; i < world; i++) {
        snprintf(idx_s[i], sizeof idx_s[i], "%d", i);
        char *args[] = {self, "peer", port_s, idx_s[i], world_s, bench ? "bench" : NULL, NULL};
        gpu_peer_pick_device(i, gpu_count());
        if (!h_spawn(&peers[i], args)) return 1;
    }
    int failures = 0;
    char line[512], first[NCASES][256];
    for (int i = 0; i < world; i++) {
        if (!h_read_line(&peers[i], line, sizeof line, 60000) || strcmp(line, "ready") != 0) {
            fprintf(stderr, "peer %d did not get ready: %s\n", i, line);
            return 1;
        }
    }
    for (int i = 0; i < world; i++) {
        for (int n = 0;; n++) {
            if (!h_read_line(&peers[i], line, sizeof line, 120000)) {
                fprintf(stderr, "peer %d: no answer\n", i);
                return 1;
            }
            if (strcmp(line, "done") == 0) break;
            if (strncmp(line, "row ", 4) == 0) {
                printf("%s\n", line + 4);
                continue;
            }
            int id = -1;
            char rest[256] = "";
            if (sscanf(line, "case %d %255[^\n]", &id, rest) == 2 && id >= 0 && id < NCASES) {
                if (strncmp(rest, "FAIL", 4) == 0) {
                    fprintf(stderr, "peer %d case %d (dtype %d op %d count %zu): %s\n", i, id, cases[id].dt,
                            cases[id].op, cases[id].count, rest);
                    failures++;
                } else if (i == 0) {
                    snprintf(first[id], sizeof first[id], "%s", rest);
                } else if (strcmp(first[id], rest) != 0) {
                    fprintf(stderr, "case %d: peer %d's result hash %s differs from peer 0's %s\n", id, i, rest,
                            first[id]);
                    failures++;
                }
            } else if (sscanf(line, "mixed %d", &id) == 1) {
                if (id != pcclInvalidArgument) {
                    fprintf(stderr, "peer %d: host/device mix gave %d, want pcclInvalidArgument\n", i, id);
                    failures++;
                }
            } else {
                fprintf(stderr, "peer %d: %s\n", i, line);
                failures++;
            }
        }
    }
    for (int i = 0; i < world; i++) h_wait(&peers[i], 10000);
    h_kill(&master, 15);
    h_wait(&master, 5000);
    if (!bench) printf("device_allreduce_test: %d cases x %d peers, %d failures\n", NCASES, world, failures);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "peer") == 0)
        return peer_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5);
    const cuda_table_t *cu = cuda_table();
    int ndev = 0;
    if (cu == NULL || cu->device_count(&ndev) != CUDA_OK || ndev == 0) {
        printf("device_allreduce_test: skipped: no GPU%s\n", cu == NULL ? " (CUDA not built in)" : "");
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: device_allreduce_test MASTER_BIN [--bench]\n");
        return 2;
    }
    int bench = argc > 2 && strcmp(argv[2], "--bench") == 0;
    h_init(bench ? 600 : 180);
    if (!bench) return session(argv[0], argv[1], NPEERS, 0) ? 1 : 0;
    /* --bench: 2 peers, then 3; PCCL_DEVICE_BENCH_MODES="late whole" adds sessions with
     * PCCL_DEVICE_COPIES set so (rows suffixed _late, _whole). */
    const char *modes = getenv("PCCL_DEVICE_BENCH_MODES");
    char list[128];
    int failures = 0;
    for (int world = 2; world <= 3; world++) {
        snprintf(list, sizeof list, "default %s", modes ? modes : "");
        for (char *save = NULL, *m = strtok_r(list, " ", &save); m != NULL; m = strtok_r(NULL, " ", &save)) {
            if (strcmp(m, "default") == 0) unsetenv("PCCL_DEVICE_COPIES");
            else setenv("PCCL_DEVICE_COPIES", m, 1);
            failures += session(argv[0], argv[1], world, 1);
        }
    }
    unsetenv("PCCL_DEVICE_COPIES");
    return failures ? 1 : 0;
}

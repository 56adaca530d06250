/* pcclAllReduceOnStream between 3 peer processes on one GPU, through the real pccl-master:
 *   stream_allreduce_test MASTER_BIN [--quick]
 * 1. "steps" (twice: the stream memory-op gate, then PCCL_STREAM_GATE=kernel): every peer runs
 *    100 steps (20 with the kernel gate) on a non-blocking stream: a kernel writes sendbuf
 *    (step-dependent values; every 10th step behind a 30 ms GPU spin), pcclAllReduceOnStream,
 *    a kernel copies recvbuf into that step's snapshot. Up to 8 ops stay in flight; the host
 *    never synchronizes the stream until the end. Checked: the call returns while the stream is
 *    still busy (it did not wait for the spin), every handle says pcclSuccess, every snapshot
 *    equals the exact sums and a host-buffer pcclAllReduce of the same input byte for byte, and
 *    every peer's snapshots hash the same.
 * 2. "kill": all 3 peers enqueue a 64 MiB op; peer 2 SIGKILLs itself 20 ms later. Peers 0 and 1:
 *    their stream is released (within 60 s), the handle says why (not pcclSuccess), and the
 *    kernel queued after the op saw recvbuf filled with 0xFF bytes, as documented.
 * --quick: 10 steps, no kill phase (for compute-sanitizer, which slows everything).
 * --bench: 2 peers time a training-like step (4 buckets of 16 MiB: gradient kernel, all-reduce,
 * optimizer kernel) blocking (pcclAllReduce on the legacy default stream) against stream-ordered
 * (gradients on one stream, each bucket's all-reduce + optimizer kernel on another), and print
 * CSV rows (name,value,unit,baseline,ratio) with the blocking step as the baseline, and the
 * fraction of the hideable time (the smaller of compute-only and all-reduce-only) that was hidden.
 * Without CUDA built in, or without a GPU, it prints "skipped: no GPU" and passes. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/cuda/gpu_peer.h"
#include "tests/cuda/test_kernels.h"

#define NPEERS 3
#define MAX_IN_FLIGHT 8

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + 1e-6 * (double) ts.tv_nsec;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint16_t float_to_bf16(float f) { /* exact for the small integers used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t) (u >> 16);
}

typedef struct scase {
    pcclDataType_t dt;
    pcclRedOp_t op;
    size_t count;
    int inplace;
} scase_t;

static const scase_t cases[] = {
    {pcclFloat, pcclSum, 1000003, 0}, {pcclBFloat16, pcclSum, 777777, 0}, {pcclFloat, pcclAvg, 262147, 0},
    {pcclFloat, pcclSum, 1 << 20, 1}, {pcclFloat, pcclSum, 1, 0},
};
#define NCASES ((int) (sizeof cases / sizeof cases[0]))

static size_t esz_of(pcclDataType_t dt) { return dt == pcclFloat ? 4 : 2; }

/* The host-side check of step s: exact sums (Sum) and the host-buffer all-reduce, bit for bit. */
static const char *check_step(pcclComm_t *comm, int p, int world, int s, const void *got, uint64_t tag) {
    const scase_t *c = &cases[s % NCASES];
    size_t esz = esz_of(c->dt), bytes = c->count * esz;
    void *in = malloc(bytes), *out = malloc(bytes);
    const char *why = NULL;
    if (!in || !out) {
        why = "allocation";
        goto done;
    }
    for (size_t i = 0; i < c->count; i++) {
        float v = tk_value(p, i, s);
        if (c->dt == pcclFloat) ((float *) in)[i] = v;
        else ((uint16_t *) in)[i] = float_to_bf16(v);
    }
    pcclReduceDescriptor_t d = {c->count, c->op, tag, {c->dt, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
    if (pcclAllReduce(in, out, &d, comm, NULL) != pcclSuccess) {
        why = "host all-reduce";
        goto done;
    }
    if (memcmp(out, got, bytes) != 0) {
        why = "stream result differs from the host-buffer result";
        goto done;
    }
    for (size_t i = 0; c->op == pcclSum && i < c->count; i++) {
        float want = 0;
        for (int q = 0; q < world; q++) want += tk_value(q, i, s);
        float g;
        if (c->dt == pcclFloat) {
            g = ((const float *) got)[i];
        } else {
            uint32_t u = (uint32_t) ((const uint16_t *) got)[i] << 16;
            memcpy(&g, &u, 4);
        }
        if (g != want) {
            fprintf(stderr, "peer %d step %d: element %zu is %g, want %g\n", p, s, i, g, want);
            why = "wrong sum";
            goto done;
        }
    }
done:
    free(in);
    free(out);
    return why;
}

static int peer_steps(const cuda_table_t *cu, pcclComm_t *comm, int p, int world, int steps) {
    size_t max_bytes = 0, snap_bytes = 0;
    for (int s = 0; s < steps; s++) {
        size_t b = cases[s % NCASES].count * esz_of(cases[s % NCASES].dt);
        if (b > max_bytes) max_bytes = b;
        snap_bytes += b;
    }
    void *stream = NULL, *d_send = NULL, *d_recv = NULL, *d_snap = NULL;
    char *h_snap = malloc(snap_bytes);
    if (h_snap == NULL || cu->stream_create(&stream) != CUDA_OK || cu->device_alloc(&d_send, max_bytes) != CUDA_OK ||
        cu->device_alloc(&d_recv, max_bytes) != CUDA_OK || cu->device_alloc(&d_snap, snap_bytes) != CUDA_OK) {
        printf("FAIL allocation\n");
        return 1;
    }
    printf("gate %s\n", tk_gate_kind());
    pcclAsyncReduceOp_t handles[256];
    int awaited = 0, failures = 0, busy_after_call = 0, spun = 0;
    double slowest_call = 0;
    size_t off = 0;
    for (int s = 0; s < steps; s++) {
        const scase_t *c = &cases[s % NCASES];
        size_t bytes = c->count * esz_of(c->dt);
        void *send = d_send, *recv = c->inplace ? d_send : d_recv;
        if (s % 10 == 0) {
            tk_spin(30 * 1000 * 1000LL, stream);
            spun++;
        }
        if (tk_fill(send, c->dt == pcclBFloat16, c->count, p, s, stream) != 0) {
            printf("FAIL fill kernel\n");
            return 1;
        }
        pcclReduceDescriptor_t d = {c->count, c->op, (uint64_t) s, {c->dt, pcclDistributionNone},
                                    {pcclUint8, pcclQuantNone}};
        double t0 = now_ms();
        pcclResult_t r = pcclAllReduceOnStream(send, recv, &d, comm, stream, &handles[s]);
        double dt = now_ms() - t0;
        if (r != pcclSuccess) {
            printf("FAIL pcclAllReduceOnStream step %d: %s\n", s, pcclResultString(r));
            return 1;
        }
        if (s % 10 == 0) {
            if (dt > slowest_call) slowest_call = dt;
            busy_after_call += tk_stream_busy(stream) == 1; /* the spin still runs */
        }
        if (tk_copy((char *) d_snap + off, recv, bytes, stream) != 0) {
            printf("FAIL copy kernel\n");
            return 1;
        }
        off += bytes;
        if (s % 10 == 9) printf("progress %d steps enqueued, %d awaited\n", s + 1, awaited);
        while (s + 1 - awaited > MAX_IN_FLIGHT) {
            r = pcclAwaitAsyncReduce(&handles[awaited], NULL);
            if (r != pcclSuccess) printf("FAIL step %d: handle says %s\n", awaited, pcclResultString(r)), failures++;
            awaited++;
        }
    }
    for (; awaited < steps; awaited++) {
        pcclResult_t r = pcclAwaitAsyncReduce(&handles[awaited], NULL);
        if (r != pcclSuccess) printf("FAIL step %d: handle says %s\n", awaited, pcclResultString(r)), failures++;
    }
    /* The end of the test, not of a step: now the host may wait for the stream. */
    if (cu->stream_synchronize(stream) != CUDA_OK || cu->memcpy_d2h(h_snap, d_snap, snap_bytes, NULL) != CUDA_OK) {
        printf("FAIL stream or copy back\n");
        return 1;
    }
    uint64_t h = 1469598103934665603ULL;
    off = 0;
    for (int s = 0; s < steps; s++) {
        const scase_t *c = &cases[s % NCASES];
        size_t bytes = c->count * esz_of(c->dt);
        const char *why = check_step(comm, p, world, s, h_snap + off, 100000 + (uint64_t) s);
        if (why) printf("FAIL step %d (dtype %d op %d count %zu): %s\n", s, c->dt, c->op, c->count, why), failures++;
        h = fnv(h_snap + off, bytes, h);
        off += bytes;
    }
    printf("calls %.3f ms slowest, stream busy after %d of %d spinning calls\n", slowest_call, busy_after_call, spun);
    if (busy_after_call != spun) printf("FAIL a call returned only after the stream's spin had ended\n"), failures++;
    printf("hash %016" PRIx64 "\n", h);
    cu->device_free(d_snap);
    cu->device_free(d_recv);
    cu->device_free(d_send);
    cu->stream_destroy(stream);
    free(h_snap);
    return failures;
}

static int peer_kill(const cuda_table_t *cu, pcclComm_t *comm, int p) {
    size_t count = 16u << 20, bytes = count * 4;
    void *stream = NULL, *d_send = NULL, *d_recv = NULL, *d_snap = NULL;
    if (cu->stream_create(&stream) != CUDA_OK || cu->device_alloc(&d_send, bytes) != CUDA_OK ||
        cu->device_alloc(&d_recv, bytes) != CUDA_OK || cu->device_alloc(&d_snap, bytes) != CUDA_OK) {
        printf("FAIL allocation\n");
        return 1;
    }
    tk_fill(d_send, 0, count, p, 0, stream);
    pcclReduceDescriptor_t d = {count, pcclSum, 7777, {pcclFloat, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
    pcclAsyncReduceOp_t handle;
    pcclResult_t r = pcclAllReduceOnStream(d_send, d_recv, &d, comm, stream, &handle);
    if (r != pcclSuccess) {
        printf("FAIL pcclAllReduceOnStream: %s\n", pcclResultString(r));
        return 1;
    }
    tk_copy(d_snap, d_recv, bytes, stream);
    printf("enqueued\n");
    fflush(stdout);
    if (p == 2) {
        usleep(20000);
        kill(getpid(), SIGKILL);
    }
    double t0 = now_ms();
    while (tk_stream_busy(stream) != 0) {
        if (now_ms() - t0 > 60000) {
            printf("FAIL the stream is still held 60 s after the peer died\n");
            return 1;
        }
        usleep(1000);
    }
    double released = now_ms() - t0;
    r = pcclAwaitAsyncReduce(&handle, NULL);
    unsigned char *h = malloc(bytes);
    int failures = 0;
    if (h == NULL || cu->memcpy_d2h(h, d_snap, bytes, NULL) != CUDA_OK) {
        printf("FAIL copy back\n");
        return 1;
    }
    size_t marked = 0;
    for (size_t i = 0; i < bytes; i++) marked += h[i] == 0xff;
    printf("released after %.0f ms, handle says %s, %zu of %zu bytes marked\n", released, pcclResultString(r), marked,
           bytes);
    if (r == pcclSuccess) printf("FAIL the handle says pcclSuccess although a peer died\n"), failures++;
    if (marked != bytes) printf("FAIL the kernel after the failed op did not see recvbuf marked\n"), failures++;
    free(h);
    return failures;
}


/* ---- --bench: a training-like loop, blocking against stream-ordered ---------------------- */

#define BUCKETS 4
#define BUCKET_COUNT ((size_t) 4 << 20) /* 16 MiB of float32 */
#define COMPUTE_ITERS 12000

typedef struct bench_bufs {
    void *x, *grad[BUCKETS], *out[BUCKETS], *y[BUCKETS];
    void *compute, *comm, *ev[BUCKETS], *done[BUCKETS];
} bench_bufs_t;

/* One step: a gradient kernel per bucket, each bucket all-reduced, then an optimizer kernel per
 * bucket that reads the result. mode 0: the kernels only; 1: the all-reduces only (blocking);
 * 2: kernels and blocking all-reduces on the legacy default stream; 3: stream-ordered, as a DDP
 * backward pass does it: gradients on a compute stream, each bucket's all-reduce on a comm stream
 * as soon as its gradient is done (an event), the optimizer kernels on the compute stream once
 * their bucket is reduced (an event recorded after the op on the comm stream). */
static int bench_step(const cuda_table_t *cu, pcclComm_t *comm, bench_bufs_t *b, int mode, uint64_t tag0) {
    pcclAsyncReduceOp_t h[BUCKETS];
    void *cs = mode == 3 ? b->compute : NULL, *ms = mode == 3 ? b->comm : NULL;
    for (int k = 0; k < BUCKETS; k++) {
        pcclReduceDescriptor_t d = {BUCKET_COUNT, pcclSum, tag0 + (uint64_t) k, {pcclFloat, pcclDistributionNone},
                                    {pcclUint8, pcclQuantNone}};
        if (mode != 1 && tk_compute(b->grad[k], b->x, BUCKET_COUNT, COMPUTE_ITERS, cs) != 0) return -1;
        if (mode == 1 || mode == 2) {
            if (pcclAllReduce(b->grad[k], b->out[k], &d, comm, NULL) != pcclSuccess) return -1;
        } else if (mode == 3) {
            if (cu->event_record(b->ev[k], cs) != CUDA_OK || cu->stream_wait_event(ms, b->ev[k]) != CUDA_OK) return -1;
            if (pcclAllReduceOnStream(b->grad[k], b->out[k], &d, comm, ms, &h[k]) != pcclSuccess) return -1;
            if (cu->event_record(b->done[k], ms) != CUDA_OK) return -1;
        }
    }
    for (int k = 0; mode != 1 && k < BUCKETS; k++) {
        if (mode == 3 && cu->stream_wait_event(cs, b->done[k]) != CUDA_OK) return -1;
        if (tk_compute(b->y[k], b->out[k], BUCKET_COUNT, COMPUTE_ITERS / 4, cs) != 0) return -1;
    }
    for (int k = 0; mode == 3 && k < BUCKETS; k++)
        if (pcclAwaitAsyncReduce(&h[k], NULL) != pcclSuccess) return -1;
    if (cu->stream_synchronize(cs) != CUDA_OK) return -1;
    return 0;
}

static int peer_bench(const cuda_table_t *cu, pcclComm_t *comm, int p, int world) {
    bench_bufs_t b;
    memset(&b, 0, sizeof b);
    size_t bytes = BUCKET_COUNT * 4;
    bool ok = cu->device_alloc(&b.x, bytes) == CUDA_OK && cu->stream_create(&b.compute) == CUDA_OK &&
              cu->stream_create(&b.comm) == CUDA_OK;
    for (int k = 0; ok && k < BUCKETS; k++)
        ok = cu->device_alloc(&b.grad[k], bytes) == CUDA_OK && cu->device_alloc(&b.out[k], bytes) == CUDA_OK &&
             cu->device_alloc(&b.y[k], bytes) == CUDA_OK && cu->event_create(&b.ev[k]) == CUDA_OK &&
             cu->event_create(&b.done[k]) == CUDA_OK;
    if (!ok || tk_fill(b.x, 0, BUCKET_COUNT, p, 0, NULL) != 0) {
        printf("FAIL bench allocation\n");
        return 1;
    }
    const int steps = 6;
    double ms[4];
    uint64_t tag = 1;
    for (int mode = 0; mode < 4; mode++) {
        if (bench_step(cu, comm, &b, mode, tag) != 0) { /* warm-up */
            printf("FAIL bench step (mode %d)\n", mode);
            return 1;
        }
        tag += BUCKETS;
        double t0 = now_ms();
        for (int s = 0; s < steps; s++, tag += BUCKETS)
            if (bench_step(cu, comm, &b, mode, tag) != 0) {
                printf("FAIL bench step (mode %d)\n", mode);
                return 1;
            }
        ms[mode] = (now_ms() - t0) / steps;
    }
    if (p == 0) {
        double hideable = ms[0] < ms[1] ? ms[0] : ms[1];
        printf("info compute-only %.2f ms, all-reduce-only %.2f ms, blocking %.2f ms, stream-ordered %.2f ms a step\n",
               ms[0], ms[1], ms[2], ms[3]);
        printf("row stream_allreduce_train_step_%dx%zuMiB_%dp,%.3f,ms,%.3f,%.3f\n", BUCKETS, bytes >> 20, world, ms[3],
               ms[2], ms[3] / ms[2]);
        printf("row stream_allreduce_overlap_%dx%zuMiB_%dp,%.3f,fraction_hidden,0,0\n", BUCKETS, bytes >> 20, world,
               hideable > 0 ? (ms[2] - ms[3]) / hideable : 0);
    }
    return 0;
}

static int peer_main(int port, int p, int world, const char *mode) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* the driver reads each line as it comes */
    const cuda_table_t *cu = cuda_table();
    pcclComm_t *comm = gpu_peer_connect(port, world);
    if (comm == NULL) {
        printf("FAIL connect\n");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    int failures = strcmp(mode, "kill") == 0    ? peer_kill(cu, comm, p)
                   : strcmp(mode, "bench") == 0 ? peer_bench(cu, comm, p, world)
                                                : peer_steps(cu, comm, p, world, atoi(mode));
    printf("done %d\n", failures);
    fflush(stdout);
    if (strcmp(mode, "kill") != 0) pcclDestroyCommunicator(comm);
    return failures ? 1 : 0;
}

/* One phase: the master and `world` peers in `mode`; 0 when every peer passed. */
static int phase(const char *self, const char *master_bin, const char *mode, int world) {
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
        char *args[] = {(char *) self, "peer", port_s, idx_s[i], world_s, (char *) mode, NULL};
        if (!h_spawn(&peers[i], args)) return 1;
    }
    int failures = 0;
    char line[512], hash0[64] = "";
    for (int i = 0; i < world; i++) {
        if (!h_read_line(&peers[i], line, sizeof line, 60000) || strcmp(line, "ready") != 0) {
            fprintf(stderr, "peer %d did not get ready: %s\n", i, line);
            return 1;
        }
    }
    bool kill_mode = strcmp(mode, "kill") == 0;
    for (int i = 0; i < world; i++) {
        for (;;) {
            if (!h_read_line(&peers[i], line, sizeof line, 90000)) {
                if (kill_mode && i == 2) break; /* it killed itself */
                fprintf(stderr, "peer %d: no answer\n", i);
                failures++;
                break;
            }
            if (strncmp(line, "row ", 4) == 0) {
                printf("%s\n", line + 4);
                continue;
            }
            printf("[%s] peer %d: %s\n", mode, i, line);
            int n = 0;
            if (sscanf(line, "done %d", &n) == 1) {
                failures += n != 0;
                break;
            }
            if (strncmp(line, "FAIL", 4) == 0) failures++;
            if (strncmp(line, "progress", 8) == 0) continue;
            if (strncmp(line, "hash ", 5) == 0) {
                if (i == 0) snprintf(hash0, sizeof hash0, "%.60s", line + 5);
                else if (strncmp(hash0, line + 5, 60) != 0) {
                    fprintf(stderr, "peer %d's results differ from peer 0's\n", i);
                    failures++;
                }
            }
        }
    }
    for (int i = 0; i < world; i++) h_wait(&peers[i], 20000);
    h_kill(&master, 15);
    h_wait(&master, 5000);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 6 && strcmp(argv[1], "peer") == 0) return peer_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
    const cuda_table_t *cu = cuda_table();
    int ndev = 0;
    if (cu == NULL || cu->device_count(&ndev) != CUDA_OK || ndev == 0) {
        printf("stream_allreduce_test: skipped: no GPU%s\n", cu == NULL ? " (CUDA not built in)" : "");
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: stream_allreduce_test MASTER_BIN [--quick]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a log file even if the watchdog kills us */
    bool quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
    if (argc > 2 && strcmp(argv[2], "--bench") == 0) {
        h_init(300);
        return phase(argv[0], argv[1], "bench", 2) ? 1 : 0;
    }
    h_init(quick ? 400 : 240);
    int failures = phase(argv[0], argv[1], quick ? "10" : "100", NPEERS);
    if (!quick) {
        setenv("PCCL_STREAM_GATE", "kernel", 1); /* the peers inherit it */
        failures += phase(argv[0], argv[1], "20", NPEERS);
        unsetenv("PCCL_STREAM_GATE");
        failures += phase(argv[0], argv[1], "kill", NPEERS);
    }
    printf("stream_allreduce_test: %d failures\n", failures);
    return failures ? 1 : 0;
}

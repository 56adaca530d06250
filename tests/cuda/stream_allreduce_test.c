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
 * 3. "late-kill": a 256 MiB op after two completed ones (so the copies follow the ring's
 *    order); peer 2 SIGKILLs itself after 65% of the time the op took just before (past the
 *    reduce-scatter). The survivors: the stream is released, the handle says why, the kernel
 *    queued after the op sees every byte of recvbuf 0xFF, and the library's warning on the
 *    failed op (the peer's stderr, kept in a file) says that ranges of the result had already
 *    been released to recvbuf, i.e. the mark had final values to overwrite.
 * 4. 10 steps with PCCL_STREAM_COPIES=whole (one copy each way, the previous behaviour).
 * --quick: 10 steps, no other phase (for compute-sanitizer, which slows everything).
 * --bench: 2 peers time a training-like step (4 buckets of 16 MiB: gradient kernel, all-reduce,
 * optimizer kernel) blocking (pcclAllReduce on the legacy default stream) against stream-ordered
 * (gradients on one stream, each bucket's all-reduce + optimizer kernel on another), and print
 * CSV rows (name,value,unit,baseline,ratio) with the blocking step as the baseline, and the
 * fraction of the hideable time (the smaller of compute-only and all-reduce-only) that was hidden.
 * Then "opbench" (peer_opbench) twice with overlapped copies and twice with whole ones,
 * interleaved: one op's time at 16, 64 and 256 MiB against the host-buffer ring, and overlapped
 * against whole.
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

/* GPUs on this machine (the driver's view, before any CUDA_VISIBLE_DEVICES of its peers). */
static int gpu_count(void) {
    static int n = -1;
    if (n < 0 && (cuda_table() == NULL || cuda_table()->device_count(&n) != CUDA_OK)) n = 0;
    return n;
}
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

/* A survivor's check after a peer died mid-op: the stream is released (within 60 s of t0), the
 * handle reports a failure, and the snapshot a kernel took of recvbuf after the op is all 0xFF. */
static int expect_marked(const cuda_table_t *cu, void *stream, pcclAsyncReduceOp_t *handle, const void *d_snap,
                         size_t bytes, double t0) {
    while (tk_stream_busy(stream) != 0) {
        if (now_ms() - t0 > 60000) {
            printf("FAIL the stream is still held 60 s after the peer died\n");
            return 1;
        }
        usleep(1000);
    }
    double released = now_ms() - t0;
    pcclResult_t r = pcclAwaitAsyncReduce(handle, NULL);
    unsigned char *h = malloc(bytes);
    if (h == NULL || cu->memcpy_d2h(h, d_snap, bytes, NULL) != CUDA_OK) {
        printf("FAIL copy back\n");
        free(h);
        return 1;
    }
    size_t marked = 0;
    for (size_t i = 0; i < bytes; i++) marked += h[i] == 0xff;
    free(h);
    printf("released after %.0f ms, handle says %s, %zu of %zu bytes marked\n", released, pcclResultString(r), marked,
           bytes);
    int failures = 0;
    if (r == pcclSuccess) printf("FAIL the handle says pcclSuccess although a peer died\n"), failures++;
    if (marked != bytes) printf("FAIL the kernel after the failed op did not see recvbuf marked\n"), failures++;
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
    return expect_marked(cu, stream, &handle, d_snap, bytes, now_ms());
}

/* "late-kill" (the header's phase 3): a peer's side. */
static int peer_late_kill(const cuda_table_t *cu, pcclComm_t *comm, int p) {
    size_t count = 64u << 20, bytes = count * 4;
    void *stream = NULL, *d_send = NULL, *d_recv = NULL, *d_snap = NULL;
    if (cu->stream_create(&stream) != CUDA_OK || cu->device_alloc(&d_send, bytes) != CUDA_OK ||
        cu->device_alloc(&d_recv, bytes) != CUDA_OK || cu->device_alloc(&d_snap, bytes) != CUDA_OK) {
        printf("FAIL allocation\n");
        return 1;
    }
    tk_fill(d_send, 0, count, p, 0, stream);
    cu->memset_async(d_recv, 0, bytes, stream);
    /* The same op twice, completed: the next one is planned with this ring rank. */
    pcclReduceDescriptor_t d = {count, pcclSum, 8000, {pcclFloat, pcclDistributionNone}, {pcclUint8, pcclQuantNone}};
    pcclAsyncReduceOp_t handle;
    double t_first = 0;
    for (int i = 0; i < 2; i++, d.tag++) { /* the second one is timed: no first-use costs */
        t_first = now_ms();
        if (pcclAllReduceOnStream(d_send, d_snap, &d, comm, stream, &handle) != pcclSuccess ||
            pcclAwaitAsyncReduce(&handle, NULL) != pcclSuccess || cu->stream_synchronize(stream) != CUDA_OK) {
            printf("FAIL the first ops\n");
            return 1;
        }
        t_first = now_ms() - t_first;
    }
    pcclResult_t r = pcclAllReduceOnStream(d_send, d_recv, &d, comm, stream, &handle);
    if (r != pcclSuccess) {
        printf("FAIL pcclAllReduceOnStream: %s\n", pcclResultString(r));
        return 1;
    }
    tk_copy(d_snap, d_recv, bytes, stream);
    printf("enqueued\n");
    fflush(stdout);
    double t0 = now_ms();
    if (p == 2) { /* past the reduce-scatter (half the op), before the end */
        usleep((useconds_t) (t_first * 0.65 * 1000));
        printf("killing myself %.1f ms after the call (the same op took %.1f ms)\n", now_ms() - t0, t_first);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    return expect_marked(cu, stream, &handle, d_snap, bytes, t0);
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
static double median(double *v, int n);
static double call_ms_sum, call_ms_max; /* pcclAllReduceOnStream's own time (mode 3) */
static int call_n;

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
            double t0 = now_ms();
            if (pcclAllReduceOnStream(b->grad[k], b->out[k], &d, comm, ms, &h[k]) != pcclSuccess) return -1;
            double dt = now_ms() - t0;
            call_ms_sum += dt;
            call_n++;
            if (dt > call_ms_max) call_ms_max = dt;
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
    /* Rounds of every mode, interleaved (the GPU and the host are shared by both peers, so
     * conditions drift); each round's mean of STEPS steps, then the median over rounds. */
    enum { ROUNDS = 7, STEPS = 3 };
    double per[4][ROUNDS], ms[4];
    uint64_t tag = 1;
    for (int round = -1; round < ROUNDS; round++) /* round -1: warm-up */
        for (int mode = 0; mode < 4; mode++) {
            double t0 = now_ms();
            for (int s = 0; s < STEPS; s++, tag += BUCKETS)
                if (bench_step(cu, comm, &b, mode, tag) != 0) {
                    printf("FAIL bench step (mode %d)\n", mode);
                    return 1;
                }
            if (round >= 0) per[mode][round] = (now_ms() - t0) / STEPS;
        }
    for (int mode = 0; mode < 4; mode++) ms[mode] = median(per[mode], ROUNDS);
    if (p == 0) {
        double hideable = ms[0] < ms[1] ? ms[0] : ms[1];
        printf("info compute-only %.2f ms, all-reduce-only %.2f ms, blocking %.2f ms, stream-ordered %.2f ms a step\n",
               ms[0], ms[1], ms[2], ms[3]);
        printf("info pcclAllReduceOnStream took %.3f ms on average, %.3f ms at most (copies: %s)\n",
               call_n ? call_ms_sum / call_n : 0.0, call_ms_max,
               getenv("PCCL_STREAM_COPIES") ? getenv("PCCL_STREAM_COPIES") : "default");
        const char *cp = getenv("PCCL_STREAM_COPIES"); /* rows of other settings say which */
        char sfx[32] = "";
        if (cp != NULL) snprintf(sfx, sizeof sfx, "_copies_%.16s", cp);
        printf("row stream_allreduce_train_step_%dx%zuMiB_%dp%s,%.3f,ms,%.3f,%.3f\n", BUCKETS, bytes >> 20, world, sfx,
               ms[3], ms[2], ms[3] / ms[2]);
        printf("row stream_allreduce_overlap_%dx%zuMiB_%dp%s,%.3f,fraction_hidden,0,0\n", BUCKETS, bytes >> 20, world,
               sfx, hideable > 0 ? (ms[2] - ms[3]) / hideable : 0);
    }
    return 0;
}

/* --bench "opbench": one op at a time, 3 peers, 16 to 256 MiB of float32, interleaved rounds of
 * the stream-ordered op (call, await, then the host waits for the stream), the blocking
 * pcclAllReduce of the same device buffers, and pcclAllReduce of host buffers (the ring alone,
 * the limit the copies should approach). Peer 0 prints medians; PCCL_STREAM_COPIES=whole in the
 * environment makes the stream-ordered op copy whole buffers (rows named _whole_). */
#define OP_ROUNDS 7
#define SIDE_ITERS 100000 /* about 3 ms on an H100 */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t) n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int peer_opbench(const cuda_table_t *cu, pcclComm_t *comm, int p, int world) {
    static const int sizes_mib[] = {16, 64, 256};
    const char *cp = getenv("PCCL_STREAM_COPIES");
    size_t max_bytes = (size_t) 256 << 20;
    void *stream = NULL, *side = NULL, *d_send = NULL, *d_recv = NULL, *k_x = NULL, *k_y = NULL;
    char *h_send = malloc(max_bytes), *h_recv = malloc(max_bytes);
    const size_t k_count = (size_t) 1 << 20; /* the side kernel: 1 Mi floats, SIDE_ITERS rounds each */
    if (h_send == NULL || h_recv == NULL || cu->stream_create(&stream) != CUDA_OK ||
        cu->stream_create(&side) != CUDA_OK || cu->device_alloc(&k_x, k_count * 4) != CUDA_OK ||
        cu->device_alloc(&k_y, k_count * 4) != CUDA_OK || tk_fill(k_x, 0, k_count, p, 1, NULL) != 0 ||
        cu->device_alloc(&d_send, max_bytes) != CUDA_OK || cu->device_alloc(&d_recv, max_bytes) != CUDA_OK ||
        tk_fill(d_send, 0, max_bytes / 4, p, 0, NULL) != 0 || cu->stream_synchronize(NULL) != CUDA_OK) {
        printf("FAIL opbench allocation\n");
        return 1;
    }
    memset(h_recv, 0, max_bytes);
    for (size_t i = 0; i < max_bytes / 4; i++) ((float *) h_send)[i] = tk_value(p, i, 0);
    uint64_t tag = 1;
    for (size_t z = 0; z < sizeof sizes_mib / sizeof sizes_mib[0]; z++) {
        size_t count = ((size_t) sizes_mib[z] << 20) / 4;
        double t[3][OP_ROUNDS], t_call[OP_ROUNDS], t_side[2][OP_ROUNDS];
        for (int round = -1; round < OP_ROUNDS; round++) { /* round -1: warm-up */
            /* At 64 MiB: a kernel on another stream of this process, alone and while a
             * stream-ordered op is in flight (queued right after the call; host clock from its
             * launch to its end). It must keep running during the op. */
            for (int side_kind = 0; z == 1 && side_kind < 2; side_kind++) {
                pcclReduceDescriptor_t d = {count, pcclSum, tag++, {pcclFloat, pcclDistributionNone},
                                            {pcclUint8, pcclQuantNone}};
                pcclAsyncReduceOp_t h;
                pcclResult_t r = side_kind ? pcclAllReduceOnStream(d_send, d_recv, &d, comm, stream, &h) : pcclSuccess;
                double t0 = now_ms();
                if (r == pcclSuccess && (tk_compute(k_y, k_x, k_count, SIDE_ITERS, side) != 0 ||
                                         cu->stream_synchronize(side) != CUDA_OK))
                    r = pcclInternalError;
                if (round >= 0) t_side[side_kind][round] = now_ms() - t0;
                if (r == pcclSuccess && side_kind) r = pcclAwaitAsyncReduce(&h, NULL);
                if (r == pcclSuccess && cu->stream_synchronize(stream) != CUDA_OK) r = pcclInternalError;
                if (r != pcclSuccess) {
                    printf("FAIL opbench side kernel: %s\n", pcclResultString(r));
                    return 1;
                }
            }
            for (int kind = 0; kind < 3; kind++) {
                pcclReduceDescriptor_t d = {count, pcclSum, tag++, {pcclFloat, pcclDistributionNone},
                                            {pcclUint8, pcclQuantNone}};
                pcclAsyncReduceOp_t h;
                double t0 = now_ms();
                pcclResult_t r;
                if (kind == 0) {
                    r = pcclAllReduceOnStream(d_send, d_recv, &d, comm, stream, &h);
                    if (round >= 0) t_call[round] = now_ms() - t0;
                    if (r == pcclSuccess) r = pcclAwaitAsyncReduce(&h, NULL);
                    if (r == pcclSuccess && cu->stream_synchronize(stream) != CUDA_OK) r = pcclInternalError;
                } else {
                    r = pcclAllReduce(kind == 1 ? d_send : (void *) h_send, kind == 1 ? d_recv : (void *) h_recv, &d,
                                      comm, NULL);
                }
                if (r != pcclSuccess) {
                    printf("FAIL opbench %d MiB kind %d: %s\n", sizes_mib[z], kind, pcclResultString(r));
                    return 1;
                }
                if (round >= 0) t[kind][round] = now_ms() - t0;
            }
        }
        double m[3];
        for (int kind = 0; kind < 3; kind++) m[kind] = median(t[kind], OP_ROUNDS);
        if (p == 0) {
            printf("info %d MiB: stream-ordered (copies: %s) %.2f ms (the call %.3f ms), blocking device %.2f ms, host "
                   "buffers %.2f ms\n", sizes_mib[z], cp ? cp : "default", m[0], median(t_call, OP_ROUNDS), m[1], m[2]);
            printf("opms %d %.3f %.3f %.3f\n", sizes_mib[z], m[0], m[1], m[2]);
            if (cp == NULL) {
                printf("row device_allreduce_blocking_op_%dMiB_3p,%.3f,ms,%.3f,%.3f\n", sizes_mib[z], m[1], m[2],
                       m[1] / m[2]);
                if (z == 1) {
                    double alone = median(t_side[0], OP_ROUNDS), during = median(t_side[1], OP_ROUNDS);
                    printf("row stream_allreduce_side_kernel_during_op_64MiB_3p,%.3f,ms,%.3f,%.3f\n", during, alone,
                           during / alone);
                }
            }
        }
    }
    cu->device_free(d_recv);
    cu->device_free(d_send);
    cu->stream_destroy(stream);
    cu->stream_destroy(side);
    cu->device_free(k_x);
    cu->device_free(k_y);
    free(h_send);
    free(h_recv);
    (void) world;
    return 0;
}

/* The driver's record of opbench medians: [copies setting][size][phase]; setting 0 is the
 * default, 1 whole copies (PCCL_STREAM_COPIES=whole), the others PCCL_STREAM_COPIES=N. */
#define OP_SIZES 3
#define OP_PHASES 4
#define OP_SETTINGS 6
static const char *settings[OP_SETTINGS] = {NULL, "whole", "2", "4", "16", "32"};
static double opms[OP_SETTINGS][OP_SIZES][OP_PHASES], host_ms[OP_SETTINGS][OP_SIZES][OP_PHASES];
static int opms_n[OP_SETTINGS][OP_SIZES];

static int setting_now(void) {
    const char *cp = getenv("PCCL_STREAM_COPIES");
    for (int i = 1; cp != NULL && i < OP_SETTINGS; i++)
        if (strcmp(cp, settings[i]) == 0) return i;
    return 0;
}

static void use_setting(int i) {
    if (settings[i] == NULL) unsetenv("PCCL_STREAM_COPIES");
    else setenv("PCCL_STREAM_COPIES", settings[i], 1); /* the peers inherit it */
}

static void record_opms_line(const char *line) {
    int mib = 0;
    double s = 0, dev = 0, host = 0;
    if (sscanf(line, "opms %d %lf %lf %lf", &mib, &s, &dev, &host) != 4) return;
    int z = mib == 16 ? 0 : mib == 64 ? 1 : mib == 256 ? 2 : -1;
    int w = setting_now();
    if (z < 0 || opms_n[w][z] >= OP_PHASES) return;
    opms[w][z][opms_n[w][z]] = s;
    host_ms[w][z][opms_n[w][z]++] = host;
}

static void print_opms_rows(void) {
    static const int sizes_mib[] = {16, 64, 256};
    for (int z = 0; z < OP_SIZES; z++) {
        if (opms_n[0][z] == 0 || opms_n[1][z] == 0) continue;
        double ov = median(opms[0][z], opms_n[0][z]), wh = median(opms[1][z], opms_n[1][z]);
        double ho = median(host_ms[0][z], opms_n[0][z]), hw = median(host_ms[1][z], opms_n[1][z]);
        printf("stream_allreduce_op_%dMiB_3p,%.3f,ms,%.3f,%.3f\n", sizes_mib[z], ov, ho, ov / ho);
        printf("stream_allreduce_op_whole_%dMiB_3p,%.3f,ms,%.3f,%.3f\n", sizes_mib[z], wh, hw, wh / hw);
        printf("stream_allreduce_op_overlapped_vs_whole_%dMiB_3p,%.3f,ms,%.3f,%.3f\n", sizes_mib[z], ov, wh, ov / wh);
        for (int i = 2; i < OP_SETTINGS; i++) {
            if (opms_n[i][z] == 0) continue;
            double v = median(opms[i][z], opms_n[i][z]), hv = median(host_ms[i][z], opms_n[i][z]);
            printf("stream_allreduce_op_parts%s_%dMiB_3p,%.3f,ms,%.3f,%.3f\n", settings[i], sizes_mib[z], v, hv, v / hv);
        }
    }
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
    int failures = strcmp(mode, "kill") == 0        ? peer_kill(cu, comm, p)
                   : strcmp(mode, "late-kill") == 0 ? peer_late_kill(cu, comm, p)
                   : strcmp(mode, "bench") == 0     ? peer_bench(cu, comm, p, world)
                   : strcmp(mode, "opbench") == 0   ? peer_opbench(cu, comm, p, world)
                                                    : peer_steps(cu, comm, p, world, atoi(mode));
    printf("done %d\n", failures);
    fflush(stdout);
    if (strstr(mode, "kill") == NULL) pcclDestroyCommunicator(comm);
    return failures ? 1 : 0;
}

/* The ranges of the failed op that a surviving peer's library had released to recvbuf before the
 * failure, from its line "... failed after R of N ranges ..."; -1 without that line. */
static int early_ranges(const char *path, int peer) {
    FILE *f = fopen(path, "r");
    char line[1024];
    int got = -1, n = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        const char *at = strstr(line, "failed after ");
        if (at != NULL && sscanf(at, "failed after %d of %d ranges", &got, &n) == 2) break;
    }
    if (f != NULL) fclose(f);
    printf("[late-kill] peer %d: %d of %d ranges of the result had gone to recvbuf before the failure\n", peer, got, n);
    if (got <= 0) fprintf(stderr, "peer %d: no range had gone to recvbuf before the failure\n", peer);
    return got;
}

/* One phase: the master and `world` peers in `mode`; 0 when every peer passed. */
static int phase(const char *self, const char *master_bin, const char *mode, int world) {
    h_proc_t master, peers[NPEERS];
    int port = h_start_master(&master, master_bin, NULL);
    if (port <= 0) {
        fprintf(stderr, "cannot start the master\n");
        return 1;
    }
    char port_s[16], world_s[16], idx_s[NPEERS][16], log_path[NPEERS][256];
    bool late = strcmp(mode, "late-kill") == 0;
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    for (int i = 0; i < world; i++)
        snprintf(log_path[i], sizeof log_path[i], "%s/stream_late_kill_%d_%d.log", tmp, (int) getpid(), i);
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(world_s, sizeof world_s, "%d", world);
    for (int i = 0; i < world; i++) {
        snprintf(idx_s[i], sizeof idx_s[i], "%d", i);
        char *args[] = {(char *) self, "peer", port_s, idx_s[i], world_s, (char *) mode, NULL};
        if (late) h_stderr_path = log_path[i]; /* the library's line on the failed op goes there */
        gpu_peer_pick_device(i, gpu_count());
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
    bool kill_mode = strstr(mode, "kill") != NULL;
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
            if (strncmp(line, "opms ", 5) == 0) record_opms_line(line);
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
    for (int i = 0; late && i < world; i++) {
        if (i < 2 && early_ranges(log_path[i], i) <= 0) failures++;
        unlink(log_path[i]);
    }
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
        /* PCCL_BENCH_SETTINGS=N: the copies settings to time (default 2: default and whole). */
        const char *ns = getenv("PCCL_BENCH_SETTINGS");
        int nset = ns != NULL && atoi(ns) >= 2 && atoi(ns) <= OP_SETTINGS ? atoi(ns) : 2;
        h_init(120 + 60 * nset);
        int f = 0;
        /* PCCL_STREAM_BENCH_OPS_ONLY: the single ops alone, without the training-like step. */
        for (int i = 0; i < nset && f == 0 && getenv("PCCL_STREAM_BENCH_OPS_ONLY") == NULL; i++) {
            use_setting(i);
            f += phase(argv[0], argv[1], "bench", 2);
        }
        for (int round = 0; round < 2 && f == 0; round++) /* interleaved rounds */
            for (int i = 0; i < nset && f == 0; i++) {
                use_setting(i);
                f += phase(argv[0], argv[1], "opbench", NPEERS);
            }
        use_setting(0);
        print_opms_rows();
        return f ? 1 : 0;
    }
    h_init(quick ? 400 : 240);
    int failures = phase(argv[0], argv[1], quick ? "10" : "100", NPEERS);
    if (!quick) {
        setenv("PCCL_STREAM_GATE", "kernel", 1); /* the peers inherit it */
        failures += phase(argv[0], argv[1], "20", NPEERS);
        unsetenv("PCCL_STREAM_GATE");
        failures += phase(argv[0], argv[1], "kill", NPEERS);
        failures += phase(argv[0], argv[1], "late-kill", NPEERS);
        setenv("PCCL_STREAM_COPIES", "whole", 1); /* the previous behaviour still works */
        failures += phase(argv[0], argv[1], "10", NPEERS);
        unsetenv("PCCL_STREAM_COPIES");
    }
    printf("stream_allreduce_test: %d failures\n", failures);
    return failures ? 1 : 0;
}

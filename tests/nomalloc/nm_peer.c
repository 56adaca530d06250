/* nm_peer: a PCCL peer (public API only) that counts its own allocation calls in steady state.
 * Usage: nm_peer MASTER_PORT IDX POOL, under LD_PRELOAD=libnomalloc.so (nomalloc.h); master on
 * 127.0.0.1, IDX this peer's index 0..N-1 (it picks the inputs), POOL the
 * p2p_connection_pool_size. Driven line by line on stdin:
 *   connect | update     -> "connect R" | "update R"
 *   selftest             -> "selftest CALLS": one malloc on this thread and one on another, armed
 *                           (2 when the interposer counts every thread; -1 without it)
 *   run SCENARIO N       -> warm-up, then arms the counter for 100 all-reduces of 4 MiB float32
 *                           (SCENARIO: sync, async, multi, quant) or 100 shared-state syncs with
 *                           nothing to transfer (ss), over N peers; prints
 *                           "run SCENARIO CALLS NBAD HASH" (CALLS: allocation calls counted in
 *                           any thread; NBAD: results that differ from the expected values or
 *                           calls that failed; HASH: FNV-1a of the last result, equal on every
 *                           peer). The per-thread counts and the first backtraces go to stderr.
 *   ssbusy               -> starts a shared-state sync on another thread; while it waits for
 *                           the others, a second call on this thread must be refused: prints
 *                           "ssbusy R2" (R2: the second call's result), then, once the first
 *                           is done, "ssdone R1"
 *   ss                   -> one shared-state sync: "ss R"
 *   quit                 -> "bye R" after pcclDestroyCommunicator
 * The counter stays armed for at least 1.5 s, so that master-link heartbeats and watchdog
 * ticks fall inside it. Inputs are small integers in float32: every sum is exact. */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"
#include "tests/nomalloc/nomalloc.h"

#define COUNT (1u << 20) /* 4 MiB of float32 */
#define MEASURED 100
#define WINDOW 8          /* async ops in flight */
#define MULTI_OPS 10      /* descriptors per pcclAllReduceMultipleWithRetry */
#define SS_TENSORS 64     /* enough that an allocating qsort would allocate */
#define SS_COUNT 1024
#define MIN_ARMED_MS 1500

static int idx, npeers;
static nomalloc_arm_fn arm;
static nomalloc_disarm_fn disarm;
static nomalloc_report_fn report;
static float *sendb[MULTI_OPS], *recvb[MULTI_OPS], *ref;
static size_t nbad;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static float in_val(int peer, uint64_t it, size_t i) {
    return (float) ((int) ((i * 7 + (size_t) peer * 13 + it * 5) % 1000) - 500);
}

static void fill(float *b, uint64_t it) {
    for (size_t i = 0; i < COUNT; i++) b[i] = in_val(idx, it, i);
}

/* Elements of b that differ from the sum over every peer of input `it`. */
static size_t verify(const float *b, uint64_t it) {
    size_t bad = 0;
    for (size_t i = 0; i < COUNT; i++) {
        float want = 0;
        for (int p = 0; p < npeers; p++) want += in_val(p, it, i);
        bad += memcmp(&b[i], &want, sizeof want) != 0;
    }
    return bad;
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static pcclReduceDescriptor_t desc(uint64_t tag, bool quant) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = COUNT;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    if (quant) d.quantization_options = (pcclQuantizationOptions_t){pcclUint8, pcclQuantMinMax};
    return d;
}

/* One plain all-reduce of input `it`, checked. */
static void sync_op(pcclComm_t *comm, uint64_t tag, uint64_t it) {
    fill(sendb[0], it);
    pcclReduceDescriptor_t d = desc(tag, false);
    if (pcclAllReduce(sendb[0], recvb[0], &d, comm, NULL) != pcclSuccess) nbad++;
    else nbad += verify(recvb[0], it);
}

/* ops all-reduces with WINDOW in flight: op k (tag base + k, input k) uses buffer k % WINDOW. */
static void async_ops(pcclComm_t *comm, uint64_t base, int ops) {
    pcclAsyncReduceOp_t h[WINDOW];
    for (int k = 0; k < ops + WINDOW; k++) {
        int j = k % WINDOW;
        if (k >= WINDOW) {
            if (pcclAwaitAsyncReduce(&h[j], NULL) != pcclSuccess) nbad++;
            else nbad += verify(recvb[j], (uint64_t) (k - WINDOW));
        }
        if (k >= ops) continue;
        fill(sendb[j], (uint64_t) k);
        pcclReduceDescriptor_t d = desc(base + (uint64_t) k, false);
        if (pcclAllReduceAsync(sendb[j], recvb[j], &d, comm, &h[j]) != pcclSuccess) {
            nbad++;
            h[j].comm = NULL; /* awaiting it fails and counts once more: fine, it is an error */
        }
    }
}

/* WINDOW all-reduces submitted back to back (inputs filled first, so that none can finish
 * before the last is submitted), then awaited. */
static void async_burst(pcclComm_t *comm, uint64_t base) {
    pcclAsyncReduceOp_t h[WINDOW];
    pcclResult_t r[WINDOW];
    for (int j = 0; j < WINDOW; j++) fill(sendb[j], (uint64_t) j);
    for (int j = 0; j < WINDOW; j++) {
        pcclReduceDescriptor_t d = desc(base + (uint64_t) j, false);
        r[j] = pcclAllReduceAsync(sendb[j], recvb[j], &d, comm, &h[j]);
    }
    for (int j = 0; j < WINDOW; j++) {
        if (r[j] == pcclSuccess) r[j] = pcclAwaitAsyncReduce(&h[j], NULL);
        if (r[j] != pcclSuccess) nbad++;
        else nbad += verify(recvb[j], (uint64_t) j);
    }
}

/* One pcclAllReduceMultipleWithRetry of MULTI_OPS descriptors (inputs base_it + j). */
static void multi_call(pcclComm_t *comm, uint64_t tag, uint64_t base_it) {
    pcclReduceOpDescriptor_t ds[MULTI_OPS];
    for (int j = 0; j < MULTI_OPS; j++) {
        fill(sendb[j], base_it + (uint64_t) j);
        ds[j].sendbuf = sendb[j];
        ds[j].recvbuf = recvb[j];
        ds[j].descriptor = desc(tag + (uint64_t) j, false);
    }
    if (pcclAllReduceMultipleWithRetry(ds, MULTI_OPS, comm, NULL, WINDOW) != pcclSuccess) {
        nbad++;
        return;
    }
    for (int j = 0; j < MULTI_OPS; j++) nbad += verify(recvb[j], base_it + (uint64_t) j);
}

/* A quantized all-reduce of input 0: lossy, but every run and every peer give the same bits. */
static void quant_op(pcclComm_t *comm, uint64_t tag) {
    pcclReduceDescriptor_t d = desc(tag, true);
    if (pcclAllReduce(sendb[0], recvb[0], &d, comm, NULL) != pcclSuccess) nbad++;
    else nbad += memcmp(recvb[0], ref, COUNT * sizeof(float)) != 0;
}

/* The shared state: SS_TENSORS tensors, equal on every peer, listed in reverse name order. */
static char ss_names[SS_TENSORS][16];
static float ss_data[SS_TENSORS][SS_COUNT];
static pcclTensorInfo_t ss_infos[SS_TENSORS];
static pcclSharedState_t ss_state;

static void ss_setup(void) {
    for (int t = 0; t < SS_TENSORS; t++) {
        snprintf(ss_names[t], sizeof ss_names[t], "layer.%02d", SS_TENSORS - 1 - t);
        for (int i = 0; i < SS_COUNT; i++) ss_data[t][i] = (float) (t * 31 + i);
        ss_infos[t] = (pcclTensorInfo_t){ss_names[t], ss_data[t], SS_COUNT, pcclFloat, pcclDeviceCpu, false};
    }
    ss_state = (pcclSharedState_t){0, SS_TENSORS, ss_infos};
}

static void ss_sync(pcclComm_t *comm) {
    uint64_t want = ss_state.revision;
    pcclSharedStateSyncInfo_t info = {1, 1};
    pcclResult_t r = pcclSynchronizeSharedState(comm, &ss_state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
    if (r != pcclSuccess || info.tx_bytes != 0 || info.rx_bytes != 0 || ss_state.revision != want) nbad++;
    for (int t = 0; t < SS_TENSORS; t++)
        for (int i = 0; i < SS_COUNT; i++) nbad += ss_data[t][i] != (float) (t * 31 + i);
    ss_state.revision++;
}

static void run(pcclComm_t *comm, const char *scen) {
    nbad = 0;
    uint64_t hash = 0;
    bool known = true;
    /* warm-up: every thread, data link, worker and cached block the scenario needs */
    if (strcmp(scen, "sync") == 0) {
        for (uint64_t k = 0; k < 3; k++) sync_op(comm, 100 + k, k);
    } else if (strcmp(scen, "async") == 0) {
        /* Bursts first: WINDOW ops submitted at once reach the high-water marks (a worker per op
         * in flight, every pool stream running a ring with its staging blocks) at once; a
         * sliding window reaches them only at some random later moment. */
        for (uint64_t b = 0; b < 2; b++) async_burst(comm, 200 + b * WINDOW);
        async_ops(comm, 220, 2 * WINDOW);
    } else if (strcmp(scen, "multi") == 0) {
        multi_call(comm, 300, 0);
    } else if (strcmp(scen, "quant") == 0) {
        fill(sendb[0], 0);
        pcclReduceDescriptor_t d = desc(400, true);
        if (pcclAllReduce(sendb[0], ref, &d, comm, NULL) != pcclSuccess) nbad++;
        /* the lossy result is near the exact sum: each of the world's quantization steps is off
         * by at most half a step of a range of at most npeers * 1000 */
        for (size_t i = 0; i < COUNT; i++) {
            float exact = 0;
            for (int p = 0; p < npeers; p++) exact += in_val(p, 0, i);
            float err = ref[i] - exact;
            if (err < 0) err = -err;
            nbad += err > (float) (npeers * npeers) * 1000.0f / 255.0f;
        }
        quant_op(comm, 401);
    } else if (strcmp(scen, "ss") == 0) {
        ss_setup();
        for (int k = 0; k < 3; k++) ss_sync(comm);
    } else {
        known = false;
    }
    if (!known) {
        printf("run %s unknown\n", scen);
        return;
    }
    long t0 = now_ms();
    if (arm != NULL) arm();
    if (strcmp(scen, "sync") == 0) {
        for (uint64_t k = 0; k < MEASURED; k++) sync_op(comm, 1000 + k, 10 + k);
    } else if (strcmp(scen, "async") == 0) {
        async_ops(comm, 2000, MEASURED);
    } else if (strcmp(scen, "multi") == 0) {
        for (uint64_t c = 0; c < MEASURED / MULTI_OPS; c++) multi_call(comm, 3000 + c * MULTI_OPS, c * MULTI_OPS);
    } else if (strcmp(scen, "quant") == 0) {
        for (uint64_t k = 0; k < MEASURED; k++) quant_op(comm, 4000 + k);
    } else {
        for (int k = 0; k < MEASURED; k++) ss_sync(comm);
    }
    while (now_ms() - t0 < MIN_ARMED_MS) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long calls = disarm != NULL ? (long) disarm() : -1;
    if (report != NULL) report(2, scen);
    hash = strcmp(scen, "ss") == 0 ? fnv(ss_data, sizeof ss_data) : fnv(recvb[0], COUNT * sizeof(float));
    printf("run %s %ld %zu %016" PRIx64 "\n", scen, calls, nbad, hash);
}

static pcclComm_t *bg_comm;
static pcclResult_t bg_result;
static atomic_int bg_started;
static void *bg_sync(void *arg) {
    pcclSharedStateSyncInfo_t info;
    atomic_store(&bg_started, 1);
    bg_result = pcclSynchronizeSharedState(bg_comm, &ss_state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
    return arg;
}

static atomic_int go;
static void *other_thread(void *arg) {
    while (!atomic_load(&go)) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    void *volatile p = malloc(24); /* volatile: a malloc/free pair is otherwise optimised away */
    free(p);
    return arg;
}

static long selftest(void) {
    pthread_t th;
    if (arm == NULL || pthread_create(&th, NULL, other_thread, NULL) != 0) return -1;
    arm();
    void *volatile p = malloc(16);
    free(p);
    atomic_store(&go, 1);
    pthread_join(th, NULL);
    long calls = (long) disarm();
    report(2, "selftest");
    return calls;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: nm_peer MASTER_PORT IDX POOL\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    arm = (nomalloc_arm_fn) dlsym(RTLD_DEFAULT, NOMALLOC_ARM);
    disarm = (nomalloc_disarm_fn) dlsym(RTLD_DEFAULT, NOMALLOC_DISARM);
    report = (nomalloc_report_fn) dlsym(RTLD_DEFAULT, NOMALLOC_REPORT);
    if (arm == NULL || disarm == NULL || report == NULL) arm = NULL, disarm = NULL, report = NULL;
    idx = atoi(argv[2]);
    for (int j = 0; j < MULTI_OPS; j++) {
        sendb[j] = malloc(COUNT * sizeof(float));
        recvb[j] = malloc(COUNT * sizeof(float));
        if (sendb[j] == NULL || recvb[j] == NULL) return 1;
    }
    ref = malloc(COUNT * sizeof(float));
    if (ref == NULL || pcclInit() != pcclSuccess) return 1;
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    memcpy(params.master_address.inet.ipv4.data, "\x7f\x00\x00\x01", 4);
    params.master_address.port = (uint16_t) atoi(argv[1]);
    params.p2p_connection_pool_size = (uint32_t) atoi(argv[3]);
    pcclComm_t *comm = NULL;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        char cmd[32] = "", arg[32] = "";
        int n = 0;
        if (sscanf(line, "%31s %31s %d", cmd, arg, &n) < 1) continue;
        if (strcmp(cmd, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(cmd, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(cmd, "selftest") == 0) {
            printf("selftest %ld\n", selftest());
        } else if (strcmp(cmd, "run") == 0) {
            npeers = n;
            run(comm, arg);
        } else if (strcmp(cmd, "ssbusy") == 0) {
            /* The first call waits for the other peers' (they are told only after our answer). */
            pthread_t th;
            bg_comm = comm;
            if (pthread_create(&th, NULL, bg_sync, NULL) != 0) return 1;
            while (!atomic_load(&bg_started)) {
                struct timespec ts = {0, 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            struct timespec settle = {0, 200 * 1000 * 1000}; /* into its wait for the master */
            nanosleep(&settle, NULL);
            pcclSharedStateSyncInfo_t info;
            pcclSharedState_t other = ss_state;
            printf("ssbusy %d\n", (int) pcclSynchronizeSharedState(comm, &other,
                                                                  PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info));
            pthread_join(th, NULL);
            ss_state.revision++;
            printf("ssdone %d\n", (int) bg_result);
        } else if (strcmp(cmd, "ss") == 0) {
            pcclSharedStateSyncInfo_t info;
            pcclResult_t r = pcclSynchronizeSharedState(comm, &ss_state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
            ss_state.revision++;
            printf("ss %d\n", (int) r);
        } else if (strcmp(cmd, "quit") == 0) {
            printf("bye %d\n", (int) pcclDestroyCommunicator(comm));
            break;
        }
    }
    for (int j = 0; j < MULTI_OPS; j++) free(sendb[j]), free(recvb[j]);
    free(ref);
    return 0;
}

/* wd_peer: a PCCL peer for the collective-watchdog tests, driven line by line on stdin.
 * Usage: wd_peer MASTER_PORT IDX (master on 127.0.0.1; IDX picks this peer's inputs). The
 * collective timeout comes from PCCL_COLLECTIVE_TIMEOUT_MS in the environment, or `timeout`.
 *
 * Inputs are small integers in float32 (every sum exact): in(idx, tag, i); the expected result
 * of an all-reduce over the peers in MASK (bit = IDX) is computed here, independently of the
 * library, and every element is compared (NBAD: elements that differ).
 * Commands and the line each prints (R: pcclResult_t number, MS: milliseconds the call took):
 *   connect | update            -> "connect R" | "update R"
 *   apicheck                    -> "apicheck 0" when pcclSetCollectiveTimeout(NULL) is refused and
 *                                  pcclResultString names pcclCollectiveTimeout
 *   timeout MS                  -> "timeout R" (pcclSetCollectiveTimeout)
 *   pending                     -> "pending R MS"
 *   ar TAG COUNT MASK           -> "ar R MS NBAD HASH NAME" (NAME: pcclResultString(R))
 *   arstop TAG COUNT MASK K     -> starts the all-reduce async; once K sub-chunk completions
 *                                  moved (the op's doorbell), prints "stopping" and SIGSTOPs
 *                                  itself mid-ring; after SIGCONT: "ar R MS NBAD HASH NAME"
 *                                  (MS from the SIGCONT on); "nomove" when the op ended first
 *   armove TAG COUNT MASK K     -> the same without the stop: "moving", then the "ar" line
 *   ss REV                      -> "ss R MS": pcclSynchronizeSharedState of one tensor (4096
 *                                  float32, the same on every peer) at revision REV
 *   quit                        -> "bye FDS THREADS BASE_FDS BASE_THREADS" after
 *                                  pcclDestroyCommunicator (BASE: before pcclInit) */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "pccl.h"

static int idx;

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void *nothing(void *arg) { return arg; }

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static float in_val(int peer, uint64_t tag, size_t i) { return (float) ((peer * 37 + tag * 11 + i) % 1024); }

static void fill(float *b, uint64_t tag, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = in_val(idx, tag, i);
}

static size_t verify(const float *b, uint64_t tag, size_t n, unsigned mask, uint64_t *hash) {
    size_t bad = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int p = 0; p < 32; p++)
            if (mask & (1u << p)) want += in_val(p, tag, i);
        bad += memcmp(&b[i], &want, sizeof want) != 0;
        const unsigned char *c = (const unsigned char *) &b[i];
        for (int k = 0; k < 4; k++) h = (h ^ c[k]) * 0x100000001b3ull;
    }
    *hash = h;
    return bad;
}

static pcclReduceDescriptor_t desc(uint64_t tag, size_t count) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.quantized_datatype = pcclFloat;
    return d;
}

static void report(pcclResult_t r, long ms, const float *out, uint64_t tag, size_t count, unsigned mask) {
    uint64_t h = 0;
    size_t bad = r == pcclSuccess ? verify(out, tag, count, mask, &h) : 0;
    printf("ar %d %ld %zu %016llx %s\n", (int) r, ms, bad, (unsigned long long) h, pcclResultString(r));
}

/* The doorbell of the running op of `tag` (test-only look inside the communicator); false once
 * the op finished. */
static bool op_doorbell(pcclComm_t *comm, uint64_t tag, uint32_t *v) {
    bool running = false;
    pthread_mutex_lock(&comm->colls.lock);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        ccoip_op_t *op = &comm->colls.ops[i];
        if (op->state == CCOIP_OP_FREE || op->tag != tag) continue;
        running = op->state != CCOIP_OP_FINISHED;
        *v = atomic_load(&op->doorbell);
    }
    pthread_mutex_unlock(&comm->colls.lock);
    return running;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: wd_peer MASTER_PORT IDX\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A sanitizer runtime starts a thread of its own with the first pthread_create: start a dummy
     * thread first, so that the base counts it. */
    pthread_t dummy;
    if (pthread_create(&dummy, NULL, nothing, NULL) == 0) pthread_join(dummy, NULL);
    int base_fds = count_dir("/proc/self/fd"), base_threads = count_dir("/proc/self/task");
    idx = atoi(argv[2]);
    pcclInit();
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    memcpy(params.master_address.inet.ipv4.data, "\x7f\x00\x00\x01", 4);
    params.master_address.port = (uint16_t) atoi(argv[1]);
    pcclComm_t *comm = NULL;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    float *in = NULL, *out = NULL;
    size_t cap = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        char cmd[32] = "";
        unsigned long long tag = 0, count = 0, k = 0;
        unsigned mask = 0;
        int n = sscanf(line, "%31s %llu %llu %u %llu", cmd, &tag, &count, &mask, &k);
        if (n < 1) continue;
        if (strcmp(cmd, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(cmd, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(cmd, "apicheck") == 0) { /* the extension's argument checks and name */
            bool ok = pcclSetCollectiveTimeout(NULL, 5) == pcclInvalidArgument &&
                      strcmp(pcclResultString(pcclCollectiveTimeout), "pcclCollectiveTimeout") == 0;
            printf("apicheck %d\n", ok ? 0 : 1);
        } else if (strcmp(cmd, "timeout") == 0) {
            printf("timeout %d\n", (int) pcclSetCollectiveTimeout(comm, (uint32_t) tag));
        } else if (strcmp(cmd, "pending") == 0) {
            bool pending = false;
            long t0 = now_ms();
            pcclResult_t r = pcclArePeersPending(comm, &pending);
            printf("pending %d %ld\n", (int) r, now_ms() - t0);
        } else if ((strcmp(cmd, "ar") == 0 && n == 4) ||
                   ((strcmp(cmd, "arstop") == 0 || strcmp(cmd, "armove") == 0) && n == 5)) {
            if (count > cap) {
                free(in);
                free(out);
                in = malloc(count * sizeof *in);
                out = malloc(count * sizeof *out);
                if (in == NULL || out == NULL) return 1;
                cap = count;
            }
            fill(in, tag, count);
            pcclReduceDescriptor_t d = desc(tag, count);
            long t0 = now_ms();
            pcclResult_t r;
            if (cmd[2] == '\0') {
                r = pcclAllReduce(in, out, &d, comm, NULL);
            } else {
                pcclAsyncReduceOp_t h;
                r = pcclAllReduceAsync(in, out, &d, comm, &h);
                if (r == pcclSuccess) {
                    uint32_t base = 0, v = 0;
                    op_doorbell(comm, tag, &base);
                    bool running = true;
                    while ((running = op_doorbell(comm, tag, &v)) && v - base < k && now_ms() - t0 < 20000) {
                        struct timespec ts = {0, 100000};
                        nanosleep(&ts, NULL);
                    }
                    bool stop = strcmp(cmd, "arstop") == 0;
                    bool moved = running && v - base >= k;
                    printf("%s\n", !moved ? "nomove" : stop ? "stopping" : "moving");
                    if (moved && stop) {
                        raise(SIGSTOP); /* the whole process, mid-ring: heartbeats stop too */
                        t0 = now_ms();
                    }
                    r = pcclAwaitAsyncReduce(&h, NULL);
                }
            }
            report(r, now_ms() - t0, out, tag, count, mask);
        } else if (strcmp(cmd, "ss") == 0 && n == 2) {
            static float w[4096];
            for (size_t i = 0; i < 4096; i++) w[i] = in_val(0, 0, i);
            pcclTensorInfo_t t = {.name = "w", .data = w, .count = 4096, .datatype = pcclFloat,
                                  .device_type = pcclDeviceCpu, .allow_content_inequality = false};
            pcclSharedState_t state = {.revision = tag, .count = 1, .infos = &t};
            long t0 = now_ms();
            pcclResult_t r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
            printf("ss %d %ld\n", (int) r, now_ms() - t0);
        } else if (strcmp(cmd, "quit") == 0) {
            break;
        } else {
            printf("unknown %s\n", cmd);
        }
    }
    pcclDestroyCommunicator(comm);
    free(in);
    free(out);
    printf("bye %d %d %d %d\n", count_dir("/proc/self/fd"), count_dir("/proc/self/task"), base_fds, base_threads);
    return 0;
}

/* teardown_peer: a PCCL peer for teardown_test, driven line by line on stdin.
 *   teardown_peer MASTER_HOST:PORT
 * Commands and the line each prints on stdout (RESULT: the pcclResult_t number):
 *   connect   -> "connect RESULT P2P_PORT SS_PORT BENCH_PORT"
 *   update    -> "update RESULT"
 *   allreduce -> "allreduce RESULT" (1 Mi floats, sum, the value 1 everywhere: RESULT -1 when a
 *                result element is not the peer count)
 *   sync STRATEGY VALUE -> "sync RESULT MS": pcclSynchronizeSharedState of one 64 MiB float tensor
 *                filled with VALUE, revision 1, with that pcclSharedStateSyncStrategy_t, and the
 *                milliseconds the call took
 *   threads   -> "threads DLRECV_IN_RECV DLRECV ACCEPT": data-link receive threads (and how many
 *                of them sit in the recvfrom system call, /proc/self/task/T/syscall) and
 *                threads of the listeners (accept loops and their handshakes)
 *   destroy   -> "destroy RESULT MS": pcclDestroyCommunicator and the milliseconds it took; then exits.
 * Logs go to stderr. Linux only (/proc). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "pccl.h"

#define COUNT (1u << 20)
#define SS_COUNT (16u << 20) /* 64 MiB of floats */

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The first line of /proc/self/task/TID/FILE, without its newline; "" when unreadable. */
static void task_file(const char *tid, const char *file, char *out, size_t n) {
    char path[320];
    snprintf(path, sizeof path, "/proc/self/task/%s/%s", tid, file);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    if (fgets(out, (int) n, f) == NULL) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static void threads(void) {
    int in_recv = 0, dl = 0, accept = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char name[64], sc[128];
        task_file(e->d_name, "comm", name, sizeof name);
        if (strcmp(name, "pccl-dl-recv") == 0) {
            dl++;
            task_file(e->d_name, "syscall", sc, sizeof sc);
            if (atol(sc) == SYS_recvfrom && sc[0] != '\0') in_recv++;
        } else if (strcmp(name, "pccl-accept") == 0) {
            accept++;
        }
    }
    if (d != NULL) closedir(d);
    printf("threads %d %d %d\n", in_recv, dl, accept);
}

static int allreduce(pcclComm_t *comm, int peers) {
    float *buf = malloc(COUNT * sizeof(float));
    if (buf == NULL) return -2;
    for (uint32_t i = 0; i < COUNT; i++) buf[i] = 1.0f;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = COUNT;
    desc.op = pcclSum;
    desc.tag = 1;
    desc.src_descriptor.datatype = pcclFloat;
    pcclReduceInfo_t info;
    pcclResult_t r = pcclAllReduce(buf, buf, &desc, comm, &info);
    int rc = (int) r;
    for (uint32_t i = 0; r == pcclSuccess && i < COUNT; i++)
        if (buf[i] != (float) peers) rc = -1;
    free(buf);
    return rc;
}

static int sync_state(pcclComm_t *comm, int strategy, float value) {
    static float *w;
    if (w == NULL && (w = malloc(SS_COUNT * sizeof(float))) == NULL) return -2;
    for (uint32_t i = 0; i < SS_COUNT; i++) w[i] = value;
    pcclTensorInfo_t t = {"w", w, SS_COUNT, pcclFloat, pcclDeviceCpu, false};
    pcclSharedState_t st = {1, 1, &t};
    pcclSharedStateSyncInfo_t info;
    return (int) pcclSynchronizeSharedState(comm, &st, (pcclSharedStateSyncStrategy_t) strategy, &info);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: teardown_peer MASTER_HOST:PORT\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (!ccoip_parse_address(argv[1], 48148, &params.master_address)) return 2;
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "connect") == 0) {
            pcclResult_t r = pcclConnect(comm);
            printf("connect %d %u %u %u\n", (int) r, comm->p2p.listener.port, ccoip_ss_port(comm), ccoip_bench_port(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(line, "allreduce") == 0) {
            int peers = 0;
            pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &peers);
            printf("allreduce %d\n", allreduce(comm, peers));
        } else if (strncmp(line, "sync ", 5) == 0) {
            int strategy = 0;
            float value = 0;
            int64_t t0 = now_ms();
            int r = sscanf(line + 5, "%d %f", &strategy, &value) == 2 ? sync_state(comm, strategy, value) : -3;
            printf("sync %d %lld\n", r, (long long) (now_ms() - t0));
        } else if (strcmp(line, "threads") == 0) {
            threads();
        } else if (strcmp(line, "destroy") == 0) {
            int64_t t0 = now_ms();
            pcclResult_t r = pcclDestroyCommunicator(comm);
            printf("destroy %d %lld\n", (int) r, (long long) (now_ms() - t0));
            fflush(stdout);
            return 0;
        } else {
            printf("unknown %s\n", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    return 0;
}

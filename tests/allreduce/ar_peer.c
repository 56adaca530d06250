/* ar_peer: a PCCL peer for the end-to-end all-reduce tests, driven line by line on stdin; it uses
 * the public API only (pccl.h). Usage: ar_peer MASTER_PORT (master on 127.0.0.1).
 * Commands and the line each prints:
 *   connect  -> "connect RESULT"
 *   update   -> "update RESULT" (pcclUpdateTopology)
 *   ar TAG DTYPE OP COUNT KIND INPLACE SEED S0,S1,..  (the seeds of every peer, in ring order)
 *            -> "ar RESULT CHECK HASH TX RX WORLD CALL_US END_US"
 *      runs one pcclAllReduce of this peer's input (ar_ref.h) and, on success, compares every
 *      byte of recvbuf with the expected result and sendbuf with the input it started from.
 *      CHECK: 0 all equal, 1 mismatch (details on stderr), -1 not checked (RESULT != 0).
 *      HASH: of recvbuf. END_US: CLOCK_MONOTONIC when the call returned.
 *   arg ...  the same as ar, but prints "go" right before calling pcclAllReduce (so that a
 *            test can time a kill from the start of the call)
 *   res      -> "res FDS THREADS" (open descriptors and threads of this process)
 *   quit     -> "bye" after pcclDestroyCommunicator */
#include <dirent.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"
#include "tests/allreduce/ar_ref.h"

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the descriptor of the listing itself (for /proc/self/fd) */
}

static void report_mismatch(const uint8_t *got, const uint8_t *want, size_t count, size_t esz, const char *what) {
    for (size_t i = 0; i < count; i++) {
        if (memcmp(got + i * esz, want + i * esz, esz) == 0) continue;
        uint64_t g = 0, w = 0;
        memcpy(&g, got + i * esz, esz);
        memcpy(&w, want + i * esz, esz);
        fprintf(stderr, "ar_peer: %s differs at element %zu of %zu: got 0x%" PRIx64 ", want 0x%" PRIx64 "\n", what,
                i, count, g, w);
        return;
    }
}

static void do_allreduce(pcclComm_t *comm, char *args, bool announce) {
    unsigned long long tag;
    int dtype, op, kind, inplace;
    size_t count;
    unsigned seed;
    char list[200];
    if (sscanf(args, "%llu %d %d %zu %d %d %u %199s", &tag, &dtype, &op, &count, &kind, &inplace, &seed, list) != 8) {
        printf("ar -1 -1 0 0 0 0 0 0\n");
        return;
    }
    uint32_t seeds[64], n = 0;
    for (char *s = strtok(list, ","); s != NULL && n < 64; s = strtok(NULL, ",")) seeds[n++] = (uint32_t) atoi(s);
    size_t esz = ar_dtype_size(dtype), bytes = count * esz;
    uint8_t *send = malloc(bytes ? bytes : 1), *recv = inplace ? send : malloc(bytes ? bytes : 1);
    uint8_t *want = malloc(bytes ? bytes : 1);
    if (send == NULL || recv == NULL || want == NULL) {
        fprintf(stderr, "ar_peer: out of memory for %zu bytes\n", bytes);
        exit(1);
    }
    ar_fill_input(send, count, dtype, op, kind, seed);
    if (!inplace) memset(recv, 0xa5, bytes);
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = (pcclRedOp_t) op;
    d.tag = tag;
    d.src_descriptor.datatype = (pcclDataType_t) dtype;
    pcclReduceInfo_t info = {0, 0, 0};
    if (announce) {
        printf("go\n");
        fflush(stdout);
    }
    uint64_t t0 = now_us();
    pcclResult_t r = pcclAllReduce(send, recv, &d, comm, &info);
    uint64_t t1 = now_us();
    int check = -1;
    if (r == pcclSuccess) {
        check = 0;
        if (!inplace) { /* sendbuf must come back untouched */
            ar_fill_input(want, count, dtype, op, kind, seed);
            if (memcmp(send, want, bytes) != 0) {
                report_mismatch(send, want, count, esz, "sendbuf");
                check = 1;
            }
        }
        ar_expected(want, count, dtype, op, kind, seeds, n);
        if (memcmp(recv, want, bytes) != 0) {
            report_mismatch(recv, want, count, esz, "result");
            fprintf(stderr, "ar_peer: (tag %llu dtype %d op %d count %zu kind %d peers %u)\n", tag, dtype, op, count,
                    kind, n);
            check = 1;
        }
    }
    printf("ar %d %d %016" PRIx64 " %" PRIu64 " %" PRIu64 " %u %" PRIu64 " %" PRIu64 "\n", (int) r, check,
           r == pcclSuccess ? ar_hash(recv, bytes) : 0, info.tx_bytes, info.rx_bytes, info.local_world_size, t1 - t0,
           t1);
    if (!inplace) free(recv);
    free(send);
    free(want);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ar_peer MASTER_PORT\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4 = (ccoip_ipv4_address_t){{127, 0, 0, 1}};
    params.master_address.port = (uint16_t) atoi(argv[1]);
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[512];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strncmp(line, "ar ", 3) == 0 || strncmp(line, "arg ", 4) == 0) {
            do_allreduce(comm, line + (line[2] == 'g' ? 4 : 3), line[2] == 'g');
        } else if (strcmp(line, "res") == 0) {
            printf("res %d %d\n", count_dir("/proc/self/fd"), count_dir("/proc/self/task") + 1);
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            printf("unknown %s\n", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    printf("bye\n");
    fflush(stdout);
    return 0;
}

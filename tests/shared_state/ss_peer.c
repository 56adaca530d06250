/* ss_peer: a PCCL peer with a shared state, driven line by line on stdin (the end-to-end tests).
 *   ss_peer MASTER_HOST:PORT [PEER_GROUP]
 * Tensors are float32 named "t0", "t1", ...; their bytes follow a pattern chosen by a seed (seed 0:
 * zeros), so that a test can check every byte without moving them around. Commands and answers:
 *   connect                 -> "connect RESULT"
 *   update                  -> "update RESULT"
 *   tensors N BYTES SEED    -> "tensors 0"        N tensors of BYTES bytes (a multiple of 4)
 *   odd SEED B0 B1 ...      -> "odd 0"            tensors of B0, B1, ... bytes (uint8, any size)
 *   fill I SEED             -> "fill 0"           tensor I := pattern(SEED, I)
 *   env NAME VALUE          -> "env 0"            setenv (VALUE "-": unsetenv), for knobs read per call
 *   corrupt I               -> "corrupt 0"        flips one bit of tensor I
 *   poke I OFFSET           -> "poke 0"           flips one bit of byte OFFSET of tensor I
 *   ineq I 0|1              -> "ineq 0"           its allow_content_inequality
 *   count I COUNT           -> "count 0"          resizes tensor I (zeros)
 *   rev R                   -> "rev R"
 *   bump                    -> "rev R"           revision + 1 (what a training step does)
 *   sync STRATEGY           -> "sync RESULT REVISION TX_BYTES RX_BYTES MILLISECONDS"
 *   check SEED              -> "check K"          K tensors differ from pattern(SEED, i) anywhere
 *   hash                    -> "hash H"           XXH3 over the per-tensor XXH3s
 *   allreduce COUNT         -> "allreduce RESULT BAD MILLISECONDS"  a sum of COUNT floats,
 *                              element k = k % 13 on every peer; BAD: elements of the result
 *                              other than world * (k % 13) (after success only)
 *   quit                    -> "bye"
 * RESULT is the pcclResult_t number. Logs go to stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip/net/ccoip_socket.h"
#include "hash/hash.h"
#include "reduce/reduce_mem.h"
#include "pccl.h"

#define MAX_TENSORS 160 /* GPT-2 124M has 148 */

static pcclTensorInfo_t infos[MAX_TENSORS];
static char names[MAX_TENSORS][16];
static size_t ntensors;
static pcclSharedState_t state;

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void pattern(uint64_t *w, size_t words, uint64_t seed, size_t i) {
    if (seed == 0) {
        memset(w, 0, words * 8);
        return;
    }
    uint64_t base = splitmix(seed * 1000003u + i * 7919u);
    for (size_t k = 0; k < words; k++) w[k] = base ^ (k * 0x9e3779b97f4a7c15ull);
}

/* setenv / unsetenv (NULL); Windows (the mixed tests build this client too) has _putenv_s, where
 * an empty value unsets. */
static int set_env(const char *name, const char *value) {
#ifdef _WIN32
    return _putenv_s(name, value == NULL ? "" : value);
#else
    return value == NULL ? unsetenv(name) : setenv(name, value, 1);
#endif
}

static size_t bytes_of(size_t i) { return infos[i].count * (infos[i].datatype == pcclUint8 ? 1 : 4); }

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_tensor(size_t i, size_t bytes, uint64_t seed);

/* "odd SEED B0 B1 ...": uint8 tensors of the given sizes; false on a malformed line. */
static bool set_odd(const char *line) {
    char *end;
    uint64_t seed = strtoull(line + 4, &end, 10);
    size_t n = 0, sizes[MAX_TENSORS];
    for (const char *at = end; n < MAX_TENSORS;) {
        while (*at == ' ') at++;
        if (*at == '\0') break;
        sizes[n++] = strtoull(at, &end, 10);
        if (end == at) return false;
        at = end;
    }
    for (size_t i = 0; i < ntensors; i++) reduce_aligned_free(infos[i].data), infos[i].data = NULL;
    memset(infos, 0, sizeof infos);
    ntensors = n;
    for (size_t i = 0; i < n; i++) {
        set_tensor(i, sizes[i], seed);
        infos[i].datatype = pcclUint8;
        infos[i].count = sizes[i];
    }
    state.count = n;
    return true;
}

static void set_tensor(size_t i, size_t bytes, uint64_t seed) {
    reduce_aligned_free(infos[i].data);
    snprintf(names[i], sizeof names[i], "t%zu", i);
    size_t words = (bytes + 7) / 8;
    uint64_t *w = reduce_aligned_alloc(64, (words * 8 + 63) / 64 * 64 + 64);
    pattern(w, words, seed, i);
    infos[i] = (pcclTensorInfo_t){names[i], w, bytes / 4, pcclFloat, pcclDeviceCpu, infos[i].allow_content_inequality};
}

static size_t check(uint64_t seed) {
    size_t bad = 0;
    for (size_t i = 0; i < ntensors; i++) {
        size_t bytes = bytes_of(i), words = (bytes + 7) / 8;
        uint64_t *want = malloc(words * 8 + 8);
        pattern(want, words, seed, i);
        bad += memcmp(want, infos[i].data, bytes) != 0;
        free(want);
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ss_peer MASTER_HOST:PORT [PEER_GROUP]\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (!ccoip_parse_address(argv[1], 48148, &params.master_address)) return 2;
    params.peer_group = argc > 2 ? (uint32_t) strtoul(argv[2], NULL, 10) : 0;
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    state.infos = infos;
    char line[256], env_name[64], env_value[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        unsigned long long a = 0, b = 0, c = 0;
        if (strcmp(line, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(line, "pending") == 0) {
            bool pending = false;
            pcclResult_t r = pcclArePeersPending(comm, &pending);
            printf("pending %d %d\n", (int) r, (int) pending);
        } else if (sscanf(line, "tensors %llu %llu %llu", &a, &b, &c) == 3 && a <= MAX_TENSORS) {
            for (size_t i = 0; i < ntensors; i++) reduce_aligned_free(infos[i].data), infos[i].data = NULL;
            memset(infos, 0, sizeof infos);
            ntensors = a;
            for (size_t i = 0; i < ntensors; i++) set_tensor(i, b, c);
            state.count = ntensors;
            printf("tensors 0\n");
        } else if (sscanf(line, "env %63s %63s", env_name, env_value) == 2) {
            int r = set_env(env_name, strcmp(env_value, "-") == 0 ? NULL : env_value);
            printf("env %d\n", r);
        } else if (strncmp(line, "odd ", 4) == 0 && set_odd(line)) {
            printf("odd 0\n");
        } else if (sscanf(line, "fill %llu %llu", &a, &b) == 2 && a < ntensors) {
            pattern(infos[a].data, (bytes_of(a) + 7) / 8, b, a);
            printf("fill 0\n");
        } else if (sscanf(line, "corrupt %llu", &a) == 1 && a < ntensors && bytes_of(a) > 0) {
            ((unsigned char *) infos[a].data)[bytes_of(a) / 2] ^= 0x10;
            printf("corrupt 0\n");
        } else if (sscanf(line, "poke %llu %llu", &a, &b) == 2 && a < ntensors && b < bytes_of(a)) {
            ((unsigned char *) infos[a].data)[b] ^= 0x04;
            printf("poke 0\n");
        } else if (sscanf(line, "ineq %llu %llu", &a, &b) == 2 && a < ntensors) {
            infos[a].allow_content_inequality = b != 0;
            printf("ineq 0\n");
        } else if (sscanf(line, "count %llu %llu", &a, &b) == 2 && a < ntensors) {
            set_tensor(a, b * 4, 0);
            printf("count 0\n");
        } else if (strcmp(line, "bump") == 0) {
            state.revision++;
            printf("rev %llu\n", (unsigned long long) state.revision);
        } else if (sscanf(line, "rev %llu", &a) == 1) {
            state.revision = a;
            printf("rev %llu\n", a);
        } else if (sscanf(line, "sync %llu", &a) == 1) {
            pcclSharedStateSyncInfo_t info = {0, 0};
            int64_t t0 = now_ms();
            pcclResult_t r = pcclSynchronizeSharedState(comm, &state, (pcclSharedStateSyncStrategy_t) a, &info);
            printf("sync %d %llu %llu %llu %lld\n", (int) r, (unsigned long long) state.revision,
                   (unsigned long long) info.tx_bytes, (unsigned long long) info.rx_bytes, (long long) (now_ms() - t0));
        } else if (sscanf(line, "check %llu", &a) == 1) {
            printf("check %zu\n", check(a));
        } else if (strcmp(line, "hash") == 0) {
            uint64_t h[MAX_TENSORS];
            for (size_t i = 0; i < ntensors; i++) h[i] = hash_xxh3(infos[i].data, bytes_of(i));
            printf("hash %016llx\n", (unsigned long long) hash_xxh3(h, ntensors * 8));
        } else if (sscanf(line, "allreduce %llu", &a) == 1 && a > 0) {
            float *x = malloc(a * sizeof *x);
            for (size_t k = 0; k < a; k++) x[k] = (float) (k % 13);
            pcclReduceDescriptor_t d = {.count = a, .op = pcclSum, .src_descriptor = {.datatype = pcclFloat},
                                        .quantization_options = {.quantized_datatype = pcclFloat}};
            int64_t t0 = now_ms();
            pcclResult_t r = pcclAllReduce(x, x, &d, comm, NULL);
            int64_t took = now_ms() - t0;
            int world = 0;
            pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
            size_t bad = 0;
            for (size_t k = 0; k < a && r == pcclSuccess; k++) bad += x[k] != (float) (world * (int) (k % 13));
            free(x);
            printf("allreduce %d %zu %lld\n", (int) r, bad, (long long) took);
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            printf("unknown %s\n", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    for (size_t i = 0; i < ntensors; i++) reduce_aligned_free(infos[i].data);
    printf("bye\n");
    fflush(stdout);
    return 0;
}

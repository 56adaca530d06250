/* gpu_peer.h: what the GPU end-to-end tests' peer processes share: connect to the master on
 * 127.0.0.1 and vote newcomers in until `world` peers are accepted. */
#ifndef PCCL_TESTS_CUDA_GPU_PEER_H
#define PCCL_TESTS_CUDA_GPU_PEER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

/* The communicator once `world` peers are in, or NULL (after 60 s at most). */
static inline pcclComm_t *gpu_peer_connect(int port, int world) {
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4 = (ccoip_ipv4_address_t){{127, 0, 0, 1}};
    params.master_address.port = (uint16_t) port;
    pcclComm_t *comm = NULL;
    if (pcclInit() != pcclSuccess || pcclCreateCommunicator(&params, &comm) != pcclSuccess) return NULL;
    if (pcclConnect(comm) != pcclSuccess) return NULL;
    time_t give_up = time(NULL) + 60;
    for (int w = 0; time(NULL) < give_up; usleep(10000)) {
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &w) != pcclSuccess) return NULL;
        if (w >= world) return comm;
        pcclUpdateTopology(comm); /* admits whoever waits; a failed round is simply repeated */
    }
    return NULL;
}

/* Driver side, before spawning peer i: with PCCL_TEST_GPU_PER_PEER=1 in the environment and
 * `ndev` GPUs, peer i sees only GPU i mod ndev (CUDA_VISIBLE_DEVICES, inherited), as peers on
 * one GPU each would in a deployment; otherwise every peer shares GPU 0 (the default). */
static inline void gpu_peer_pick_device(int i, int ndev) {
    const char *v = getenv("PCCL_TEST_GPU_PER_PEER");
    if (v == NULL || strcmp(v, "1") != 0 || ndev < 2) return;
    char s[16];
    snprintf(s, sizeof s, "%d", i % ndev);
    setenv("CUDA_VISIBLE_DEVICES", s, 1);
}

#endif /* PCCL_TESTS_CUDA_GPU_PEER_H */

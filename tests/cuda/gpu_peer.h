/* gpu_peer.h: what the GPU end-to-end tests' peer processes share: connect to the master on
 * 127.0.0.1 and vote newcomers in until `world` peers are accepted. */
#ifndef PCCL_TESTS_CUDA_GPU_PEER_H
#define PCCL_TESTS_CUDA_GPU_PEER_H

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

#endif /* PCCL_TESTS_CUDA_GPU_PEER_H */

/* peer_prog: a PCCL peer driven line by line on stdin, for the end-to-end tests.
 *   peer_prog MASTER_HOST:PORT [PEER_GROUP]
 * Commands (one per line) and the line each prints on stdout:
 *   connect  -> "connect RESULT PORT"  (PORT: our p2p listener)
 *   update   -> "update RESULT"
 *   pending  -> "pending RESULT 0|1"
 *   attrs    -> "attrs RESULT GLOBAL GROUP NUM_GROUPS LARGEST"
 *   links    -> "links TX_FD RX_FD"
 *   quit     -> "bye" after pcclDestroyCommunicator
 * RESULT is the pcclResult_t number. Logs go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/net/ccoip_socket.h"
#include "pccl.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: peer_prog MASTER_HOST:PORT [PEER_GROUP]\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (!ccoip_parse_address(argv[1], 48148, &params.master_address)) {
        fprintf(stderr, "peer_prog: bad address %s\n", argv[1]);
        return 2;
    }
    params.peer_group = argc > 2 ? (uint32_t) strtoul(argv[2], NULL, 10) : 0;
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "connect") == 0) {
            pcclResult_t r = pcclConnect(comm);
            printf("connect %d %u\n", (int) r, comm->p2p.listener.port);
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(line, "pending") == 0) {
            bool pending = false;
            pcclResult_t r = pcclArePeersPending(comm, &pending);
            printf("pending %d %d\n", (int) r, pending);
        } else if (strcmp(line, "attrs") == 0) {
            int v[4] = {0, 0, 0, 0};
            pcclResult_t r = pcclSuccess;
            for (int i = 0; i < 4 && r == pcclSuccess; i++) r = pcclGetAttribute(comm, (pcclAttribute_t) (i + 1), &v[i]);
            printf("attrs %d %d %d %d %d\n", (int) r, v[0], v[1], v[2], v[3]);
        } else if (strcmp(line, "links") == 0) {
            ccoip_p2p_links_t l;
            ccoip_comm_links(comm, &l);
            printf("links %d %d\n", l.tx.fd, l.rx.fd);
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

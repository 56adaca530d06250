/* The public API inside one process: misuse results, an unreachable master, the embedded master
 * (pcclCreateMaster .. pcclDestroyMaster) with two communicators on threads, destroy while the
 * other peer is mid-operation. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/master/ccoip_master.h"
#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/net/ccoip_socket.h"
#include "pccl.h"
#include "tests/common/check.h"

static ccoip_socket_address_t loopback(uint16_t port) {
    ccoip_socket_address_t a;
    REQUIRE(ccoip_parse_address("127.0.0.1", port, &a));
    return a;
}

typedef struct {
    pcclResult_t r;
    pcclComm_t *comm;
} job_t;

static void *connect_job(void *arg) {
    job_t *j = arg;
    j->r = pcclConnect(j->comm);
    return NULL;
}

static void *update_job(void *arg) {
    job_t *j = arg;
    j->r = pcclUpdateTopology(j->comm);
    return NULL;
}

int main(void) {
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address = loopback(1); /* nothing listens on port 1 */
    pcclComm_t *comm = NULL;
    pcclMasterInstance_t *master = NULL;

    /* Before pcclInit. */
    CHECK(pcclCreateCommunicator(&params, &comm) == pcclNotInitialized);
    CHECK(pcclCreateMaster(loopback(0), &master) == pcclNotInitialized);
    CHECK(pcclConnect(NULL) == pcclNotInitialized);
    REQUIRE(pcclInit() == pcclSuccess);

    /* NULL and bad arguments. */
    CHECK(pcclCreateCommunicator(NULL, &comm) == pcclInvalidArgument);
    CHECK(pcclCreateCommunicator(&params, NULL) == pcclInvalidArgument);
    CHECK(pcclConnect(NULL) == pcclInvalidArgument);
    CHECK(pcclUpdateTopology(NULL) == pcclInvalidArgument);
    bool pending;
    CHECK(pcclArePeersPending(NULL, &pending) == pcclInvalidArgument);
    int v;
    CHECK(pcclGetAttribute(NULL, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &v) == pcclInvalidArgument);
    CHECK(pcclDestroyCommunicator(NULL) == pcclInvalidArgument);
    CHECK(pcclCreateMaster(loopback(0), NULL) == pcclInvalidArgument);
    CHECK(pcclRunMaster(NULL) == pcclInvalidArgument);
    CHECK(pcclInterruptMaster(NULL) == pcclInvalidArgument);
    CHECK(pcclMasterAwaitTermination(NULL) == pcclInvalidArgument);
    CHECK(pcclDestroyMaster(NULL) == pcclInvalidArgument);

    /* Unreachable master: a bounded failure; calls before connect are misuse; no second try. */
    setenv("PCCL_CONNECT_TIMEOUT_MS", "1500", 1);
    REQUIRE(pcclCreateCommunicator(&params, &comm) == pcclSuccess);
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &v) == pcclInvalidUsage);
    CHECK(pcclGetAttribute(comm, (pcclAttribute_t) 9, &v) == pcclInvalidArgument);
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, NULL) == pcclInvalidArgument);
    CHECK(pcclArePeersPending(comm, NULL) == pcclInvalidArgument);
    CHECK(pcclUpdateTopology(comm) == pcclInvalidUsage);
    int64_t t0 = ccoip_now_ms();
    CHECK(pcclConnect(comm) == pcclMasterConnectionFailed);
    int64_t took = ccoip_now_ms() - t0;
    CHECK(took >= 1000 && took < 5000);
    CHECK(pcclConnect(comm) == pcclInvalidUsage);
    CHECK(pcclDestroyCommunicator(comm) == pcclSuccess);

    /* Embedded master on an ephemeral port. */
    REQUIRE(pcclCreateMaster(loopback(0), &master) == pcclSuccess);
    uint16_t port = ccoip_master_port(master);
    CHECK(port != 0);
    CHECK(pcclInterruptMaster(master) == pcclInvalidUsage); /* not running yet */
    REQUIRE(pcclRunMaster(master) == pcclSuccess);
    CHECK(pcclRunMaster(master) == pcclInvalidUsage);
    CHECK(pcclDestroyMaster(master) == pcclInvalidUsage); /* still running */

    params.master_address = loopback(port);
    job_t a = {pcclInternalError, NULL}, b = {pcclInternalError, NULL};
    REQUIRE(pcclCreateCommunicator(&params, &a.comm) == pcclSuccess);
    REQUIRE(pcclCreateCommunicator(&params, &b.comm) == pcclSuccess);
    CHECK(pcclConnect(a.comm) == pcclSuccess);
    CHECK(pcclGetAttribute(a.comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &v) == pcclSuccess && v == 1);
    CHECK(pcclConnect(a.comm) == pcclInvalidUsage);
    pthread_t tb, ta;
    pthread_create(&tb, NULL, connect_job, &b);
    /* b registers in its own time (a loaded machine: seconds); poll, bounded. */
    pending = false;
    for (int i = 0; i < 1500 && !pending; i++) {
        CHECK(pcclArePeersPending(a.comm, &pending) == pcclSuccess);
        if (!pending) usleep(20000);
    }
    CHECK(pending);
    CHECK(pcclUpdateTopology(a.comm) == pcclSuccess);
    pthread_join(tb, NULL);
    CHECK(b.r == pcclSuccess);
    for (int i = 1; i <= 4; i++) {
        int va = -1, vb = -1;
        CHECK(pcclGetAttribute(a.comm, (pcclAttribute_t) i, &va) == pcclSuccess);
        CHECK(pcclGetAttribute(b.comm, (pcclAttribute_t) i, &vb) == pcclSuccess);
        CHECK(va == (i == 3 ? 1 : 2) && vb == va);
    }
    ccoip_p2p_links_t la, lb;
    ccoip_comm_links(a.comm, &la);
    ccoip_comm_links(b.comm, &lb);
    CHECK(la.tx.fd >= 0 && la.rx.fd >= 0 && lb.tx.fd >= 0 && lb.rx.fd >= 0);
    ccoip_uuid_t ua = ccoip_comm_uuid(a.comm), ub = ccoip_comm_uuid(b.comm);
    CHECK(memcmp(&la.tx.peer, &ub, 16) == 0 && memcmp(&lb.rx.peer, &ua, 16) == 0);
    CHECK(la.epoch == lb.epoch);
    ccoip_abort_queue_t *q = ccoip_comm_aborts(a.comm);
    uint64_t seen = ccoip_abort_generation(q);
    CHECK(!ccoip_abort_changed(q, seen));

    /* a waits in a vote; b is destroyed meanwhile: a's call returns, the next one succeeds alone. */
    job_t ja = {pcclInternalError, a.comm};
    pthread_create(&ta, NULL, update_job, &ja);
    usleep(200000);
    CHECK(pcclDestroyCommunicator(b.comm) == pcclSuccess);
    pthread_join(ta, NULL);
    CHECK(ja.r == pcclSuccess || ja.r == pcclUpdateTopologyFailed);
    CHECK(pcclUpdateTopology(a.comm) == pcclSuccess);
    CHECK(pcclGetAttribute(a.comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &v) == pcclSuccess && v == 1);

    /* The master stops under a: its next call fails cleanly, and the abort flag is up. */
    CHECK(pcclInterruptMaster(master) == pcclSuccess);
    CHECK(pcclMasterAwaitTermination(master) == pcclSuccess);
    CHECK(pcclDestroyMaster(master) == pcclSuccess);
    CHECK(pcclUpdateTopology(a.comm) == pcclMasterConnectionFailed);
    CHECK(ccoip_abort_changed(q, seen) && ccoip_abort_check(q, 42, &seen));
    CHECK(pcclDestroyCommunicator(a.comm) == pcclSuccess);

    /* A master that never ran can be destroyed; a taken port is refused at creation. */
    REQUIRE(pcclCreateMaster(loopback(0), &master) == pcclSuccess);
    pcclMasterInstance_t *clash = NULL;
    CHECK(pcclCreateMaster(loopback(ccoip_master_port(master)), &clash) == pcclInvalidArgument);
    CHECK(pcclDestroyMaster(master) == pcclSuccess);
    return check_exit();
}

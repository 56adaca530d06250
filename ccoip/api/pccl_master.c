/* pccl_master.c: the public master API (pcclCreateMaster ... pcclDestroyMaster): the pcclInit
 * check, then master/ccoip_master.c. */
#include "ccoip/api/pccl_internal.h"
#include "ccoip/master/ccoip_master.h"
#include "pccl.h"

PCCL_EXPORT pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address, pcclMasterInstance_t **out) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    return ccoip_master_create(listen_address, out);
}

PCCL_EXPORT pcclResult_t pcclSetMasterSecret(pcclMasterInstance_t *m, const void *secret, size_t length) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    if (m == NULL) return pcclInvalidArgument;
    return ccoip_master_set_secret(m, secret, length);
}

PCCL_EXPORT pcclResult_t pcclSetMasterEncryption(pcclMasterInstance_t *m, bool on) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    if (m == NULL) return pcclInvalidArgument;
    return ccoip_master_require_encryption(m, on);
}

PCCL_EXPORT pcclResult_t pcclRunMaster(pcclMasterInstance_t *m) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    return ccoip_master_run(m);
}

PCCL_EXPORT pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *m) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    return ccoip_master_interrupt(m);
}

PCCL_EXPORT pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *m) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    return ccoip_master_await(m);
}

PCCL_EXPORT pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *m) {
    if (!pccl_is_initialized()) return pcclNotInitialized;
    return ccoip_master_destroy(m);
}

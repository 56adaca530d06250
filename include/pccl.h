/* pccl.h: the public C API of libpccl.
 *
 * Source- and ABI-compatible with PCCL 1.0: names, numeric values, field order and field types
 * are fixed. Our own additions live in the "Extensions" section at the end, each behind a
 * PCCL_HAS_<FEATURE> macro. */
#ifndef PCCL_H
#define PCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip_inet.h"

#if defined(_WIN32)
#  if defined(PCCL_BUILDING_SHARED)
#    define PCCL_EXPORT __declspec(dllexport)
#  else
#    define PCCL_EXPORT
#  endif
#else
#  define PCCL_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pcclResult_t {
    pcclSuccess = 0,
    pcclNotInitialized = 1,
    pcclInternalError = 2,
    pcclInvalidArgument = 3,
    pcclInvalidUsage = 4,
    pcclTooFewPeers = 5,
    pcclMasterConnectionFailed = 6,
    pcclRankConnectionFailed = 7,
    pcclRankConnectionLost = 8,
    pcclNoSharedStateAvailable = 9,
    pcclPendingAsyncOps = 10,
    pcclUpdateTopologyFailed = 11,
    pcclTopologyOptimizationFailed = 12,
    /* Extensions take values from 100 up; see the end of this file. */
    pcclCollectiveTimeout = 100 /* PCCL_HAS_COLLECTIVE_TIMEOUT */
} pcclResult_t;

typedef enum pcclDataType_t {
    pcclUint8 = 0,
    pcclInt8 = 1,
    pcclInt16 = 2,
    pcclUint16 = 3,
    pcclUint32 = 4,
    pcclInt32 = 5,
    pcclUint64 = 6,
    pcclInt64 = 7,
    pcclFloat16 = 8,
    pcclBFloat16 = 9,
    pcclFloat = 10,
    pcclDouble = 11
} pcclDataType_t;

typedef enum pcclDeviceType_t {
    pcclDeviceCpu = 0,
    pcclDeviceCuda = 1
} pcclDeviceType_t;

typedef enum pcclRedOp_t {
    pcclSum = 0,
    pcclAvg = 1,
    pcclProd = 2,
    pcclMax = 3,
    pcclMin = 4
} pcclRedOp_t;

typedef enum pcclAttribute_t {
    PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE = 1,
    PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE = 2,
    PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS = 3,
    PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE = 4
} pcclAttribute_t;

typedef enum pcclSharedStateSyncStrategy_t {
    PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR = 0,
    PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY = 1,
    PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY = 2
} pcclSharedStateSyncStrategy_t;

typedef enum pcclDistributionHint_t {
    pcclDistributionNone = 0,
    pcclDistributionNormal = 1,
    pcclDistributionUniform = 2
} pcclDistributionHint_t;

typedef enum pcclQuantizationAlgorithm_t {
    pcclQuantNone = 0,
    pcclQuantMinMax = 1,
    pcclQuantZeroPointScale = 2
} pcclQuantizationAlgorithm_t;

typedef struct pcclCommCreateParams_t {
    ccoip_socket_address_t master_address;
    uint32_t peer_group;
    uint32_t p2p_connection_pool_size; /* 0 means 4 (docs/allreduce.md, connection pool) */
} pcclCommCreateParams_t;

typedef struct pcclComm_t pcclComm_t;
typedef struct pcclRankInfo_t pcclRankInfo_t;
typedef struct pcclMasterInstanceState_t pcclMasterInstance_t;

typedef struct pcclReduceInfo_t {
    uint32_t local_world_size;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclReduceInfo_t;

typedef struct pcclReduceOperandDescriptor_t {
    pcclDataType_t datatype;
    pcclDistributionHint_t distribution_hint;
} pcclReduceOperandDescriptor_t;

typedef struct pcclQuantizationOptions_t {
    pcclDataType_t quantized_datatype;
    pcclQuantizationAlgorithm_t algorithm;
} pcclQuantizationOptions_t;

typedef struct pcclReduceDescriptor_t {
    size_t count;
    pcclRedOp_t op;
    uint64_t tag;
    pcclReduceOperandDescriptor_t src_descriptor;
    pcclQuantizationOptions_t quantization_options;
} pcclReduceDescriptor_t;

typedef struct pcclReduceSingleDescriptor_t {
    void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t descriptor;
} pcclReduceOpDescriptor_t;

typedef struct pcclAsyncReduceOp_t {
    pcclComm_t *comm;
    uint64_t tag;
} pcclAsyncReduceOp_t;

typedef struct pcclRankUuid_t {
    uint8_t data[16];
} pcclRankUuid_t;

typedef struct pcclTensorInfo_t {
    const char *name;
    void *data;
    size_t count;
    pcclDataType_t datatype;
    pcclDeviceType_t device_type;
    bool allow_content_inequality;
} pcclTensorInfo_t;

typedef struct pcclSharedState_t {
    uint64_t revision;
    size_t count;
    pcclTensorInfo_t *infos;
} pcclSharedState_t;

typedef struct pcclSharedStateSyncInfo_t {
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclSharedStateSyncInfo_t;

typedef struct pcclBuildInfo_t {
    bool has_cuda_support;
} pcclBuildInfo_t;

/* Once per process, before any other call; until then calls return pcclNotInitialized. */
PCCL_EXPORT pcclResult_t pcclInit(void);

/* Allocates a communicator; does no I/O. */
PCCL_EXPORT pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params, pcclComm_t **comm_out);

/* World sizes and peer-group counts as the master last reported them. */
PCCL_EXPORT pcclResult_t pcclGetAttribute(const pcclComm_t *communicator, pcclAttribute_t attribute,
                                          int *p_attribute_out);

/* Closes every connection, joins every thread, frees everything. */
PCCL_EXPORT pcclResult_t pcclDestroyCommunicator(pcclComm_t *communicator);

/* Connects to the master and blocks until the accepted peers admit this one. */
PCCL_EXPORT pcclResult_t pcclConnect(pcclComm_t *communicator);

/* Collective among accepted peers: admits pending peers and (re)connects the ring. */
PCCL_EXPORT pcclResult_t pcclUpdateTopology(pcclComm_t *communicator);

/* Collective among accepted peers: is anyone waiting for admission? */
PCCL_EXPORT pcclResult_t pcclArePeersPending(const pcclComm_t *communicator, bool *pending_out);

/* Collective: measures missing bandwidths and adopts the ring order the master computes. */
PCCL_EXPORT pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator);

/* Blocking all-reduce over the accepted peers of this peer group; sendbuf may equal recvbuf. */
PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator, pcclReduceInfo_t *reduce_info_out);

/* Starts an all-reduce; several with distinct tags may be in flight. */
PCCL_EXPORT pcclResult_t pcclAllReduceAsync(const void *sendbuf, void *recvbuf,
                                            const pcclReduceDescriptor_t *descriptor,
                                            const pcclComm_t *communicator, pcclAsyncReduceOp_t *reduce_handle_out);

/* Waits for an async all-reduce and returns its result. */
PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                              pcclReduceInfo_t *reduce_info_out);

/* Runs `count` all-reduces, at most max_in_flight at once, retrying failed ones with the peers
 * that remain until all succeed or fewer than two peers are left. */
PCCL_EXPORT pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descriptors, size_t count,
                                                        const pcclComm_t *communicator,
                                                        pcclReduceInfo_t *reduce_info_out, int max_in_flight);

/* Hashes the tensors, lets the master elect the popular content, fetches what differs, verifies. */
PCCL_EXPORT pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *communicator, pcclSharedState_t *shared_state,
                                                    pcclSharedStateSyncStrategy_t strategy,
                                                    pcclSharedStateSyncInfo_t *sync_info_out);

/* A master inside the caller's process; the pccl-master binary wraps these five. */
PCCL_EXPORT pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address,
                                          pcclMasterInstance_t **p_master_handle_out);
PCCL_EXPORT pcclResult_t pcclRunMaster(pcclMasterInstance_t *master_instance);
PCCL_EXPORT pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *master_instance);
PCCL_EXPORT pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *master_instance);
PCCL_EXPORT pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *master_instance);

/* Whether CUDA support is compiled in. */
PCCL_EXPORT pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info);

/* ---- Extensions (ours, not in PCCL 1.0) ---------------------------------------------------- */

/* pcclResultString: a short constant English name for a result code ("pcclSuccess", ...);
 * unknown values give "unknown pcclResult_t". Never NULL. */
#define PCCL_HAS_RESULT_STRING 1
PCCL_EXPORT const char *pcclResultString(pcclResult_t result);

/* Collective watchdog: an all-reduce that makes no progress (no bytes moved, no step of its
 * start / finish handshake with the master) for the communicator's collective timeout is aborted
 * on every member of its peer group, and every member returns pcclCollectiveTimeout. Waiting for
 * the other members to call the same collective counts as no progress. The timeout comes from
 * the environment variable PCCL_COLLECTIVE_TIMEOUT_MS, read by pcclCreateCommunicator (unset or 0:
 * the default, 600000 ms = 10 minutes); pcclSetCollectiveTimeout changes it (0: the default again;
 * UINT32_MAX: about 49 days, in effect never), also for collectives already running.
 * After pcclCollectiveTimeout call pcclUpdateTopology before the next collective, as after
 * pcclRankConnectionLost. */
#define PCCL_HAS_COLLECTIVE_TIMEOUT 1
PCCL_EXPORT pcclResult_t pcclSetCollectiveTimeout(pcclComm_t *communicator, uint32_t timeout_ms);

/* Run secret: a run only its members can join. Every connection (peer to master, p2p, shared
 * state, benchmark) proves knowledge of the secret both ways, by HMAC-SHA256 over fresh nonces;
 * the secret never crosses the wire. Both sides must hold the same secret or neither: a mismatch
 * makes pcclConnect return pcclMasterConnectionFailed with a log line saying the secret was
 * refused. pcclSetSecret (before pcclConnect) takes 16 to 4096 bytes; without it, pcclConnect
 * reads the file named by PCCL_SECRET_FILE (trailing whitespace dropped; refused when group or
 * others may read it). pcclSetMasterSecret does the same for an embedded master, before
 * pcclRunMaster. Without a secret the run is open, as in PCCL. PCCL_ENCRYPT=1 (read by
 * pcclConnect; needs the secret, and a master started with --encrypt) encrypts the all-reduce data
 * links and shared-state transfers. See docs/security.md. */
#define PCCL_HAS_SECRET 1
PCCL_EXPORT pcclResult_t pcclSetSecret(pcclComm_t *communicator, const void *secret, size_t length);
PCCL_EXPORT pcclResult_t pcclSetMasterSecret(pcclMasterInstance_t *master_instance, const void *secret, size_t length);
/* Before pcclConnect: encrypt or not, whatever PCCL_ENCRYPT says. Before pcclRunMaster (after
 * pcclSetMasterSecret): every member must encrypt. */
PCCL_EXPORT pcclResult_t pcclSetEncryption(pcclComm_t *communicator, bool encrypt);
PCCL_EXPORT pcclResult_t pcclSetMasterEncryption(pcclMasterInstance_t *master_instance, bool encrypt);

/* Stream-ordered all-reduce of CUDA device buffers (docs/cuda-streams.md), as NCCL's: the call
 * records an event on `stream` (a cudaStream_t; NULL is the legacy default stream), hands the op
 * to a proxy thread and returns at once; the stream waits, on the GPU, until the result is in
 * recvbuf; the host never synchronizes the stream. Complete it with pcclAwaitAsyncReduce, which
 * returns the op's result (and frees its tag). On failure the stream is released all the same:
 * recvbuf is then filled with 0xFF bytes (a NaN in every float type, -1 in every integer type)
 * before work queued on the stream after the call runs, and sendbuf is untouched unless it is
 * recvbuf. Both buffers must be device memory; host buffers get pcclInvalidArgument. In a library
 * built without CUDA it returns pcclInvalidUsage. */
#define PCCL_HAS_CUDA_STREAMS 1
PCCL_EXPORT pcclResult_t pcclAllReduceOnStream(const void *sendbuf, void *recvbuf,
                                               const pcclReduceDescriptor_t *descriptor,
                                               const pcclComm_t *communicator, void *stream,
                                               pcclAsyncReduceOp_t *reduce_handle_out);

/* Determinism fingerprint (docs/fingerprint.md): hashes of the bit-exact outputs of the
 * functions a training step uses (expf, logf, tanhf, rsqrtf, erff, ..., fp16/bf16 conversions,
 * fma dot products, a tree reduction) over fixed inputs (all 2^32 floats for the unary float
 * functions), on CUDA device 0, plus its compute capability and driver/runtime versions.
 * Flags: PCCL_FINGERPRINT_QUICK uses 2^24 of the 2^32 inputs; PCCL_FINGERPRINT_CPU computes, on
 * the host, only the functions whose results IEEE 754 fixes exactly (these must equal a GPU's).
 * Without CUDA or without a GPU, only PCCL_FINGERPRINT_CPU succeeds (else pcclInvalidUsage).
 * With PCCL_REQUIRE_FINGERPRINT=1 in its environment, pcclConnect computes the fingerprint (or
 * reads the file named by PCCL_FINGERPRINT_FILE, as `pccl-fingerprint --out` writes it) and
 * shows it to the master, which refuses a peer whose hashes differ from the run's. */
#define PCCL_HAS_DETERMINISM_FINGERPRINT 1
#define PCCL_FINGERPRINT_MAX_ENTRIES 32
#define PCCL_FINGERPRINT_QUICK 1u
#define PCCL_FINGERPRINT_CPU 2u

typedef struct pcclFingerprintEntry_t {
    char name[24]; /* "expf", "f32_to_bf16", ... */
    uint64_t hash;
} pcclFingerprintEntry_t;

typedef struct pcclDeterminismFingerprint_t {
    char device[64];           /* the GPU's name, or "cpu" */
    uint32_t compute_capability; /* major * 10 + minor (90: an H100); 0 for the CPU */
    uint32_t driver_version;   /* cudaDriverGetVersion (13000: CUDA 13.0); 0 for the CPU */
    uint32_t runtime_version;  /* cudaRuntimeGetVersion */
    uint32_t flags;            /* the PCCL_FINGERPRINT_* flags it was computed with */
    uint32_t count;
    pcclFingerprintEntry_t entries[PCCL_FINGERPRINT_MAX_ENTRIES];
} pcclDeterminismFingerprint_t;

PCCL_EXPORT pcclResult_t pcclGetDeterminismFingerprint(uint32_t flags, pcclDeterminismFingerprint_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_H */

// The drop-in converts rdma-core's C structs and enums to uroce's by value or by cast. Every
// such conversion is only right while these hold; they are checked against Debian's
// libibverbs-dev headers at build time.
#include <infiniband/tm_types.h>
#include <infiniband/verbs.h>

#include <cstddef>

#include "compat/objects.hpp"
#include "uroce/types.hpp"

namespace uroce::compat {
namespace {

template <class A, class B>
constexpr bool same(A a, B b) {
  return static_cast<long long>(a) == static_cast<long long>(b);
}

// ibv_sge arrays are read as Sge arrays (post_send, post_recv, ibv_wr_set_sge_list).
static_assert(sizeof(ibv_sge) == sizeof(Sge) && alignof(ibv_sge) == alignof(Sge));
static_assert(offsetof(ibv_sge, addr) == offsetof(Sge, addr) && offsetof(ibv_sge, length) == offsetof(Sge, length) &&
              offsetof(ibv_sge, lkey) == offsetof(Sge, lkey));

// Work request opcodes: WrOpcode(ibv_wr_opcode).
static_assert(same(WrOpcode::RdmaWrite, IBV_WR_RDMA_WRITE) && same(WrOpcode::RdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM) &&
              same(WrOpcode::Send, IBV_WR_SEND) && same(WrOpcode::SendWithImm, IBV_WR_SEND_WITH_IMM) &&
              same(WrOpcode::RdmaRead, IBV_WR_RDMA_READ) && same(WrOpcode::AtomicCmpSwp, IBV_WR_ATOMIC_CMP_AND_SWP) &&
              same(WrOpcode::AtomicFetchAdd, IBV_WR_ATOMIC_FETCH_AND_ADD));

// Completions: ibv_wc_status(WcStatus), ibv_wc_opcode(WcOpcode).
static_assert(same(WcStatus::Success, IBV_WC_SUCCESS) && same(WcStatus::LocLenErr, IBV_WC_LOC_LEN_ERR) &&
              same(WcStatus::LocQpOpErr, IBV_WC_LOC_QP_OP_ERR) && same(WcStatus::LocEecOpErr, IBV_WC_LOC_EEC_OP_ERR) &&
              same(WcStatus::LocProtErr, IBV_WC_LOC_PROT_ERR) && same(WcStatus::WrFlushErr, IBV_WC_WR_FLUSH_ERR) &&
              same(WcStatus::MwBindErr, IBV_WC_MW_BIND_ERR) && same(WcStatus::BadRespErr, IBV_WC_BAD_RESP_ERR) &&
              same(WcStatus::LocAccessErr, IBV_WC_LOC_ACCESS_ERR) && same(WcStatus::RemInvReqErr, IBV_WC_REM_INV_REQ_ERR) &&
              same(WcStatus::RemAccessErr, IBV_WC_REM_ACCESS_ERR) && same(WcStatus::RemOpErr, IBV_WC_REM_OP_ERR) &&
              same(WcStatus::RetryExcErr, IBV_WC_RETRY_EXC_ERR) && same(WcStatus::RnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR) &&
              same(WcStatus::GeneralErr, IBV_WC_GENERAL_ERR) && same(WcStatus::TmErr, IBV_WC_TM_ERR) &&
              same(WcStatus::TmRndvIncomplete, IBV_WC_TM_RNDV_INCOMPLETE));
// Tag matching: completions, their flags (passed through), list operations and the TMH.
static_assert(same(WcOpcode::TmAdd, IBV_WC_TM_ADD) && same(WcOpcode::TmDel, IBV_WC_TM_DEL) &&
              same(WcOpcode::TmSync, IBV_WC_TM_SYNC) && same(WcOpcode::TmRecv, IBV_WC_TM_RECV) &&
              same(WcOpcode::TmNoTag, IBV_WC_TM_NO_TAG));
static_assert(same(kWcTmSyncReq, IBV_WC_TM_SYNC_REQ) && same(kWcTmMatch, IBV_WC_TM_MATCH) &&
              same(kWcTmDataValid, IBV_WC_TM_DATA_VALID));
static_assert(same(TmOpcode::Add, IBV_WR_TAG_ADD) && same(TmOpcode::Del, IBV_WR_TAG_DEL) &&
              same(TmOpcode::Sync, IBV_WR_TAG_SYNC) && same(kTmOpSignaled, IBV_OPS_SIGNALED) &&
              same(kTmOpSync, IBV_OPS_TM_SYNC));
static_assert(same(TmhOp::NoTag, IBV_TMH_NO_TAG) && same(TmhOp::Rndv, IBV_TMH_RNDV) && same(TmhOp::Fin, IBV_TMH_FIN) &&
              same(TmhOp::Eager, IBV_TMH_EAGER) && kTmhBytes == sizeof(ibv_tmh) && kRvhBytes == sizeof(ibv_rvh));
static_assert(same(WcOpcode::Send, IBV_WC_SEND) && same(WcOpcode::RdmaWrite, IBV_WC_RDMA_WRITE) &&
              same(WcOpcode::RdmaRead, IBV_WC_RDMA_READ) && same(WcOpcode::CompSwap, IBV_WC_COMP_SWAP) &&
              same(WcOpcode::FetchAdd, IBV_WC_FETCH_ADD) && same(WcOpcode::Recv, IBV_WC_RECV) &&
              same(WcOpcode::RecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM) && same(WcOpcode::AtomicWrite, IBV_WC_ATOMIC_WRITE) &&
              unsigned(WcOpcode::Flush) == kIbvWcFlush);

// QP types, states, MTUs: QpType(ibv_qp_type), QpState(ibv_qp_state), Mtu(ibv_mtu) and back.
static_assert(same(QpType::RC, IBV_QPT_RC) && same(QpType::UC, IBV_QPT_UC) && same(QpType::UD, IBV_QPT_UD));
static_assert(same(QpType::RawPacket, IBV_QPT_RAW_PACKET));
static_assert(same(WqState::Reset, IBV_WQS_RESET) && same(WqState::Ready, IBV_WQS_RDY) && same(WqState::Err, IBV_WQS_ERR));
static_assert(uint64_t(kHashSrcIpv4) == IBV_RX_HASH_SRC_IPV4 && uint64_t(kHashDstPortUdp) == IBV_RX_HASH_DST_PORT_UDP);
static_assert(same(QpState::Reset, IBV_QPS_RESET) && same(QpState::Init, IBV_QPS_INIT) && same(QpState::Rtr, IBV_QPS_RTR) &&
              same(QpState::Rts, IBV_QPS_RTS) && same(QpState::Sqd, IBV_QPS_SQD) && same(QpState::Sqe, IBV_QPS_SQE) &&
              same(QpState::Err, IBV_QPS_ERR));
static_assert(same(Mtu::Mtu256, IBV_MTU_256) && same(Mtu::Mtu512, IBV_MTU_512) && same(Mtu::Mtu1024, IBV_MTU_1024) &&
              same(Mtu::Mtu2048, IBV_MTU_2048) && same(Mtu::Mtu4096, IBV_MTU_4096));

// Bit masks passed through unchanged: access flags, send flags, modify_qp attribute masks.
static_assert(unsigned(kQpRateLimit) == IBV_QP_RATE_LIMIT && unsigned(kQpDestQpn) == IBV_QP_DEST_QPN);
static_assert(same(kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE) && same(kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE) &&
              same(kAccessRemoteRead, IBV_ACCESS_REMOTE_READ) && same(kAccessRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC));
static_assert(same(kSendFence, IBV_SEND_FENCE) && same(kSendSignaled, IBV_SEND_SIGNALED) &&
              same(kSendSolicited, IBV_SEND_SOLICITED) && same(kSendInline, IBV_SEND_INLINE));
static_assert(same(kQpState, IBV_QP_STATE) && same(kQpCurState, IBV_QP_CUR_STATE) &&
              same(kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY) && same(kQpAccessFlags, IBV_QP_ACCESS_FLAGS) &&
              same(kQpPkeyIndex, IBV_QP_PKEY_INDEX) && same(kQpPort, IBV_QP_PORT) && same(kQpQkey, IBV_QP_QKEY) &&
              same(kQpAv, IBV_QP_AV) && same(kQpPathMtu, IBV_QP_PATH_MTU) && same(kQpTimeout, IBV_QP_TIMEOUT) &&
              same(kQpRetryCnt, IBV_QP_RETRY_CNT) && same(kQpRnrRetry, IBV_QP_RNR_RETRY) && same(kQpRqPsn, IBV_QP_RQ_PSN) &&
              same(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC) && same(kQpAltPath, IBV_QP_ALT_PATH) &&
              same(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER) && same(kQpSqPsn, IBV_QP_SQ_PSN) &&
              same(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC) && same(kQpPathMigState, IBV_QP_PATH_MIG_STATE) &&
              same(kQpCap, IBV_QP_CAP) && same(kQpDestQpn, IBV_QP_DEST_QPN));

// Async events: ibv_event_type(AsyncEventType) and back.
static_assert(same(AsyncEventType::CqErr, IBV_EVENT_CQ_ERR) && same(AsyncEventType::QpFatal, IBV_EVENT_QP_FATAL) &&
              same(AsyncEventType::PortActive, IBV_EVENT_PORT_ACTIVE) &&
              same(AsyncEventType::SrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED) &&
              same(AsyncEventType::QpLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED));

// GIDs are copied as 16 raw bytes.
static_assert(sizeof(ibv_gid) == sizeof(Gid::raw));

}  // namespace
}  // namespace uroce::compat

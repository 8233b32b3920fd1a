#include "verbs/qp.hpp"

#include <array>
#include <cerrno>
#include <string>

namespace uroce::verbs {

Qp::Qp(Qpn qpn, QpType type, PdHandle pd, Cq* scq, Cq* rcq, const QpCap& cap)
    : sq(cap.max_send_wr, cap.max_send_sge, cap.max_inline_data),
      rq(cap.max_recv_wr, cap.max_recv_sge, 0),
      send_cq(scq), recv_cq(rcq), qpn_(qpn), type_(type), pd_(pd) {
  attr_.cap = cap;
  attr_.cap.max_send_wr = sq.capacity();
  attr_.cap.max_recv_wr = rq.capacity();
}

namespace {

struct Rule {
  QpState from, to;
  uint32_t required, optional;
};

constexpr uint32_t kPathOpt = kQpAltPath | kQpPathMigState;

// Required and optional attributes per transition (IBA 11.2.1.4, as libibverbs documents; the
// rate limit where the kernel takes it, RTR->RTS and RTS->RTS).
constexpr Rule kRcRules[] = {
    {QpState::Reset, QpState::Init, kQpPkeyIndex | kQpPort | kQpAccessFlags, 0},
    {QpState::Init, QpState::Init, 0, kQpPkeyIndex | kQpPort | kQpAccessFlags},
    {QpState::Init, QpState::Rtr,
     kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer,
     kQpAltPath | kQpAccessFlags | kQpPkeyIndex},
    {QpState::Rtr, QpState::Rts, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic,
     kQpCurState | kQpAccessFlags | kQpMinRnrTimer | kPathOpt | kQpRateLimit},
    {QpState::Rts, QpState::Rts, 0, kQpCurState | kQpAccessFlags | kQpMinRnrTimer | kPathOpt | kQpRateLimit},
    {QpState::Rts, QpState::Sqd, 0, kQpEnSqdAsyncNotify},
    {QpState::Sqd, QpState::Rts, 0, kQpCurState | kQpAccessFlags | kQpMinRnrTimer | kPathOpt},
    {QpState::Sqd, QpState::Sqd, 0,
     kQpAccessFlags | kQpMinRnrTimer | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
         kQpMaxDestRdAtomic | kQpPkeyIndex | kPathOpt},
    {QpState::Sqe, QpState::Rts, 0, kQpCurState | kQpAccessFlags},
};
// XRC (as the kernel has it): an initiator needs no responder attributes at RTR, a target no
// requester attributes but the timeout at RTS; given anyway (as uroce's own bring-up does),
// they are taken.
template <size_t N>
constexpr std::array<Rule, N> xrc_rules(const Rule (&rc)[N], bool target) {
  std::array<Rule, N> out{};
  for (size_t i = 0; i < N; ++i) {
    out[i] = rc[i];
    const uint32_t moved = target ? kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic : kQpMaxDestRdAtomic | kQpMinRnrTimer;
    const bool here = target ? rc[i].from == QpState::Rtr && rc[i].to == QpState::Rts
                             : rc[i].from == QpState::Init && rc[i].to == QpState::Rtr;
    if (here) {
      out[i].required &= ~moved;
      out[i].optional |= moved;
    }
  }
  return out;
}
constexpr auto kXrcIniRules = xrc_rules(kRcRules, false);
constexpr auto kXrcTgtRules = xrc_rules(kRcRules, true);

constexpr Rule kUcRules[] = {
    {QpState::Reset, QpState::Init, kQpPkeyIndex | kQpPort | kQpAccessFlags, 0},
    {QpState::Init, QpState::Init, 0, kQpPkeyIndex | kQpPort | kQpAccessFlags},
    {QpState::Init, QpState::Rtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
     kQpAltPath | kQpAccessFlags | kQpPkeyIndex},
    {QpState::Rtr, QpState::Rts, kQpSqPsn, kQpCurState | kQpAccessFlags | kPathOpt | kQpRateLimit},
    {QpState::Rts, QpState::Rts, 0, kQpCurState | kQpAccessFlags | kPathOpt | kQpRateLimit},
    {QpState::Rts, QpState::Sqd, 0, kQpEnSqdAsyncNotify},
    {QpState::Sqd, QpState::Rts, 0, kQpCurState | kQpAccessFlags | kPathOpt},
    {QpState::Sqe, QpState::Rts, 0, kQpCurState | kQpAccessFlags},
};
constexpr Rule kUdRules[] = {
    {QpState::Reset, QpState::Init, kQpPkeyIndex | kQpPort | kQpQkey, 0},
    {QpState::Init, QpState::Init, 0, kQpPkeyIndex | kQpPort | kQpQkey},
    {QpState::Init, QpState::Rtr, 0, kQpPkeyIndex | kQpQkey},
    {QpState::Rtr, QpState::Rts, kQpSqPsn, kQpCurState | kQpQkey | kQpRateLimit},
    {QpState::Rts, QpState::Rts, 0, kQpCurState | kQpQkey | kQpRateLimit},
    {QpState::Rts, QpState::Sqd, 0, kQpEnSqdAsyncNotify},
    {QpState::Sqd, QpState::Rts, 0, kQpCurState | kQpQkey},
    {QpState::Sqe, QpState::Rts, 0, kQpCurState | kQpQkey},
};

// Raw packet QPs, as the kernel has them: a port at INIT, nothing after.
constexpr Rule kRawRules[] = {
    {QpState::Reset, QpState::Init, kQpPort, 0},
    {QpState::Init, QpState::Init, 0, kQpPort},
    {QpState::Init, QpState::Rtr, 0, 0},
    {QpState::Rtr, QpState::Rts, 0, kQpCurState | kQpRateLimit},
    {QpState::Rts, QpState::Rts, 0, kQpCurState | kQpRateLimit},
    {QpState::Sqe, QpState::Rts, 0, kQpCurState},
};

const Rule* find_rule(QpType t, QpState from, QpState to) {
  std::span<const Rule> rules = t == QpType::RawPacket ? std::span<const Rule>(kRawRules)
                                : t == QpType::XrcSend ? std::span<const Rule>(kXrcIniRules)
                                : t == QpType::XrcRecv ? std::span<const Rule>(kXrcTgtRules)
                                : t == QpType::RC      ? std::span<const Rule>(kRcRules)
                                : t == QpType::UC ? std::span<const Rule>(kUcRules)
                                                  : std::span<const Rule>(kUdRules);
  for (const Rule& r : rules)
    if (r.from == from && r.to == to) return &r;
  return nullptr;
}

std::string transition(QpState a, QpState b) { return std::string(to_string(a)) + "->" + to_string(b); }

}  // namespace

Status Qp::modify(const QpAttr& a, uint32_t mask) {
  QpState cur = state();
  QpState to = mask & kQpState ? a.qp_state : cur;
  if ((mask & kQpCurState) && a.cur_qp_state != cur)
    return make_error(EINVAL, "modify_qp: cur_qp_state is " + std::string(to_string(a.cur_qp_state)) +
                                  " but the QP is in " + to_string(cur));
  uint32_t allowed = kQpState | kQpCurState;
  uint32_t required = 0;
  if (to != QpState::Reset && to != QpState::Err) {
    const Rule* r = find_rule(type_, cur, to);
    if (!r) return make_error(EINVAL, "modify_qp: transition " + transition(cur, to) + " is not allowed");
    required = r->required;
    allowed |= r->required | r->optional;
  }
  if (uint32_t missing = required & ~mask)
    return make_error(EINVAL, "modify_qp " + transition(cur, to) + ": required attribute mask 0x" +
                                  std::to_string(missing) + " missing");
  if (uint32_t extra = mask & ~allowed)
    return make_error(EINVAL, "modify_qp " + transition(cur, to) + ": attribute mask 0x" +
                                  std::to_string(extra) + " not allowed here");
  if ((mask & kQpPathMtu) && (uint8_t(a.path_mtu) < 1 || uint8_t(a.path_mtu) > 5))
    return make_error(EINVAL, "modify_qp: path_mtu must be 256..4096");
  if ((mask & kQpTimeout) && a.timeout > 31) return make_error(EINVAL, "modify_qp: timeout > 31");
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return make_error(EINVAL, "modify_qp: retry_cnt > 7");
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return make_error(EINVAL, "modify_qp: rnr_retry > 7");
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return make_error(EINVAL, "modify_qp: min_rnr_timer > 31");
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > kMaxRdAtomic)
    return make_error(EINVAL, "modify_qp: max_rd_atomic > " + std::to_string(kMaxRdAtomic));
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > kMaxRdAtomic)
    return make_error(EINVAL, "modify_qp: max_dest_rd_atomic > " + std::to_string(kMaxRdAtomic));
  if ((mask & kQpDestQpn) && a.dest_qp_num > 0xffffff) return make_error(EINVAL, "modify_qp: dest_qp_num > 24 bits");
  if ((mask & kQpRqPsn) && a.rq_psn > 0xffffff) return make_error(EINVAL, "modify_qp: rq_psn > 24 bits");
  if ((mask & kQpSqPsn) && a.sq_psn > 0xffffff) return make_error(EINVAL, "modify_qp: sq_psn > 24 bits");
  if ((mask & kQpPort) && a.port_num != 1) return make_error(EINVAL, "modify_qp: port_num must be 1");
  if ((mask & kQpPkeyIndex) && a.pkey_index != 0) return make_error(EINVAL, "modify_qp: pkey_index must be 0");
  if ((mask & kQpAv) && a.dgid == Gid{})
    return make_error(EINVAL, "modify_qp: dgid must be a RoCE v2 GID (an IPv6 or IPv4-mapped address)");
  if ((mask & kQpAccessFlags) &&
      (a.qp_access_flags & ~uint32_t(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic |
                                     kAccessFlushGlobal | kAccessFlushPersistent)))
    return make_error(EINVAL, "modify_qp: unknown access flags");

  if (mask & kQpAccessFlags) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & kQpQkey) attr_.qkey = a.qkey;
  if (mask & kQpAv) {
    attr_.dgid = a.dgid;
    attr_.hop_limit = a.hop_limit;
    attr_.traffic_class = a.traffic_class;
    attr_.sgid_index = a.sgid_index;
  }
  if (mask & kQpPathMtu) attr_.path_mtu = a.path_mtu;
  if (mask & kQpTimeout) attr_.timeout = a.timeout;
  if (mask & kQpRetryCnt) attr_.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) attr_.rnr_retry = a.rnr_retry;
  if (mask & kQpRqPsn) attr_.rq_psn = a.rq_psn;
  if (mask & kQpSqPsn) attr_.sq_psn = a.sq_psn;
  if (mask & kQpMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpDestQpn) attr_.dest_qp_num = a.dest_qp_num;
  if (mask & kQpPkeyIndex) attr_.pkey_index = a.pkey_index;
  if (mask & kQpPort) attr_.port_num = a.port_num;
  attr_.qp_state = to;
  set_state(to);
  return {};
}

}  // namespace uroce::verbs

// Work queues: checking and posting send and receive work requests (application threads),
// doorbells, and the engine taking receive WQEs.
#include <algorithm>
#include <cstring>
#include <cerrno>
#include <mutex>
#include <string>

#include "transport/roles.hpp"
#include "transport/tag_matching.hpp"

namespace uroce::transport {

constexpr uint64_t kMinFrame = 14;  // a raw frame holds its Ethernet header at least


// ---------------------------------------------------------------- data path (application)

Result<uint32_t> ProtocolCore::check_send_wr(const Qp& qp, const SendWr& wr) const {
  constexpr uint32_t kKnown = kSendFence | kSendSignaled | kSendSolicited | kSendInline;
  if (wr.send_flags & ~kKnown) return make_error(EINVAL, "post_send: unknown send_flags");
  if (!known_opcode(wr.opcode)) return make_error(EINVAL, "post_send: unknown opcode");
  const WrTraits& t = traits(wr.opcode);
  uint64_t total = 0;
  for (const Sge& s : wr.sg_list) total += s.length;
  if (total > limits_.max_msg) return make_error(EINVAL, "post_send: message longer than 2^31 bytes");
  if (qp.type() == QpType::UC && !t.uc)
    return make_error(EINVAL, std::string("post_send: ") + t.name + " on a UC queue pair (SEND, RDMA WRITE and memory windows only)");
  if (qp.type() == QpType::UD) {
    if (!t.ud) return make_error(EINVAL, std::string("post_send: ") + t.name + " on a UD queue pair (SEND only)");
    if (!wr.ah) return make_error(EINVAL, "post_send: UD needs an address handle");
    if (wr.ah->sgid_index >= cfg_.gids.size() || wire::is_v4(wr.ah->dgid) != wire::is_v4(cfg_.gids[wr.ah->sgid_index]))
      return make_error(EINVAL, "post_send: the address handle's sgid_index names no GID of the destination's IP version");
    if (total > mtu_bytes(cfg_.port_mtu))
      return make_error(EINVAL, "post_send: a UD message fits in one packet of the port MTU (" +
                                    std::to_string(mtu_bytes(cfg_.port_mtu)) + " bytes)");
    if (wr.remote_qpn > wire::kQpnMask) return make_error(EINVAL, "post_send: remote_qpn > 24 bits");
  }
  if (qp.type() == QpType::RawPacket) {
    if (wr.opcode != WrOpcode::Send) return make_error(EINVAL, std::string("post_send: ") + t.name + " on a raw packet QP (SEND only)");
    if (total < kMinFrame || total > cfg_.raw_frame_max)
      return make_error(EINVAL, "post_send: a raw frame is " + std::to_string(kMinFrame) + ".." +
                                    std::to_string(cfg_.raw_frame_max) + " bytes (Ethernet header to the interface MTU)");
  }
  if (wr.send_flags & kSendInline) {
    if (t.rd_atomic())
      return make_error(EINVAL, "post_send: INLINE is only for SEND and RDMA WRITE");
    if (total > qp.sq.max_inline())
      return make_error(EINVAL, "post_send: inline data longer than max_inline_data (" +
                                    std::to_string(qp.sq.max_inline()) + ")");
  } else if (wr.sg_list.size() > qp.sq.max_sge()) {
    return make_error(EINVAL, "post_send: more SGEs than max_send_sge (" + std::to_string(qp.sq.max_sge()) + ")");
  }
  if (qp.type() == QpType::XrcRecv) return make_error(EINVAL, "post_send: an XRC target QP sends nothing");
  if (reliable_connected(qp.type()) && !t.rc)
    return make_error(EINVAL, std::string("post_send: ") + t.name + " on an RC queue pair");
  if (qp.type() == QpType::XrcSend && wr.remote_srqn > wire::kQpnMask)
    return make_error(EINVAL, "post_send: remote_srqn > 24 bits");
  if (t.local) {
    if (!wr.sg_list.empty() || (wr.send_flags & kSendInline))
      return make_error(EINVAL, std::string("post_send: ") + t.name + " carries no data (no SGEs, no INLINE)");
    if (wr.opcode == WrOpcode::BindMw && !wr.bind) return make_error(EINVAL, "post_send: BIND_MW needs its MwBind");
  }
  if (t.atomic) {
    if (wr.sg_list.size() != 1 || wr.sg_list[0].length != 8)
      return make_error(EINVAL, "post_send: atomics take exactly one 8-byte SGE");
    if (wr.remote_addr & 7) return make_error(EINVAL, "post_send: atomic remote_addr must be 8-byte aligned");
  }
  if (t.empty_reply) {
    if (!wr.sg_list.empty() || (wr.send_flags & kSendInline))
      return make_error(EINVAL, std::string("post_send: ") + t.name + " carries no SGEs (ATOMIC_WRITE's 8 bytes are in compare_add)");
    if (wr.opcode == WrOpcode::AtomicWrite && (wr.remote_addr & 7))
      return make_error(EINVAL, "post_send: ATOMIC_WRITE remote_addr must be 8-byte aligned");
    if (wr.opcode == WrOpcode::Flush) {
      if (!wr.flush_type || (wr.flush_type & ~(kFlushGlobal | kFlushPersistent)))
        return make_error(EINVAL, "post_send: FLUSH type must be GLOBAL and/or PERSISTENT");
      if (wr.flush_level != FlushLevel::Range && wr.flush_level != FlushLevel::Region)
        return make_error(EINVAL, "post_send: FLUSH level must be RANGE or MR");
      if (wr.flush_length > limits_.max_msg) return make_error(EINVAL, "post_send: FLUSH longer than 2^31 bytes");
      return wr.flush_length;
    }
  }
  return uint32_t(total);
}

Status ProtocolCore::post_send(Qp& qp, std::span<const SendWr> wrs, size_t* bad) {
  QpState st = qp.state();
  if (st != QpState::Rts && st != QpState::Sqd && st != QpState::Err) {
    if (bad) *bad = 0;
    return make_error(EINVAL, std::string("post_send: QP is in ") + to_string(st) +
                                  "; the send queue takes work in RTS (or ERR, where it is flushed)");
  }
  auto& sq = qp.sq;
  // A QP of a tag matching SRQ keeps slots for its rendezvous READs and FINs.
  const uint32_t kept = qp.srq && qp.srq->tm ? tm::kRendezvousSlots : 0;
  Status result;
  {
    std::lock_guard g(sq.producer_lock);
    for (size_t i = 0; i < wrs.size(); ++i) {
      const SendWr& wr = wrs[i];
      Result<uint32_t> total = check_send_wr(qp, wr);
      if (total && sq.free_slots() <= kept && (!kept || sq.free_slots_now() <= kept))
        total = make_error(ENOMEM, "post_send: send queue full (" + std::to_string(sq.capacity() - kept) + " WQEs)");
      if (!total) {
        if (bad) *bad = i;
        result = total.error();
        break;
      }
      uint32_t idx = sq.prod_local;
      verbs::SendWqe& w = sq.slot(idx);
      // Field by field (no memset of the slot): the side entry is written only for CAS and UD.
      w.wr_id = wr.wr_id;
      w.remote_addr = wr.remote_addr;
      w.compare_add = wr.compare_add;
      w.rkey = wr.rkey;
      w.imm = wr.imm_data;
      w.flags = wr.send_flags;
      w.opcode = wr.opcode;
      w.is_inline = false;
      w.num_sge = 0;
      w.assigned = w.failed = false;
      w.error = WcStatus::Success;
      w.first_psn = wire::Psn{};
      w.npkts = w.resp_pkts = 0;
      if (wr.opcode == WrOpcode::AtomicCmpSwp) sq.ext(idx).swap = wr.swap;
      if (wr.opcode == WrOpcode::SendWithInv || wr.opcode == WrOpcode::LocalInv) w.imm = wr.invalidate_rkey;
      if (wr.opcode == WrOpcode::BindMw) sq.ext(idx).bind = *wr.bind;
      if (qp.type() == QpType::XrcSend) sq.ext(idx).xrc_srqn = wr.remote_srqn;
      // FLUSH: its FETH (placement type, selectivity level) rides where immediate data would.
      if (wr.opcode == WrOpcode::Flush) w.imm = uint32_t(wr.flush_type) | uint32_t(wr.flush_level) << 4;
      if (wr.ah) {
        verbs::SendWqeExt& x = sq.ext(idx);
        x.ud_dgid = wr.ah->dgid;
        x.ud_tclass = wr.ah->traffic_class;
        x.ud_sgid_index = wr.ah->sgid_index;
        x.ud_qpn = wr.remote_qpn;
        x.ud_qkey = wr.remote_qkey;
      }
      if (wr.send_flags & kSendInline) {
        uint8_t* dst = sq.inline_data(idx);
        for (const Sge& s : wr.sg_list) {
          std::memcpy(dst, reinterpret_cast<const void*>(s.addr), s.length);
          dst += s.length;
        }
        w.is_inline = true;
      } else {
        std::copy(wr.sg_list.begin(), wr.sg_list.end(), sq.sges(idx));
        w.num_sge = uint16_t(wr.sg_list.size());
      }
      w.length = *total;
      ++sq.prod_local;
    }
    sq.publish();
  }
  ring_doorbell(qp);
  return result;
}

Status ProtocolCore::post_recv_wrs(verbs::WorkQueue<verbs::RecvWqe>& rq, std::span<const RecvWr> wrs, size_t* bad) {
  std::lock_guard g(rq.producer_lock);
  Status result;
  for (size_t i = 0; i < wrs.size(); ++i) {
    const RecvWr& wr = wrs[i];
    Status s;
    if (wr.sg_list.size() > rq.max_sge())
      s = make_error(EINVAL, "post_recv: more SGEs than max_recv_sge (" + std::to_string(rq.max_sge()) + ")");
    else if (rq.free_slots() == 0)
      s = make_error(ENOMEM, "post_recv: receive queue full (" + std::to_string(rq.capacity()) + " WQEs)");
    if (!s) {
      if (bad) *bad = i;
      result = s;
      break;
    }
    uint32_t idx = rq.prod_local;
    verbs::RecvWqe& w = rq.slot(idx);
    w.wr_id = wr.wr_id;
    w.num_sge = uint16_t(wr.sg_list.size());
    uint64_t total = 0;
    Sge* dst = rq.sges(idx);
    for (size_t k = 0; k < wr.sg_list.size(); ++k) {
      dst[k] = wr.sg_list[k];
      total += wr.sg_list[k].length;
    }
    w.length = total > UINT32_MAX ? UINT32_MAX : uint32_t(total);
    ++rq.prod_local;
  }
  rq.publish();
  return result;
}

Status ProtocolCore::post_recv(Qp& qp, std::span<const RecvWr> wrs, size_t* bad) {
  QpState st = qp.state();
  // The type first: an XRC target's srq is the engine's to change, message by message.
  if (qp.type() == QpType::XrcSend || qp.type() == QpType::XrcRecv || st == QpState::Reset || qp.srq) {
    if (bad) *bad = 0;
    return make_error(EINVAL, qp.type() == QpType::XrcRecv || (qp.type() != QpType::XrcSend && qp.srq)
                                  ? "post_recv: the QP takes its receives from an SRQ; post there"
                              : qp.type() == QpType::XrcSend ? "post_recv: an XRC initiator QP receives nothing"
                                                             : "post_recv: QP is in RESET; move it to INIT first");
  }
  Status result = post_recv_wrs(qp.rq, wrs, bad);
  // Only a QP in ERR needs the engine for receives: to flush them.
  if (qp.state() == QpState::Err) ring_doorbell(qp);
  return result;
}

Status ProtocolCore::post_srq_recv(verbs::Srq& srq, std::span<const RecvWr> wrs, size_t* bad) {
  return post_recv_wrs(srq.rq, wrs, bad);
}

void ProtocolCore::ring_doorbell(Qp& qp) {
  if (!qp.sq.doorbell.exchange(true, std::memory_order_acq_rel)) {
    {
      std::lock_guard g(doorbell_lock_);
      doorbells_.push_back(qp.qpn());
    }
    doorbell_count_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (waker_) waker_();
}


bool ProtocolCore::pop_recv(Qp& qp, verbs::RecvWqe& w, std::vector<Sge>& sges) {
  return pop_recv_from(qp.srq ? qp.srq->rq : qp.rq, qp.srq, w, sges);
}

bool ProtocolCore::pop_recv_from(verbs::WorkQueue<verbs::RecvWqe>& rq, verbs::Srq* srq, verbs::RecvWqe& w,
                                 std::vector<Sge>& sges) {
  uint32_t idx = rq.done.load(std::memory_order_relaxed);
  if (idx == rq.prod.load(std::memory_order_acquire)) return false;
  w = rq.slot(idx);
  sges.assign(rq.sges(idx), rq.sges(idx) + w.num_sge);
  rq.done.store(idx + 1, std::memory_order_release);
  if (srq) {
    uint32_t limit = srq->limit.load(std::memory_order_acquire);
    if (limit && srq->posted() < limit && srq->limit.exchange(0) != 0) {
      AsyncEvent e{AsyncEventType::SrqLimitReached};
      e.srq_handle = srq->handle();
      raise(e);
    }
  }
  return true;
}


}  // namespace uroce::transport

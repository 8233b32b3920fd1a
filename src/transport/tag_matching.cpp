// Tag matching SRQs: their list operations (ibv_post_srq_ops) and how a SEND to one of their
// QPs finds its buffer. A SEND starts with a TMH; an EAGER or RNDV message whose tag matches a
// posted buffer (while software is in step with the unexpected count, verbs/tag_list.hpp) goes
// there, else it is unexpected and takes an ordinary receive whole, as NO_TAG and FIN messages
// do. A matched RNDV request names the sender's data (RVH): this QP's requester READs it into
// the buffer, then sends the sender a FIN (its TMH alone, fenced behind the READ so the sender
// never reuses memory still being read), and the buffer's second completion says the data is
// there.
#include "transport/tag_matching.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "transport/roles.hpp"
#include "wire/bytes.hpp"

namespace uroce::transport {

Result<verbs::Srq*> ProtocolCore::create_tm_srq(PdHandle pd, verbs::Cq* cq, uint32_t depth, uint32_t max_sge,
                                                uint32_t max_tags, uint32_t max_ops) {
  UROCE_ASSERT_HELD(*this);
  if (!cq || !cq_users_.count(cq)) return make_error(EINVAL, "create_srq: a tag matching SRQ needs a CQ of this device");
  if (max_tags == 0 || max_tags > limits_.max_tm_tags)
    return make_error(EINVAL, "create_srq: max_num_tags must be 1.." + std::to_string(limits_.max_tm_tags));
  if (max_ops > limits_.max_tm_ops)
    return make_error(EINVAL, "create_srq: max_ops must be at most " + std::to_string(limits_.max_tm_ops));
  auto srq = create_srq(pd, depth, max_sge);
  if (!srq) return srq;
  (*srq)->tm = std::make_unique<verbs::TagList>(max_tags);
  (*srq)->cq = cq;
  ++cq_users_[cq];
  return srq;
}

Status ProtocolCore::post_srq_ops(verbs::Srq& srq, std::span<TmOp> ops, size_t* bad) {
  UROCE_ASSERT_HELD(*this);
  auto refuse = [&](size_t i, const std::string& why, int code = EINVAL) {
    if (bad) *bad = i;
    return make_error(code, "post_srq_ops: " + why);
  };
  if (!srq.tm) return refuse(0, "not a tag matching SRQ");
  verbs::TagList& tags = *srq.tm;
  for (size_t i = 0; i < ops.size(); ++i) {
    TmOp& op = ops[i];
    if (op.flags & ~uint32_t(kTmOpSignaled | kTmOpSync)) return refuse(i, "unknown flags");
    if (op.opcode == TmOpcode::Add) {
      if (op.sg_list.size() > 1) return refuse(i, "a tagged buffer takes at most one SGE");
      if (tags.posted() == tags.capacity())
        return refuse(i, "the tag list is full (" + std::to_string(tags.capacity()) + " tags)", ENOMEM);
    } else if (op.opcode == TmOpcode::Del) {
      if (op.handle >= tags.capacity()) return refuse(i, "DEL of a handle no ADD returned");
    } else if (op.opcode != TmOpcode::Sync) {
      return refuse(i, "unknown opcode");
    }
    if (op.flags & kTmOpSync) tags.reported = op.unexpected_cnt;
    Wc wc;
    wc.wr_id = op.wr_id;
    switch (op.opcode) {
      case TmOpcode::Add: {
        verbs::TaggedBuffer b;
        b.tag = op.tag;
        b.mask = op.mask;
        b.recv_wr_id = op.recv_wr_id;
        if (!op.sg_list.empty()) b.sge = op.sg_list[0];
        op.handle = *tags.add(b);
        wc.opcode = WcOpcode::TmAdd;
        break;
      }
      case TmOpcode::Del:
        // Consumed meanwhile: its message's completion comes instead.
        if (!tags.remove(op.handle)) wc.status = WcStatus::TmErr;
        wc.opcode = WcOpcode::TmDel;
        break;
      case TmOpcode::Sync: wc.opcode = WcOpcode::TmSync; break;
    }
    if (!tags.matching()) wc.tm_flags = kWcTmSyncReq;
    if ((op.flags & kTmOpSignaled) || wc.status != WcStatus::Success) push_wc(srq.cq, wc);
  }
  return {};
}

namespace tm {

namespace {

TmMessage read_tmh(std::span<const uint8_t> b) {
  TmMessage m;
  m.kind = TmKind::Plain;
  if (b.size() < kTmhBytes) return m;  // its reserved bytes are not looked at, as mlx5 does not
  m.app_ctx = wire::read_be32(&b[4]);
  m.tag = wire::read_be64(&b[8]);
  switch (TmhOp(b[0])) {
    case TmhOp::NoTag:
    case TmhOp::Fin: m.kind = TmKind::NoTag; break;
    case TmhOp::Eager: m.kind = TmKind::Eager; break;
    case TmhOp::Rndv:
      if (b.size() < kTmhBytes + kRvhBytes) break;  // no RVH to act on
      m.kind = TmKind::Rndv;
      m.rvh_va = wire::read_be64(&b[16]);
      m.rvh_rkey = wire::read_be32(&b[24]);
      m.rvh_len = wire::read_be32(&b[28]);
      break;
  }
  return m;
}

bool matched(TmKind k) { return k == TmKind::Eager || k == TmKind::Rndv; }

// Writes one WQE of a rendezvous into qp's send queue (producer lock held).
verbs::SendWqe& rendezvous_wqe(Qp& qp, WrOpcode op, uint32_t flags, uint32_t length) {
  auto& sq = qp.sq;
  verbs::SendWqe& w = sq.slot(sq.prod_local);
  w = verbs::SendWqe{};
  w.opcode = op;
  w.flags = kSendRendezvous | flags;
  w.length = length;
  return w;
}

// Posts the READ of the sender's data and the FIN behind it; false if this QP cannot now
// (not sending, a buffer too small for the data, or its send queue full).
bool start_rendezvous(Context& cx, Qp& qp) {
  auto& r = qp.resp;
  const TmMessage& m = r.tm;
  if (qp.state() != QpState::Rts || m.rvh_len > r.recv_len) return false;
  auto& sq = qp.sq;
  {
    std::lock_guard g(sq.producer_lock);
    if (sq.free_slots_now() < 2) return false;
    if (m.rvh_len) {
      verbs::SendWqe& rd = rendezvous_wqe(qp, WrOpcode::RdmaRead, 0, m.rvh_len);
      rd.remote_addr = m.rvh_va;
      rd.rkey = m.rvh_rkey;
      rd.num_sge = 1;
      sq.sges(sq.prod_local)[0] = r.recv_sges.front();
      ++sq.prod_local;
    }
    verbs::SendWqe& fin = rendezvous_wqe(qp, WrOpcode::Send, kSendFence, kTmhBytes);
    fin.is_inline = true;
    uint8_t* h = sq.inline_data(sq.prod_local);
    std::memset(h, 0, kTmhBytes);
    h[0] = uint8_t(TmhOp::Fin);
    wire::write_be32(h + 4, m.app_ctx);
    wire::write_be64(h + 8, m.tag);
    ++sq.prod_local;
    sq.publish();
  }
  ++cx.ctr().tm_rndv_reads;
  if (m.rvh_len) qp.tm_rndv.push_back({r.recv_wr_id, m.rvh_len});  // completed in READ order
  cx.schedule(qp);
  return true;
}

// A rendezvous's second completion: its data is in the buffer (or its READ failed).
void data_arrived(Context& cx, Qp& qp, uint64_t recv_wr_id, uint32_t len, WcStatus st) {
  Wc wc;
  wc.wr_id = recv_wr_id;
  wc.status = st;
  wc.opcode = WcOpcode::TmRecv;
  wc.byte_len = st == WcStatus::Success ? len : 0;
  wc.qp_num = qp.qpn().value();
  wc.src_qp = qp.attr().dest_qp_num;
  // No tag: wr_id names the buffer, as mlx5's second completion.
  wc.tm_flags = st == WcStatus::Success ? kWcTmDataValid : 0;
  cx.push_wc(qp.recv_cq, wc);
}

}  // namespace

bool take_recv(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (r.have_recv) return true;  // kept from a try on trial, for the requester's resend
  verbs::TagList& tags = *qp.srq->tm;
  TmMessage m = read_tmh(p.payload);
  if (matched(m.kind) && tags.matching()) {
    if (auto b = tags.take_match(m.tag)) {
      r.recv_wr_id = b->recv_wr_id;
      r.recv_sges.clear();
      if (b->sge.length) r.recv_sges.push_back(b->sge);
      r.recv_len = b->sge.length;
      r.have_recv = true;
      ++r.recv_taken;
      r.tm = m;
      ++cx.ctr().rx_tm_matched;
      return true;
    }
  }
  verbs::RecvWqe w;
  if (!cx.pop_recv(qp, w, r.recv_sges)) return false;
  r.recv_wr_id = w.wr_id;
  r.recv_len = w.length;
  r.have_recv = true;
  ++r.recv_taken;
  if (matched(m.kind)) {
    m = TmMessage{TmKind::Unexpected};  // software matches it: the tag is in the bytes it gets
    ++tags.unexpected;
    ++cx.ctr().rx_tm_unexpected;
  } else if (m.kind == TmKind::Plain) {
    ++cx.ctr().rx_tm_no_tmh;
  }
  r.tm = m;
  return true;
}

std::span<const uint8_t> placed(const Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  std::span<const uint8_t> b = p.payload;
  if (!matched(r.tm.kind)) return b;
  if (p.info().flags & wire::kFirst) b = b.subspan(kTmhBytes);
  if (r.tm.kind == TmKind::Rndv) b = b.first(std::min<size_t>(b.size(), r.recv_len - r.recv_offset));
  return b;
}

void complete(Context& cx, Qp& qp, Wc& wc) {
  const TmMessage& m = qp.resp.tm;
  switch (m.kind) {
    case TmKind::None:
    case TmKind::Plain: break;
    case TmKind::NoTag: wc.opcode = WcOpcode::TmNoTag; break;
    case TmKind::Unexpected: wc.opcode = WcOpcode::TmRecv; break;
    case TmKind::Eager:
    case TmKind::Rndv:
      wc.opcode = WcOpcode::TmRecv;
      wc.tm_flags = kWcTmMatch;
      if (m.kind == TmKind::Eager && wc.status == WcStatus::Success) wc.tm_flags |= kWcTmDataValid;  // arrived whole
      wc.tm_tag = m.tag;
      wc.tm_priv = m.app_ctx;
      break;
  }
  // The first completion says whether the device carries the rendezvous out.
  const bool rndv = m.kind == TmKind::Rndv && wc.status == WcStatus::Success;
  const bool started = rndv && start_rendezvous(cx, qp);
  if (rndv && !started) {
    wc.status = WcStatus::TmRndvIncomplete;  // the buffer holds the RVH: software reads it
    ++cx.ctr().tm_rndv_incomplete;
  }
  const uint32_t len = m.rvh_len;
  const uint64_t wr_id = wc.wr_id;
  cx.push_wc(qp.recv_cq, wc);
  if (started && !len) data_arrived(cx, qp, wr_id, 0, WcStatus::Success);  // nothing to read
}

void rendezvous_done(Context& cx, Qp& qp, WrOpcode op, WcStatus st) {
  if (op != WrOpcode::RdmaRead || qp.tm_rndv.empty()) return;  // a FIN: nothing to tell
  const TmRendezvous z = qp.tm_rndv.front();
  qp.tm_rndv.pop_front();
  data_arrived(cx, qp, z.recv_wr_id, z.len, st);
}

}  // namespace tm

}  // namespace uroce::transport

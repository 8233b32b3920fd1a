// A run of MIDDLE packets of one SEND or WRITE (a same-host peer's placed payloads,
// wire::ApartPayload) executed as one: the checks of 9.7.5.2 once over the run's span, one
// copy, the expected PSN moved past them all. Taken only where each packet in turn would pass
// them and be executed (the next expected PSN, the message in progress, go-back-N, nothing
// queued behind a NAK); anything else, and anything that fails, goes packet by packet through
// the responder (packets.cpp), which then answers as IBA says for the packet at fault. What a
// failed attempt copied is copied again there, to the same place.
#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"
#include "verbs/region_access.hpp"

namespace uroce::transport {

bool responder_take_run(Context& cx, Qp& qp, const wire::Packet& p, uint32_t n) {
  auto& r = qp.resp;
  const uint32_t flags = p.info().flags;
  const uint32_t len = uint32_t(p.payload.size());
  if (qp.type() != QpType::RC || r.seq != RespSeq::InSequence || r.on_trial || p.bth.psn != r.epsn || !recovery::in_order(qp) ||
      cx.tracing() || !(flags & wire::kMiddle) || len != n * qp.mtu())
    return false;
  if (flags & wire::kWrite) {
    if (r.msg != RespMsg::Write || uint64_t(r.write_offset) + len > r.write_len) return false;
    uint8_t* dst = nullptr;
    bool odp = false;
    if (cx.check_remote(qp, r.write_rkey, r.write_va + r.write_offset, len, kAccessRemoteWrite, &dst, &odp) !=
            verbs::KeyCheck::Ok ||
        odp)
      return false;
    verbs::region_write(dst, p.payload.data(), len, false);
    r.write_offset += len;
  } else if (flags & wire::kSend) {
    if (r.msg != RespMsg::Send || (qp.srq && qp.srq->tm) || uint64_t(r.recv_offset) + len > r.recv_len ||
        sgl_scatter(cx.mrs(), qp.pd(), r.recv_sges.data(), uint32_t(r.recv_sges.size()), r.recv_offset,
                    p.payload.data(), len) != verbs::KeyCheck::Ok)
      return false;
    r.recv_offset += len;
  } else {
    return false;
  }
  r.epsn = p.bth.psn + n;
  if (p.bth.ack_req) cx.want_ack(qp);
  return true;
}

}  // namespace uroce::transport

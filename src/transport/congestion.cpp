// Congestion notification (DCQCN, engine lock held). The receiver of a CE-marked request is
// the notification point: it tells the sender with a CNP (BTH opcode 0x81 to the sender's QP,
// BECN set, 16 reserved bytes, as RoCE NICs send it), at most one per QP per interval. The
// sender's reaction point (a QP's RateControl, when the device has one) takes the CNPs that
// reach it, and its pacer spaces the QP's packets at the rate it allows.
#include <algorithm>
#include <limits>

#include "transport/context.hpp"
#include "transport/roles.hpp"

namespace uroce::transport {

using wire::Psn;

void congestion_on_marked_request(Context& cx, Qp& qp, const wire::Packet& req, uint64_t now) {
  // Only a request inside the responder's PSN window, behind or ahead, tells of this
  // connection's path: a stale one, or a stranger's, must not make the QP send CNPs.
  if (Psn::distance(qp.resp.epsn - wire::kSackPsns, req.bth.psn) >= 2 * wire::kSackPsns) return;
  ++cx.ctr().rx_ce_marked;
  if (!qp.np.on_ce(now)) return;
  PacketBuf* tx = start_packet(cx, qp);
  if (!tx) return;  // counted as tx_pool_exhausted: the next marked packet asks again
  static constexpr uint8_t kReserved[16] = {};
  wire::Packet p;
  p.bth.opcode = wire::Opcode::CNP;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.becn = true;
  p.payload = kReserved;
  ++cx.ctr().tx_cnps;
  ++qp.stats.tx_cnps;
  send_packet(cx, tx, p);
}

void congestion_on_cnp(Context& cx, Qp& qp, uint64_t now) {
  ++cx.ctr().rx_cnps;
  ++qp.stats.rx_cnps;
  if (qp.rate) qp.rate->on_cnp(now);
}

bool pace(Context& cx, Qp& qp, uint64_t now) {
  const uint64_t slack = cx.config().pace_slack_ns;
  if (qp.pacer.free_at() <= now + slack) return true;
  qp.req.pace_waited = true;
  qp.timers.set(QpTimer::Pace, qp.pacer.free_at() - slack);
  cx.arm_timer(qp, qp.timers.get(QpTimer::Pace));
  return false;
}

// The lower of congestion control's rate and the program's limit; only the limit's bucket
// lets a burst through. A QP whose packets have been waiting for the pacer sends on the
// pacer's time, not the clock's: a timer that wakes it late (the engine's sleep, timer slack,
// scheduling: tens of microseconds, a tenth of the gap at 10 Mb/s; milliseconds on a busy
// host) costs it no rate, up to 1 ms or 16 packets' time behind, whichever is longer. Idle time
// (an empty send queue) still earns nothing beyond the burst.
void paced_send(Qp& qp, uint32_t bytes, uint64_t now) {
  double rate = qp.limit_bps > 0 ? qp.limit_bps : std::numeric_limits<double>::infinity();
  if (qp.rate) {
    qp.rate->on_sent(bytes, now);
    rate = std::min(rate, qp.rate->rate_bps());
  }
  const bool limited = qp.limit_bps > 0 && rate >= qp.limit_bps;
  uint64_t credit_ns = limited ? uint64_t(double(qp.limit_burst) * 8e9 / rate) : 0;
  if (qp.req.pace_waited) credit_ns = std::max({credit_ns, uint64_t(1'000'000), uint64_t(16 * double(bytes) * 8e9 / rate)});
  qp.pacer.book(bytes, rate, now, credit_ns);
}

}  // namespace uroce::transport

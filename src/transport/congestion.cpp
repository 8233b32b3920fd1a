// Congestion notification (DCQCN, engine lock held). The receiver of a CE-marked request is
// the notification point: it tells the sender with a CNP (BTH opcode 0x81 to the sender's QP,
// BECN set, 16 reserved bytes, as RoCE NICs send it), at most one per QP per interval. The
// sender counts the CNPs that reach it.
#include "transport/context.hpp"
#include "transport/roles.hpp"

namespace uroce::transport {

using core::Qp;

void congestion_on_marked_request(Context& cx, Qp& qp, uint64_t now) {
  ++cx.ctr().rx_ce_marked;
  if (!qp.np.on_ce(now)) return;
  TxPacket* tx = start_packet(cx, qp);
  if (!tx) return;  // counted as tx_pool_exhausted: the next marked packet asks again
  static constexpr uint8_t kReserved[16] = {};
  wire::Packet p;
  p.bth.opcode = wire::Opcode::CNP;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.becn = true;
  p.payload = kReserved;
  ++cx.ctr().tx_cnps;
  send_packet(cx, tx, p);
}

void congestion_on_cnp(Context& cx, Qp&, uint64_t) { ++cx.ctr().rx_cnps; }

}  // namespace uroce::transport

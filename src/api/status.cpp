// What a process tells the host NIC daemon of its device when the uroce command asks: each QP
// (number, type, state, peer, next PSNs, its counters) and the device's counters, as status records
// (link/host_nic_proto.hpp). Runs in the engine's pass, the engine lock held.
#include <cstdio>
#include <string>

#include "api/device_stack.hpp"
#include "transport/qp_transport.hpp"

namespace uroce::detail {

namespace {

const char* type_name(QpType t) {
  switch (t) {
    case QpType::RC: return "RC";
    case QpType::UC: return "UC";
    case QpType::UD: return "UD";
    case QpType::RawPacket: return "RAW_PACKET";
    case QpType::XrcSend: return "XRC_INI";
    case QpType::XrcRecv: return "XRC_TGT";
  }
  return "?";
}
unsigned long long ull(uint64_t v) { return v; }

}  // namespace

std::string status_records(const DeviceStack& stack) {
  std::string out;
  char line[512];
  stack.pc->for_each_qp([&](const transport::Qp& q) {
    const QpAttr& a = q.attr();
    if (q.qpn().value() <= 1) return;  // QP1 is the CM's, the daemon's business
    const transport::QpCounters& c = q.stats;
    std::snprintf(line, sizeof line,
                  "qp qpn=0x%06x type=%s state=%s dest_qpn=0x%06x dgid=%s sq_psn=%u epsn=%u tx_packets=%llu "
                  "tx_bytes=%llu rx_packets=%llu rx_bytes=%llu retransmitted_packets=%llu retransmit_timeouts=%llu "
                  "tx_naks=%llu rx_naks=%llu tx_rnr_naks=%llu rx_rnr_naks=%llu tx_cnps=%llu rx_cnps=%llu\n",
                  q.qpn().value(), type_name(q.type()), to_string(a.qp_state), a.dest_qp_num,
                  a.dgid.to_string().c_str(), q.req.psn.value(), q.resp.epsn.value(), ull(c.tx_packets),
                  ull(c.tx_bytes), ull(c.rx_packets), ull(c.rx_bytes), ull(c.retransmitted_packets),
                  ull(c.retransmit_timeouts), ull(c.tx_naks), ull(c.rx_naks), ull(c.tx_rnr_naks), ull(c.rx_rnr_naks),
                  ull(c.tx_cnps), ull(c.rx_cnps));
    out += line;
  });
  auto counter = [&](const char* name, uint64_t v) {
    if (v == 0) return;  // dozens of counters: what happened only
    std::snprintf(line, sizeof line, "counter name=%s value=%llu\n", name, ull(v));
    out += line;
  };
  stack.pc->counters().for_each(counter);
  stack.link->for_each_counter(counter);  // frames refused before the core, AF_XDP's
  return out;
}

}  // namespace uroce::detail

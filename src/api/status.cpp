// What a process tells the host NIC daemon of its device when the uroce command asks: each QP
// (number, type, state, peer, next PSNs) and the device's counters, as status records
// (link/host_nic_proto.hpp). Runs in the engine's pass, the engine lock held.
#include <cstdio>
#include <string>

#include "api/device_stack.hpp"
#include "transport/qp_transport.hpp"

namespace uroce::detail {

namespace {

const char* type_name(QpType t) { return t == QpType::RC ? "RC" : t == QpType::UC ? "UC" : "UD"; }

}  // namespace

std::string status_records(const DeviceStack& stack) {
  std::string out;
  char line[256];
  stack.pc->for_each_qp([&](const transport::Qp& q) {
    const QpAttr& a = q.attr();
    if (q.qpn().value() <= 1) return;  // QP1 is the CM's, the daemon's business
    std::snprintf(line, sizeof line, "qp qpn=0x%06x type=%s state=%s dest_qpn=0x%06x dgid=%s sq_psn=%u epsn=%u\n",
                  q.qpn().value(), type_name(q.type()), to_string(a.qp_state), a.dest_qp_num,
                  a.dgid.to_string().c_str(), q.req.psn.value(), q.resp.epsn.value());
    out += line;
  });
  stack.pc->counters().for_each([&](const char* name, uint64_t v) {
    if (v == 0) return;  // dozens of counters: what happened only
    std::snprintf(line, sizeof line, "counter name=%s value=%llu\n", name, static_cast<unsigned long long>(v));
    out += line;
  });
  return out;
}

}  // namespace uroce::detail

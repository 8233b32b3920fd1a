#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "uroce/types.hpp"

namespace uroce {

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::Success: return "SUCCESS";
    case WcStatus::LocLenErr: return "LOC_LEN_ERR";
    case WcStatus::LocQpOpErr: return "LOC_QP_OP_ERR";
    case WcStatus::LocEecOpErr: return "LOC_EEC_OP_ERR";
    case WcStatus::LocProtErr: return "LOC_PROT_ERR";
    case WcStatus::WrFlushErr: return "WR_FLUSH_ERR";
    case WcStatus::MwBindErr: return "MW_BIND_ERR";
    case WcStatus::BadRespErr: return "BAD_RESP_ERR";
    case WcStatus::LocAccessErr: return "LOC_ACCESS_ERR";
    case WcStatus::RemInvReqErr: return "REM_INV_REQ_ERR";
    case WcStatus::RemAccessErr: return "REM_ACCESS_ERR";
    case WcStatus::RemOpErr: return "REM_OP_ERR";
    case WcStatus::RetryExcErr: return "RETRY_EXC_ERR";
    case WcStatus::RnrRetryExcErr: return "RNR_RETRY_EXC_ERR";
    case WcStatus::GeneralErr: return "GENERAL_ERR";
    case WcStatus::TmErr: return "TM_ERR";
    case WcStatus::TmRndvIncomplete: return "TM_RNDV_INCOMPLETE";
  }
  return "?";
}

const char* to_string(WcOpcode o) {
  switch (o) {
    case WcOpcode::Send: return "SEND";
    case WcOpcode::RdmaWrite: return "RDMA_WRITE";
    case WcOpcode::RdmaRead: return "RDMA_READ";
    case WcOpcode::CompSwap: return "COMP_SWAP";
    case WcOpcode::FetchAdd: return "FETCH_ADD";
    case WcOpcode::BindMw: return "BIND_MW";
    case WcOpcode::LocalInv: return "LOCAL_INV";
    case WcOpcode::Flush: return "FLUSH";
    case WcOpcode::AtomicWrite: return "ATOMIC_WRITE";
    case WcOpcode::Recv: return "RECV";
    case WcOpcode::RecvRdmaWithImm: return "RECV_RDMA_WITH_IMM";
    case WcOpcode::TmAdd: return "TM_ADD";
    case WcOpcode::TmDel: return "TM_DEL";
    case WcOpcode::TmSync: return "TM_SYNC";
    case WcOpcode::TmRecv: return "TM_RECV";
    case WcOpcode::TmNoTag: return "TM_NO_TAG";
  }
  return "?";
}

const char* to_string(QpState s) {
  switch (s) {
    case QpState::Reset: return "RESET";
    case QpState::Init: return "INIT";
    case QpState::Rtr: return "RTR";
    case QpState::Rts: return "RTS";
    case QpState::Sqd: return "SQD";
    case QpState::Sqe: return "SQE";
    case QpState::Err: return "ERR";
  }
  return "?";
}

const char* to_string(AsyncEventType t) {
  switch (t) {
    case AsyncEventType::CqErr: return "CQ_ERR";
    case AsyncEventType::QpFatal: return "QP_FATAL";
    case AsyncEventType::QpLastWqeReached: return "QP_LAST_WQE_REACHED";
    case AsyncEventType::SrqLimitReached: return "SRQ_LIMIT_REACHED";
    case AsyncEventType::PortActive: return "PORT_ACTIVE";
  }
  return "?";
}

Gid Gid::from_ipv4(uint32_t ip) {
  Gid g;
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = uint8_t(ip >> 24);
  g.raw[13] = uint8_t(ip >> 16);
  g.raw[14] = uint8_t(ip >> 8);
  g.raw[15] = uint8_t(ip);
  return g;
}

std::optional<uint32_t> Gid::ipv4() const {
  for (int i = 0; i < 10; ++i)
    if (raw[i]) return std::nullopt;
  if (raw[10] != 0xff || raw[11] != 0xff) return std::nullopt;
  return uint32_t(raw[12]) << 24 | uint32_t(raw[13]) << 16 | uint32_t(raw[14]) << 8 | raw[15];
}

std::string Gid::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, raw.data(), buf, sizeof buf);
  return buf;
}

std::optional<Gid> Gid::parse(const std::string& s) {
  Gid g;
  if (inet_pton(AF_INET6, s.c_str(), g.raw.data()) == 1) return g;
  in_addr a;
  if (inet_pton(AF_INET, s.c_str(), &a) == 1) return from_ipv4(ntohl(a.s_addr));
  return std::nullopt;
}

Ah Ah::from_grh(const void* grh) {
  // RoCE v2 over IPv6: the GRH area is the IPv6 header, its source address at bytes 8..23.
  // Over IPv4: bytes 20..39 hold the IPv4 header; its source address is bytes 32..35.
  const uint8_t* g = static_cast<const uint8_t*>(grh);
  Ah a;
  a.hop_limit = 64;
  if ((g[0] >> 4) == 6 && g[20] != 0x45) {
    std::copy(g + 8, g + 24, a.dgid.raw.begin());
    return a;
  }
  const uint8_t* p = g + 20;
  a.dgid = Gid::from_ipv4(uint32_t(p[12]) << 24 | uint32_t(p[13]) << 16 | uint32_t(p[14]) << 8 | p[15]);
  return a;
}

namespace {

template <class E, size_t N>
std::string_view name_of(const std::pair<E, std::string_view> (&names)[N], E e) {
  for (const auto& [v, n] : names)
    if (v == e) return n;
  return "?";
}

template <class E, size_t N>
std::optional<E> value_of(const std::pair<E, std::string_view> (&names)[N], std::string_view s) {
  for (const auto& [v, n] : names)
    if (n == s) return v;
  return std::nullopt;
}

constexpr std::pair<Reliability, std::string_view> kReliability[] = {{Reliability::Gbn, "gbn"}, {Reliability::Sr, "sr"}};
constexpr std::pair<CongestionControl, std::string_view> kCc[] = {{CongestionControl::None, "none"},
                                                                  {CongestionControl::Dcqcn, "dcqcn"},
                                                                  {CongestionControl::Timely, "timely"},
                                                                  {CongestionControl::Swift, "swift"}};
constexpr std::pair<DcqcnSet, std::string_view> kDcqcnSets[] = {{DcqcnSet::Paper, "dcqcn_paper"},
                                                                {DcqcnSet::Mellanox, "mellanox"}};

}  // namespace

std::string_view to_string(Reliability r) { return name_of(kReliability, r); }
std::string_view to_string(CongestionControl c) { return name_of(kCc, c); }
std::string_view to_string(DcqcnSet s) { return name_of(kDcqcnSets, s); }
std::optional<Reliability> parse_reliability(std::string_view s) { return value_of(kReliability, s); }
std::optional<CongestionControl> parse_congestion_control(std::string_view s) { return value_of(kCc, s); }
std::optional<DcqcnSet> parse_dcqcn_set(std::string_view s) { return value_of(kDcqcnSets, s); }

}  // namespace uroce

#include "api/config.hpp"

#include "wire/ip_udp.hpp"

#include <cerrno>
#include <cstdlib>

namespace uroce::detail {

namespace {

std::string env(const char* name) {
  const char* e = std::getenv(name);
  return e ? e : "";
}

// A switch the environment turns off with "0" (and, where given, on with "1").
bool env_off(const char* name) { return env(name) == "0"; }

// An option unset by the program, from the environment by its name; EINVAL for an unknown name.
template <class E, class Parse>
Status from_env(std::optional<E>& v, const char* name, Parse parse, std::string_view names) {
  if (v) return {};
  const std::string s = env(name);
  if (s.empty()) return {};
  v = parse(s);
  if (!v) return make_error(EINVAL, std::string(name) + ": unknown value '" + s + "' (" + std::string(names) + ")");
  return {};
}

}  // namespace

Result<DeviceSettings> device_settings(const DeviceOptions& o) {
  DeviceSettings d;
  const std::string& addr = o.addr;  // placed by place_device
  if (!addr.empty()) {
    auto g = Gid::parse(addr);
    if (!g) return make_error(EINVAL, "UROCE_ADDR/addr is not an IPv4 or IPv6 address: " + addr);
    d.addr = *g;
  }
  const bool loopback = addr.empty() || (wire::is_v4(d.addr) && wire::v4_of(d.addr) >> 24 == 127) ||
                        d.addr == *Gid::parse("::1");
  const std::string sh = env("UROCE_SHARED");
  if (!sh.empty() && sh != "0" && sh != "1") return make_error(EINVAL, "UROCE_SHARED: 0 or 1, not '" + sh + "'");
  d.shared = o.shared.value_or(sh.empty() ? !loopback : sh == "1");
  if (d.shared && addr.empty()) return make_error(EINVAL, "a shared device needs an address of a network interface (addr or UROCE_ADDR)");
  d.pcap = o.pcap.empty() ? env("UROCE_PCAP") : o.pcap;
  const std::string raw = env("UROCE_RAW_RX");
  using Rx = link::UdpLink::Rx;
  d.rx = o.raw_rx || raw == "1" ? Rx::Raw : raw == "0" ? Rx::Udp : Rx::Auto;
  // UROCE_LINK=xdp: kernel bypass (AF_XDP) where the process may; udp: the kernel's sockets.
  const std::string lk = env("UROCE_LINK");
  if (!lk.empty() && lk != "udp" && lk != "xdp") return make_error(EINVAL, "UROCE_LINK: udp or xdp, not '" + lk + "'");
  if (lk == "xdp" && d.rx == Rx::Raw) return make_error(EINVAL, "UROCE_LINK=xdp and raw receive exclude each other");
  if (lk == "xdp") d.rx = Rx::Xdp;
  else if (lk == "udp" && d.rx == Rx::Auto) d.rx = Rx::Udp;
  d.gso = !env_off("UROCE_GSO");
  d.same_host_shm = o.same_host_shm && !env_off("UROCE_SHM");
  d.progress_thread = o.progress_thread && !env_off("UROCE_PROGRESS_THREAD");
  if (const std::string s = env("UROCE_SPIN_US"); !s.empty()) d.spin_ns = std::strtoull(s.c_str(), nullptr, 10) * 1000;

  auto cc = o.cc;
  auto params = o.cc_params;
  auto rel = o.reliability;
  if (Status s = from_env(cc, "UROCE_CC", parse_congestion_control, kCongestionControlNames); !s) return s.error();
  if (Status s = from_env(params, "UROCE_CC_PARAMS", parse_dcqcn_set, kDcqcnSetNames); !s) return s.error();
  if (Status s = from_env(rel, "UROCE_RELIABILITY", parse_reliability, kReliabilityNames); !s) return s.error();
  double gbps = o.line_gbps;
  if (gbps == 0) {
    const std::string s = env("UROCE_LINE_GBPS");
    gbps = s.empty() ? 100 : std::strtod(s.c_str(), nullptr);
  }
  if (!(gbps > 0 && gbps <= 1e4)) return make_error(EINVAL, "UROCE_LINE_GBPS/line_gbps must be in (0, 10000] Gb/s");
  transport::CoreConfig& c = d.core;
  c.seed = o.seed;
  c.cc = cc.value_or(CongestionControl::None);
  c.dcqcn = cc::DcqcnParams::of(params.value_or(DcqcnSet::Paper), gbps * 1e9);
  c.timely = cc::TimelyParams::paper(gbps * 1e9);
  c.swift = cc::SwiftParams::for_engine(gbps * 1e9);
  c.reliability = rel.value_or(Reliability::Gbn);
  if (o.qos) {
    if (Status s = check_qos(*o.qos); !s) return s.error();
    c.qos = *o.qos;
  } else if (const std::string s = env("UROCE_QOS"); !s.empty()) {
    auto q = parse_qos(s);
    if (!q) return make_error(EINVAL, "UROCE_QOS: " + q.error().message);
    c.qos = *q;
  }

  d.rx_loss = o.rx_loss;
  if (const std::string s = env("UROCE_RX_LOSS"); d.rx_loss == 0 && !s.empty()) d.rx_loss = std::strtod(s.c_str(), nullptr);
  if (!(d.rx_loss >= 0 && d.rx_loss < 1)) return make_error(EINVAL, "UROCE_RX_LOSS/rx_loss must be in [0, 1)");
  d.rx_loss_seed = o.rx_loss_seed;
  return d;
}

}  // namespace uroce::detail

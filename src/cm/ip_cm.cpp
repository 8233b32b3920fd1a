#include "cm/ip_cm.hpp"

#include <cstring>

#include "wire/bytes.hpp"

namespace uroce::cm {

std::optional<std::pair<PortSpace, uint16_t>> parse_ip_service_id(uint64_t sid) {
  if ((sid & 0xffffffffff000000ull) != kIpServicePrefix) return std::nullopt;
  auto ps = PortSpace(uint16_t(sid >> 16));
  switch (ps) {
    case PortSpace::IpoIb:
    case PortSpace::Ib:
    case PortSpace::Tcp:
    case PortSpace::Udp:
      return std::pair{ps, uint16_t(sid)};
  }
  return std::nullopt;
}

namespace {
// IPv4 addresses sit in the last four bytes after twelve zero bytes; IPv6 fill all sixteen.
void put_addr(uint8_t* p, const Gid& g, bool v4) {
  std::memset(p, 0, 16);
  if (v4)
    std::memcpy(p + 12, g.raw.data() + 12, 4);
  else
    std::memcpy(p, g.raw.data(), 16);
}
Gid get_addr(const uint8_t* p, bool v4) {
  if (v4) return Gid::from_ipv4(wire::read_be32(p + 12));
  Gid g;
  std::memcpy(g.raw.data(), p, 16);
  return g;
}
}  // namespace

void write_ip_cm_header(const IpCmHeader& h, std::span<uint8_t> out) {
  uint8_t* p = out.data();
  p[0] = h.version;
  p[1] = uint8_t(h.ip_version << 4);
  wire::write_be16(p + 2, h.src_port);
  put_addr(p + 4, h.src, h.ip_version == 4);
  put_addr(p + 20, h.dst, h.ip_version == 4);
}

std::optional<IpCmHeader> read_ip_cm_header(std::span<const uint8_t> in) {
  if (in.size() < kIpCmHeaderBytes) return std::nullopt;
  const uint8_t* p = in.data();
  IpCmHeader h;
  h.version = p[0];
  h.ip_version = p[1] >> 4;
  if (h.ip_version != 4 && h.ip_version != 6) return std::nullopt;
  h.src_port = wire::read_be16(p + 2);
  h.src = get_addr(p + 4, h.ip_version == 4);
  h.dst = get_addr(p + 20, h.ip_version == 4);
  return h;
}

}  // namespace uroce::cm

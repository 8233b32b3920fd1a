#include "link/pcap_writer.hpp"

#include <unistd.h>

#include <cstring>

#include "wire/bytes.hpp"

namespace uroce::link {

std::string PcapWriter::expand_path(const std::string& path) {
  std::string out = path;
  if (auto at = out.find("%p"); at != std::string::npos) out.replace(at, 2, std::to_string(getpid()));
  return out;
}

bool PcapWriter::open(const std::string& path) {
  f_ = std::fopen(expand_path(path).c_str(), "wb");
  if (!f_) return false;
  uint8_t hdr[24] = {};
  uint32_t magic = 0xa1b2c3d4, snap = 262144, linktype = 1;
  uint16_t major = 2, minor = 4;
  std::memcpy(hdr, &magic, 4);
  std::memcpy(hdr + 4, &major, 2);
  std::memcpy(hdr + 6, &minor, 2);
  std::memcpy(hdr + 16, &snap, 4);
  std::memcpy(hdr + 20, &linktype, 4);
  std::fwrite(hdr, 1, sizeof hdr, f_);
  std::fflush(f_);
  return true;
}

PcapWriter::~PcapWriter() {
  if (f_) std::fclose(f_);
}

void PcapWriter::write(const wire::FlowAddr& flow, std::span<const uint8_t> payload, uint64_t t,
                       const wire::Ipv4Fields& ip) {
  if (!f_) return;
  uint8_t frame[wire::kEthLen + wire::kIpv6Len + wire::kUdpLen];
  // Locally administered MACs derived from the addresses' last four bytes.
  uint8_t* e = frame;
  e[0] = 0x02; e[1] = 0x00; std::memcpy(e + 2, flow.dst.raw.data() + 12, 4);
  e[6] = 0x02; e[7] = 0x00; std::memcpy(e + 8, flow.src.raw.data() + 12, 4);
  wire::write_be16(e + 12, flow.v4() ? 0x0800 : 0x86dd);
  size_t hdr = wire::kEthLen + wire::write_ip_udp(frame + wire::kEthLen, flow, payload.size(), ip);
  if (!flow.v4()) {
    // IPv6 forbids a zero UDP checksum to tools that read captures; our sockets send a real one.
    uint8_t* udp = frame + wire::kEthLen + wire::kIpv6Len;
    uint32_t sum = 17 + uint32_t(wire::kUdpLen + payload.size());
    auto add = [&sum](const uint8_t* p, size_t n) {
      for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t(p[i]) << 8 | p[i + 1];
      if (n & 1) sum += uint32_t(p[n - 1]) << 8;
    };
    add(flow.src.raw.data(), 16);
    add(flow.dst.raw.data(), 16);
    add(udp, wire::kUdpLen);
    add(payload.data(), payload.size());
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    uint16_t c = uint16_t(~sum);
    wire::write_be16(udp + 6, c ? c : 0xffff);
  }
  uint32_t len = uint32_t(hdr + payload.size());
  uint32_t rec[4] = {uint32_t(t / 1'000'000'000), uint32_t(t % 1'000'000'000 / 1000), len, len};
  std::lock_guard g(mu_);
  std::fwrite(rec, 1, sizeof rec, f_);
  std::fwrite(frame, 1, hdr, f_);
  std::fwrite(payload.data(), 1, payload.size(), f_);
  std::fflush(f_);
}

}  // namespace uroce::link

// Minimal classic-pcap reader for tests (Ethernet link type, microsecond timestamps).
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace uroce::test {

struct PcapFrame { std::vector<uint8_t> bytes; };

inline std::vector<PcapFrame> read_pcap(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<PcapFrame> out;
  if (d.size() < 24) return out;
  auto u32 = [&d](size_t o) {
    return uint32_t(d[o]) | uint32_t(d[o + 1]) << 8 | uint32_t(d[o + 2]) << 16 | uint32_t(d[o + 3]) << 24;
  };
  if (u32(0) != 0xa1b2c3d4) return out;
  size_t off = 24;
  while (off + 16 <= d.size()) {
    uint32_t incl = u32(off + 8);
    off += 16;
    if (off + incl > d.size()) break;
    out.push_back({std::vector<uint8_t>(d.begin() + long(off), d.begin() + long(off + incl))});
    off += incl;
  }
  return out;
}

}  // namespace uroce::test

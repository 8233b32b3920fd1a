// uroce-pcap-check FILE...: checks every RoCEv2 frame of classic pcap files (Ethernet/IPv4 or IPv6/UDP
// 4791): headers decode and the ICRC matches, computed over the IP header as captured. Prints
// the opcode counts; exits 1 if any frame is bad or none was found.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

using namespace uroce::wire;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: uroce-pcap-check FILE.pcap...\n");
    return 2;
  }
  int total = 0, bad = 0;
  for (int a = 1; a < argc; ++a) {
    std::ifstream f(argv[a], std::ios::binary);
    std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto u32 = [&d](size_t o) {
      return uint32_t(d[o]) | uint32_t(d[o + 1]) << 8 | uint32_t(d[o + 2]) << 16 | uint32_t(d[o + 3]) << 24;
    };
    if (d.size() < 24 || u32(0) != 0xa1b2c3d4 || u32(20) != 1) {
      std::fprintf(stderr, "%s: not a classic Ethernet pcap\n", argv[a]);
      return 2;
    }
    std::map<std::string, int> ops;
    int n = 0, nbad = 0;
    for (size_t off = 24; off + 16 <= d.size();) {
      uint32_t incl = u32(off + 8);
      off += 16;
      if (off + incl > d.size()) break;
      const uint8_t* fr = d.data() + off;
      off += incl;
      if (incl < kEthLen + kIpv4Len + kUdpLen) continue;
      const uint8_t* ip = fr + kEthLen;
      size_t ihl;  // IPv4 (without options) or IPv6 (without extension headers), then UDP to 4791
      if (read_be16(fr + 12) == 0x0800) {
        ihl = size_t(ip[0] & 0xf) * 4;
        if (ip[9] != 17 || ihl != kIpv4Len) continue;
      } else if (read_be16(fr + 12) == 0x86dd && incl >= kEthLen + kIpv6Len + kUdpLen) {
        ihl = kIpv6Len;
        if (ip[6] != 17) continue;
      } else {
        continue;
      }
      if (read_be16(ip + ihl + 2) != kRoceV2Port) continue;
      size_t ulen = read_be16(ip + ihl + 4);
      ++n;
      if (ulen < kUdpLen + kBthLen + kIcrcLen || kEthLen + ihl + ulen > incl) {
        ++nbad;
        continue;
      }
      std::span<const uint8_t> ib(ip + ihl + kUdpLen, ulen - kUdpLen);
      Packet p;
      ParseError e = decode(ib, p);
      bool icrc = icrc_compute(ip, ib.first(ib.size() - kIcrcLen)) == icrc_load(ib.data() + ib.size() - kIcrcLen);
      if (e != ParseError::None || !icrc) {
        ++nbad;
        std::printf("%s frame %d: %s%s\n", argv[a], n, e != ParseError::None ? to_string(e) : "", icrc ? "" : " bad ICRC");
        continue;
      }
      std::string name(p.info().name);
      if (p.bth.opcode == Opcode::RC_ACKNOWLEDGE) {
        char s[16];
        std::snprintf(s, sizeof s, "(0x%02x)", p.aeth.syndrome);
        name += s;
      }
      ++ops[name];
    }
    std::printf("%s: %d RoCEv2 packets, %d bad:", argv[a], n, nbad);
    for (auto& [k, v] : ops) std::printf(" %s=%d", k.c_str(), v);
    std::printf("\n");
    total += n;
    bad += nbad;
  }
  return bad || total == 0 ? 1 : 0;
}

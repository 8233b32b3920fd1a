// Writes RoCEv2 packets as classic pcap (Ethernet/IPv4 or IPv6/UDP), which tshark and Wireshark
// decode as InfiniBand. The IP header is the one the ICRC was computed over.
#pragma once
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <span>
#include <string>

#include "wire/ip_udp.hpp"

namespace uroce::link {

class PcapWriter {
 public:
  // `%p` in the path becomes the process id, so several processes can capture at once.
  static std::string expand_path(const std::string& path);
  bool open(const std::string& path);
  ~PcapWriter();
  // `ip`: the IPv4 fields as received (raw receive) or as our sockets send them.
  void write(const wire::FlowAddr& flow, std::span<const uint8_t> udp_payload, uint64_t time_ns,
             const wire::Ipv4Fields& ip = {});
  bool is_open() const { return f_ != nullptr; }

 private:
  std::FILE* f_ = nullptr;
  std::mutex mu_;
};

}  // namespace uroce::link

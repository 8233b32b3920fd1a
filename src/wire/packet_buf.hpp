// A packet buffer: the flow a packet belongs to and its bytes (the UDP payload, BTH .. ICRC),
// and the pool they come from. The protocol core fills them, links carry them; both layers
// use them, so they live here, below both.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "wire/ip_udp.hpp"

namespace uroce::wire {

inline constexpr uint32_t kMaxPacket = 4096 + 64 + 4;  // payload + headers + ICRC

struct PacketBuf {
  FlowAddr flow;
  uint32_t len = 0;
  // The ICRC field holds 0: the packet was built for a link that carries packets intact (same-host
  // memory). A link that sends it anywhere else computes the ICRC first (wire/icrc.hpp).
  bool icrc_skipped = false;
  uint8_t data[kMaxPacket];
};

// Grows in blocks up to a limit; buffers are reused, never freed before the pool.
class BufferPool {
 public:
  explicit BufferPool(uint32_t limit) : limit_(limit) {}
  PacketBuf* alloc() {
    if (free_.empty()) {
      if (blocks_.size() * kBlock >= limit_) return nullptr;
      blocks_.emplace_back(new PacketBuf[kBlock]);
      for (uint32_t i = 0; i < kBlock; ++i) free_.push_back(&blocks_.back()[i]);
    }
    PacketBuf* p = free_.back();
    free_.pop_back();
    return p;
  }
  void release(PacketBuf* p) { free_.push_back(p); }

 private:
  static constexpr uint32_t kBlock = 256;
  uint32_t limit_;
  std::vector<std::unique_ptr<PacketBuf[]>> blocks_;
  std::vector<PacketBuf*> free_;
};

}  // namespace uroce::wire

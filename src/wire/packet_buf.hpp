// A packet buffer: the flow a packet belongs to and its bytes (the UDP payload, BTH .. ICRC),
// and the pool they come from. The protocol core fills them, links carry them; both layers
// use them, so they live here, below both.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

namespace uroce::wire {

inline constexpr uint32_t kMaxPacket = 4096 + 64 + 4;  // payload + headers + ICRC

// A received packet whose payload lies apart from its other bytes (a same-host peer's file,
// link/shm_place.cpp): bytes [at, at + bytes.size()) of the packet are `bytes`; the buffer
// handed with it holds the others, in order. A run (packets > 1) is that many packets of one
// message, one after another: their payloads, bytes.size() / packets each, lie one after
// another in `bytes`, and their other bytes are the buffer's but for the PSN, which counts up
// from the buffer's.
struct ApartPayload {
  uint32_t at = 0;
  std::span<const uint8_t> bytes;
  uint32_t packets = 1;
};
// The most packets a run carries (a same-host peer's placed payloads, link/shm_place.cpp).
inline constexpr uint32_t kMaxRunPackets = 16;

// The payload bytes of each packet of a payload apart (`bytes` of them at `at`, in `packets`
// packets) whose other bytes number rest_len; none if no packets can be made of it: a count
// of 0 or over kMaxRunPackets, bytes that do not divide among the packets, a payload that
// starts past the other bytes, packets longer than kMaxPacket, or a run without a BTH to
// count its PSNs from. The one rule for the link that reads a run and the core that takes it.
inline std::optional<size_t> run_unit(uint32_t packets, size_t at, size_t bytes, size_t rest_len) {
  if (packets == 0 || packets > kMaxRunPackets || bytes % packets || at > rest_len || rest_len > kMaxPacket ||
      (packets > 1 && rest_len < kBthLen))
    return std::nullopt;
  const size_t unit = bytes / packets;
  if (unit > kMaxPacket - rest_len) return std::nullopt;
  return unit;
}
inline std::optional<size_t> run_unit(const ApartPayload& a, size_t rest_len) {
  return run_unit(a.packets, a.at, a.bytes.size(), rest_len);
}

struct PacketBuf {
  FlowAddr flow;
  uint32_t len = 0;
  uint32_t src_qpn = 0;  // the QP that sends it (its counters)
  // Its IP traffic class: the DSCP of the QP's path (the GRH traffic class its address vector,
  // or a UD send's address handle, gave) in the top six bits. The link keeps the ECN bits.
  uint8_t tclass = 0;
  // The ICRC field holds 0: the packet was built for a link that carries packets intact (same-host
  // memory). A link that sends it anywhere else computes the ICRC first (wire/icrc.hpp).
  bool icrc_skipped = false;
  // Payload by reference: bytes [ref_at, ref_at + ref_len) of the packet are not in data but
  // at `ref`, registered memory of this process, read when the link's send() runs (data holds
  // the rest at its place, the ICRC included; what may change them before: transport/context.hpp). The same-host link copies
  // them from there straight into its ring, UDP hands them to the kernel in an iovec;
  // anything else (a capture, IPv6, a test link) makes the packet whole first (materialize).
  const uint8_t* ref = nullptr;
  uint32_t ref_at = 0, ref_len = 0;
  // Its referenced payload may be read after send() returns, until the peer answers (a
  // reliable connection's request or READ response, whose work request completes only on the
  // answer): a same-host peer may read it where it lies (link/shm_place.cpp). Not so for UC,
  // whose requests complete once sent.
  bool ref_until_answered = false;
  uint8_t data[kMaxPacket];

  void materialize() {
    if (!ref) return;
    std::memcpy(data + ref_at, ref, ref_len);
    ref = nullptr;
  }
  // Bytes [0, end) of the packet in order, as three pieces: those in data before the
  // reference, the referenced payload, those in data after it (without a reference, all in the
  // first). end covers the reference whole (it is the packet's length or reaches its pad).
  std::array<std::span<const uint8_t>, 3> pieces(uint32_t end) const {
    if (!ref) return {std::span<const uint8_t>(data, end), {}, {}};
    const uint32_t after = ref_at + ref_len;
    return {std::span<const uint8_t>(data, ref_at), std::span<const uint8_t>(ref, ref_len),
            std::span<const uint8_t>(data + after, end - after)};
  }
  // Copies the packet, whole, into `out` (kMaxPacket bytes).
  void copy_to(uint8_t* out) const { copy_range(out, 0, len); }
  // Copies bytes [lo, hi) of the packet to the same offsets of `out`.
  void copy_range(uint8_t* out, uint32_t lo, uint32_t hi) const {
    uint32_t at = 0;  // where the piece starts in the packet
    for (std::span<const uint8_t> piece : pieces(len)) {
      const uint32_t from = std::max(lo, at), to = std::min<uint32_t>(hi, at + uint32_t(piece.size()));
      if (from < to) std::memcpy(out + from, piece.data() + (from - at), to - from);
      at += uint32_t(piece.size());
    }
  }
};

// Bytes whose life has ended (link/link.hpp states the rules) are overwritten with this in
// debug and sanitizer builds, so that a pointer kept past its life reads garbage at once
// rather than, rarely, the next packet. Release builds leave them.
inline constexpr uint8_t kExpiredByte = 0xeb;
inline void expire(uint8_t* bytes, size_t n) {
#ifndef NDEBUG
  std::memset(bytes, kExpiredByte, n);
#else
  (void)bytes;
  (void)n;
#endif
}

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
    ASAN_UNPOISON_MEMORY_REGION(p->data, sizeof p->data);
    return p;
  }
  // The buffer's bytes end here (a link that kept them broke the send() rule).
  void release(PacketBuf* p) {
    p->ref = nullptr;
    expire(p->data, sizeof p->data);
    ASAN_POISON_MEMORY_REGION(p->data, sizeof p->data);
    free_.push_back(p);
  }
  ~BufferPool() {  // handed back to the allocator as it gave them
    for (PacketBuf* p : free_) ASAN_UNPOISON_MEMORY_REGION(p->data, sizeof p->data);
  }

 private:
  static constexpr uint32_t kBlock = 256;
  uint32_t limit_;
  std::vector<std::unique_ptr<PacketBuf[]>> blocks_;
  std::vector<PacketBuf*> free_;
};

}  // namespace uroce::wire

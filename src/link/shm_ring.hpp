// The shared memory of a same-host channel between two devices: two single-producer,
// single-consumer rings of packet slots (one per direction) in one memfd both processes map.
// Indices are free-running; a slot holds one RoCEv2 packet (UDP payload, BTH .. ICRC) and its
// flow. The producer never waits on the consumer: a full ring is the sender's to handle.
//
// Everything in it is written by the other process too: the consumer bounds-checks the
// indices and lengths it reads and copies a packet out before parsing it.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>

#include "wire/ip_udp.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::link::shm {

inline constexpr uint32_t kMagic = 0x75726f31;  // "uro1"
inline constexpr uint32_t kSlots = 1024;         // a power of two

inline constexpr uint32_t kSlotNoIcrc = 1;  // Slot::flags: the sender left the ICRC out

struct alignas(64) Slot {
  uint32_t len;
  uint32_t flags;
  uint16_t src_port, dst_port;
  Gid src, dst;
  uint8_t data[wire::kMaxPacket];
};

struct Ring {
  alignas(64) std::atomic<uint32_t> tail;       // next slot the producer fills
  alignas(64) std::atomic<uint32_t> head;       // next slot the consumer takes
  // Set by a consumer about to block: a producer that sees it writes the consumer's eventfd.
  alignas(64) std::atomic<uint32_t> consumer_sleeping;
  Slot slots[kSlots];

  // Producer side. False if the ring is full. head_seen is the producer's last look at head
  // (0 for a new ring): head is read again only when that look says full, so the consumer's
  // cache line is not pulled over on every packet.
  bool push(const wire::PacketBuf& p, uint32_t& head_seen) {
    uint32_t t = tail.load(std::memory_order_relaxed);
    if (t - head_seen >= kSlots && t - (head_seen = head.load(std::memory_order_acquire)) >= kSlots) return false;
    Slot& s = slots[t % kSlots];
    s.len = p.len;
    s.flags = p.icrc_skipped ? kSlotNoIcrc : 0;
    s.src = p.flow.src;
    s.dst = p.flow.dst;
    s.src_port = p.flow.src_port;
    s.dst_port = p.flow.dst_port;
    p.copy_to(s.data);  // a payload by reference is copied once, from the MR into the slot
    tail.store(t + 1, std::memory_order_release);
    return true;
  }
  // After a batch of pushes: true if the consumer is asleep and must be woken.
  bool consumer_needs_wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the consumer's arm()
    return consumer_sleeping.load(std::memory_order_relaxed) != 0;
  }

  // Consumer side: packets waiting, or -1 if the indices cannot be right (a broken peer).
  int64_t waiting() const {
    uint32_t n = tail.load(std::memory_order_acquire) - head.load(std::memory_order_relaxed);
    return n > kSlots ? -1 : int64_t(n);
  }
  // The oldest packet, read where it lies (its slot stays ours until pop()): its length is
  // read once and checked, so nothing the peer writes meanwhile can take a read out of the
  // slot; the bytes themselves are the peer's to send, like bytes on a wire. Null if its
  // length is impossible (pop() it all the same).
  const Slot* front(wire::PacketBuf& meta) const {
    const Slot& s = slots[head.load(std::memory_order_relaxed) % kSlots];
    uint32_t len = s.len;
    if (len > wire::kMaxPacket) return nullptr;
    meta.len = len;
    meta.icrc_skipped = (s.flags & kSlotNoIcrc) != 0;
    meta.flow = {s.src, s.dst, s.src_port, s.dst_port};
    return &s;
  }
  void pop() { head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Before blocking: true if the consumer may sleep (nothing arrived in the meantime).
  bool arm() {
    consumer_sleeping.store(1, std::memory_order_seq_cst);
    return waiting() == 0;
  }
  void disarm() { consumer_sleeping.store(0, std::memory_order_relaxed); }
};

// The memfd's contents. ring[0] carries the connecting side's packets, ring[1] the other's.
struct Area {
  uint32_t magic;
  uint32_t slots;
  uint32_t slot_bytes;
  Ring ring[2];
};

// What the connecting side sends, with the memfd and the eventfds of ring[0] and ring[1]; the
// answer is one byte, 'Y', once the listener has mapped the memory.
inline constexpr uint32_t kMaxPeerGids = 8;
struct Hello {
  uint32_t magic;
  uint32_t area_bytes;
  uint32_t ngids;  // the connecting device's addresses
  Gid gids[kMaxPeerGids];
};

}  // namespace uroce::link::shm

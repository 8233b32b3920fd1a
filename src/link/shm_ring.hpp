// The shared memory of a same-host channel between two devices: two single-producer,
// single-consumer rings of packet slots (one per direction) in one memfd both processes map.
// Indices are free-running; a slot holds one RoCEv2 packet (UDP payload, BTH .. ICRC) and its
// flow; or a split packet: its payload in the ring's payload area, the slot's own entry there,
// and its other bytes (kSlotSplit); or a placed packet: where its payload lies, and its other
// bytes (kSlotPlaced). The producer never waits on the consumer: a full ring is the sender's
// to handle.
//
// Split packets let the receiver coalesce: the payload entries of consecutive slots lie one
// after another, so MIDDLE packets of one message in a row are handed to the transport as one
// run and copied into their destination in one piece (shm_split.cpp). One copy of 64 KiB moves
// lines from the other core faster than sixteen of 4 KiB (docs/performance.md).
//
// A slot says itself when its packet is complete (its seq), so the consumer polls the slot it
// reads next and nothing else: one cache line comes over per small packet, not a shared tail
// index as well, and the producer's lines stay its own until the consumer reads the packet.
//
// Everything in it is written by the other process too: the consumer bounds-checks what it
// reads, and a packet's bytes are the peer's to send, like bytes on a wire.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <fcntl.h>
#include <sys/stat.h>

#include "wire/ip_udp.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::link::shm {

inline constexpr uint32_t kMagic = 0x75726f35;  // "uro5"
inline constexpr uint32_t kSlots = 256;          // a power of two

inline constexpr uint32_t kSlotNoIcrc = 1u << 31;  // in Slot::len: the sender left the ICRC out
// In Slot::len: the payload is not in the slot but in a file of the sender's that the consumer
// maps (link/shm_place.cpp). The slot's data starts with a Placed, then the packet's other bytes.
inline constexpr uint32_t kSlotPlaced = 1u << 30;
// In Slot::len: the payload is in the slot's entry of Ring::payload; the slot's data starts with
// a Split, then the packet's other bytes.
inline constexpr uint32_t kSlotSplit = 1u << 29;
inline constexpr uint32_t kSlotFlags = kSlotNoIcrc | kSlotPlaced | kSlotSplit;

// A payload entry: the largest payload of a packet (the largest path MTU).
inline constexpr uint32_t kPayloadBytes = 4096;
// Payloads shorter than this stay in their slot: coalescing wants whole entries.
inline constexpr uint32_t kMinSplit = 2048;

// Whether p's payload may travel apart from its other bytes, in a payload entry or where it
// lies: a payload by reference in whole words (no pad), from a packet built for this link (no
// ICRC), as the receiver's transport takes a payload apart.
inline bool goes_apart(const wire::PacketBuf& p) { return p.ref && p.ref_len % 4 == 0 && p.icrc_skipped; }

// A split packet's payload: bytes [at, at + len) of the packet are the first len bytes of the
// slot's payload entry.
struct Split {
  uint32_t at, len;
};

// Payloads shorter than this are copied through the ring: a small copy costs less than reading
// the peer's lines where they lie.
inline constexpr uint32_t kMinPlaced = 2048;

// Where a placed payload lies: bytes [at, at + len) of the packet are bytes [offset, offset +
// len) of the file the producer's descriptor fd names (/proc/<pid>/fd/<fd>), which must be
// the file (dev, ino). packets > 1 (0 reads as 1): a run of that many MIDDLE packets of one
// message (wire::ApartPayload), len / packets bytes of payload each, one after another in the
// file; the slot's other bytes are the first's, and the PSN counts up from its.
struct Placed {
  uint64_t dev, ino, offset;
  int32_t fd;
  uint32_t at, len;
  uint32_t packets;
};

// Ring::takes_placed: a consumer that can open the producer's files takes placed payloads,
// and runs of them.
inline constexpr uint32_t kTakesPlaced = 1, kTakesRuns = 2, kTakesAll = kTakesPlaced | kTakesRuns;

struct alignas(64) Slot {
  // Index + 1 of the packet it holds, written last: the slot is ready when it equals the
  // consumer's head + 1 (before that it holds the previous lap's, or 0 if never written).
  std::atomic<uint32_t> seq;
  uint32_t len;  // of data's bytes, with kSlotFlags
  uint16_t src_port, dst_port;
  Gid src, dst;
  uint8_t data[wire::kMaxPacket];
};

// Packet bytes that share a slot's first cache line with its header.
inline constexpr uint32_t kFirstLineData = 64 - offsetof(Slot, data);

struct Ring {
  alignas(64) std::atomic<uint32_t> head;  // next slot the consumer takes
  // Set by a consumer about to block: a producer that sees it writes the consumer's eventfd.
  alignas(64) std::atomic<uint32_t> consumer_sleeping;
  // Set by a consumer that can open the producer's files: placed payloads are welcome.
  alignas(64) std::atomic<uint32_t> takes_placed;
  Slot slots[kSlots];
  alignas(4096) uint8_t payload[kSlots][kPayloadBytes];  // slot i's entry is payload[i % kSlots]

  // Producer side, with its own state out of shared memory (both 0 for a new ring): tail, the
  // next slot it fills, and head_seen, its last look at head (read again only when that look
  // says full, so the consumer's cache line is not pulled over on every packet). False if the
  // ring is full.
  bool push(const wire::PacketBuf& p, uint32_t& tail, uint32_t& head_seen) {
    return push(p.len, p.icrc_skipped ? kSlotNoIcrc : 0, p.flow, tail, head_seen,
                [&p](uint8_t* out, uint32_t lo, uint32_t hi) { p.copy_range(out, lo, hi); });
  }
  // The same for a packet whose payload by reference goes into the slot's payload entry
  // (p.ref_len of kMinSplit to kPayloadBytes), the rest into the slot after a Split.
  bool push_split(const wire::PacketBuf& p, uint32_t& tail, uint32_t& head_seen) {
    const uint32_t t = tail;
    if (t - head_seen >= kSlots && t - (head_seen = head.load(std::memory_order_acquire)) >= kSlots) return false;
    std::memcpy(payload[t % kSlots], p.ref, p.ref_len);
    const Split d{p.ref_at, p.ref_len};
    const uint32_t after = p.ref_at + p.ref_len, n = uint32_t(sizeof d + p.len - p.ref_len);
    uint8_t rest[sizeof d + wire::kMaxPacket - kMinSplit];
    std::memcpy(rest, &d, sizeof d);
    std::memcpy(rest + sizeof d, p.data, p.ref_at);
    std::memcpy(rest + sizeof d + p.ref_at, p.data + after, p.len - after);
    return push(n, (p.icrc_skipped ? kSlotNoIcrc : 0) | kSlotSplit, p.flow, tail, head_seen,
                [&rest](uint8_t* out, uint32_t lo, uint32_t hi) { std::memcpy(out + lo, rest + lo, hi - lo); });
  }
  // The same for a slot's data held whole in `bytes` (a sender's backlog, a placed payload's
  // descriptor and headers), flags: kSlotFlags.
  bool push(std::span<const uint8_t> bytes, uint32_t flags, const wire::FlowAddr& flow, uint32_t& tail,
            uint32_t& head_seen) {
    return push(uint32_t(bytes.size()), flags, flow, tail, head_seen,
                [&bytes](uint8_t* out, uint32_t lo, uint32_t hi) { std::memcpy(out + lo, bytes.data() + lo, hi - lo); });
  }
  // copy(out, lo, hi) puts bytes [lo, hi) of the slot's data at out + lo; flags: kSlotFlags.
  template <class Copy>
  bool push(uint32_t len, uint32_t flags, const wire::FlowAddr& flow, uint32_t& tail, uint32_t& head_seen,
            Copy copy) {
    const uint32_t t = tail;
    if (t - head_seen >= kSlots && t - (head_seen = head.load(std::memory_order_acquire)) >= kSlots) return false;
    Slot& s = slots[t % kSlots];
    // The slot's first cache line, which a waiting consumer reads over and over, is written
    // last and at once: the rest of a large packet is not slowed by the consumer's polls.
    // (A payload by reference is copied once, from the MR into the slot.)
    const uint32_t head_bytes = std::min(len, kFirstLineData);
    copy(s.data, head_bytes, len);
    s.len = len | flags;
    s.src = flow.src;
    s.dst = flow.dst;
    s.src_port = flow.src_port;
    s.dst_port = flow.dst_port;
    copy(s.data, 0, head_bytes);
    s.seq.store(t + 1, std::memory_order_release);
    tail = t + 1;
    return true;
  }
  // After a batch of pushes: true if the consumer is asleep and must be woken.
  bool consumer_needs_wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the consumer's arm()
    return consumer_sleeping.load(std::memory_order_relaxed) != 0;
  }

  // Consumer side: whether the packet of index i (past the head) is ready.
  bool ready_at(uint32_t i) const { return slots[i % kSlots].seq.load(std::memory_order_acquire) == i + 1; }
  // 1 if the next packet is ready, 0 if not yet, -1 if its slot says what no
  // correct producer writes (a broken peer).
  int ready() const {
    const uint32_t h = head.load(std::memory_order_relaxed);
    const uint32_t seq = slots[h % kSlots].seq.load(std::memory_order_acquire);
    if (seq == h + 1) return 1;
    return seq == h + 1 - kSlots || seq == 0 ? 0 : -1;
  }
  // The next packet (ready() said so), read where it lies (its slot stays ours until pop()):
  // its length is read once and checked, so nothing the peer writes meanwhile can take a read
  // out of the slot. Null if its length is impossible (pop() it all the same).
  // `flags` gets its kSlotFlags.
  const Slot* front(wire::PacketBuf& meta, uint32_t& flags) const {
    const Slot& s = slots[head.load(std::memory_order_relaxed) % kSlots];
    const uint32_t word = reinterpret_cast<const volatile uint32_t&>(s.len);
    const uint32_t len = word & ~kSlotFlags;
    if (len > wire::kMaxPacket) return nullptr;
    meta.len = len;
    flags = word & kSlotFlags;
    meta.icrc_skipped = (word & kSlotNoIcrc) != 0;
    meta.flow = {s.src, s.dst, s.src_port, s.dst_port};
    return &s;
  }
  // The front packet's life ends (debug builds: see link/link.hpp); the slot is still ours.
  void expire_front(uint32_t len) { wire::expire(slots[head.load(std::memory_order_relaxed) % kSlots].data, len); }
  void pop() { head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Before blocking: true if the consumer may sleep (nothing arrived in the meantime).
  bool arm() {
    consumer_sleeping.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ready() == 0;
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

// The rings' memfd can neither shrink nor grow, nor lose those seals: what either side maps
// stays backed by the file for as long as the mapping lives.
inline constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
inline bool sealed_at_size(int fd, size_t bytes) {
  struct stat st{};
  const int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & kSeals) == kSeals && fstat(fd, &st) == 0 && size_t(st.st_size) == bytes;
}

// What the connecting side sends, with the memfd and the eventfds of ring[0] and ring[1]; the
// answer is one byte, 'Y', once the listener has mapped the memory.
inline constexpr uint32_t kMaxPeerGids = 8;
struct Hello {
  uint32_t magic;
  uint32_t area_bytes;
  uint32_t ngids;  // the connecting device's addresses
  uint32_t slot;   // and its steering slot on them (0: a device of one process)
  Gid gids[kMaxPeerGids];
};

}  // namespace uroce::link::shm

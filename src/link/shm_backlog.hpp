// Packets that wait for room in a same-host ring, in order. Each is kept at its own length in
// one buffer that is reused from one backlog to the next: a burst of thousands of small
// packets (a WRITE on each of 4096 QPs) costs a copy of their bytes, not a 4 KiB buffer each
// to allocate, fault in and free again.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "link/shm_ring.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::link::shm {

// What a channel holds while its ring is full: 16384 packets of a whole MTU, or more small ones
// (a burst of 8 WRITEs on each of 4096 QPs is 32768 packets of about 100 bytes).
inline constexpr size_t kMaxBacklogBytes = size_t(64) << 20;
inline constexpr size_t kMaxBacklogPackets = 65536;

class Backlog {
 public:
  struct Entry {
    wire::FlowAddr flow;
    uint32_t len;
    uint32_t flags;  // the slot's (shm_ring.hpp, kSlotFlags)
    size_t at;       // in the buffer
  };

  size_t size() const { return entries_.size() - first_; }
  bool empty() const { return first_ == entries_.size(); }
  size_t bytes() const { return empty() ? 0 : end_ - entries_[first_].at; }
  bool full() const { return size() >= kMaxBacklogPackets || bytes() >= kMaxBacklogBytes; }

  // Copies the packet whole (a payload by reference may change once the send returns).
  void push(const wire::PacketBuf& p) {
    reserve(end_ + p.len);
    p.copy_to(bytes_.get() + end_);
    entries_.push_back({p.flow, p.len, p.icrc_skipped ? kSlotNoIcrc : 0, end_});
    end_ += p.len;
  }
  // A slot's bytes as they are to go into the ring (a placed payload's descriptor and headers).
  void push(std::span<const uint8_t> slot, uint32_t flags, const wire::FlowAddr& flow) {
    reserve(end_ + slot.size());
    std::memcpy(bytes_.get() + end_, slot.data(), slot.size());
    entries_.push_back({flow, uint32_t(slot.size()), flags, end_});
    end_ += slot.size();
  }
  const Entry& front() const { return entries_[first_]; }
  std::span<const uint8_t> front_bytes() const { return {bytes_.get() + entries_[first_].at, entries_[first_].len}; }
  void pop() {
    if (++first_ == entries_.size()) clear();
  }
  // Drops what waits (its channel is gone), and starts again at the front of the same memory.
  void clear() {
    first_ = end_ = 0;
    entries_.clear();
    if (cap_ > kKeepBytes) {  // after a rare huge burst, give the memory back
      bytes_.reset();
      cap_ = 0;
    }
  }

 private:
  static constexpr size_t kKeepBytes = size_t(4) << 20;

  void reserve(size_t need) {
    if (need <= cap_) return;
    // What was sent already is not kept: the rest moves to the front of the new buffer.
    const size_t from = empty() ? end_ : entries_[first_].at;
    size_t cap = std::max<size_t>(cap_ * 2, 64 * 1024);
    while (cap < need - from) cap *= 2;
    std::unique_ptr<uint8_t[]> b(new uint8_t[cap]);  // not value-initialized: bytes are copied in
    if (end_ > from) std::memcpy(b.get(), bytes_.get() + from, end_ - from);
    for (size_t i = first_; i < entries_.size(); ++i) entries_[i].at -= from;
    end_ -= from;
    bytes_ = std::move(b);
    cap_ = cap;
  }

  std::unique_ptr<uint8_t[]> bytes_;
  size_t cap_ = 0, end_ = 0;
  std::vector<Entry> entries_;
  size_t first_ = 0;  // the oldest entry still waiting
};

}  // namespace uroce::link::shm

// Work queue storage shared by the application (producer) and the engine (consumer).
// Slots, their scatter/gather entries, inline bytes and (send queues) the slots' side entries
// live in flat arrays sized at creation.
// Concurrency: producers take `producer_lock`; index `prod` is published with release and read
// by the engine with acquire; `done` is published by the engine when a slot may be reused.
#pragma once
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "verbs/spinlock.hpp"
#include "uroce/types.hpp"
#include "wire/psn.hpp"

namespace uroce::verbs {

// One cache line: with thousands of QPs every post writes a cold slot, which the engine then
// reads from the other core. What only CAS and UD need lives beside it (SendWqeExt).
struct alignas(64) SendWqe {
  uint64_t wr_id;
  uint64_t remote_addr;
  uint64_t compare_add;
  uint32_t rkey;
  uint32_t imm;
  uint32_t length;      // total bytes of the message
  uint32_t flags;       // SendFlags
  uint16_t num_sge;
  WrOpcode opcode;
  bool is_inline;
  // Requester/completer bookkeeping, engine thread only.
  bool assigned;        // PSNs allocated
  bool failed;          // requester found a local error; completes with `error`
  WcStatus error;
  bool placeable;       // a WRITE no earlier unfinished request can touch (Bth::place)
  wire::Psn first_psn;
  uint32_t npkts;
  uint32_t resp_pkts;   // READ response packets received so far
  uint32_t recv_seq;    // SEND, WRITE with immediate: the receive WQE it consumes (PlaceETH)

  wire::Psn last_psn() const { return first_psn + (npkts - 1); }  // once assigned
};
static_assert(sizeof(SendWqe) == 64, "a send WQE is one cache line");

struct SendWqeExt {
  uint64_t swap;        // CAS
  MwBind bind;          // BIND_MW
  Gid ud_dgid;          // UD destination and source GID index, from the address handle when posted
  uint32_t ud_qpn;
  uint32_t ud_qkey;
  uint8_t ud_sgid_index;
  uint8_t ud_tclass;    // UD: the address handle's traffic class (its DSCP goes on the wire)
  uint32_t xrc_srqn;    // XRC: the remote XRC SRQ its requests name
};

struct NoExt {};

struct RecvWqe {
  uint64_t wr_id;
  uint32_t length;
  uint16_t num_sge;
};

// Layout: with thousands of QPs a post finds its queue cold, so the producer's first line holds
// all it reads and writes of its own (lock, private index, sizes, array pointers, a copy of
// `done`); `prod` and `done` have a line each, as the engine reads one and writes the other.
template <class Wqe, class Ext = NoExt>
class WorkQueue {
 public:
  WorkQueue(uint32_t depth, uint32_t max_sge, uint32_t max_inline)
      : mask_(std::bit_ceil(depth < 1 ? 1u : depth) - 1), max_sge_(max_sge ? max_sge : 1),
        max_inline_(max_inline), slots_(new Wqe[mask_ + 1]()),
        sges_(new Sge[size_t(mask_ + 1) * max_sge_]()),
        inline_(max_inline ? new uint8_t[size_t(mask_ + 1) * max_inline]() : nullptr),
        ext_(std::is_empty_v<Ext> ? nullptr : new Ext[mask_ + 1]()) {}

  uint32_t capacity() const { return mask_ + 1; }
  uint32_t max_sge() const { return max_sge_; }
  uint32_t max_inline() const { return max_inline_; }
  Wqe& slot(uint32_t idx) { return slots_[idx & mask_]; }
  Sge* sges(uint32_t idx) { return &sges_[size_t(idx & mask_) * max_sge_]; }
  Ext& ext(uint32_t idx) { return ext_[idx & mask_]; }
  uint8_t* inline_data(uint32_t idx) { return inline_.get() + size_t(idx & mask_) * max_inline_; }

  // Producer side (under producer_lock). `done` is read only when the copy says the queue is
  // full: the engine's line is not pulled over on every post.
  uint32_t free_slots() {
    if (prod_local - done_seen_ == capacity()) done_seen_ = done.load(std::memory_order_acquire);
    return capacity() - (prod_local - done_seen_);
  }
  // The same from the engine's `done` as it is now (one line pulled over): where a stale copy
  // must not refuse (a reserve of slots, the device's own WQEs).
  uint32_t free_slots_now() {
    done_seen_ = done.load(std::memory_order_acquire);
    return capacity() - (prod_local - done_seen_);
  }
  void publish() { prod.store(prod_local, std::memory_order_release); }
  // Back to empty (QP to RESET; under producer_lock, engine lock held).
  void reset() {
    prod_local = done_seen_ = 0;
    prod.store(0);
    done.store(0);
  }

  SpinLock producer_lock;
  uint32_t prod_local = 0;                 // producer's private copy

 private:
  uint32_t done_seen_ = 0;                 // producer's last look at `done`
  uint32_t mask_;
  uint32_t max_sge_;
  uint32_t max_inline_;
  std::unique_ptr<Wqe[]> slots_;
  std::unique_ptr<Sge[]> sges_;
  std::unique_ptr<uint8_t[]> inline_;
  std::unique_ptr<Ext[]> ext_;

 public:
  alignas(64) std::atomic<uint32_t> prod{0};
  // The QP's doorbell, on the send queue: set by a post beside the index it just published,
  // so a post makes one line travel to the engine, not two.
  std::atomic<bool> doorbell{false};
  alignas(64) std::atomic<uint32_t> done{0};  // slots before this index are free again
};

}  // namespace uroce::verbs

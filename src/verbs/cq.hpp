// Completion queue: a ring the engine fills and the application drains.
// Concurrency: push() only from the engine thread (single producer); poll() from any
// application thread (consumers serialize on a spinlock).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "verbs/spinlock.hpp"
#include "uroce/types.hpp"

namespace uroce::verbs {

enum class CqArm : uint8_t { None = 0, Next = 1, Solicited = 2 };

class Cq {
 public:
  Cq(uint32_t handle, uint32_t depth);
  uint32_t handle() const { return handle_; }
  uint32_t capacity() const { return mask_.load(std::memory_order_relaxed) + 1; }
  // A new capacity (rounded up as at creation), keeping what waits; false if more completions
  // wait than it holds. With no push meanwhile (engine lock held); polls wait for it.
  bool resize(uint32_t depth);
  // Removes the completions of QP qpn that wait, keeping the others in order (a QP reset
  // takes its completions with it, as mlx5's does). Engine lock held.
  void purge(uint32_t qpn);

  // Engine side: wc, completed at time `ts` of the device's clock. Returns false (and counts
  // an overrun) if the queue is full.
  bool push(const Wc& wc, uint64_t ts = 0);
  // True when the push should raise a completion event, given the arming (consumes it).
  bool take_event_for(const Wc& wc);

  // Application side.
  int poll(std::span<Wc> out);
  // Arming, then polling once more, must not miss a completion pushed meanwhile: the engine
  // stores the tail and loads the arming, the application stores the arming and loads the
  // tail. Each side fences between its store and its load, or both may see the old values
  // (x86 lets a load pass an earlier store) and the completion raises no event.
  void arm(CqArm how) {
    arm_.store(uint8_t(how), std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  bool overrun() const { return overrun_.load(std::memory_order_relaxed); }
  uint32_t pending() const;

  int event_fd = -1;  // owned by the API object; the engine signals it

 private:
  uint32_t handle_;
  std::atomic<uint32_t> mask_;  // changes only in resize(), under both sides' exclusion
  std::unique_ptr<Wc[]> ring_;
  alignas(64) std::atomic<uint32_t> head_{0};  // next to poll
  alignas(64) std::atomic<uint32_t> tail_{0};  // next to fill
  std::atomic<uint8_t> arm_{0};
  std::atomic<bool> overrun_{false};
  SpinLock consumer_lock_;
};

}  // namespace uroce::verbs

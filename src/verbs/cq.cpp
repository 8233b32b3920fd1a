#include "verbs/cq.hpp"

#include <bit>
#include <mutex>

namespace uroce::verbs {

Cq::Cq(uint32_t handle, uint32_t depth)
    : handle_(handle), mask_(std::bit_ceil(depth < 2 ? 2u : depth) - 1), ring_(new Wc[mask_ + 1]) {}

bool Cq::push(const Wc& wc) {
  uint32_t t = tail_.load(std::memory_order_relaxed);
  if (t - head_.load(std::memory_order_acquire) > mask_) {
    overrun_.store(true, std::memory_order_relaxed);
    return false;
  }
  ring_[t & mask_] = wc;
  tail_.store(t + 1, std::memory_order_release);
  return true;
}

bool Cq::take_event_for(const Wc& wc) {
  uint8_t a = arm_.load(std::memory_order_seq_cst);
  if (a == uint8_t(CqArm::None)) return false;
  // Solicited-only arming also fires on errors (IBA 11.4.2.2).
  if (a == uint8_t(CqArm::Solicited) && !wc.solicited && wc.status == WcStatus::Success) return false;
  return arm_.exchange(0, std::memory_order_seq_cst) != 0;
}

int Cq::poll(std::span<Wc> out) {
  // Empty: nothing to take, no lock (a polling loop mostly finds nothing).
  if (tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_relaxed)) return 0;
  std::lock_guard g(consumer_lock_);
  uint32_t h = head_.load(std::memory_order_relaxed);
  uint32_t avail = tail_.load(std::memory_order_acquire) - h;
  uint32_t n = avail < out.size() ? avail : uint32_t(out.size());
  for (uint32_t i = 0; i < n; ++i) out[i] = ring_[(h + i) & mask_];
  head_.store(h + n, std::memory_order_release);
  return int(n);
}

uint32_t Cq::pending() const {
  return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
}

}  // namespace uroce::verbs

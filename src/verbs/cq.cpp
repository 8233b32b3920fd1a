#include "verbs/cq.hpp"

#include <bit>
#include <mutex>

namespace uroce::verbs {

static uint32_t slots_for(uint32_t depth) { return std::bit_ceil(depth < 2 ? 2u : depth); }

Cq::Cq(uint32_t handle, uint32_t depth) : handle_(handle), mask_(slots_for(depth) - 1), ring_(new Wc[slots_for(depth)]) {}

bool Cq::resize(uint32_t depth) {
  std::lock_guard g(consumer_lock_);
  const uint32_t h = head_.load(std::memory_order_relaxed), t = tail_.load(std::memory_order_relaxed);
  const uint32_t slots = slots_for(depth), old = mask_.load(std::memory_order_relaxed);
  if (t - h > slots) return false;
  std::unique_ptr<Wc[]> ring(new Wc[slots]);
  for (uint32_t i = h; i != t; ++i) ring[i & (slots - 1)] = ring_[i & old];  // indices run on
  ring_ = std::move(ring);
  mask_.store(slots - 1, std::memory_order_relaxed);
  return true;
}

void Cq::purge(uint32_t qpn) {
  std::lock_guard g(consumer_lock_);
  const uint32_t mask = mask_.load(std::memory_order_relaxed);
  const uint32_t h = head_.load(std::memory_order_relaxed), t = tail_.load(std::memory_order_relaxed);
  uint32_t kept = h;
  for (uint32_t i = h; i != t; ++i)
    if (ring_[i & mask].qp_num != qpn) ring_[kept++ & mask] = ring_[i & mask];
  tail_.store(kept, std::memory_order_release);
}

bool Cq::push(const Wc& wc, uint64_t ts) {
  const uint32_t mask = mask_.load(std::memory_order_relaxed);
  uint32_t t = tail_.load(std::memory_order_relaxed);
  if (t - head_.load(std::memory_order_acquire) > mask) {
    overrun_.store(true, std::memory_order_relaxed);
    return false;
  }
  ring_[t & mask] = wc;
  ring_[t & mask].timestamp_ns = ts;
  tail_.store(t + 1, std::memory_order_release);
  return true;
}

bool Cq::take_event_for(const Wc& wc) {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the tail stored before: see arm()
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
  const uint32_t mask = mask_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) out[i] = ring_[(h + i) & mask];
  head_.store(h + n, std::memory_order_release);
  return int(n);
}

uint32_t Cq::pending() const {
  return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
}

}  // namespace uroce::verbs

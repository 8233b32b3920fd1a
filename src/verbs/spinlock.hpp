// A tiny test-and-test-and-set lock for the producer sides of work queues: held for a few
// stores, never across I/O, so a futex would only add syscalls.
#pragma once
#include <atomic>

namespace uroce::verbs {

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace uroce::verbs

// The lock that serializes a protocol core's users: the engine's passes, on its thread or an
// application's, and control calls (create, modify, destroy, counters). Debug and sanitizer
// builds record who holds it, and the core's entry points that need it check (eRPC's
// assert(in_dispatch())); release builds keep a plain mutex.
#pragma once
#include <cassert>
#include <mutex>
#include <thread>

#ifndef NDEBUG
#include <atomic>
#endif

namespace uroce::transport {

class CoreMutex {
 public:
  void lock() {
    mu_.lock();
    mark();
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    mark();
    return true;
  }
  void unlock() {
    unmark();
    mu_.unlock();
  }
  // Whether the calling thread holds it (always true in release builds: nothing is recorded).
  bool held_here() const {
#ifndef NDEBUG
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
#else
    return true;
#endif
  }

 private:
#ifndef NDEBUG
  void mark() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  void unmark() { owner_.store(std::thread::id(), std::memory_order_relaxed); }
  std::atomic<std::thread::id> owner_{};
#else
  void mark() {}
  void unmark() {}
#endif
  std::mutex mu_;
};

}  // namespace uroce::transport

// At an entry point of a protocol core that needs its users' lock (the engine lock).
#define UROCE_ASSERT_HELD(pc) assert((pc).held() && "the engine lock is not held")

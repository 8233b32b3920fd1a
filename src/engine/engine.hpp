// The NIC as a thread: it drives one protocol core (transport::ProtocolCore) with a link and the
// monotonic clock. Adaptive polling: it spins while there is traffic and for a short while
// after, then blocks in epoll on the link's socket and a wake-up eventfd, with a timeout at
// the next protocol timer. Application threads post without syscalls while it spins; only a
// post that finds it asleep writes the eventfd.
//
// Locking: control_lock() serializes control operations (create/modify/destroy, reg_mr,
// counters) with the engine loop, which holds the lock for one pass at a time and never while
// blocking. A waiting control call gets the lock before the next pass: under full load it
// waits for one pass, not for the load to end.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

#include "engine/attach.hpp"
#include "link/link.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::engine {

class Engine {
 public:
  Engine(transport::ProtocolCore& nic, link::Link& link, uint64_t spin_ns = 200'000);
  ~Engine();
  void start();
  void stop();
  std::unique_lock<std::mutex> control_lock();
  // Passes of the engine loop so far (each one holds the lock once).
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }
  // Readable while async events wait in the NIC (an eventfd; the API drains it).
  int async_fd() const { return async_fd_; }
  // Returns once the engine has run two whole passes from now (the first takes what was
  // posted, the second sends what that made), or after timeout_ns.
  void flush(uint64_t timeout_ns);

 private:
  void run();
  void wake();
  transport::ProtocolCore& nic_;
  link::Link& link_;
  CoreSink sink_{nic_};
  uint64_t spin_ns_;
  std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<uint32_t> control_waiting_{0};
  std::atomic<uint64_t> passes_{0};
  int wake_fd_ = -1;
  int async_fd_ = -1;
  int epoll_fd_ = -1;
};

}  // namespace uroce::engine

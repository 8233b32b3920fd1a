// The NIC as a thread: it drives one protocol core (transport::ProtocolCore) with a link and the
// monotonic clock. Adaptive polling: it spins while there is traffic and for a short while
// after, then blocks in epoll on the link's socket and a wake-up eventfd, with a timeout at
// the next protocol timer.
//
// Run to completion: an application thread that posts, or polls an empty CQ, runs one pass of
// the same loop itself when the core is free (try-lock), so a message costs no thread hand-off.
// While an application keeps polling, the engine thread leaves the link to it and sleeps until
// a timer, a wake-up, or the polling stops; arming a CQ (the prelude to a blocking wait) hands
// the link back at once.
//
// Locking: control_lock() serializes control operations (create/modify/destroy, reg_mr,
// counters) with the engine loop, which holds the lock for one pass at a time and never while
// blocking. A waiting control call gets the lock before the next pass: under full load it
// waits for one pass, not for the load to end. The engine thread finding the lock taken by an
// application's pass yields and tries again rather than sleep on it (the application would pay
// a futex wake at every unlock); it sleeps on it only when it stays taken.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

#include "engine/attach.hpp"
#include "link/link.hpp"
#include "link/raw_port.hpp"
#include "transport/protocol_core.hpp"
#include "uroce/result.hpp"

namespace uroce::engine {

class Engine {
 public:
  Engine(transport::ProtocolCore& pc, link::Link& link, uint64_t spin_ns = 200'000);
  ~Engine();
  // Whether it was built whole; if not (the process is out of descriptors), what failed. A
  // broken engine does not start, and is destroyed safely.
  const Status& status() const { return status_; }
  // With thread false the core progresses only on application threads (run_inline).
  void start(bool thread = true);
  void stop();
  bool threaded() const { return threaded_; }
  std::unique_lock<transport::CoreMutex> control_lock();
  // A UD QP's posted datagrams, built now on the application's thread (after the engine
  // thread's pass, if one is under way); sent once a batch waits, or before a poll.
  void gather_datagrams(transport::Qp& qp);
  // Before a CQ poll: datagrams built in posts leave before their completions are seen.
  void send_gathered() {
    if (gathered_.load(std::memory_order_relaxed)) send_gathered_now();
  }
  void send_deferred();  // what the last pass left for the next, now (at exit)
  // Arriving packets lost at random (ProtocolSink::set_loss); set before start().
  void set_rx_loss(double p, uint64_t seed) { sink_.set_loss(p, seed); }
  uint64_t rx_lost() const { return sink_.lost(); }  // under control_lock()
  // Passes of the engine loop so far (each one holds the lock once).
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }
  // Readable while async events wait in the NIC (an eventfd; the API drains it).
  int async_fd() const { return async_fd_; }
  // Returns once the engine has run two whole passes from now (the first takes what was
  // posted, the second sends what that made), or after timeout_ns.
  void flush(uint64_t timeout_ns);
  // Raw packet QPs' port on the interface (link/raw_port.hpp): from now on each pass sends the
  // frames they made and hands arriving frames to the core. Control lock held; once.
  Status attach_raw(std::unique_ptr<link::RawPort> port);
  void detach_raw();  // closes it (control lock held); frames not yet sent are dropped
  // At the end of a control operation (control lock held): signal_events(), and a pass soon
  // for the work it left the core (a QP's flush after modify_qp to ERR), even on an idle
  // device whose engine thread sleeps with no timer to wake it.
  void after_control();
  bool has_raw() const { return raw_ != nullptr; }

  // Application side of run to completion. PostScope brackets a post: the doorbell it rings
  // does not wake the engine; after_post() then leaves the post to a polling application's
  // next poll (which batches it with what follows), or runs a pass here, or wakes the engine
  // if the core is busy. polled_empty() runs a pass for a poll that found nothing; cq_armed() hands
  // receiving back to the engine thread before the application blocks.
  class PostScope {
   public:
    explicit PostScope(Engine& e);
    ~PostScope();
   private:
    Engine* prev_;
  };
  // send_here: sending costs no system call (shared memory), so a post by an application that
  // is not polling runs a pass at once; otherwise (UDP) the engine thread batches it.
  void after_post(bool send_here);
  void polled_empty();
  void cq_armed();

 private:
  // Signals the completion channels of CQs with new completions, and the async fd if events
  // wait (lock held): at the end of a pass, and of a control operation.
  void signal_events();
  void run();
  void wake();
  int made(int r, const char* what);
  // One pass of the loop, lock held; true if anything happened. inline: on an application thread.
  bool pass(uint64_t now, bool on_app_thread = false);
  bool run_inline(uint64_t now);  // a pass on the caller's thread if the core is free
  // Under mu_, on an application's thread: a timer it armed (a post's retransmission timer)
  // that falls before the engine thread's planned wake-up wakes it, to plan again.
  void keep_sleep_plan();
  // True if a post may wait for the polling application's next poll: the application polls,
  // and the engine thread comes round by itself (awake, or asleep only until polling stops).
  bool may_defer(uint64_t now);
  // The lock at once if free, else after the engine thread's pass (which steps aside for it).
  std::unique_lock<transport::CoreMutex> lock_soon();
  void send_gathered_now();
  transport::ProtocolCore& pc_;
  link::Link& link_;
  std::unique_ptr<link::RawPort> raw_;  // set under mu_
  Status status_;
  ProtocolSink sink_{pc_};
  uint64_t spin_ns_;
  transport::CoreMutex mu_;
  std::thread thread_;
  std::atomic<bool> running_{false};  // started, and not stopped
  bool threaded_ = false;
  uint32_t inline_passes_ = 0;  // under mu_
  uint64_t sleep_plan_ = 0;     // under mu_: the engine thread's next wake-up at the latest
  std::atomic<bool> sleeping_{false};
  std::atomic<uint32_t> control_waiting_{0};
  std::atomic<uint64_t> passes_{0};
  // Until when an application polls (monotonic ns): the engine thread leaves the link alone.
  std::atomic<uint64_t> app_polling_until_{0};
  std::atomic<uint32_t> empty_polls_{0};     // by applications, in a row since the last post
  std::atomic<bool> sleep_bounded_{false};  // asleep in epoll only until the polling window ends
  std::atomic<bool> more_{false};         // the last pass left work for the next
  bool tx_deferred_ = false;              // the last pass left its packets for the next (under mu_)
  // Datagrams built in posts wait to be sent. Read by every CQ poll: a line of its own, away
  // from what the engine thread writes on each pass.
  alignas(64) std::atomic<bool> gathered_{false};
  void send_held();                       // sends both now (under mu_)
  int wake_fd_ = -1;
  int async_fd_ = -1;
  int epoll_fd_ = -1;       // wake-up eventfd and the link
  int epoll_wake_fd_ = -1;  // wake-up eventfd only
};

}  // namespace uroce::engine

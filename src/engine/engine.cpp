#include "engine/engine.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/clock.hpp"

namespace uroce::engine {

namespace {
// An application is taken to be polling after this many empty polls in a row (since its last
// post): one poll per iteration, as a program that spins on memory does, is not polling.
constexpr uint32_t kPollingAfter = 4;
constexpr size_t kGatheredBatch = 32;  // datagrams built in posts that leave in one send
// How long the link stays with a polling application after its last empty poll.
constexpr uint64_t kPollWindowNs = 200'000;
// How many times in a row the engine thread steps aside for a lock holder before it waits.
constexpr uint32_t kLockTriesBeforeWait = 64;
// The engine whose post is being made on this thread: its doorbell need not wake the engine.
thread_local Engine* t_posting = nullptr;

// The running engines, so that a program that exits without closing its devices still sends
// what a pass left for the next (deferred ACKs: the peer would retry them in vain).
struct Running {
  std::mutex mu;
  std::vector<Engine*> all;
};
Running& running() {
  static Running* r = [] {
    auto* x = new Running;  // never destroyed: exit handlers may run after static destructors
    std::atexit([] {
      std::lock_guard g(running().mu);
      for (Engine* e : running().all) e->send_deferred();
    });
    return x;
  }();
  return *r;
}
}  // namespace

void Engine::send_deferred() {
  // The engine thread may be inside a pass (it sends what it made before it lets go), perhaps
  // waiting for a core; a thread stopped inside a pass (exit called from within one) never
  // lets go: wait for the lock a bounded while.
  const uint64_t end = monotonic_ns() + 200'000'000;
  while (monotonic_ns() < end) {
    std::unique_lock g(mu_, std::try_to_lock);
    if (!g.owns_lock()) {
      sched_yield();
      continue;
    }
    send_held();
    return;
  }
}

void Engine::send_held() {
  const bool gathered = gathered_.exchange(false, std::memory_order_relaxed);
  if (!std::exchange(tx_deferred_, false) && !gathered) return;
  transmit(pc_, link_, monotonic_ns());
}

// A step of construction that failed (EMFILE: out of descriptors): an engine that could not be
// woken could not be stopped either, so it is never started; status() says what failed.
int Engine::made(int r, const char* what) {
  if (r < 0 && status_) status_ = make_error(errno, std::string("engine: ") + what + ": " + std::strerror(errno));
  return r;
}

Engine::Engine(transport::ProtocolCore& pc, link::Link& link, uint64_t spin_ns)
    : pc_(pc), link_(link), spin_ns_(spin_ns) {
  wake_fd_ = made(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd");
  async_fd_ = made(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd");
  epoll_fd_ = made(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  epoll_wake_fd_ = made(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  if (!status_) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  made(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev), "epoll_ctl");
  made(epoll_ctl(epoll_wake_fd_, EPOLL_CTL_ADD, wake_fd_, &ev), "epoll_ctl");
  if (link_.inline_skips_fd() >= 0) {  // what a polling application leaves to this thread
    ev.data.fd = link_.inline_skips_fd();
    made(epoll_ctl(epoll_wake_fd_, EPOLL_CTL_ADD, link_.inline_skips_fd(), &ev), "epoll_ctl");
  }
  if (link_.rx_fd() >= 0) {
    ev.data.fd = link_.rx_fd();
    made(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, link_.rx_fd(), &ev), "epoll_ctl");
  }
  pc_.set_waker([this] { wake(); });
  pc_.set_guard(&mu_);
}

Status Engine::attach_raw(std::unique_ptr<link::RawPort> port) {
  if (raw_) return make_error(EEXIST, "raw port attached already");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = port->fd();
  for (int ep : {epoll_fd_, epoll_wake_fd_})
    if (epoll_ctl(ep, EPOLL_CTL_ADD, port->fd(), &ev) < 0) {
      int e = errno;
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, port->fd(), nullptr);
      return make_error(e, std::string("raw port: epoll_ctl: ") + std::strerror(e));
    }
  raw_ = std::move(port);
  return {};
}

void Engine::detach_raw() {
  if (!raw_) return;
  for (int ep : {epoll_fd_, epoll_wake_fd_}) epoll_ctl(ep, EPOLL_CTL_DEL, raw_->fd(), nullptr);
  raw_.reset();
  pc_.frames_out().clear();
}

Engine::~Engine() {
  stop();
  pc_.set_waker(nullptr);
  pc_.set_guard(nullptr);
  for (int fd : {wake_fd_, async_fd_, epoll_fd_, epoll_wake_fd_})
    if (fd >= 0) close(fd);
}

void Engine::start(bool thread) {
  if (!status_) return;  // see made()
  {
    std::lock_guard g(mu_);  // events raised before the engine ran (PORT_ACTIVE)
    if (pc_.take_async_signal()) {
      uint64_t one = 1;
      (void)!write(async_fd_, &one, sizeof one);
    }
  }
  if (running_.exchange(true)) return;
  threaded_ = thread;
  if (thread) thread_ = std::thread([this] { run(); });
  std::lock_guard g(running().mu);
  running().all.push_back(this);
}

void Engine::stop() {
  if (!running_.exchange(false)) return;
  {
    std::lock_guard g(running().mu);
    std::erase(running().all, this);
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  if (threaded_) thread_.join();
}

void Engine::flush(uint64_t timeout_ns) {
  if (!running_.load()) return;
  if (!threaded_) {
    std::lock_guard g(mu_);
    pass(monotonic_ns());
    pass(monotonic_ns());
    return;
  }
  const uint64_t end = monotonic_ns() + timeout_ns;
  const uint64_t want = passes() + 2;
  while (passes() < want && monotonic_ns() < end) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    sched_yield();
  }
}

std::unique_lock<transport::CoreMutex> Engine::control_lock() {
  auto g = lock_soon();
  send_held();  // before a QP goes (its packets with it) or anything else changes
  return g;
}

std::unique_lock<transport::CoreMutex> Engine::lock_soon() {
  std::unique_lock g(mu_, std::try_to_lock);
  if (!g.owns_lock()) {  // the engine thread's pass ends first (as for a control call)
    control_waiting_.fetch_add(1, std::memory_order_seq_cst);
    g.lock();
    control_waiting_.fetch_sub(1, std::memory_order_release);
  }
  return g;
}

void Engine::gather_datagrams(transport::Qp& qp) {
  auto g = lock_soon();
  pc_.gather_datagrams(qp, monotonic_ns());
  // Their sends completed as they were built: they leave in batches, and before the
  // application polls (a completion it sees is a datagram sent, even if it exits next).
  if (!pc_.tx_queue().empty()) gathered_.store(true, std::memory_order_relaxed);
  if (pc_.tx_queue().size() >= kGatheredBatch) send_held();
}

void Engine::send_gathered_now() {
  auto g = lock_soon();
  send_held();
}

Engine::PostScope::PostScope(Engine& e) : prev_(std::exchange(t_posting, &e)) {}
Engine::PostScope::~PostScope() { t_posting = prev_; }

bool Engine::run_inline(uint64_t now) {
  if (!running_.load(std::memory_order_relaxed) || control_waiting_.load(std::memory_order_acquire)) return false;
  std::unique_lock g(mu_, std::try_to_lock);
  if (!g.owns_lock()) return false;
  pass(now, true);
  keep_sleep_plan();
  return true;
}

void Engine::keep_sleep_plan() {
  if (!threaded_) return;
  const uint64_t d = std::min(pc_.next_deadline(), link_.next_deadline());
  if (d >= sleep_plan_) return;
  // Not only while it sleeps: it may be on its way there with the old plan. A write it finds
  // before sleeping costs it one more pass.
  sleep_plan_ = d;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

bool Engine::may_defer(uint64_t now) {
  if (app_polling_until_.load(std::memory_order_relaxed) <= now) return false;
  // An engine about to sleep sees the doorbell (run() checks after setting sleeping_).
  return !sleeping_.load(std::memory_order_seq_cst) || sleep_bounded_.load(std::memory_order_seq_cst);
}

void Engine::after_post(bool send_here) {
  // On shared memory the first post after an empty poll (a reply, a request after waiting) is
  // sent at once: someone waits for it, and sending costs no system call. Other posts wait
  // for the polling application's next poll, which sends them together.
  const bool first = empty_polls_.load(std::memory_order_relaxed) != 0;
  if (first) empty_polls_.store(0, std::memory_order_relaxed);
  const uint64_t now = monotonic_ns();
  const bool polling = may_defer(now);
  if (polling && !(first && send_here)) return;
  // The engine thread must carry on if the core is busy, or if one pass did not send it all
  // (unless the application's next poll will).
  if (!send_here || !run_inline(now) || (more_.load(std::memory_order_relaxed) && !polling)) wake();
}

void Engine::polled_empty() {
  const uint64_t now = monotonic_ns();  // one clock read a poll: it costs as much as the rings
  // A hint, not a count that must be exact: no locked instruction on every poll.
  const uint32_t empty = empty_polls_.load(std::memory_order_relaxed) + 1;
  empty_polls_.store(empty, std::memory_order_relaxed);
  if (empty >= kPollingAfter)
    app_polling_until_.store(now + kPollWindowNs, std::memory_order_relaxed);
  run_inline(now);
}

void Engine::cq_armed() {
  empty_polls_.store(0, std::memory_order_relaxed);
  if (app_polling_until_.exchange(0, std::memory_order_relaxed)) wake();
}

void Engine::signal_events() {
  for (verbs::Cq* cq : pc_.cq_events()) {
    uint64_t one = 1;
    if (cq->event_fd >= 0) (void)!write(cq->event_fd, &one, sizeof one);
  }
  pc_.cq_events().clear();
  if (pc_.take_async_signal()) {
    uint64_t one = 1;
    (void)!write(async_fd_, &one, sizeof one);
  }
}

void Engine::after_control() {
  signal_events();
  if (pc_.has_work()) wake();
  keep_sleep_plan();
}

void Engine::wake() {
  if (t_posting == this) return;  // after_post() follows
  // Pairs with the seq_cst store of sleeping_ and the doorbell re-check in run().
  if (sleeping_.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

bool Engine::pass(uint64_t now, bool on_app_thread) {
  // On the application's thread the link may skip what costs a system call (the engine thread
  // watches it); with no engine thread, the application's polls take it every 128th time
  // (and the link itself then reads the wire on every 16th of those while its rings are busy).
  const bool whole = !on_app_thread || (!threaded_ && ++inline_passes_ % 128 == 0);
  const uint64_t wcs_before = pc_.wcs_made();
  bool did = (whole ? link_.poll_rx(sink_, now, 256) : link_.poll_rx_inline(sink_, now, 256)) > 0;
  // Raw packet QPs' frames cost a system call to look for: whole passes only (the engine
  // thread watches the raw port while an application polls).
  if (raw_ && whole) raw_->poll([this, &did](std::span<const uint8_t> f) { did |= pc_.on_frame(f); }, 256);
  did |= pc_.progress(now);
  if (!pc_.frames_out().empty()) {  // raw packet QPs' frames (none without a raw port)
    if (!raw_) pc_.frames_out().clear();
    else pc_.count_raw_dropped(raw_->send(pc_.frames_out(), [this](std::span<const uint8_t> f) { pc_.on_frame(f); }));
  }
  // Wake waiting applications before sending: their next request is on the critical
  // path, our ACKs are not.
  signal_events();
  // A polling application's thread that made completions returns them first: what it sends
  // in answer leaves with our ACKs in one send at its next post or poll, instead of the ACKs
  // alone (a system call) ahead of the completion it waits for. Its next poll comes within
  // the polling window, else the engine thread sends them: it is awake, or asleep no longer
  // than that window (may_defer).
  const bool defer = on_app_thread && threaded_ && pc_.wcs_made() != wcs_before && !pc_.tx_queue().empty() &&
                     !tx_deferred_ && may_defer(now);
  tx_deferred_ = defer;
  if (!defer) {
    transmit(pc_, link_, now);
    gathered_.store(false, std::memory_order_relaxed);
  }
  bool more = pc_.has_work() || defer || !pc_.frames_out().empty();
  more_.store(more, std::memory_order_relaxed);
  passes_.store(passes_.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // only under mu_
  return did || more;
}

void Engine::run() {
  uint64_t idle_since = monotonic_ns();
  uint32_t busy_tries = 0;  // tries in a row that found the lock taken
  while (running_.load(std::memory_order_relaxed)) {
    bool did = false;
    uint64_t now, deadline;
    // A mutex does not queue: released and taken again at once, it would starve a control
    // call for as long as traffic lasts. Step aside until the waiter has it.
    while (control_waiting_.load(std::memory_order_acquire)) sched_yield();
    {
      // A polling application's thread holds the lock for short passes of its own. Waiting for
      // it in the kernel would make that thread pay a futex wake at each unlock, so step aside
      // instead, and wait for the lock only if it stays taken (a control operation).
      std::unique_lock g(mu_, std::try_to_lock);
      if (!g.owns_lock()) {
        if (++busy_tries < kLockTriesBeforeWait) {
          sched_yield();
          continue;
        }
        g.lock();
      }
      busy_tries = 0;
      now = monotonic_ns();
      did = pass(now);
      deadline = sleep_plan_ = std::min(pc_.next_deadline(), link_.next_deadline());
    }
    if (did) {
      idle_since = now;
      continue;
    }
    const uint64_t app_until = app_polling_until_.load(std::memory_order_relaxed);
    const bool app_polls = app_until > now;
    if (!app_polls && now - idle_since < spin_ns_ && deadline > now) {
      // Spinning, but a runnable application thread (just woken by a completion) gets this
      // core first: on a small machine it is the next step of the critical path.
      sched_yield();
      continue;
    }
    if (deadline <= now) continue;
    sleeping_.store(true, std::memory_order_seq_cst);
    if (pc_.has_doorbells()) {
      sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    if (!app_polls) {
      bool may_sleep;
      {
        std::lock_guard g(mu_);
        may_sleep = link_.prepare_sleep();
      }
      if (!may_sleep) {
        sleeping_.store(false, std::memory_order_relaxed);
        continue;
      }
    }
    // A polling application receives for itself: sleep until a timer, until it stops, or
    // until what its polls leave out (the wire, beside same-host rings) has packets.
    const uint64_t until = app_polls ? std::min(deadline, app_until) : deadline;
    timespec ts{}, *tsp = nullptr;
    if (until != UINT64_MAX) {
      uint64_t d = until - now;
      ts.tv_sec = time_t(d / 1'000'000'000);
      ts.tv_nsec = long(d % 1'000'000'000);
      tsp = &ts;
    }
    epoll_event evs[2];
    sleep_bounded_.store(app_polls, std::memory_order_seq_cst);
    epoll_pwait2(app_polls ? epoll_wake_fd_ : epoll_fd_, evs, 2, tsp, nullptr);
    sleeping_.store(false, std::memory_order_seq_cst);
    sleep_bounded_.store(false, std::memory_order_seq_cst);
    if (!app_polls) {
      std::lock_guard g(mu_);
      link_.woke();
    }
    uint64_t v;
    (void)!read(wake_fd_, &v, sizeof v);
    idle_since = monotonic_ns();
  }
}

}  // namespace uroce::engine

#include "engine/engine.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/clock.hpp"

namespace uroce::engine {

Engine::Engine(transport::ProtocolCore& nic, link::Link& link, uint64_t spin_ns)
    : nic_(nic), link_(link), spin_ns_(spin_ns) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  async_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  if (link_.rx_fd() >= 0) {
    ev.data.fd = link_.rx_fd();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, link_.rx_fd(), &ev);
  }
  nic_.set_waker([this] { wake(); });
}

Engine::~Engine() {
  stop();
  nic_.set_waker(nullptr);
  close(wake_fd_);
  close(async_fd_);
  close(epoll_fd_);
}

void Engine::start() {
  {
    std::lock_guard g(mu_);  // events raised before the engine ran (PORT_ACTIVE)
    if (nic_.take_async_signal()) {
      uint64_t one = 1;
      (void)!write(async_fd_, &one, sizeof one);
    }
  }
  if (running_.exchange(true)) return;
  thread_ = std::thread([this] { run(); });
}

void Engine::stop() {
  if (!running_.exchange(false)) return;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
}

void Engine::flush(uint64_t timeout_ns) {
  if (!running_.load()) return;
  const uint64_t end = monotonic_ns() + timeout_ns;
  const uint64_t want = passes() + 2;
  while (passes() < want && monotonic_ns() < end) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    sched_yield();
  }
}

std::unique_lock<std::mutex> Engine::control_lock() {
  control_waiting_.fetch_add(1, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> g(mu_);
  control_waiting_.fetch_sub(1, std::memory_order_release);
  return g;
}

void Engine::wake() {
  // Pairs with the seq_cst store of sleeping_ and the doorbell re-check in run().
  if (sleeping_.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

void Engine::run() {
  uint64_t idle_since = monotonic_ns();
  while (running_.load(std::memory_order_relaxed)) {
    bool did = false;
    uint64_t now, deadline;
    // A mutex does not queue: released and taken again at once, it would starve a control
    // call for as long as traffic lasts. Step aside until the waiter has it.
    while (control_waiting_.load(std::memory_order_acquire)) sched_yield();
    {
      std::lock_guard g(mu_);
      now = monotonic_ns();
      did |= link_.poll_rx(sink_, now, 256) > 0;
      did |= nic_.progress(now);
      // Wake waiting applications before sending: their next request is on the critical
      // path, our ACKs are not.
      for (core::Cq* cq : nic_.cq_events()) {
        uint64_t one = 1;
        if (cq->event_fd >= 0) (void)!write(cq->event_fd, &one, sizeof one);
      }
      nic_.cq_events().clear();
      if (nic_.take_async_signal()) {
        uint64_t one = 1;
        (void)!write(async_fd_, &one, sizeof one);
      }
      transmit(nic_, link_, now);
      did |= nic_.has_work();
      deadline = nic_.next_deadline();
      passes_.fetch_add(1, std::memory_order_release);
    }
    if (did) {
      idle_since = now;
      continue;
    }
    if (now - idle_since < spin_ns_ && deadline > now) {
      // Spinning, but a runnable application thread (just woken by a completion) gets this
      // core first: on a small machine it is the next step of the critical path.
      sched_yield();
      continue;
    }
    if (deadline <= now) continue;
    sleeping_.store(true, std::memory_order_seq_cst);
    if (nic_.has_doorbells()) {
      sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    timespec ts{}, *tsp = nullptr;
    if (deadline != UINT64_MAX) {
      uint64_t d = deadline - now;
      ts.tv_sec = time_t(d / 1'000'000'000);
      ts.tv_nsec = long(d % 1'000'000'000);
      tsp = &ts;
    }
    epoll_event evs[2];
    epoll_pwait2(epoll_fd_, evs, 2, tsp, nullptr);
    sleeping_.store(false, std::memory_order_seq_cst);
    uint64_t v;
    (void)!read(wake_fd_, &v, sizeof v);
    idle_since = monotonic_ns();
  }
}

}  // namespace uroce::engine

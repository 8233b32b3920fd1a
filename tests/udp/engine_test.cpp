// The engine thread with a link that always has work: control calls still get the lock
// between two passes instead of waiting for the load to end, and a lock held for long does
// not keep the engine thread spinning.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/clock.hpp"
#include "engine/engine.hpp"

using namespace uroce;

namespace {

// Every pass receives "a packet" that takes 100 us to process, forever.
class BusyLink final : public link::Link {
 public:
  std::vector<Gid> gids() const override { return {Gid::from_ipv4(0x7f000001)}; }
  uint16_t src_port_for(uint32_t) const override { return 0xc000; }
  void send(std::span<wire::PacketBuf* const>, uint64_t) override {}
  int poll_rx(link::PacketSink&, uint64_t now, int) override {
    while (engine::monotonic_ns() - now < 100'000) {
    }
    return 1;
  }
};

uint64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// Times this thread was descheduled against its will (it did not block or yield).
long involuntary_switches() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw;
}

}  // namespace

// The engine thread steps aside (yields) while someone else holds the lock for a pass; when the
// lock stays taken it must wait for it asleep, not spin for as long as it is held.
TEST(Engine, ALockHeldForLongIsWaitedForAsleep) {
  transport::ProtocolCore pc({});
  BusyLink link;
  engine::Engine e(pc, link, 0);
  e.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (e.passes() < 10 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_GE(e.passes(), 10u);
  auto g = e.control_lock();
  const uint64_t passes = e.passes();
  const uint64_t cpu0 = process_cpu_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // holds the lock, using no CPU
  const uint64_t engine_cpu = process_cpu_ns() - cpu0;
  EXPECT_EQ(e.passes(), passes);
  g.unlock();
  const uint64_t after = e.passes();
  while (e.passes() < after + 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  EXPECT_GE(e.passes(), after + 2) << "the engine thread runs again once the lock is free";
  e.stop();
  // A thread that spun on the lock would have used most of the 300 ms.
  EXPECT_LT(engine_cpu, 60'000'000u) << "engine thread used " << engine_cpu / 1000 << " us of CPU";
}

// Counts the passes that end between asking for the lock and holding it. A sample during which
// the asking thread was preempted (the count then measures the scheduler, not the engine) is
// set aside; the check needs most samples clean.
TEST(Engine, ControlCallsWaitAtMostAPassUnderLoad) {
  transport::ProtocolCore pc({});
  BusyLink link;
  engine::Engine e(pc, link, 0);
  e.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (e.passes() < 10 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_GE(e.passes(), 10u);
  uint64_t worst = 0;
  int clean = 0, preempted = 0;
  for (int i = 0; i < 2000 && clean < 200 && std::chrono::steady_clock::now() < give_up; ++i) {
    const long switches = involuntary_switches();
    uint64_t before = e.passes();
    auto g = e.control_lock();
    const uint64_t waited = e.passes() - before;
    g.unlock();
    if (involuntary_switches() == switches) {
      worst = std::max(worst, waited);
      ++clean;
    } else {
      ++preempted;
    }
    // Let the engine run a pass or two between calls.
    for (uint64_t p = e.passes(); e.passes() < p + 2 && std::chrono::steady_clock::now() < give_up;)
      std::this_thread::yield();
  }
  e.stop();
  ASSERT_GE(clean, 100) << preempted << " samples preempted";
  // The pass under way, and one that began just before the call asked.
  EXPECT_LE(worst, 2u) << "over " << clean << " samples (" << preempted << " preempted, set aside)";
}

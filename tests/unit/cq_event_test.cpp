// Completion events: an application that arms its CQ and then polls it once more (the verbs
// idiom before it blocks) either finds the completion pushed meanwhile or gets its event. Two
// threads race exactly that, many times; a lost event leaves the consumer waiting, which the
// bounded wait turns into a failure. The spinning threads step aside now and then, so that on
// a loaded machine with two cores they do not take a timeslice per round.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "verbs/cq.hpp"

using namespace uroce;

namespace {
// A spin that yields every 64 tries.
void relax(unsigned& spins) {
  if (++spins % 64 == 0) std::this_thread::yield();
}
}  // namespace

TEST(CqEvent, ArmThenPollNeverMissesAConcurrentCompletion) {
  constexpr int kRounds = 200000, kMinRounds = 20000;
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::seconds(20);
  verbs::Cq cq(1, 16);
  std::atomic<int> consumed{0};  // rounds the application finished
  std::atomic<int> events{0};    // events raised (the engine writes the CQ's eventfd)
  std::atomic<bool> stop{false};
  std::thread engine([&] {
    for (int i = 0; i < kRounds && !stop.load(); ++i) {
      for (unsigned spins = 0; consumed.load(std::memory_order_acquire) != i && !stop.load();) relax(spins);
      Wc wc;
      wc.wr_id = uint64_t(i);
      cq.push(wc);
      if (cq.take_event_for(wc)) events.fetch_add(1, std::memory_order_release);
    }
  });
  int lost = -1, rounds = 0;
  for (int i = 0; i < kRounds && lost < 0 && (i % 1024 || Clock::now() < end); ++i) {
    Wc out[1];
    for (;;) {  // the idiom: poll; arm; poll again; then sleep until an event
      if (cq.poll(out) == 1) break;
      int before = events.load(std::memory_order_acquire);
      cq.arm(verbs::CqArm::Next);
      if (cq.poll(out) == 1) break;
      auto until = Clock::now() + std::chrono::seconds(30);
      for (unsigned spins = 0; events.load(std::memory_order_acquire) == before && Clock::now() < until;) relax(spins);
      if (events.load(std::memory_order_acquire) == before) {
        lost = i;
        break;
      }
    }
    if (lost >= 0) break;
    ASSERT_EQ(out[0].wr_id, uint64_t(i));
    consumed.store(i + 1, std::memory_order_release);
    rounds = i + 1;
  }
  stop.store(true);
  engine.join();
  EXPECT_GE(rounds, lost < 0 ? kMinRounds : 0) << "rounds in 20 s";
  EXPECT_EQ(lost, -1) << "round " << lost << ": armed, polled empty, and the completion raised no event";
}

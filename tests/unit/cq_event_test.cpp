// Completion events: an application that arms its CQ and then polls it once more (the verbs
// idiom before it blocks) either finds the completion pushed meanwhile or gets its event. Two
// threads race exactly that, many times; a lost event leaves the consumer waiting, which the
// bounded wait turns into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "verbs/cq.hpp"

using namespace uroce;

TEST(CqEvent, ArmThenPollNeverMissesAConcurrentCompletion) {
  constexpr int kRounds = 200000;
  using Clock = std::chrono::steady_clock;
  verbs::Cq cq(1, 16);
  std::atomic<int> consumed{0};  // rounds the application finished
  std::atomic<int> events{0};    // events raised (the engine writes the CQ's eventfd)
  std::atomic<bool> stop{false};
  std::thread engine([&] {
    for (int i = 0; i < kRounds && !stop.load(); ++i) {
      while (consumed.load(std::memory_order_acquire) != i && !stop.load()) {
      }
      Wc wc;
      wc.wr_id = uint64_t(i);
      cq.push(wc);
      if (cq.take_event_for(wc)) events.fetch_add(1, std::memory_order_release);
    }
  });
  int lost = -1;
  for (int i = 0; i < kRounds && lost < 0; ++i) {
    Wc out[1];
    for (;;) {  // the idiom: poll; arm; poll again; then sleep until an event
      if (cq.poll(out) == 1) break;
      int before = events.load(std::memory_order_acquire);
      cq.arm(verbs::CqArm::Next);
      if (cq.poll(out) == 1) break;
      auto until = Clock::now() + std::chrono::seconds(5);
      while (events.load(std::memory_order_acquire) == before && Clock::now() < until) {
      }
      if (events.load(std::memory_order_acquire) == before) {
        lost = i;
        break;
      }
    }
    if (lost >= 0) break;
    ASSERT_EQ(out[0].wr_id, uint64_t(i));
    consumed.store(i + 1, std::memory_order_release);
  }
  stop.store(true);
  engine.join();
  EXPECT_EQ(lost, -1) << "round " << lost << ": armed, polled empty, and the completion raised no event";
}

// Run to completion: posting and polling do the device's work on the application's thread.
// Two devices without progress threads, driven by one test thread, must move every byte of
// SENDs, WRITEs and READs: nobody else runs their protocol cores.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "../common/api_side.hpp"
#include "../common/seed.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

struct Side : test::ApiSide {
  explicit Side(bool thread, bool shm = true) : ApiSide(options(thread, shm)) {}
  static DeviceOptions options(bool thread, bool shm) {
    DeviceOptions o;
    o.progress_thread = thread;
    o.same_host_shm = shm;
    return o;
  }
};

// Polls both CQs from this thread until `want` completions arrived on `on`, at most 5 s.
std::vector<Wc> until(Side& on, Side& other, size_t want) {
  std::vector<Wc> got;
  Wc wc[16];
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.size() < want && std::chrono::steady_clock::now() < end) {
    int n = on.cq->poll(wc);
    got.insert(got.end(), wc, wc + n);
    EXPECT_EQ(other.cq->poll({}), 0);  // the other side's part runs on this thread too
  }
  return got;
}

}  // namespace

class RunToCompletionOn : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Link, RunToCompletionOn, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "SharedMemory" : "Udp"; });

TEST_P(RunToCompletionOn, TwoDevicesWithoutThreadsMoveEveryByte) {
  uint64_t seed = test::test_seed(11);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Side a(false, GetParam()), b(false, GetParam());
  ASSERT_TRUE(a.qp->connect(b.endpoint(200), 100));
  ASSERT_TRUE(b.qp->connect(a.endpoint(100), 200));
  for (auto& x : a.buf) x = uint8_t(rng());

  // SENDs of growing size (many packets each at the largest), each checked byte for byte.
  for (uint32_t i = 0, len = 1; len <= 300'000; ++i, len = len * 3 + 7) {
    Sge r = b.mr->sge(0, len);
    ASSERT_TRUE(b.qp->post_recv({i, {&r, 1}}));
    Sge s = a.mr->sge(4096, len);
    ASSERT_TRUE(a.qp->post_send({i, WrOpcode::Send, kSendSignaled, {&s, 1}}));
    auto rx = until(b, a, 1);
    ASSERT_EQ(rx.size(), 1u) << "SEND " << len;
    EXPECT_EQ(rx[0].status, WcStatus::Success);
    EXPECT_EQ(rx[0].byte_len, len);
    ASSERT_EQ(std::memcmp(b.buf.data(), a.buf.data() + 4096, len), 0) << "SEND " << len;
    auto tx = until(a, b, 1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].wr_id, i);
    EXPECT_EQ(tx[0].status, WcStatus::Success);
  }

  // A 512 KiB WRITE into b, then a READ of it back into another part of a.
  Sge w = a.mr->sge(0, 512 << 10);
  SendWr wr{7, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.buf.data()) + 4096;
  wr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(wr));
  auto wc = until(a, b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.buf.data() + 4096, a.buf.data(), 512 << 10), 0);

  Sge rd = a.mr->sge(600 << 10, 256 << 10);
  SendWr rwr{8, WrOpcode::RdmaRead, kSendSignaled, {&rd, 1}};
  rwr.remote_addr = uint64_t(b.buf.data()) + 4096 + 1000;
  rwr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(rwr));
  wc = until(a, b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, 256u << 10);
  ASSERT_EQ(std::memcmp(a.buf.data() + (600 << 10), a.buf.data() + 1000, 256 << 10), 0);

  EXPECT_EQ(a.counter("rx_bad_icrc"), 0u);
  EXPECT_EQ(a.counter("rx_malformed"), 0u);
  EXPECT_EQ(a.counter("shm_tx_packets") == a.counter("tx_packets"), GetParam());
}

// Without a progress thread, wait() polls: it returns what arrives, and 0 after its timeout.
TEST(RunToCompletion, WaitWithoutAThreadPolls) {
  Side a(false), b(true);
  ASSERT_TRUE(a.qp->connect(b.endpoint(2), 1));
  ASSERT_TRUE(b.qp->connect(a.endpoint(1), 2));
  Wc wc[4];
  auto r = a.cq->wait(wc, 20);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 0);
  Sge rx = a.mr->sge(0, 64);
  ASSERT_TRUE(a.qp->post_recv({5, {&rx, 1}}));
  std::memcpy(b.buf.data(), "sixty-four", 10);
  Sge s = b.mr->sge(0, 64);
  ASSERT_TRUE(b.qp->post_send({6, WrOpcode::Send, 0, {&s, 1}}));
  r = a.cq->wait(wc, 5000);
  ASSERT_TRUE(r);
  ASSERT_EQ(*r, 1);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(std::memcmp(a.buf.data(), "sixty-four", 10), 0);
}

// A post made while the application polls, after another post, is left to its next poll; if
// that poll never comes (the program turns to another device), the engine thread must still
// send it, also when it was asleep.
TEST_P(RunToCompletionOn, APostLeftForAPollThatNeverComesIsSent) {
  Side a(true, GetParam()), b(true, GetParam());
  ASSERT_TRUE(a.qp->connect(b.endpoint(2), 1));
  ASSERT_TRUE(b.qp->connect(a.endpoint(1), 2));
  Sge r = b.mr->sge(0, 64);
  ASSERT_TRUE(b.qp->post_recv({9, {&r, 1}}));
  usleep(20'000);  // both engines idle: asleep, no timers
  Wc wc[4];
  Sge r2 = b.mr->sge(64, 64);
  ASSERT_TRUE(b.qp->post_recv({10, {&r2, 1}}));
  for (int i = 0; i < 8; ++i) ASSERT_EQ(a.cq->poll(wc), 0);  // a's application polls...
  std::memcpy(a.buf.data(), "sent-at-once", 12);
  std::memcpy(a.buf.data() + 64, "left-for-a-poll", 15);
  Sge s = a.mr->sge(0, 64), s2 = a.mr->sge(64, 64);
  ASSERT_TRUE(a.qp->post_send({10, WrOpcode::Send, 0, {&s, 1}}));   // ...posts twice (the second
  ASSERT_TRUE(a.qp->post_send({11, WrOpcode::Send, 0, {&s2, 1}}));  // waits for a poll), turns away
  std::vector<Wc> got;
  for (int i = 0; i < 2000 && got.size() < 2; ++i) {  // at most 20 s
    auto n = b.cq->wait(wc, 10);
    ASSERT_TRUE(n);
    got.insert(got.end(), wc, wc + *n);
  }
  ASSERT_EQ(got.size(), 2u) << "a SEND never left a";
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[1].wr_id, 10u);
  EXPECT_EQ(std::memcmp(b.buf.data(), "sent-at-once", 12), 0);
  EXPECT_EQ(std::memcmp(b.buf.data() + 64, "left-for-a-poll", 15), 0);
}

// A post sent on the application's thread arms its retransmission timer there. If nothing
// answers, that timer is the engine thread's to run once the application blocks, also when the
// engine thread was asleep with no timer at all: the post must not wait for other traffic.
TEST(RunToCompletion, ATimerArmedByAPostWakesASleepingEngine) {
  Side a(true), b(true);
  ConnectOptions o;
  o.timeout = 8;  // ~1 ms
  o.retry_cnt = 2;
  ASSERT_TRUE(a.qp->connect(b.endpoint(2), 1, o));  // b's QP stays in RESET: it answers nothing
  usleep(20'000);  // both engines idle: asleep, no timers
  Sge s = a.mr->sge(0, 64);
  SendWr w{5, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(b.buf.data());
  w.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(w));  // sent on this thread: over shared memory, no system call
  Wc wc[4];
  auto n = a.cq->wait(wc, 5000);
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 1) << "the retransmission timer never ran";
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].status, WcStatus::RetryExcErr);
  EXPECT_EQ(a.counter("retransmit_timeouts"), 3u);  // the first try and retry_cnt more
  EXPECT_EQ(a.counter("retransmitted_packets"), 2u);
  EXPECT_EQ(a.counter("shm_tx_packets"), 3u);
}

// On shared memory the first post after an empty poll (a reply, a request after a wait) is
// sent before post_send returns: someone is waiting for it. (No engine thread here: nobody
// else could send it.)
TEST(RunToCompletion, TheFirstPostAfterAnEmptyPollIsSentAtOnce) {
  Side a(false), b(false);
  ASSERT_TRUE(a.qp->connect(b.endpoint(2), 1));
  ASSERT_TRUE(b.qp->connect(a.endpoint(1), 2));
  Sge r = b.mr->sge(0, 64);
  ASSERT_TRUE(b.qp->post_recv({3, {&r, 1}}));
  Wc wc[4];
  for (int i = 0; i < 8; ++i) ASSERT_EQ(a.cq->poll(wc), 0);
  const uint64_t before = a.counter("tx_packets");
  std::memcpy(a.buf.data(), "at-once", 7);
  Sge s = a.mr->sge(0, 64);
  ASSERT_TRUE(a.qp->post_send({4, WrOpcode::Send, 0, {&s, 1}}));
  EXPECT_EQ(a.counter("tx_packets"), before + 1);
  auto rx = until(b, a, 1);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 3u);
  EXPECT_EQ(std::memcmp(b.buf.data(), "at-once", 7), 0);
}

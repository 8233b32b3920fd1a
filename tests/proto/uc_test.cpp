// Unreliable Connected QPs: no ACKs; a message that loses a packet, finds no receive or breaks a
// rule is dropped silently; everything that is delivered is exact.
#include <gtest/gtest.h>

#include <random>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {
PairOptions uc(uint64_t seed = 1) {
  PairOptions o;
  o.type = QpType::UC;
  o.seed = seed;
  return o;
}
}  // namespace

TEST(Uc, SendAndWriteWithoutAcks) {
  CorePair t(uc());
  std::vector<uint8_t> src(10000), dst(20000, 0), wr(20000, 0);
  fill_pattern(src.data(), src.size(), 5);
  auto sm = t.reg(t.a, src.data(), src.size());
  auto dm = t.reg(t.b, dst.data(), dst.size());
  auto wm = t.reg(t.b, wr.data(), wr.size(), kAccessLocalWrite | kAccessRemoteWrite);
  Sge r{uint64_t(dst.data()), 20000, dm.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  ASSERT_TRUE(t.recv(t.b, {2, {&r, 1}}));
  Sge s{uint64_t(src.data()), 10000, sm.lkey};
  ASSERT_TRUE(t.send(t.a, {10, WrOpcode::SendWithImm, kSendSignaled, {&s, 1}, 77}));
  SendWr w{11, WrOpcode::RdmaWriteWithImm, kSendSignaled, {&s, 1}, 78, uint64_t(wr.data() + 5000), wm.rkey};
  ASSERT_TRUE(t.send(t.a, w));
  std::vector<Wc> sw, rw;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, sw));
  ASSERT_TRUE(t.wait_wc(t.b.rcq, 2, rw));
  EXPECT_EQ(sw[0].status, WcStatus::Success);
  EXPECT_EQ(sw[1].wr_id, 11u);
  EXPECT_EQ(rw[0].wr_id, 1u);
  EXPECT_EQ(rw[0].byte_len, 10000u);
  EXPECT_EQ(rw[0].imm_data, 77u);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  EXPECT_EQ(rw[1].opcode, WcOpcode::RecvRdmaWithImm);
  EXPECT_EQ(rw[1].imm_data, 78u);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), wr.begin() + 5000));
  EXPECT_EQ(t.b.pc->counters().tx_packets, 0u);  // the responder never answers
  EXPECT_EQ(t.a.pc->counters().tx_packets, 20u);  // 2 messages x 10 packets of 1 KiB
}

TEST(Uc, NoReceiveDropsTheMessageOnly) {
  CorePair t(uc());
  std::vector<uint8_t> src(3000, 1), dst(3000, 0);
  auto sm = t.reg(t.a, src.data(), src.size());
  auto dm = t.reg(t.b, dst.data(), dst.size());
  Sge s{uint64_t(src.data()), 3000, sm.lkey};
  ASSERT_TRUE(t.send(t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);  // the requester cannot know
  t.sim.run_until([] { return false; }, 1'000'000);
  EXPECT_EQ(t.b.pc->counters().rx_uc_dropped, 1u);
  EXPECT_EQ(t.b.rcq->pending(), 0u);
  Sge r{uint64_t(dst.data()), 3000, dm.lkey};
  ASSERT_TRUE(t.recv(t.b, {2, {&r, 1}}));
  std::fill(src.begin(), src.end(), 2);
  ASSERT_TRUE(t.send(t.a, {3, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc rw = t.one_wc(t.b.rcq);
  EXPECT_EQ(rw.status, WcStatus::Success);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(t.b.qp->state(), QpState::Rts);
}

TEST(Uc, ReceiveTooSmallCompletesInErrorAndTheQpGoesOn) {
  CorePair t(uc());
  std::vector<uint8_t> src(3000, 9), dst(4000, 0);
  auto sm = t.reg(t.a, src.data(), src.size());
  auto dm = t.reg(t.b, dst.data(), dst.size());
  Sge small{uint64_t(dst.data()), 1000, dm.lkey}, big{uint64_t(dst.data()), 4000, dm.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&small, 1}}));
  ASSERT_TRUE(t.recv(t.b, {2, {&big, 1}}));
  Sge s{uint64_t(src.data()), 3000, sm.lkey};
  ASSERT_TRUE(t.send(t.a, {1, WrOpcode::Send, 0, {&s, 1}}));
  ASSERT_TRUE(t.send(t.a, {2, WrOpcode::Send, 0, {&s, 1}}));
  std::vector<Wc> rw;
  ASSERT_TRUE(t.wait_wc(t.b.rcq, 2, rw));
  EXPECT_EQ(rw[0].wr_id, 1u);
  EXPECT_EQ(rw[0].status, WcStatus::LocLenErr);
  EXPECT_EQ(rw[1].wr_id, 2u);
  EXPECT_EQ(rw[1].status, WcStatus::Success);
  EXPECT_EQ(rw[1].byte_len, 3000u);
  EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  for (size_t i = 1000; i < 3000; ++i) ASSERT_EQ(dst[i], 9) << i;  // the second message filled it
}

TEST(Uc, OnlySendAndWriteArePosted) {
  CorePair t(uc());
  uint64_t x = 0;
  auto m = t.reg(t.a, &x, 8);
  Sge s{uint64_t(&x), 8, m.lkey};
  for (WrOpcode op : {WrOpcode::RdmaRead, WrOpcode::AtomicFetchAdd, WrOpcode::AtomicCmpSwp}) {
    auto st = t.send(t.a, {1, op, 0, {&s, 1}});
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, EINVAL);
  }
}

// Messages of 1..8 packets over a link that drops, duplicates, reorders and corrupts.
TEST(Uc, LossyLinkDeliversExactMessagesOrNone) {
  const uint64_t seed = test_seed(77);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  PairOptions o = uc(seed);
  o.faults = {.drop = 0.03, .duplicate = 0.01, .reorder = 0.02, .corrupt = 0.002};
  o.cap = QpCap{256, 256, 1, 1, 0};
  CorePair t(o);
  constexpr int kMsgs = 3000, kSlot = 8192;
  std::vector<uint8_t> src(size_t(kSlot) * 16), dst(size_t(kSlot) * 256, 0), expect(kSlot);
  auto sm = t.reg(t.a, src.data(), src.size());
  auto dm = t.reg(t.b, dst.data(), dst.size());
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> len(kMsgs);
  for (int i = 0; i < 256; ++i) {
    Sge r{uint64_t(dst.data() + size_t(i) * kSlot), kSlot, dm.lkey};
    ASSERT_TRUE(t.recv(t.b, {uint64_t(i), {&r, 1}}));
  }
  int delivered = 0, sent_done = 0, last_id = -1;
  for (int i = 0; i < kMsgs; ++i) {
    len[size_t(i)] = uint32_t(rng() % kSlot) + 1;
    uint8_t* p = src.data() + size_t(i % 16) * kSlot;
    fill_pattern(p, len[size_t(i)], uint64_t(i));
    Sge s{uint64_t(p), len[size_t(i)], sm.lkey};
    ASSERT_TRUE(t.send(t.a, {uint64_t(i), WrOpcode::SendWithImm, kSendSignaled, {&s, 1}, uint32_t(i)}));
    std::vector<Wc> w;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 1, w));
    ASSERT_EQ(w[0].status, WcStatus::Success);
    ++sent_done;
    t.sim.run_until([] { return false; }, 200'000);  // let stragglers land
    Wc rw[8];
    int k;
    while ((k = t.b.rcq->poll(rw)) > 0) {
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(rw[j].status, WcStatus::Success);
        int id = int(rw[j].imm_data);
        ASSERT_GT(id, last_id) << "delivered twice or out of order";
        last_id = id;
        ASSERT_EQ(rw[j].byte_len, len[size_t(id)]);
        fill_pattern(expect.data(), len[size_t(id)], uint64_t(id));
        ASSERT_EQ(0, std::memcmp(expect.data(), dst.data() + rw[j].wr_id % 256 * kSlot, len[size_t(id)])) << "message " << id;
        ++delivered;
        Sge r{uint64_t(dst.data() + rw[j].wr_id % 256 * kSlot), kSlot, dm.lkey};
        ASSERT_TRUE(t.recv(t.b, {rw[j].wr_id + 256, {&r, 1}}));
      }
    }
  }
  EXPECT_EQ(sent_done, kMsgs);
  EXPECT_GT(delivered, kMsgs * 7 / 10);
  EXPECT_LT(delivered, kMsgs);
  EXPECT_GT(t.b.pc->counters().rx_uc_dropped, 0u);
  EXPECT_EQ(t.b.pc->counters().rx_bad_icrc, t.sim.link().stats().corrupted);
  EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  std::printf("UC: %d of %d messages delivered, %llu dropped\n", delivered, kMsgs,
              (unsigned long long)t.b.pc->counters().rx_uc_dropped);
}

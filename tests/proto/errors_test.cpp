// Error paths: each must end in the exact verbs completion status, touch no memory it may not,
// and (for RC) move the QP to ERR and flush what is left.
#include <gtest/gtest.h>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

struct Fixture {
  explicit Fixture(PairOptions o = {}) : t(o) {
    src.assign(8192, 0x5a);
    dst.assign(8192, 0);
    smr = t.reg(t.a, src.data(), src.size());
  }
  SendWr write_to(uint64_t raddr, uint32_t rkey, uint32_t len) {
    sge = {uint64_t(src.data()), len, smr.lkey};
    SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&sge, 1}};
    w.remote_addr = raddr;
    w.rkey = rkey;
    return w;
  }
  CorePair t;
  std::vector<uint8_t> src, dst;
  test::CorePair::Keys smr;
  Sge sge;
};

// After a fatal error every later WQE completes with WR_FLUSH_ERR, and the QP is in ERR.
void expect_flush_after(Fixture& f, uint64_t id) {
  Sge s{uint64_t(f.src.data()), 8, f.smr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, {id, WrOpcode::Send, 0, {&s, 1}}));  // unsignaled: flushed anyway
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.wr_id, id);
  EXPECT_EQ(w.status, WcStatus::WrFlushErr);
  EXPECT_EQ(f.t.a.qp->state(), QpState::Err);
}

}  // namespace

TEST(RcErrors, BadRkeyIsRemoteAccessError) {
  Fixture f;
  auto dmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  ASSERT_TRUE(f.t.send(f.t.a, f.write_to(uint64_t(f.dst.data()), dmr.rkey ^ 0x10001, 100)));
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.dst, std::vector<uint8_t>(8192, 0));
  EXPECT_EQ(f.t.b.pc->counters().tx_naks_fatal, 1u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
  expect_flush_after(f, 2);
}

TEST(RcErrors, OutOfBoundsRemoteWriteAndRead) {
  Fixture f;
  auto dmr = f.t.reg(f.t.b, f.dst.data() + 1024, 4096);
  // One byte past the end of the region.
  ASSERT_TRUE(f.t.send(f.t.a, f.write_to(uint64_t(f.dst.data()) + 1024 + 4096 - 99, dmr.rkey, 100)));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.dst, std::vector<uint8_t>(8192, 0));

  Fixture g;
  auto rmr = g.t.reg(g.t.b, g.dst.data(), 4096, kAccessRemoteRead);
  auto lmr = g.t.reg(g.t.a, g.src.data(), g.src.size());
  Sge s{uint64_t(g.src.data()), 100, lmr.lkey};
  SendWr r{3, WrOpcode::RdmaRead, kSendSignaled, {&s, 1}};
  r.remote_addr = uint64_t(g.dst.data()) - 1;  // one byte before the start
  r.rkey = rmr.rkey;
  ASSERT_TRUE(g.t.send(g.t.a, r));
  EXPECT_EQ(g.t.one_wc(g.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(g.src, std::vector<uint8_t>(8192, 0x5a));
}

TEST(RcErrors, MissingAccessFlagIsRemoteAccessError) {
  Fixture f;
  auto ro = f.t.reg(f.t.b, f.dst.data(), f.dst.size(), kAccessRemoteRead);  // no REMOTE_WRITE
  ASSERT_TRUE(f.t.send(f.t.a, f.write_to(uint64_t(f.dst.data()), ro.rkey, 64)));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.dst, std::vector<uint8_t>(8192, 0));

  Fixture g;
  alignas(8) uint64_t target = 5, res = 0;
  auto wo = g.t.reg(g.t.b, &target, 8, kAccessLocalWrite | kAccessRemoteWrite);  // no REMOTE_ATOMIC
  auto lm = g.t.reg(g.t.a, &res, 8);
  Sge s{uint64_t(&res), 8, lm.lkey};
  SendWr a{4, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}};
  a.remote_addr = uint64_t(&target);
  a.rkey = wo.rkey;
  a.compare_add = 1;
  ASSERT_TRUE(g.t.send(g.t.a, a));
  EXPECT_EQ(g.t.one_wc(g.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(target, 5u);
}

TEST(RcErrors, DeregisteredMrIsRevokedAtOnce) {
  Fixture f;
  auto dmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  ASSERT_TRUE(f.t.send(f.t.a, f.write_to(uint64_t(f.dst.data()), dmr.rkey, 64)));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::Success);
  ASSERT_TRUE(f.t.b.pc->dereg_mr(verbs::Lkey(dmr.lkey)));
  std::fill(f.dst.begin(), f.dst.end(), 0);
  ASSERT_TRUE(f.t.send(f.t.a, f.write_to(uint64_t(f.dst.data()), dmr.rkey, 64)));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.dst, std::vector<uint8_t>(8192, 0));
}

TEST(RcErrors, BadLkeyIsLocalProtectionError) {
  Fixture f;
  Sge s{uint64_t(f.src.data()), 64, f.smr.lkey + 1};
  ASSERT_TRUE(f.t.send(f.t.a, {7, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.wr_id, 7u);
  EXPECT_EQ(w.status, WcStatus::LocProtErr);
  EXPECT_EQ(f.t.a.pc->counters().tx_packets, 0u);  // nothing left the NIC
  expect_flush_after(f, 8);
  // A READ into a region without LOCAL_WRITE is a local protection error too.
  Fixture g;
  auto ro = g.t.reg(g.t.a, g.dst.data(), 64, 0);
  auto rm = g.t.reg(g.t.b, g.src.data(), 64, kAccessRemoteRead);
  Sge d{uint64_t(g.dst.data()), 64, ro.lkey};
  SendWr r{9, WrOpcode::RdmaRead, kSendSignaled, {&d, 1}};
  r.remote_addr = uint64_t(g.src.data());
  r.rkey = rm.rkey;
  ASSERT_TRUE(g.t.send(g.t.a, r));
  EXPECT_EQ(g.t.one_wc(g.t.a.scq).status, WcStatus::LocProtErr);
}

TEST(RcErrors, NoReceivePostedRnrThenRetryExceeded) {
  PairOptions o;
  o.rnr_retry = 3;
  o.min_rnr_timer = 1;  // 10 us
  Fixture f(o);
  Sge s{uint64_t(f.src.data()), 64, f.smr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.status, WcStatus::RnrRetryExcErr);
  EXPECT_EQ(f.t.b.pc->counters().tx_rnr_naks, 4u);  // the first try and 3 retries
  EXPECT_EQ(f.t.a.pc->counters().rx_rnr_naks, 4u);
  expect_flush_after(f, 2);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);  // an RNR is not an error for the responder
}

TEST(RcErrors, RnrWaitsForTheReceiveThenSucceeds) {
  PairOptions o;
  o.rnr_retry = 7;  // forever
  Fixture f(o);
  Sge s{uint64_t(f.src.data()), 64, f.smr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  std::vector<Wc> none;
  EXPECT_FALSE(f.t.wait_wc(f.t.a.scq, 1, none, 5'000'000));  // 5 ms of RNR NAKs, no completion
  EXPECT_GE(f.t.b.pc->counters().tx_rnr_naks, 10u);
  auto rmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  Sge r{uint64_t(f.dst.data()), 100, rmr.lkey};
  ASSERT_TRUE(f.t.recv(f.t.b, {5, {&r, 1}}));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::Success);
  Wc rw = f.t.one_wc(f.t.b.rcq);
  EXPECT_EQ(rw.byte_len, 64u);
  EXPECT_EQ(f.dst[63], 0x5a);
}

TEST(RcErrors, PeerGoneRetryExceededThenFlush) {
  PairOptions o;
  o.retry_cnt = 2;
  o.timeout = 8;
  Fixture f(o);
  f.t.sim.link().set_faults({.drop = 1.0});  // the peer answers nothing any more
  Sge s{uint64_t(f.src.data()), 64, f.smr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  ASSERT_TRUE(f.t.send(f.t.a, {2, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  std::vector<Wc> w;
  ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, 2, w));
  EXPECT_EQ(w[0].wr_id, 1u);
  EXPECT_EQ(w[0].status, WcStatus::RetryExcErr);
  EXPECT_EQ(w[1].wr_id, 2u);
  EXPECT_EQ(w[1].status, WcStatus::WrFlushErr);
  EXPECT_EQ(f.t.a.pc->counters().retransmit_timeouts, 3u);  // retry_cnt retries, then give up
  EXPECT_EQ(f.t.a.qp->state(), QpState::Err);
}

// Packets the link still holds (a full same-host ring its reader drains) have not left the
// host: their transport timer starts again while that queue moves, and counts retries once it
// stalls (a peer that stopped reading). Every packet is lost here, so only the link's word
// keeps the QP alive.
TEST(RcErrors, PacketsTheLinkHoldsAreNotResentWhileItsQueueMoves) {
  for (bool held : {true, false}) {
    PairOptions o;
    o.retry_cnt = 2;
    o.timeout = 8;
    const uint64_t full = transport::transport_timeout_ns(o.timeout);
    const uint64_t stalls_at = 10'000'000;  // virtual ns: the queue moves until then
    o.config = [held, stalls_at](transport::CoreConfig& c) {
      c.held_moved_at = [held, stalls_at](const Gid&, uint32_t, uint64_t now) -> uint64_t {
        return held ? std::min(now, stalls_at) : 0;
      };
    };
    Fixture f(o);
    f.t.sim.link().set_faults({.drop = 1.0});
    Sge s{uint64_t(f.src.data()), 64, f.smr.lkey};
    ASSERT_TRUE(f.t.send(f.t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
    std::vector<Wc> w;
    EXPECT_EQ(f.t.wait_wc(f.t.a.scq, 1, w, stalls_at - f.t.sim.now() - 1), !held);
    EXPECT_EQ(f.t.a.pc->counters().retransmit_timeouts, held ? 0u : 3u) << "held " << held;
    if (!held) {
      ASSERT_EQ(w.size(), 1u);
      EXPECT_EQ(w[0].status, WcStatus::RetryExcErr);
      continue;
    }
    EXPECT_EQ(f.t.a.pc->counters().tx_packets, 1u);  // sent once, never again
    ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, 1, w, 100 * full));
    EXPECT_EQ(w[0].status, WcStatus::RetryExcErr);
    EXPECT_EQ(f.t.a.pc->counters().retransmit_timeouts, 3u);
    EXPECT_GE(f.t.sim.now(), stalls_at + 3 * full);  // the stalled queue's timeouts counted
    EXPECT_LT(f.t.sim.now(), stalls_at + 5 * full);
  }
}

TEST(RcErrors, ReceiveTooSmallIsLocLenOnResponderRemInvReqOnRequester) {
  Fixture f;
  auto rmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  Sge r{uint64_t(f.dst.data()), 1000, rmr.lkey};
  ASSERT_TRUE(f.t.recv(f.t.b, {5, {&r, 1}}));
  ASSERT_TRUE(f.t.recv(f.t.b, {6, {&r, 1}}));
  Sge s{uint64_t(f.src.data()), 3000, f.smr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, {1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemInvReqErr);
  std::vector<Wc> rw;
  ASSERT_TRUE(f.t.wait_wc(f.t.b.rcq, 2, rw));
  EXPECT_EQ(rw[0].wr_id, 5u);
  EXPECT_EQ(rw[0].status, WcStatus::LocLenErr);
  EXPECT_EQ(rw[1].wr_id, 6u);
  EXPECT_EQ(rw[1].status, WcStatus::WrFlushErr);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
  for (size_t i = 1000; i < f.dst.size(); ++i) ASSERT_EQ(f.dst[i], 0) << i;  // nothing past the SGE
}

TEST(RcErrors, MaxRdAtomicBoundsOutstandingReads) {
  PairOptions o;
  o.max_rd_atomic = 2;
  Fixture f(o);
  auto rm = f.t.reg(f.t.b, f.dst.data(), f.dst.size(), kAccessRemoteRead);
  std::vector<uint8_t> local(8 * 1024);
  auto lm = f.t.reg(f.t.a, local.data(), local.size());
  for (int i = 0; i < 8; ++i) {
    Sge s{uint64_t(local.data() + i * 1024), 1024, lm.lkey};
    SendWr r{uint64_t(i), WrOpcode::RdmaRead, kSendSignaled, {&s, 1}};
    r.remote_addr = uint64_t(f.dst.data());
    r.rkey = rm.rkey;
    ASSERT_TRUE(f.t.send(f.t.a, r));
  }
  uint32_t peak = 0;
  std::vector<Wc> w;
  ASSERT_TRUE(f.t.sim.run_until(
      [&] {
        peak = std::max(peak, f.t.a.qp->req.rd_atomic_out);
        Wc b[8];
        int k = f.t.a.scq->poll(b);
        w.insert(w.end(), b, b + k);
        return w.size() == 8;
      },
      1'000'000'000));
  EXPECT_EQ(peak, 2u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w[i].status, WcStatus::Success);
}

TEST(RcErrors, QpToErrFlushesBothQueues) {
  Fixture f;
  auto rmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  Sge r{uint64_t(f.dst.data()), 100, rmr.lkey};
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(f.t.recv(f.t.b, {i, {&r, 1}}));
  QpAttr a;
  a.qp_state = QpState::Err;
  ASSERT_TRUE(f.t.b.pc->modify_qp(*f.t.b.qp, a, kQpState));
  std::vector<Wc> w;
  ASSERT_TRUE(f.t.wait_wc(f.t.b.rcq, 3, w));
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w[i].wr_id, i);
    EXPECT_EQ(w[i].status, WcStatus::WrFlushErr);
  }
  // Receives posted in ERR are flushed too.
  ASSERT_TRUE(f.t.recv(f.t.b, {9, {&r, 1}}));
  EXPECT_EQ(f.t.one_wc(f.t.b.rcq).status, WcStatus::WrFlushErr);
}

// rnr.pcap's pattern: an RNR NAK for the first SEND, a sequence NAK for those behind it. The
// sequence NAK repeats what the RNR NAK said and must not use up retry_cnt.
TEST(RcErrors, RnrFollowedBySequenceNakDoesNotExhaustRetries) {
  PairOptions o;
  o.retry_cnt = 1;
  o.rnr_retry = 7;
  o.min_rnr_timer = 1;
  Fixture f(o);
  auto rmr = f.t.reg(f.t.b, f.dst.data(), f.dst.size());
  Sge s{uint64_t(f.src.data()), 64, f.smr.lkey};
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(f.t.send(f.t.a, {i, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  std::vector<Wc> w;
  for (uint64_t i = 0; i < 8; ++i) {
    // One receive at a time, each after a few RNR rounds.
    EXPECT_FALSE(f.t.wait_wc(f.t.a.scq, i + 1, w, 50'000)) << "completed without a receive";
    Sge r{uint64_t(f.dst.data() + i * 64), 64, rmr.lkey};
    ASSERT_TRUE(f.t.recv(f.t.b, {i, {&r, 1}}));
    ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, i + 1, w, 1'000'000'000)) << dump_counters(*f.t.a.pc);
  }
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(w[i].wr_id, i);
    EXPECT_EQ(w[i].status, WcStatus::Success);
  }
  EXPECT_GE(f.t.a.pc->counters().rx_rnr_naks, 8u);
  EXPECT_GE(f.t.a.pc->counters().rx_naks_seq, 1u);
  EXPECT_EQ(f.t.a.pc->counters().retransmit_timeouts, 0u);
}

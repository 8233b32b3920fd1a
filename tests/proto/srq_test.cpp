// Shared receive queues and asynchronous events.
#include <gtest/gtest.h>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"
#include "transport/bringup.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

struct SrqSetup {
  SrqSetup() : sim(5, {}) {
    a = &sim.add_core(kIpA);
    b = &sim.add_core(kIpB);
    pa = *a->alloc_pd();
    pb = *b->alloc_pd();
    cqa = *a->create_cq(256);
    cqb = *b->create_cq(256);
    srq = *b->create_srq(pb, 64, 1);
    for (int i = 0; i < 2; ++i) {
      qa[i] = *a->create_qp(pa, QpType::RC, cqa, cqa, QpCap{32, 32, 1, 1, 0}, true);
      qb[i] = *b->create_qp(pb, QpType::RC, cqb, cqb, QpCap{32, 32, 1, 1, 0}, false, srq);
    }
    ConnectOptions o;
    o.timeout = 8;
    for (int i = 0; i < 2; ++i) {
      Endpoint to_b{Gid::from_ipv4(kIpB), qb[i]->qpn().value(), 500, 0, 0, 0}, to_a{Gid::from_ipv4(kIpA), qa[i]->qpn().value(), 100, 0, 0, 0};
      EXPECT_TRUE(transport::connect_rc(*a, *qa[i], to_b, 100, o));
      EXPECT_TRUE(transport::connect_rc(*b, *qb[i], to_a, 500, o));
    }
    src.assign(4096, 0);
    dst.assign(64 * 1024, 0);
    msa = *a->reg_mr(pa, src.data(), src.size(), kAccessLocalWrite);
    mdb = *b->reg_mr(pb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
    while (a->get_async_event()) {
    }
    while (b->get_async_event()) {
    }
  }
  void post_srq(uint64_t first, uint64_t n) {
    for (uint64_t i = first; i < first + n; ++i) {
      Sge s{uint64_t(dst.data() + (i % 64) * 1024), 1024, mdb.lkey.value()};
      RecvWr r{i, {&s, 1}};
      ASSERT_TRUE(b->post_srq_recv(*srq, {&r, 1}));
    }
  }
  void send(int q, uint32_t tag, uint32_t len = 100) {
    std::fill(src.begin(), src.begin() + len, uint8_t(tag));
    Sge s{uint64_t(src.data()), len, msa.lkey.value()};
    SendWr w{tag, WrOpcode::SendWithImm, 0, {&s, 1}, tag};
    ASSERT_TRUE(a->post_send(*qa[q], {&w, 1}));
    std::vector<Wc> got;
    ASSERT_TRUE(wait(cqa, 1, got));  // one at a time: the SRQ order is then known
    ASSERT_EQ(got[0].status, WcStatus::Success);
  }
  bool wait(verbs::Cq* cq, size_t n, std::vector<Wc>& out) {
    return sim.run_until([&] {
      Wc w[16];
      int k;
      while ((k = cq->poll(w)) > 0) out.insert(out.end(), w, w + k);
      return out.size() >= n;
    }, 1'000'000'000);
  }
  std::vector<AsyncEvent> events(transport::ProtocolCore* n) {
    std::vector<AsyncEvent> v;
    for (auto e = n->get_async_event(); e; e = n->get_async_event()) v.push_back(*e);
    return v;
  }
  sim::Sim sim;
  transport::ProtocolCore *a, *b;
  verbs::PdHandle pa, pb;
  verbs::Cq *cqa, *cqb;
  verbs::Srq* srq;
  transport::Qp *qa[2], *qb[2];
  std::vector<uint8_t> src, dst;
  verbs::Mr msa, mdb;
};

}  // namespace

TEST(Srq, TwoQpsDrawFromOneQueueInOrder) {
  SrqSetup t;
  t.post_srq(0, 8);
  uint32_t tags[6] = {11, 21, 12, 22, 13, 23};  // tens digit: which QP sent it
  for (uint32_t tag : tags) t.send(tag / 10 - 1, tag);
  std::vector<Wc> rw;
  ASSERT_TRUE(t.wait(t.cqb, 6, rw));
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rw[i].wr_id, i);  // the SRQ's WQEs are used in posting order, whichever QP
    EXPECT_EQ(rw[i].status, WcStatus::Success);
    EXPECT_EQ(rw[i].imm_data, tags[i]);
    EXPECT_EQ(rw[i].qp_num, t.qb[tags[i] / 10 - 1]->qpn().value());
    EXPECT_EQ(t.dst[i * 1024], tags[i]);
    EXPECT_EQ(t.dst[i * 1024 + 99], tags[i]);
    EXPECT_EQ(t.dst[i * 1024 + 100], 0);
  }
  EXPECT_EQ(t.srq->posted(), 2u);
}

TEST(Srq, LimitEventFiresOnceBelowTheLimit) {
  SrqSetup t;
  t.post_srq(0, 16);
  ASSERT_TRUE(t.b->modify_srq(*t.srq, 10));
  for (uint32_t i = 0; i < 6; ++i) t.send(int(i % 2), 1 + i);  // 16 -> 10 posted: not below
  EXPECT_TRUE(t.events(t.b).empty());
  t.send(0, 40);  // 9 left: below 10
  auto ev = t.events(t.b);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::SrqLimitReached);
  EXPECT_EQ(ev[0].srq_handle, t.srq->handle());
  EXPECT_EQ(t.srq->limit.load(), 0u);  // disarmed
  t.send(1, 41);
  EXPECT_TRUE(t.events(t.b).empty());
  EXPECT_EQ(t.b->modify_srq(*t.srq, 1000).error().code, EINVAL);  // more than the queue holds
}

TEST(Srq, ErrorOnOneQpLeavesTheSharedWqesToTheOther) {
  SrqSetup t;
  t.post_srq(0, 4);
  Sge s{0, 0, 0};
  RecvWr r{1, {&s, 1}};
  EXPECT_EQ(t.b->post_recv(*t.qb[0], {&r, 1}).error().code, EINVAL);  // it has an SRQ
  QpAttr at;
  at.qp_state = QpState::Err;
  ASSERT_TRUE(t.b->modify_qp(*t.qb[0], at, kQpState));
  t.sim.run_until([] { return false; }, 1'000'000);
  auto ev = t.events(t.b);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::QpLastWqeReached);
  EXPECT_EQ(ev[0].qp_num, t.qb[0]->qpn().value());
  EXPECT_EQ(t.cqb->pending(), 0u);  // nothing flushed from the SRQ
  EXPECT_EQ(t.srq->posted(), 4u);
  t.send(1, 77);
  std::vector<Wc> rw;
  ASSERT_TRUE(t.wait(t.cqb, 1, rw));
  EXPECT_EQ(rw[0].wr_id, 0u);
  EXPECT_EQ(rw[0].qp_num, t.qb[1]->qpn().value());
  EXPECT_EQ(t.b->destroy_srq(t.srq).error().code, EBUSY);
}

TEST(AsyncEvents, PortActiveAtStartAndQpFatalOnErrors) {
  sim::Sim sim(1, {});
  auto& n = sim.add_core(kIpA);
  auto e = n.get_async_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, AsyncEventType::PortActive);
  EXPECT_EQ(n.get_async_event().error().code, EAGAIN);

  CorePair t;
  while (t.a.pc->get_async_event()) {
  }
  while (t.b.pc->get_async_event()) {
  }
  std::vector<uint8_t> buf(64);
  auto m = t.reg(t.a, buf.data(), buf.size());
  Sge s{uint64_t(buf.data()), 64, m.lkey};
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}, 0, 0x1000, 0xbad};  // bad rkey
  ASSERT_TRUE(t.send(t.a, w));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::RemAccessErr);
  auto ea = t.a.pc->get_async_event();
  ASSERT_TRUE(ea);
  EXPECT_EQ(ea->type, AsyncEventType::QpFatal);
  EXPECT_EQ(ea->qp_num, t.a.qp->qpn().value());
  auto eb = t.b.pc->get_async_event();
  ASSERT_TRUE(eb);
  EXPECT_EQ(eb->type, AsyncEventType::QpFatal);
  EXPECT_EQ(eb->qp_num, t.b.qp->qpn().value());
}

TEST(AsyncEvents, CqOverrunIsReportedOnce) {
  PairOptions o;
  o.cq_depth = 2;
  CorePair t(o);
  while (t.a.pc->get_async_event()) {
  }
  std::vector<uint8_t> buf(8);
  auto m = t.reg(t.a, buf.data(), buf.size());
  auto r = t.reg(t.b, buf.data(), buf.size());
  for (int i = 0; i < 5; ++i) {
    Sge s{uint64_t(buf.data()), 8, m.lkey};
    SendWr w{uint64_t(i), WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}, 0, uint64_t(buf.data()), r.rkey};
    ASSERT_TRUE(t.send(t.a, w));
  }
  t.sim.run_until([] { return false; }, 10'000'000);
  EXPECT_EQ(t.a.pc->counters().cq_overruns, 3u);
  auto e = t.a.pc->get_async_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, AsyncEventType::CqErr);
  EXPECT_EQ(e->cq_handle, t.a.scq->handle());
  EXPECT_FALSE(t.a.pc->get_async_event());
}

// XRC (IBA 9.8.x): an initiator on A, a target QP of B's XRC domain; every message names B's
// XRC SRQ, takes its receive there, is checked in the SRQ's PD and completes to its CQ.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Verdict;

namespace {

PairOptions xrc_pair() {
  PairOptions o;
  o.xrc = true;
  return o;
}

}  // namespace

TEST(Xrc, SendsWritesAndReadsReachTheTargetsSrq) {
  CorePair t(xrc_pair());
  std::vector<uint8_t> src(8192), dst(8192, 0), mem(8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
  auto ka = t.reg(t.a, src.data(), src.size());
  auto kd = t.reg(t.a, dst.data(), dst.size());
  auto kb = t.reg(t.b, mem.data(), mem.size());
  Sge r{uint64_t(mem.data()), 4096, kb.lkey};
  ASSERT_TRUE(t.recv(t.b, {11, {&r, 1}}));
  Sge s{uint64_t(src.data()), 3000, ka.lkey};
  ASSERT_TRUE(t.send(t.a, SendWr{1, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc rw = t.one_wc(t.b.rcq);
  EXPECT_EQ(rw.status, WcStatus::Success) << to_string(rw.status) << dump_counters(*t.b.pc);
  EXPECT_EQ(rw.wr_id, 11u);
  EXPECT_EQ(rw.byte_len, 3000u);
  EXPECT_EQ(rw.qp_num, t.b.qp->qpn().value());
  EXPECT_EQ(0, std::memcmp(mem.data(), src.data(), 3000));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  // A WRITE into B's memory, a READ back, a FETCH_ADD.
  SendWr w{2, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(mem.data()) + 4096;
  w.rkey = kb.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  Sge d{uint64_t(dst.data()), 3000, kd.lkey};
  SendWr rd{3, WrOpcode::RdmaRead, kSendSignaled, {&d, 1}};
  rd.remote_addr = uint64_t(mem.data()) + 4096;
  rd.rkey = kb.rkey;
  ASSERT_TRUE(t.send(t.a, rd));
  std::vector<Wc> wcs;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, wcs)) << dump_counters(*t.a.pc) << dump_counters(*t.b.pc);
  EXPECT_EQ(wcs[0].status, WcStatus::Success);
  EXPECT_EQ(wcs[1].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(mem.data() + 4096, src.data(), 3000));
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 3000));
}

namespace {

// B's second XRC domain, with an SRQ of its own (completing to B's receive CQ).
verbs::Srq* other_domain_srq(CorePair& t) {
  uint32_t x = *t.b.pc->create_xrcd();
  return *t.b.pc->create_xrc_srq(t.b.pd, x, t.b.rcq, 16, 1);
}

// A SEND from A naming XRC SRQ `srqn`: its completion status at A.
WcStatus send_to(CorePair& t, uint32_t srqn, std::vector<uint8_t>& buf, uint32_t lkey) {
  Sge s{uint64_t(buf.data()), 64, lkey};
  SendWr w{9, WrOpcode::Send, kSendSignaled, {&s, 1}};
  w.remote_srqn = srqn;
  EXPECT_TRUE(t.send(t.a, w));
  return t.one_wc(t.a.scq).status;
}

}  // namespace

TEST(XrcHostile, AnSrqOfAnotherDomainIsRefused) {
  CorePair t(xrc_pair());
  std::vector<uint8_t> buf(64, 0x3c), mem(64, 0);
  auto ka = t.reg(t.a, buf.data(), buf.size());
  auto kb = t.reg(t.b, mem.data(), mem.size());
  verbs::Srq* other = other_domain_srq(t);
  Sge r{uint64_t(mem.data()), 64, kb.lkey};
  ASSERT_TRUE(t.b.pc->post_srq_recv(*other, std::span<const RecvWr>(std::vector<RecvWr>{{5, {&r, 1}}})));
  EXPECT_EQ(send_to(t, other->handle(), buf, ka.lkey), WcStatus::RemInvReqErr);
  EXPECT_EQ(t.b.pc->counters().rx_bad_xrc_srq, 1u);
  EXPECT_EQ(mem[0], 0) << "a receive of another domain's SRQ was used";
  EXPECT_EQ(other->posted(), 1u);
  EXPECT_EQ(t.b.qp->state(), QpState::Err);
}

TEST(XrcHostile, UnknownAndOrdinarySrqsAreRefused) {
  {
    CorePair t(xrc_pair());
    std::vector<uint8_t> buf(64, 0x3c);
    auto ka = t.reg(t.a, buf.data(), buf.size());
    EXPECT_EQ(send_to(t, 0xabcde, buf, ka.lkey), WcStatus::RemInvReqErr);
  }
  CorePair t(xrc_pair());
  std::vector<uint8_t> buf(64, 0x3c);
  auto ka = t.reg(t.a, buf.data(), buf.size());
  verbs::Srq* plain = *t.b.pc->create_srq(t.b.pd, 16, 1);  // not an XRC SRQ
  EXPECT_EQ(send_to(t, plain->handle(), buf, ka.lkey), WcStatus::RemInvReqErr);
  EXPECT_EQ(t.b.pc->counters().rx_bad_xrc_srq, 1u);
}

TEST(XrcHostile, TheSrqStaysTheSameToTheMessagesEnd) {
  std::vector<Verdict> v;
  PairOptions o = xrc_pair();
  o.trace_b = [&v](const transport::Qp&, const wire::Packet&, Verdict x) { v.push_back(x); };
  CorePair t(o);
  std::vector<uint8_t> mem(8192, 0);
  auto kb = t.reg(t.b, mem.data(), mem.size());
  verbs::Srq* second = *t.b.pc->create_xrc_srq(t.b.pd, t.b.xrcd, t.b.rcq, 16, 1);  // the same domain
  Sge r{uint64_t(mem.data()), 8192, kb.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  std::vector<uint8_t> payload(t.b.qp->mtu(), 0x77);
  wire::Packet p;
  p.xrc = true;
  p.xrc_srqn = t.b.srq->handle();
  p.bth.opcode = wire::Opcode::RC_SEND_FIRST;
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn;
  p.payload = payload;
  t.inject(t.b, t.a, p);
  ASSERT_EQ(v.back(), Verdict::Execute);
  p.bth.opcode = wire::Opcode::RC_SEND_LAST;
  p.bth.psn = t.b.qp->resp.epsn;
  p.xrc_srqn = second->handle();
  t.inject(t.b, t.a, p);
  EXPECT_EQ(v.back(), Verdict::NakInvalid);
  EXPECT_EQ(t.b.pc->counters().rx_bad_xrc_srq, 1u);
}

TEST(XrcHostile, OpcodesOfTheOtherKindAreUnknownToEachQp) {
  CorePair t(xrc_pair());
  std::vector<uint8_t> payload(16, 1);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_SEND_ONLY;  // RC, not XRC, to the target
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn;
  p.payload = payload;
  t.inject(t.b, t.a, p);
  EXPECT_EQ(t.b.pc->counters().rx_bad_opcode, 1u);
  p.xrc = true;  // an XRC answer to the target, an XRC request to the initiator
  p.bth.opcode = wire::Opcode::RC_ACKNOWLEDGE;
  p.payload = {};
  t.inject(t.b, t.a, p);
  EXPECT_EQ(t.b.pc->counters().rx_bad_opcode, 2u);
  p.bth.opcode = wire::Opcode::RC_SEND_ONLY;
  p.bth.dest_qp = t.a.qp->qpn().value();
  p.payload = payload;
  t.inject(t.a, t.b, p);
  EXPECT_EQ(t.a.pc->counters().rx_bad_opcode, 1u);
  CorePair rc;  // an XRC request to an RC QP
  p.bth.dest_qp = rc.b.qp->qpn().value();
  p.bth.psn = rc.b.qp->resp.epsn;
  rc.inject(rc.b, rc.a, p);
  EXPECT_EQ(rc.b.pc->counters().rx_bad_opcode, 1u);
}

TEST(XrcHostile, MemoryIsCheckedInTheSrqsPd) {
  CorePair t(xrc_pair());
  std::vector<uint8_t> buf(64, 0x3c), mem(64, 0);
  auto ka = t.reg(t.a, buf.data(), buf.size());
  verbs::PdHandle other = *t.b.pc->alloc_pd();
  auto mr = t.b.pc->reg_mr(other, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok());
  Sge s{uint64_t(buf.data()), 64, ka.lkey};
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(mem.data());
  w.rkey = mr->rkey.value();
  ASSERT_TRUE(t.send(t.a, w));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(mem[0], 0);
}

TEST(Xrc, ObjectRules) {
  CorePair t(xrc_pair());
  auto code = [](const Status& s) { return s ? 0 : s.error().code; };
  RecvWr r{1, {}};
  EXPECT_EQ(code(t.a.pc->post_recv(*t.a.qp, std::span<const RecvWr>(&r, 1))), EINVAL) << "an initiator receives nothing";
  SendWr w{1, WrOpcode::Send, kSendSignaled};
  EXPECT_EQ(code(t.b.pc->post_send(*t.b.qp, std::span<const SendWr>(&w, 1))), EINVAL) << "a target sends nothing";
  w.remote_srqn = 1u << 24;
  EXPECT_EQ(code(t.a.pc->post_send(*t.a.qp, std::span<const SendWr>(&w, 1))), EINVAL) << "SRQ numbers are 24 bits";
  QpCap cap{4, 4, 1, 1, 0};
  EXPECT_EQ(t.a.pc->create_qp(t.a.pd, QpType::XrcRecv, t.a.scq, t.a.rcq, cap, false).error().code, EINVAL);
  EXPECT_EQ(t.a.pc->create_qp(t.a.pd, QpType::XrcSend, t.a.scq, t.a.rcq, cap, false).error().code, EINVAL)
      << "an initiator with a receive queue";
  EXPECT_EQ(t.b.pc->create_qp(t.b.pd, QpType::RC, t.b.scq, t.b.rcq, cap, false, t.b.srq).error().code, EINVAL)
      << "an XRC SRQ's receives are its domain's targets' alone";
  EXPECT_EQ(t.b.pc->create_xrc_tgt(12345).error().code, EINVAL);
  EXPECT_EQ(t.b.pc->create_xrc_srq(t.b.pd, 12345, t.b.rcq, 4, 1).error().code, EINVAL);
  EXPECT_EQ(code(t.b.pc->destroy_xrcd(t.b.xrcd)), EBUSY) << "its SRQ and QP still use it";
  EXPECT_EQ(code(t.b.pc->destroy_cq(t.b.rcq)), EBUSY) << "the XRC SRQ completes to it";
  // An SRQ that goes while the target holds it: the next message to it is refused, nothing dangles.
  std::vector<uint8_t> buf(64, 0x3c), mem(64, 0);
  auto ka = t.reg(t.a, buf.data(), buf.size());
  auto kb = t.reg(t.b, mem.data(), mem.size());
  Sge rs{uint64_t(mem.data()), 64, kb.lkey};
  ASSERT_TRUE(t.recv(t.b, {2, {&rs, 1}}));
  EXPECT_EQ(send_to(t, t.b.srq->handle(), buf, ka.lkey), WcStatus::Success);
  EXPECT_EQ(t.one_wc(t.b.rcq).status, WcStatus::Success);
  const uint32_t gone = t.b.srq->handle();
  ASSERT_TRUE(t.b.pc->destroy_srq(t.b.srq));
  t.b.srq = nullptr;
  EXPECT_EQ(t.b.qp->srq, nullptr);
  EXPECT_EQ(send_to(t, gone, buf, ka.lkey), WcStatus::RemInvReqErr);
  ASSERT_TRUE(t.b.pc->destroy_qp(t.b.qp));
  EXPECT_EQ(code(t.b.pc->destroy_xrcd(t.b.xrcd)), 0);
}

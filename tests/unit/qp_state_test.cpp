// The verbs QP state machine and argument checks: legal transitions succeed, illegal ones and
// bad arguments fail with EINVAL and a message, and change nothing.
#include <gtest/gtest.h>

#include "transport/protocol_core.hpp"

using namespace uroce;

namespace {

transport::CoreConfig make_cfg() {
  transport::CoreConfig c;
  c.seed = 3;
  return c;
}

struct Env {
  Env() : pc(make_cfg()) {
    pd = *pc.alloc_pd();
    cq = *pc.create_cq(16);
    qp = *pc.create_qp(pd, QpType::RC, cq, cq, QpCap{4, 4, 2, 2, 16}, false);
  }
  Status to(QpState s, uint32_t extra_mask, QpAttr a = {}) {
    a.qp_state = s;
    return pc.modify_qp(*qp, a, kQpState | extra_mask);
  }
  Status init() { return to(QpState::Init, kQpPkeyIndex | kQpPort | kQpAccessFlags); }
  Status rtr() {
    QpAttr a;
    a.dgid = Gid::from_ipv4(0x7f000002);
    a.dest_qp_num = 0x22;
    return to(QpState::Rtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer, a);
  }
  Status rts() { return to(QpState::Rts, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic); }

  transport::ProtocolCore pc;
  verbs::PdHandle pd;
  verbs::Cq* cq;
  transport::Qp* qp;
};

}  // namespace

TEST(QpState, LegalPath) {
  Env e;
  EXPECT_EQ(e.qp->state(), QpState::Reset);
  ASSERT_TRUE(e.init());
  ASSERT_TRUE(e.rtr());
  ASSERT_TRUE(e.rts());
  EXPECT_EQ(e.qp->state(), QpState::Rts);
  ASSERT_TRUE(e.to(QpState::Sqd, 0));
  ASSERT_TRUE(e.to(QpState::Rts, 0));
  ASSERT_TRUE(e.to(QpState::Err, 0));
  ASSERT_TRUE(e.to(QpState::Reset, 0));
  ASSERT_TRUE(e.init());  // a reset QP can be reused
}

TEST(QpState, IllegalTransitionsChangeNothing) {
  Env e;
  auto s = e.rtr();  // RESET -> RTR skips INIT
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, EINVAL);
  EXPECT_NE(s.error().message.find("RESET->RTR"), std::string::npos) << s.error().message;
  EXPECT_EQ(e.qp->state(), QpState::Reset);
  ASSERT_TRUE(e.init());
  EXPECT_FALSE(e.rts());  // INIT -> RTS
  EXPECT_FALSE(e.to(QpState::Sqd, 0));
  EXPECT_EQ(e.qp->state(), QpState::Init);
  ASSERT_TRUE(e.rtr());
  EXPECT_FALSE(e.init());  // back to INIT is not allowed
  EXPECT_EQ(e.qp->state(), QpState::Rtr);
}

TEST(QpState, RequiredAndForbiddenAttributes) {
  Env e;
  auto s = e.to(QpState::Init, kQpPkeyIndex | kQpPort);  // no access flags
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("required"), std::string::npos);
  s = e.to(QpState::Init, kQpPkeyIndex | kQpPort | kQpAccessFlags | kQpSqPsn);  // SQ_PSN not here
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not allowed"), std::string::npos);
  EXPECT_EQ(e.qp->state(), QpState::Reset);
  ASSERT_TRUE(e.init());
  QpAttr bad;
  bad.path_mtu = Mtu(6);
  bad.dgid = Gid::from_ipv4(1);
  EXPECT_FALSE(e.to(QpState::Rtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer, bad));
  bad = {};
  bad.rq_psn = 1u << 24;
  bad.dgid = Gid::from_ipv4(1);
  EXPECT_FALSE(e.to(QpState::Rtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer, bad));
  bad = {};  // dgid not IPv4-mapped
  EXPECT_FALSE(e.to(QpState::Rtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer, bad));
  EXPECT_EQ(e.qp->state(), QpState::Init);
  ASSERT_TRUE(e.rtr());
  QpAttr r;
  r.retry_cnt = 8;
  EXPECT_FALSE(e.to(QpState::Rts, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic, r));
  r = {};
  r.timeout = 32;
  EXPECT_FALSE(e.to(QpState::Rts, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic, r));
  QpAttr cur;
  cur.cur_qp_state = QpState::Init;  // wrong current state
  EXPECT_FALSE(e.to(QpState::Rts, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic | kQpCurState, cur));
  EXPECT_EQ(e.qp->state(), QpState::Rtr);
}

TEST(QpState, PostingRules) {
  Env e;
  static uint8_t buf[64];
  auto mr = *e.pc.reg_mr(e.pd, buf, sizeof buf, kAccessLocalWrite);
  Sge s{uint64_t(buf), 8, mr.lkey.value()};
  SendWr w{1, WrOpcode::Send, 0, {&s, 1}};
  RecvWr r{1, {&s, 1}};
  size_t bad = 99;
  auto st = e.pc.post_send(*e.qp, {&w, 1}, &bad);
  ASSERT_FALSE(st);  // RESET
  EXPECT_EQ(st.error().code, EINVAL);
  EXPECT_EQ(bad, 0u);
  EXPECT_FALSE(e.pc.post_recv(*e.qp, {&r, 1}));  // RESET
  ASSERT_TRUE(e.init());
  EXPECT_TRUE(e.pc.post_recv(*e.qp, {&r, 1}));   // receives may be posted from INIT on
  EXPECT_FALSE(e.pc.post_send(*e.qp, {&w, 1}));  // sends not before RTS
  ASSERT_TRUE(e.rtr());
  ASSERT_TRUE(e.rts());
  Sge three[3] = {s, s, s};
  SendWr many{2, WrOpcode::Send, 0, three};
  st = e.pc.post_send(*e.qp, {&many, 1});
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("max_send_sge"), std::string::npos);
  SendWr at{3, WrOpcode::AtomicFetchAdd, 0, {&s, 1}};
  at.remote_addr = 8;
  s.length = 4;
  EXPECT_EQ(e.pc.post_send(*e.qp, {&at, 1}).error().code, EINVAL);  // atomics need 8 bytes
  s.length = 8;
  at.remote_addr = 12;
  EXPECT_EQ(e.pc.post_send(*e.qp, {&at, 1}).error().code, EINVAL);  // and alignment
  Sge big{uint64_t(buf), 17, 0};
  SendWr in{4, WrOpcode::Send, kSendInline, {&big, 1}};
  EXPECT_EQ(e.pc.post_send(*e.qp, {&in, 1}).error().code, EINVAL);  // more than max_inline_data
  // A list stops at the first bad request and says which one.
  SendWr list[3] = {w, w, many};
  bad = 99;
  st = e.pc.post_send(*e.qp, list, &bad);
  ASSERT_FALSE(st);
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(e.qp->sq.prod.load(), 2u);  // the first two were posted
  // Queue full (depth 4).
  SendWr more[3] = {w, w, w};
  st = e.pc.post_send(*e.qp, more, &bad);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ENOMEM);
  EXPECT_EQ(bad, 2u);
}

TEST(QpState, ObjectLifetimeRules) {
  Env e;
  EXPECT_EQ(e.pc.dealloc_pd(e.pd).error().code, EBUSY);   // a QP uses it
  EXPECT_EQ(e.pc.destroy_cq(e.cq).error().code, EBUSY);
  EXPECT_TRUE(e.pc.destroy_qp(e.qp));
  EXPECT_TRUE(e.pc.destroy_cq(e.cq));
  EXPECT_TRUE(e.pc.dealloc_pd(e.pd));
  EXPECT_EQ(e.pc.dealloc_pd(e.pd).error().code, EINVAL);
  EXPECT_FALSE(e.pc.create_cq(0));
  auto pd = *e.pc.alloc_pd();
  auto cq = *e.pc.create_cq(4);
  EXPECT_TRUE(e.pc.create_qp(pd, QpType::UD, cq, cq, {}, false).ok());
  EXPECT_EQ(e.pc.create_qp(pd, QpType(1), cq, cq, {}, false).error().code, EOPNOTSUPP);  // not RC/UC/UD
  EXPECT_EQ(e.pc.create_qp(pd, QpType::RC, cq, cq, QpCap{e.pc.limits().max_qp_wr + 1, 1, 1, 1, 0}, false).error().code, EINVAL);
  auto recv_only = e.pc.create_qp(pd, QpType::RC, cq, cq, QpCap{0, 1, 0, 1, 0}, false);  // no send queue asked for, as rxe allows
  ASSERT_TRUE(recv_only);
  EXPECT_TRUE(e.pc.destroy_qp(*recv_only));
  EXPECT_EQ(e.pc.create_qp(pd, QpType::RC, cq, cq, QpCap{1, 1, 99, 1, 0}, false).error().code, EINVAL);
  EXPECT_EQ(e.pc.create_qp(verbs::PdHandle(pd.value() + 100), QpType::RC, cq, cq, {}, false).error().code, EINVAL);
}

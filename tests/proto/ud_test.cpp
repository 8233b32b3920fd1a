// Unreliable Datagram QPs: single-packet messages to any peer named by an address handle,
// Q_Key checked, the GRH area at the start of every receive.
#include <gtest/gtest.h>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"
#include "transport/bringup.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kQkey = 0x11111111;

struct UdNode {
  transport::ProtocolCore* pc;
  verbs::PdHandle pd;
  verbs::Cq* cq;
  transport::Qp* qp;
};

struct UdPair {
  explicit UdPair(sim::FaultConfig f = {}, uint64_t seed = 3) : sim(seed, f) {
    for (int i = 0; i < 3; ++i) {
      UdNode& n = node[i];
      n.pc = &sim.add_core(kIpA + uint32_t(i));
      n.pd = *n.pc->alloc_pd();
      n.cq = *n.pc->create_cq(1024);
      n.qp = *n.pc->create_qp(n.pd, QpType::UD, n.cq, n.cq, QpCap{64, 64, 2, 2, 64}, false);
      EXPECT_TRUE(transport::activate_ud(*n.pc, *n.qp, kQkey, 100 * uint32_t(i)));
    }
  }
  verbs::Mr reg(UdNode& n, void* p, size_t len) { return *n.pc->reg_mr(n.pd, p, len, kAccessLocalWrite); }
  bool wait(verbs::Cq* cq, size_t k, std::vector<Wc>& out, uint64_t ns = 1'000'000'000) {
    return sim.run_until([&] {
      Wc w[16];
      int n;
      while ((n = cq->poll(w)) > 0) out.insert(out.end(), w, w + n);
      return out.size() >= k;
    }, ns);
  }
  sim::Sim sim;
  UdNode node[3];
};

}  // namespace

TEST(Ud, DatagramsCarryGrhImmAndSource) {
  UdPair t;
  UdNode &a = t.node[0], &b = t.node[1], &c = t.node[2];
  std::vector<uint8_t> src(4096), rb(2 * (kGrhBytes + 4096), 0xee);
  fill_pattern(src.data(), src.size(), 4);
  auto sm = t.reg(a, src.data(), src.size());
  auto rm = t.reg(b, rb.data(), rb.size());
  for (uint64_t i = 0; i < 2; ++i) {
    Sge r{uint64_t(rb.data() + i * (kGrhBytes + 4096)), kGrhBytes + 4096, rm.lkey.value()};
    RecvWr rw{i, {&r, 1}};
    ASSERT_TRUE(b.pc->post_recv(*b.qp, {&rw, 1}));
  }
  Ah to_b{Gid::from_ipv4(kIpB)};
  Sge s{uint64_t(src.data()), 4096, sm.lkey.value()};
  SendWr w{7, WrOpcode::SendWithImm, kSendSignaled, {&s, 1}, 0xabcd};
  w.ah = &to_b;
  w.remote_qpn = b.qp->qpn().value();
  w.remote_qkey = kQkey;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
  std::vector<Wc> sw, rw;
  ASSERT_TRUE(t.wait(a.cq, 1, sw));
  EXPECT_EQ(sw[0].status, WcStatus::Success);
  ASSERT_TRUE(t.wait(b.cq, 1, rw));
  EXPECT_EQ(rw[0].status, WcStatus::Success);
  EXPECT_EQ(rw[0].byte_len, kGrhBytes + 4096);
  EXPECT_TRUE(rw[0].with_grh);
  EXPECT_EQ(rw[0].network_hdr, NetworkHeader::Ipv4);
  EXPECT_TRUE(rw[0].with_imm);
  EXPECT_EQ(rw[0].imm_data, 0xabcdu);
  EXPECT_EQ(rw[0].src_qp, a.qp->qpn().value());
  EXPECT_TRUE(std::equal(src.begin(), src.end(), rb.begin() + kGrhBytes));
  // GRH area: 20 undefined bytes, then the IPv4 header of the packet.
  const uint8_t* ip = rb.data() + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(wire::read_be32(ip + 12), kIpA);
  EXPECT_EQ(wire::read_be32(ip + 16), kIpB);
  // Reply to the sender from the receive alone, with the QP's own Q_Key (top bit set).
  Ah back = Ah::from_grh(rb.data());
  EXPECT_EQ(back.dgid, Gid::from_ipv4(kIpA));
  // And a datagram from a third node to the same QP.
  std::vector<uint8_t> small(100, 0x42);
  auto cm = t.reg(c, small.data(), small.size());
  Sge cs{uint64_t(small.data()), 100, cm.lkey.value()};
  SendWr w2{8, WrOpcode::Send, 0, {&cs, 1}};
  w2.ah = &to_b;
  w2.remote_qpn = b.qp->qpn().value();
  w2.remote_qkey = 0x80000000;  // use c's QP Q_Key, the same value
  ASSERT_TRUE(c.pc->post_send(*c.qp, {&w2, 1}));
  ASSERT_TRUE(t.wait(b.cq, 2, rw));
  EXPECT_EQ(rw[1].byte_len, kGrhBytes + 100);
  EXPECT_EQ(rw[1].src_qp, c.qp->qpn().value());
  EXPECT_FALSE(rw[1].with_imm);
  EXPECT_EQ(wire::read_be32(rb.data() + kGrhBytes + 4096 + 20 + 12), kIpA + 2);
  EXPECT_EQ(rb[2 * kGrhBytes + 4096 + 99], 0x42);
  EXPECT_EQ(rb[2 * kGrhBytes + 4096 + 100], 0xee);  // nothing past the datagram
}

TEST(Ud, WrongQkeyAndNoReceiveAreDroppedSilently) {
  UdPair t;
  UdNode &a = t.node[0], &b = t.node[1];
  std::vector<uint8_t> buf(200, 1), rb(kGrhBytes + 200, 0);
  auto sm = t.reg(a, buf.data(), buf.size());
  auto rm = t.reg(b, rb.data(), rb.size());
  Ah to_b{Gid::from_ipv4(kIpB)};
  Sge s{uint64_t(buf.data()), 200, sm.lkey.value()};
  SendWr w{1, WrOpcode::Send, kSendSignaled, {&s, 1}};
  w.ah = &to_b;
  w.remote_qpn = b.qp->qpn().value();
  w.remote_qkey = kQkey;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));  // no receive posted
  w.remote_qkey = kQkey + 1;
  Sge r{uint64_t(rb.data()), uint32_t(rb.size()), rm.lkey.value()};
  std::vector<Wc> sw;
  ASSERT_TRUE(t.wait(a.cq, 1, sw));
  t.sim.run_until([] { return false; }, 1'000'000);
  RecvWr rwr{1, {&r, 1}};
  ASSERT_TRUE(b.pc->post_recv(*b.qp, {&rwr, 1}));
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));  // wrong Q_Key
  ASSERT_TRUE(t.wait(a.cq, 2, sw));
  t.sim.run_until([] { return false; }, 1'000'000);
  EXPECT_EQ(sw[0].status, WcStatus::Success);
  EXPECT_EQ(sw[1].status, WcStatus::Success);
  EXPECT_EQ(b.pc->counters().rx_ud_no_recv, 1u);
  EXPECT_EQ(b.pc->counters().rx_bad_qkey, 1u);
  EXPECT_EQ(b.cq->pending(), 0u);
  EXPECT_EQ(rb, std::vector<uint8_t>(kGrhBytes + 200, 0));
}

TEST(Ud, ReceiveWithoutRoomForGrhIsLocLenErr) {
  UdPair t;
  UdNode &a = t.node[0], &b = t.node[1];
  std::vector<uint8_t> buf(100, 1), rb(100, 0);
  auto sm = t.reg(a, buf.data(), buf.size());
  auto rm = t.reg(b, rb.data(), rb.size());
  Sge r{uint64_t(rb.data()), 100, rm.lkey.value()};  // 100 bytes: no room for 40 + 100
  RecvWr rwr{1, {&r, 1}};
  ASSERT_TRUE(b.pc->post_recv(*b.qp, {&rwr, 1}));
  Ah to_b{Gid::from_ipv4(kIpB)};
  Sge s{uint64_t(buf.data()), 100, sm.lkey.value()};
  SendWr w{1, WrOpcode::Send, 0, {&s, 1}};
  w.ah = &to_b;
  w.remote_qpn = b.qp->qpn().value();
  w.remote_qkey = kQkey;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
  std::vector<Wc> rw;
  ASSERT_TRUE(t.wait(b.cq, 1, rw));
  EXPECT_EQ(rw[0].status, WcStatus::LocLenErr);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_EQ(rb, std::vector<uint8_t>(100, 0));
}

TEST(Ud, PostingRules) {
  UdPair t;
  UdNode& a = t.node[0];
  std::vector<uint8_t> buf(5000);
  auto sm = t.reg(a, buf.data(), buf.size());
  Ah ok{Gid::from_ipv4(kIpB)}, v6;
  v6.dgid.raw[0] = 0xfe;
  Sge s{uint64_t(buf.data()), 100, sm.lkey.value()};
  SendWr w{1, WrOpcode::Send, 0, {&s, 1}};
  EXPECT_EQ(a.pc->post_send(*a.qp, {&w, 1}).error().code, EINVAL);  // no address handle
  w.ah = &v6;
  EXPECT_EQ(a.pc->post_send(*a.qp, {&w, 1}).error().code, EINVAL);  // not an IPv4 GID
  w.ah = &ok;
  s.length = 4097;
  EXPECT_EQ(a.pc->post_send(*a.qp, {&w, 1}).error().code, EINVAL);  // more than one MTU
  s.length = 100;
  w.opcode = WrOpcode::RdmaWrite;
  EXPECT_EQ(a.pc->post_send(*a.qp, {&w, 1}).error().code, EINVAL);
  w.opcode = WrOpcode::Send;
  EXPECT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
}

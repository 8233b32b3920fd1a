// RoCE v2 over IPv6 in the simulator: the same transport with IPv6 GIDs, the ICRC over the
// IPv6 header, and UD receives whose GRH area holds the IPv6 header.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"
#include "transport/bringup.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

Gid v6(const char* s) { return *Gid::parse(s); }

struct Node {
  transport::ProtocolCore* pc;
  verbs::PdHandle pd;
  verbs::Cq* cq;
  transport::Qp* qp;
};

Node make(sim::Sim& sim, const Gid& addr, QpType type) {
  Node n;
  n.pc = &sim.add_core(addr);
  n.pd = *n.pc->alloc_pd();
  n.cq = *n.pc->create_cq(256);
  n.qp = *n.pc->create_qp(n.pd, type, n.cq, n.cq, QpCap{16, 16, 1, 1, 0}, false);
  return n;
}

bool wait(sim::Sim& sim, verbs::Cq* cq, size_t k, std::vector<Wc>& out) {
  return sim.run_until([&] {
    Wc w[16];
    int n;
    while ((n = cq->poll(w)) > 0) out.insert(out.end(), w, w + n);
    return out.size() >= k;
  }, 1'000'000'000);
}

}  // namespace

// The ICRC masks traffic class, flow label and hop limit, and covers the addresses.
TEST(Ipv6, IcrcMasksTheVariantFields) {
  wire::FlowAddr f{v6("fe80::1"), v6("fe80::2"), 0xc001};
  std::vector<uint8_t> ib(12 + 64, 0x3c);
  uint8_t hdr[48];
  ASSERT_EQ(wire::write_ip_udp(hdr, f, ib.size() + 4), 48u);
  EXPECT_EQ(hdr[0] >> 4, 6);
  EXPECT_EQ(wire::read_be16(hdr + 4), 8 + ib.size() + 4);  // payload length: UDP header and all
  uint32_t base = wire::icrc_compute(hdr, ib);
  EXPECT_EQ(base, wire::icrc_for_flow(f, ib));
  hdr[0] = 0x6a, hdr[1] = 0x12, hdr[2] = 0x34, hdr[3] = 0x56, hdr[7] = 3;  // TC, flow label, hop limit
  EXPECT_EQ(wire::icrc_compute(hdr, ib), base);
  hdr[23] ^= 1;  // the source address
  EXPECT_NE(wire::icrc_compute(hdr, ib), base);
  // Not the IPv4-mapped flow of the same bytes.
  EXPECT_NE(wire::icrc_for_flow(wire::FlowAddr::ipv4(1, 2, 0xc001), ib), base);
}

// RC over IPv6 GIDs: WRITE, READ and SEND, byte-exact, with loss and duplication.
TEST(Ipv6, RcOperationsOverIpv6) {
  sim::FaultConfig faults;
  faults.drop = 0.02;
  faults.duplicate = 0.01;
  sim::Sim sim(test_seed(66), faults);
  Node a = make(sim, v6("2001:db8::a"), QpType::RC), b = make(sim, v6("2001:db8::b"), QpType::RC);
  ConnectOptions co;
  co.timeout = 8;
  ASSERT_TRUE(transport::connect_rc(*a.pc, *a.qp, {v6("2001:db8::b"), b.qp->qpn().value(), 500}, 100, co));
  ASSERT_TRUE(transport::connect_rc(*b.pc, *b.qp, {v6("2001:db8::a"), a.qp->qpn().value(), 100}, 500, co));
  std::vector<uint8_t> src(20000), dst(20000, 0), back(20000, 0), rb(20000, 0);
  fill_pattern(src.data(), src.size(), 6);
  auto sm = *a.pc->reg_mr(a.pd, src.data(), src.size(), kAccessLocalWrite);
  auto km = *a.pc->reg_mr(a.pd, back.data(), back.size(), kAccessLocalWrite);
  auto dm = *b.pc->reg_mr(b.pd, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  auto rm = *b.pc->reg_mr(b.pd, rb.data(), rb.size(), kAccessLocalWrite);
  Sge r{uint64_t(rb.data()), 20000, rm.lkey.value()};
  RecvWr rw{9, {&r, 1}};
  ASSERT_TRUE(b.pc->post_recv(*b.qp, {&rw, 1}));
  Sge s{uint64_t(src.data()), 20000, sm.lkey.value()}, k{uint64_t(back.data()), 20000, km.lkey.value()};
  SendWr w1{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w1.remote_addr = uint64_t(dst.data());
  w1.rkey = dm.rkey.value();
  SendWr w2{2, WrOpcode::RdmaRead, kSendSignaled, {&k, 1}};
  w2.remote_addr = uint64_t(dst.data());
  w2.rkey = dm.rkey.value();
  SendWr w3{3, WrOpcode::Send, kSendSignaled, {&s, 1}};
  SendWr wrs[] = {w1, w2, w3};
  ASSERT_TRUE(a.pc->post_send(*a.qp, wrs));
  std::vector<Wc> wc;
  ASSERT_TRUE(wait(sim, a.cq, 3, wc));
  for (const Wc& c : wc) EXPECT_EQ(c.status, WcStatus::Success) << c.wr_id;
  std::vector<Wc> rwc;
  ASSERT_TRUE(wait(sim, b.cq, 1, rwc));
  EXPECT_EQ(rwc[0].status, WcStatus::Success);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(back, src);
  EXPECT_EQ(rb, src);
  EXPECT_EQ(b.pc->counters().rx_bad_icrc, 0u);
  EXPECT_GT(a.pc->counters().rx_icrc_ip_seen, 0u);
  // A v4 path from a v6-only port is refused.
  QpAttr av;
  av.dgid = Gid::from_ipv4(0x0a000001);
  EXPECT_EQ(a.pc->modify_qp(*a.qp, av, kQpAv).error().code, EINVAL);
}

// UD over IPv6: the receive's GRH area is the IPv6 header, and Ah::from_grh answers the sender.
TEST(Ipv6, UdGrhHoldsTheIpv6Header) {
  sim::Sim sim(1, {});
  Node a = make(sim, v6("fe80::a"), QpType::UD), b = make(sim, v6("fe80::b"), QpType::UD);
  ASSERT_TRUE(transport::activate_ud(*a.pc, *a.qp, 0x11, 0));
  ASSERT_TRUE(transport::activate_ud(*b.pc, *b.qp, 0x11, 0));
  std::vector<uint8_t> buf(2 * (kGrhBytes + 256), 0);
  auto am = *a.pc->reg_mr(a.pd, buf.data(), buf.size(), kAccessLocalWrite);
  auto bm = *b.pc->reg_mr(b.pd, buf.data(), buf.size(), kAccessLocalWrite);
  uint8_t* bslot = buf.data() + kGrhBytes + 256;
  Sge r{uint64_t(bslot), kGrhBytes + 256, bm.lkey.value()};
  RecvWr rw{1, {&r, 1}};
  ASSERT_TRUE(b.pc->post_recv(*b.qp, {&rw, 1}));
  std::memcpy(buf.data(), "over IPv6", 10);
  Ah to_b{v6("fe80::b")};
  Sge s{uint64_t(buf.data()), 10, am.lkey.value()};
  SendWr w{2, WrOpcode::Send, kSendSignaled, {&s, 1}};
  w.ah = &to_b;
  w.remote_qpn = b.qp->qpn().value();
  w.remote_qkey = 0x11;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
  std::vector<Wc> wc;
  ASSERT_TRUE(wait(sim, b.cq, 1, wc));
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, kGrhBytes + 10);
  EXPECT_EQ(wc[0].network_hdr, NetworkHeader::Ipv6);
  EXPECT_STREQ(reinterpret_cast<char*>(bslot + kGrhBytes), "over IPv6");
  EXPECT_EQ(bslot[0] >> 4, 6);
  EXPECT_EQ(Ah::from_grh(bslot).dgid, v6("fe80::a"));
  // An address handle to an IPv4 GID cannot leave from this IPv6-only port.
  Ah to_v4{Gid::from_ipv4(0x0a000002)};
  w.ah = &to_v4;
  EXPECT_EQ(a.pc->post_send(*a.qp, {&w, 1}).error().code, EINVAL);
}
